//! One throwaway PostgreSQL for the whole test run, started from the machine's own binaries (as the
//! `postgres` user when the tests run as root) and stopped at process exit; or `DATABASE_URL` when set.
//! Every test gets a database of its own.

use std::{path::PathBuf, str::FromStr, sync::OnceLock};

use ark_broker::db::embedded::{EmbeddedOptions, EmbeddedPostgres};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Executor, PgConnection, postgres::PgConnectOptions};
use tokio::sync::OnceCell;

static SERVER: OnceCell<String> = OnceCell::const_new();
static EMBEDDED: OnceLock<(EmbeddedPostgres, PathBuf)> = OnceLock::new();

/// The URL of the server's maintenance database.
async fn admin_url() -> &'static str {
    SERVER
        .get_or_init(|| async {
            if let Ok(url) = std::env::var("DATABASE_URL") {
                return url;
            }
            let dir = std::env::temp_dir().join(format!("ark-broker-tests-{}", std::process::id()));
            let options = EmbeddedOptions { durable: false, max_connections: 500, ..Default::default() };
            let server = EmbeddedPostgres::start(&dir, options).await.unwrap_or_else(|error| {
                panic!("the tests need PostgreSQL: set DATABASE_URL or install its server binaries ({error})")
            });
            let url = server.url();
            EMBEDDED.set((server, dir)).expect("started once");
            // SAFETY: registering a plain extern "C" function with atexit has no preconditions.
            unsafe { libc::atexit(stop_embedded) };
            url
        })
        .await
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
        super::install_tls_provider();
        let dir = std::env::temp_dir().join(format!("ark-broker-own-{}", uuid::Uuid::new_v4().simple()));
        let options = EmbeddedOptions { durable: true, max_connections: 200, ..Default::default() };
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
