//! One throwaway PostgreSQL for the whole test run, from the first of: `DATABASE_URL` when set; the machine's
//! own server binaries (started as the `postgres` user when the tests run as root, stopped at process exit);
//! a container from a Docker engine that answers (`testcontainers`). The run prints which one it used. Every
//! test gets a database of its own.

use std::{io::Write, path::PathBuf, str::FromStr, sync::OnceLock};

use ark_broker::db::embedded::{self, EmbeddedOptions, EmbeddedPostgres};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Executor, PgConnection, postgres::PgConnectOptions};
use testcontainers_modules::{
    postgres::Postgres,
    testcontainers::{ContainerAsync, ImageExt, runners::AsyncRunner},
};
use tokio::sync::OnceCell;

static SERVER: OnceCell<String> = OnceCell::const_new();
static EMBEDDED: OnceLock<(EmbeddedPostgres, PathBuf)> = OnceLock::new();
static CONTAINER: OnceLock<ContainerAsync<Postgres>> = OnceLock::new();

/// Where the tests' PostgreSQL comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// `DATABASE_URL`.
    Url(String),
    /// The machine's `initdb` and `pg_ctl`.
    Binaries,
    /// A container, from a Docker engine that answers.
    Docker,
}

/// The first PostgreSQL available, or what to install.
pub fn choose(database_url: Option<String>, binaries: bool, docker: bool) -> Result<Backend, String> {
    match (database_url.filter(|url| !url.is_empty()), binaries, docker) {
        (Some(url), _, _) => Ok(Backend::Url(url)),
        (None, true, _) => Ok(Backend::Binaries),
        (None, false, true) => Ok(Backend::Docker),
        (None, false, false) => Err("the tests need PostgreSQL: set DATABASE_URL, install its server binaries \
                                     (initdb, pg_ctl), or run a Docker engine"
            .into()),
    }
}

/// Whether a Docker engine answers on its socket (`DOCKER_HOST=unix://…`, else the default one).
fn docker_answers() -> bool {
    let socket = std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|host| host.strip_prefix("unix://").map(str::to_owned))
        .unwrap_or_else(|| "/var/run/docker.sock".to_owned());
    std::os::unix::net::UnixStream::connect(socket).is_ok()
}

/// The URL of the server's maintenance database.
async fn admin_url() -> &'static str {
    SERVER
        .get_or_init(|| async {
            let backend =
                choose(std::env::var("DATABASE_URL").ok(), embedded::server_binaries_available(), docker_answers())
                    .unwrap_or_else(|missing| panic!("{missing}"));
            let (url, from) = match backend {
                Backend::Url(url) => (url, "DATABASE_URL"),
                Backend::Binaries => (start_embedded().await, "the machine's PostgreSQL server binaries"),
                Backend::Docker => (start_container().await, "a Docker container (testcontainers)"),
            };
            // Straight to stderr, past the test harness's capture of `eprintln!`: the run's log says it once.
            let _ = writeln!(std::io::stderr(), "the tests' PostgreSQL: {from}");
            url
        })
        .await
}

async fn start_embedded() -> String {
    let dir = std::env::temp_dir().join(format!("ark-broker-tests-{}", std::process::id()));
    let options = EmbeddedOptions { durable: false, max_connections: 500, ..Default::default() };
    let server = EmbeddedPostgres::start(&dir, options)
        .await
        .unwrap_or_else(|error| panic!("cannot start PostgreSQL from its server binaries: {error}"));
    let url = server.url();
    EMBEDDED.set((server, dir)).expect("started once");
    // SAFETY: registering a plain extern "C" function with atexit has no preconditions.
    unsafe { libc::atexit(stop_embedded) };
    url
}

/// PostgreSQL 15 in a container, with room for every test's connections; removed when the run ends.
async fn start_container() -> String {
    let container = Postgres::default()
        .with_tag("15-alpine")
        .with_cmd(["postgres", "-c", "max_connections=500", "-c", "fsync=off"])
        .start()
        .await
        .unwrap_or_else(|error| panic!("cannot start PostgreSQL in Docker: {error}"));
    let port = container.get_host_port_ipv4(5432).await.expect("the mapped port");
    assert!(CONTAINER.set(container).is_ok(), "started once");
    format!("postgres://postgres:postgres@127.0.0.1:{port}/postgres")
}

extern "C" fn stop_embedded() {
    if let Some((server, dir)) = EMBEDDED.get() {
        server.stop_blocking();
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Creates an empty database and returns its URL.
pub async fn fresh_database() -> String {
    super::install_tls_provider();
    let admin = admin_url().await;
    let name = format!("ark_test_{}", uuid::Uuid::new_v4().simple());
    let mut connection = PgConnection::connect(admin).await.expect("connect to the test server");
    connection.execute(AssertSqlSafe(format!("create database {name}"))).await.expect("create a test database");
    let options = PgConnectOptions::from_str(admin).expect("a valid DATABASE_URL").database(&name);
    options.to_url_lossy().to_string()
}

/// A PostgreSQL server of a test's own, for tests that restart it or hold transactions open that would hold
/// back the shared server's visibility horizon for every other test. Stopped and removed on drop.
pub struct OwnServer {
    server: EmbeddedPostgres,
    dir: PathBuf,
}

impl OwnServer {
    /// Starts a server (durable, so a crash restart replays the WAL) and returns it with a fresh database.
    pub async fn start() -> (Self, String) {
        Self::start_with(Vec::new()).await
    }

    /// Like [`OwnServer::start`], with more server settings (`name=value`, e.g. `ssl=on`).
    pub async fn start_with(extra_settings: Vec<String>) -> (Self, String) {
        super::install_tls_provider();
        let dir = std::env::temp_dir().join(format!("ark-broker-own-{}", uuid::Uuid::new_v4().simple()));
        let options = EmbeddedOptions { durable: true, max_connections: 200, extra_settings };
        let server = EmbeddedPostgres::start(&dir, options).await.expect("start a PostgreSQL of the test's own");
        let admin = server.url();
        let mut connection = PgConnection::connect(&admin).await.expect("connect to the test's server");
        connection.execute("create database broker").await.expect("create the database");
        let url = server.database_url("broker");
        (OwnServer { server, dir }, url)
    }
}

impl OwnServer {
    /// Stops the server (an outage) until [`OwnServer::start_again`].
    pub async fn stop(&self) {
        self.server.stop_server().await.expect("stop the test's PostgreSQL");
    }

    /// Starts the stopped server again.
    pub async fn start_again(&self) {
        self.server.start_server().await.expect("start the test's PostgreSQL again");
    }

    /// Restarts the server as after a crash (`pg_ctl restart -m immediate`).
    pub async fn crash_restart(&self) {
        self.server.crash_restart().await.expect("restart the test's PostgreSQL");
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        self.server.stop_blocking();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::{Backend, choose};

    #[test]
    fn the_tests_take_the_first_postgresql_there_is() {
        let url = Some("postgres://db/x".to_owned());
        assert_eq!(choose(url.clone(), true, true), Ok(Backend::Url("postgres://db/x".into())));
        assert_eq!(choose(Some(String::new()), true, true), Ok(Backend::Binaries), "an empty URL is no URL");
        assert_eq!(choose(None, true, true), Ok(Backend::Binaries));
        assert_eq!(choose(None, false, true), Ok(Backend::Docker));
        assert!(choose(None, false, false).unwrap_err().contains("set DATABASE_URL"));
    }
}
