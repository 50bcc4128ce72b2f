//! The process around the application: the embedded PostgreSQL when no `DATABASE_URL` is given, binding,
//! SIGTERM/SIGHUP/ctrl-c handling, and stopping the embedded server again on the way out.

use crate::telemetry::chain;
use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpSocket};

use crate::{
    app::{self, Listeners, StartError},
    config::{Config, ConfigError},
    db::embedded::{EmbeddedError, EmbeddedOptions, EmbeddedPostgres},
};

/// Why the process stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The settings contradict each other.
    #[error("refusing to start: {0}")]
    Config(#[from] ConfigError),
    /// The embedded PostgreSQL could not be started.
    #[error("embedded PostgreSQL: {0}")]
    Embedded(#[from] EmbeddedError),
    /// The application could not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// An address could not be bound (in use, or not this machine's).
    #[error("cannot listen on {address} ({flag}): {error}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The flag that sets it.
        flag: &'static str,
        /// Why.
        error: std::io::Error,
    },
    /// Serving failed.
    #[error("serving HTTP: {0}")]
    Io(#[from] std::io::Error),
}

/// Runs a replica until SIGTERM or ctrl-c.
pub async fn run(config: Config) -> Result<(), RunError> {
    // Before anything starts: settings that cannot work are refused, not corrected.
    config.check()?;
    let embedded = match &config.database_url {
        Some(_) => None,
        None => {
            let dir = config.data_dir.join("postgres");
            tracing::info!(dir = %dir.display(), "no DATABASE_URL: starting the embedded PostgreSQL");
            Some(EmbeddedPostgres::start(&dir, EmbeddedOptions::default()).await?)
        }
    };
    let outcome = serve_on(config, embedded.as_ref()).await;
    if let Some(server) = embedded {
        match server.stop().await {
            Ok(()) => tracing::info!("embedded PostgreSQL stopped"),
            Err(error) => tracing::warn!(error = %chain(&error), "stopping the embedded PostgreSQL failed"),
        }
    }
    outcome
}

async fn serve_on(config: Config, embedded: Option<&EmbeddedPostgres>) -> Result<(), RunError> {
    let database_url = match (&config.database_url, embedded) {
        (Some(url), _) => url.expose().to_owned(),
        (None, Some(server)) => {
            tracing::info!(database.url = %server.url(), "embedded PostgreSQL is up");
            server.url()
        }
        (None, None) => unreachable!("run starts the embedded server when no URL is given"),
    };
    let http_address = SocketAddr::new(config.host, config.port);
    let mcp_address = SocketAddr::new(config.host, config.mcp_port);
    crate::connections::raise_open_files_limit(&config);
    let http = listen(http_address).map_err(|error| RunError::Bind { address: http_address, flag: "--port", error })?;
    let mcp =
        listen(mcp_address).map_err(|error| RunError::Bind { address: mcp_address, flag: "--mcp-port", error })?;
    let (http_at, mcp_at) = (http.local_addr()?, mcp.local_addr()?);
    // The ports as bound (`0` picks one): links the broker gives (a question's page) name the real one.
    let config = Config { port: http_at.port(), mcp_port: mcp_at.port(), ..config };
    let state = app::build_state(config, &database_url).await?;
    tracing::info!(
        http.addr = %http_at,
        mcp.addr = %mcp_at,
        version = env!("CARGO_PKG_VERSION"),
        git_sha = env!("ARK_BROKER_GIT_SHA"),
        api.url = %url(http_at, "/"),
        page.url = %url(http_at, "/ui"),
        mcp.url = %url(mcp_at, "/mcp"),
        "listening"
    );
    app::serve(Listeners { http, mcp: Some(mcp) }, state, shutdown_signal()).await?;
    tracing::info!("stopped");
    Ok(())
}

/// Where a person or client reaches `path` on `address` (a wildcard address as `localhost`).
fn url(address: SocketAddr, path: &str) -> String {
    let host = if address.ip().is_unspecified() { "localhost".to_owned() } else { address.ip().to_string() };
    match address.ip() {
        std::net::IpAddr::V6(_) if host != "localhost" => format!("http://[{host}]:{}{path}", address.port()),
        _ => format!("http://{host}:{}{path}", address.port()),
    }
}

/// Connections the kernel queues before the broker accepts them. The default (128 on `TcpListener::bind`)
/// overflows when a thousand executors and readers reconnect at once after a restart, and each overflow costs
/// the client a SYN retransmit (one second or more).
const LISTEN_BACKLOG: u32 = 4096;

fn listen(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if address.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Resolves on SIGTERM (Kubernetes), SIGHUP or ctrl-c (SIGINT). The handlers are installed when this is
/// called, not when the future is first polled: a signal arriving between "listening" and the first poll would
/// otherwise take its default action and kill the process (and leave the embedded PostgreSQL running).
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let install = |kind: SignalKind, name: &'static str| match signal(kind) {
        Ok(stream) => Some((stream, name)),
        Err(error) => {
            tracing::warn!(error = %chain(&error), signal = name, "cannot handle a signal");
            None
        }
    };
    // SIGHUP too: a closed terminal must not leave the embedded PostgreSQL running without its broker.
    let mut signals: Vec<_> = [
        install(SignalKind::terminate(), "SIGTERM"),
        install(SignalKind::hangup(), "SIGHUP"),
        install(SignalKind::interrupt(), "ctrl-c"),
    ]
    .into_iter()
    .flatten()
    .collect();
    async move {
        if signals.is_empty() {
            return std::future::pending().await;
        }
        let received = futures::future::select_all(
            signals.iter_mut().map(|(stream, name)| Box::pin(async move { stream.recv().await.map(|_| *name) })),
        );
        match received.await.0 {
            Some(name) => tracing::info!("{name}: shutting down"),
            None => std::future::pending::<()>().await,
        }
    }
}
