//! The application: [`AppState`] (what every handler shares), [`build_state`] (connect, migrate, start the
//! background tasks), [`app`] (the router) and [`serve`] (run until shutdown, then drain).

use std::{future::Future, sync::Arc, time::Duration};

use axum::{
    Router,
    extract::DefaultBodyLimit,
    http::{Method, Request},
    middleware,
};
use sqlx::{PgPool, postgres::PgPoolOptions};
use tokio::{net::TcpListener, sync::Mutex, task::JoinHandle};
use tokio_util::sync::CancellationToken;
use tower_http::{
    cors::{AllowHeaders, Any, CorsLayer},
    request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer},
    trace::TraceLayer,
};

use crate::{
    config::Config,
    db::{
        self,
        hub::Hub,
        listener::{self, ListenerStatus},
    },
    error::{self, ApiError},
    http::health,
    messages::{self, MessageStore},
    query_status,
    questions::{self, QuestionStore},
    retention::Reaper,
    streams::{self, ChunkStore, ChunkWriter},
    ui,
};

/// How long start-up waits for the LISTEN connection before giving up.
const LISTENER_START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long shutdown waits for the chunk writer to commit what it holds.
const WRITER_DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// Everything a handler needs; cheap to clone.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The settings this replica runs with.
    pub config: Arc<Config>,
    /// The request pool.
    pub pool: PgPool,
    /// In-process fan-out.
    pub hub: Hub,
    /// Whether the LISTEN connection is up.
    pub listener: ListenerStatus,
    /// Conversation memory.
    pub messages: MessageStore,
    /// Chunk streams.
    pub chunks: ChunkStore,
    /// Questions.
    pub questions: QuestionStore,
    /// This replica's group-commit writer.
    pub writer: ChunkWriter,
    /// Cancelled when the replica starts shutting down: readiness fails and SSE responses end.
    pub shutdown: CancellationToken,
    background: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

/// Why the broker could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Postgres refused or could not be reached.
    #[error("cannot connect to PostgreSQL: {0}")]
    Connect(#[from] sqlx::Error),
    /// A migration failed.
    #[error("cannot migrate the database: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The LISTEN connection did not come up in time.
    #[error("the LISTEN connection did not come up within {0:?}")]
    Listener(Duration),
}

/// Connects to `database_url`, applies migrations and starts the writer and the listener; returns once the
/// replica is ready to serve.
pub async fn build_state(config: Config, database_url: &str) -> Result<AppState, StartError> {
    let pool = db::connect(database_url, config.database_pool_max).await?;
    db::migrate(&pool).await?;
    let listen_pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with(db::connect_options(database_url, &listener::application_name())?);
    let hub = Hub::default();
    let status = ListenerStatus::default();
    let shutdown = CancellationToken::new();
    let chunks = ChunkStore::new(pool.clone());
    let (writer, writer_task) = ChunkWriter::spawn(chunks.clone(), config.flush_max_rows as usize);
    let listener_task = tokio::spawn(listener::run(
        listen_pool,
        pool.clone(),
        hub.clone(),
        status.clone(),
        config.poll_interval(),
        shutdown.clone(),
    ));
    if tokio::time::timeout(LISTENER_START_TIMEOUT, status.wait_up()).await.is_err() {
        shutdown.cancel();
        return Err(StartError::Listener(LISTENER_START_TIMEOUT));
    }
    let messages = MessageStore::new(pool.clone());
    let questions = QuestionStore::new(pool.clone());
    let reaper = Reaper {
        messages: messages.clone(),
        questions: questions.clone(),
        question_log_seconds: config.question_log_seconds as i64,
    };
    let reaper_task = tokio::spawn(reaper.run(Duration::from_secs(config.reap_interval_seconds), shutdown.clone()));
    let mut background = vec![listener_task, writer_task, reaper_task];
    if let Some(client) = query_status::client(&config).await {
        background.push(query_status::spawn(client, &config, pool.clone(), hub.clone(), shutdown.clone()));
    }
    Ok(AppState {
        config: Arc::new(config),
        messages,
        questions,
        pool,
        hub,
        listener: status,
        chunks,
        writer,
        shutdown,
        background: Arc::new(Mutex::new(background)),
    })
}

/// The HTTP API with upstream's cross-cutting behaviour: CORS, `X-Request-ID`, body limits, error bodies.
pub fn app(state: AppState) -> Router {
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([Method::GET, Method::HEAD, Method::PUT, Method::PATCH, Method::POST, Method::DELETE])
        .allow_headers(AllowHeaders::mirror_request());
    let trace = TraceLayer::new_for_http().make_span_with(|request: &Request<_>| {
        let request_id = request.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or_default();
        tracing::debug_span!("http", method = %request.method(), path = %request.uri().path(), request.id = %request_id)
    });
    Router::new()
        .merge(health::router())
        .merge(messages::router())
        .merge(streams::router())
        .merge(questions::router())
        .merge(ui::router())
        .fallback(|| async { ApiError::NotFound("Not found".into()) })
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(middleware::from_fn(error::render_error_body))
        .layer(trace)
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(cors)
        .with_state(state)
}

/// Where a replica listens: the HTTP API, and the MCP endpoint when it has one.
#[derive(Debug)]
pub struct Listeners {
    /// REST, SSE and the page.
    pub http: TcpListener,
    /// MCP (`/mcp`).
    pub mcp: Option<TcpListener>,
}

impl From<TcpListener> for Listeners {
    fn from(http: TcpListener) -> Self {
        Listeners { http, mcp: None }
    }
}

/// Serves `state` until `shutdown` resolves; then readiness fails, SSE responses and waiting MCP calls end
/// (their questions stay), open requests get `shutdown_timeout` to finish, buffered chunks are committed,
/// and it returns.
pub async fn serve(
    listeners: impl Into<Listeners>,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listeners = listeners.into();
    let draining = state.shutdown.clone();
    let mut servers = tokio::task::JoinSet::new();
    servers.spawn(
        axum::serve(listeners.http, app(state.clone()))
            .with_graceful_shutdown(draining.clone().cancelled_owned())
            .into_future(),
    );
    if let Some(mcp) = listeners.mcp {
        servers.spawn(
            axum::serve(mcp, crate::mcp::router(state.clone()))
                .with_graceful_shutdown(draining.clone().cancelled_owned())
                .into_future(),
        );
    }
    let first = tokio::select! {
        Some(result) = servers.join_next() => flatten(result),
        () = shutdown => Ok(()),
    };
    draining.cancel();
    let rest = tokio::time::timeout(state.config.shutdown_timeout(), async {
        let mut outcome = Ok(());
        while let Some(result) = servers.join_next().await {
            outcome = outcome.and(flatten(result));
        }
        outcome
    })
    .await
    .unwrap_or_else(|_| {
        tracing::warn!("open requests did not finish in time; exiting anyway");
        Ok(())
    });
    servers.abort_all();
    finish_background(state).await;
    first.and(rest)
}

fn flatten(result: Result<std::io::Result<()>, tokio::task::JoinError>) -> std::io::Result<()> {
    result.unwrap_or_else(|join| Err(std::io::Error::other(join)))
}

async fn finish_background(state: AppState) {
    let tasks = std::mem::take(&mut *state.background.lock().await);
    let pool = state.pool.clone();
    // Dropping our handle lets the writer see its queue close once the last request is gone.
    drop(state);
    for task in tasks {
        if tokio::time::timeout(WRITER_DRAIN_TIMEOUT, task).await.is_err() {
            tracing::warn!("a background task did not finish in time");
        }
    }
    if tokio::time::timeout(WRITER_DRAIN_TIMEOUT, pool.close()).await.is_err() {
        tracing::warn!("database connections still in use at exit");
    }
}
