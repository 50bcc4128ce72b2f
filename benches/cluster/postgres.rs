//! The bench's own PostgreSQL: a durable (fsync on) embedded server in a temporary directory with
//! `pg_stat_statements` preloaded, the databases on it, and statement counts per database.

use std::{
    path::{Path, PathBuf},
    str::FromStr,
};

use ark_broker::db::embedded::{EmbeddedOptions, EmbeddedPostgres};
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection, postgres::PgConnectOptions};

/// The database the brokers use.
pub const BROKER_DB: &str = "ark_bench";
/// The database the baselines use, so the brokers' tables are untouched.
pub const BASELINE_DB: &str = "bench_baseline";
/// The record phases' raw baseline, dropped after them.
pub const RECORDS_DB: &str = "bench_records";

/// Server settings on top of the embedded defaults; the memory and WAL ones are those of the reference
/// measurements (`performance.md` §2).
const SETTINGS: &[&str] = &[
    "shared_preload_libraries=pg_stat_statements",
    "pg_stat_statements.track=top",
    "shared_buffers=1GB",
    "max_wal_size=4GB",
    "checkpoint_timeout=15min",
    // Commit times, for each chunk's commit latency (`Postgres::commit_latencies_ms`).
    "track_commit_timestamp=on",
];

/// The running server, with a connection to its `postgres` database for the bench's own queries.
pub struct Postgres {
    server: EmbeddedPostgres,
    dir: PathBuf,
    admin: PgConnection,
    broker_db_oid: Option<u32>,
}

impl Postgres {
    /// Initialises and starts a server under `dir`.
    pub async fn start(dir: &Path) -> Self {
        Self::start_with(dir, 400, SETTINGS).await
    }

    /// A server at PostgreSQL's defaults (`max_connections` 100, `shared_buffers` 128MB, …), but for the
    /// statement counts the meter reads.
    pub async fn start_at_defaults(dir: &Path) -> Self {
        Self::start_with(dir, 100, &SETTINGS[..2]).await
    }

    async fn start_with(dir: &Path, max_connections: u32, settings: &[&str]) -> Self {
        let options = EmbeddedOptions {
            durable: true,
            max_connections,
            extra_settings: settings.iter().map(|s| (*s).to_owned()).collect(),
        };
        let server = EmbeddedPostgres::start(dir, options).await.expect("start PostgreSQL");
        let mut admin = PgConnection::connect(&server.url()).await.expect("connect to PostgreSQL");
        admin.execute("create extension if not exists pg_stat_statements").await.expect("pg_stat_statements");
        Postgres { server, dir: dir.to_owned(), admin, broker_db_oid: None }
    }

    /// The URL of database `name`.
    pub fn url(&self, name: &str) -> String {
        self.server.database_url(name)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        PgConnectOptions::from_str(&self.server.url()).expect("a valid URL").get_port()
    }

    /// `select version()`.
    pub async fn version(&mut self) -> String {
        sqlx::query_scalar("select version()").fetch_one(&mut self.admin).await.expect("version")
    }

    /// Creates database `name`.
    pub async fn create_database(&mut self, name: &str) {
        self.admin.execute(AssertSqlSafe(format!("create database {name}"))).await.expect("create database");
        if name == BROKER_DB {
            let oid: sqlx::postgres::types::Oid = sqlx::query_scalar("select oid from pg_database where datname = $1")
                .bind(name)
                .fetch_one(&mut self.admin)
                .await
                .expect("the database's oid");
            self.broker_db_oid = Some(oid.0);
        }
    }

    /// Drops database `name`, closing any connection still on it.
    pub async fn drop_database(&mut self, name: &str) {
        let sql = format!("drop database {name} with (force)");
        self.admin.execute(AssertSqlSafe(sql)).await.expect("drop database");
    }

    /// Starts a phase from a quiet server: `VACUUM ANALYZE` of the brokers' database (so autovacuum does not
    /// wake up in the middle of the phase for what earlier phases wrote), then `CHECKPOINT`.
    pub async fn settle(&mut self) {
        let mut broker = PgConnection::connect(&self.url(BROKER_DB)).await.expect("connect to the broker database");
        broker.execute("vacuum analyze").await.expect("vacuum analyze");
        broker.close().await.expect("close");
        self.admin.execute("checkpoint").await.expect("checkpoint");
    }

    /// Commit latency of the chunks of streams whose ids start with `prefix`: when the transaction that
    /// stored each one committed (`pg_xact_commit_timestamp`) − when its line was made (`bench.sent_us`);
    /// p50, p99 and max in ms. The timestamp is taken as the commit record is written, just before its
    /// WAL flush, so this leaves out the flush itself (0.14 ms per fdatasync here).
    pub async fn commit_latencies_ms(&mut self, prefix: &str) -> Option<[f64; 3]> {
        let mut broker = PgConnection::connect(&self.url(BROKER_DB)).await.expect("connect to the broker database");
        let quantiles: (Option<f64>, Option<f64>, Option<f64>) = sqlx::query_as(
            "select percentile_disc(0.5) within group (order by ms), percentile_disc(0.99) within group (order by ms),
                    max(ms)
             from (select (extract(epoch from pg_xact_commit_timestamp(tx::xid)) * 1e6
                           - (chunk -> 'bench' ->> 'sent_us')::float8) / 1e3 as ms
                   from chunks where starts_with(stream_id, $1) and not is_done) c",
        )
        .bind(prefix)
        .fetch_one(&mut broker)
        .await
        .expect("commit latencies");
        broker.close().await.expect("close");
        match quantiles {
            (Some(p50), Some(p99), Some(max)) => Some([p50, p99, max]),
            _ => None,
        }
    }

    /// Forgets every statement counted so far.
    pub async fn reset_statements(&mut self) {
        self.admin.execute("select pg_stat_statements_reset()").await.expect("pg_stat_statements_reset");
    }

    /// Statements the brokers' database ran since the last reset (the bench's own run on `postgres`).
    pub async fn broker_statements(&mut self) -> i64 {
        let oid = sqlx::postgres::types::Oid(self.broker_db_oid.expect("the broker database exists"));
        sqlx::query_scalar("select coalesce(sum(calls), 0)::bigint from pg_stat_statements where dbid = $1")
            .bind(oid)
            .fetch_one(&mut self.admin)
            .await
            .expect("pg_stat_statements")
    }

    /// The statements of the brokers' database that took the most time since the last reset:
    /// `(calls, total ms, query)`.
    pub async fn top_broker_statements(&mut self, limit: i64) -> Vec<(i64, f64, String)> {
        let oid = sqlx::postgres::types::Oid(self.broker_db_oid.expect("the broker database exists"));
        sqlx::query_as(
            // A select's list of columns is cut, so the statement shows what it reads (the chunk reads all
            // name the same columns first, then their function).
            "select calls, total_exec_time,
                    left(regexp_replace(regexp_replace(query, '\\s+', ' ', 'g'), '^select .*? from ', 'select … from '), 120)
             from pg_stat_statements where dbid = $1 order by total_exec_time desc limit $2",
        )
        .bind(oid)
        .bind(limit)
        .fetch_all(&mut self.admin)
        .await
        .expect("pg_stat_statements")
    }
}

impl Drop for Postgres {
    /// Stops the server (immediate shutdown: nothing here needs to survive) and removes its directory,
    /// also when the bench panics.
    fn drop(&mut self) {
        self.server.stop_blocking();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A PostgreSQL client program (`pgbench`) from PATH or the newest `/usr/lib/postgresql/*/bin`.
pub fn client_program(name: &str) -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file()));
    if let Some(found) = on_path {
        return found;
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dirs| dirs.filter_map(|d| d.ok().map(|d| d.path().join("bin").join(name))).collect())
        .unwrap_or_default();
    found.retain(|p| p.is_file());
    found.sort_by_key(|p| p.iter().rev().nth(2).and_then(|v| v.to_str()?.parse::<u32>().ok()).unwrap_or(0));
    found.pop().unwrap_or_else(|| panic!("{name} not found on PATH or under /usr/lib/postgresql"))
}
