//! Command-line flags with environment fallbacks: the one place the broker's settings are defined.

use std::{net::IpAddr, path::PathBuf, time::Duration};

use clap::{Parser, ValueEnum};

/// Ark Broker: Postgres-backed memory, chunk streams and questions for Ark, served by identical replicas.
///
/// Environment names follow the upstream TypeScript broker where it has one (`PORT`, `HOST`, `DATABASE_URL`,
/// `DATABASE_POOL_MAX`, `LOG_LEVEL`); the rest are prefixed `ARK_BROKER_`.
#[derive(Debug, Clone, Parser)]
#[command(name = "ark-broker", version, about)]
pub struct Config {
    /// Address the HTTP API binds to.
    #[arg(long, env = "HOST", default_value = "0.0.0.0")]
    pub host: IpAddr,

    /// Port of the HTTP API (REST and SSE). 0 picks a free port.
    #[arg(long, env = "PORT", default_value_t = 8080)]
    pub port: u16,

    /// PostgreSQL connection URL. When unset, the broker starts its own local PostgreSQL from the
    /// machine's binaries in `<data-dir>/postgres` and stops it on exit (the embedded default).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,

    /// Largest number of pooled Postgres connections per replica (the LISTEN connection is extra).
    #[arg(long, env = "DATABASE_POOL_MAX", default_value_t = 10)]
    pub database_pool_max: u32,

    /// Directory for the embedded PostgreSQL when no DATABASE_URL is given.
    #[arg(long, env = "ARK_BROKER_DATA_DIR", default_value = ".ark-broker")]
    pub data_dir: PathBuf,

    /// Log filter (`error`, `warn`, `info`, `debug`, `trace`, or a tracing directive list).
    #[arg(long, env = "LOG_LEVEL", default_value = "info")]
    pub log_level: String,

    /// Log format; `auto` writes JSON unless stdout is a terminal.
    #[arg(long, env = "ARK_BROKER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Auto)]
    pub log_format: LogFormat,

    /// Fallback poll, in milliseconds, that backs LISTEN/NOTIFY while readers wait (at most 1000).
    #[arg(long, env = "ARK_BROKER_POLL_INTERVAL_MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(10..=1000))]
    pub poll_interval_ms: u64,

    /// Seconds between `: heartbeat` comments on `watch=true` SSE streams.
    #[arg(long, env = "ARK_BROKER_SSE_HEARTBEAT_SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub sse_heartbeat_seconds: u64,

    /// Seconds the broker waits for open requests after SIGTERM before it exits anyway.
    #[arg(long, env = "ARK_BROKER_SHUTDOWN_TIMEOUT_SECONDS", default_value_t = 8)]
    pub shutdown_timeout_seconds: u64,

    /// Largest JSON request body, in bytes (upstream: 10 MB). Larger bodies get 413.
    #[arg(long, env = "ARK_BROKER_MAX_BODY_BYTES", default_value_t = 10 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Largest single NDJSON line on `POST /stream/{id}`, in bytes; longer lines are skipped and counted.
    #[arg(long, env = "ARK_BROKER_MAX_CHUNK_BYTES", default_value_t = 10 * 1024 * 1024)]
    pub max_chunk_bytes: usize,

    /// Seconds between passes of the reaper (expired messages, expired questions, the question watch log).
    #[arg(long, env = "ARK_BROKER_REAP_INTERVAL_SECONDS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub reap_interval_seconds: u64,

    /// Seconds the questions watch log keeps a change; a watch resuming from an older version gets 410.
    #[arg(long, env = "ARK_BROKER_QUESTION_LOG_SECONDS", default_value_t = 86_400,
          value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    pub question_log_seconds: u64,

    /// Most chunks one group commit writes (many streams, one transaction, one NOTIFY).
    #[arg(long, env = "ARK_BROKER_FLUSH_MAX_ROWS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..=50_000))]
    pub flush_max_rows: u64,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// JSON when stdout is not a terminal, text otherwise.
    Auto,
    /// One JSON object per line.
    Json,
    /// Human-readable text.
    Text,
}

impl Config {
    /// Settings for a broker on `database_url` with every other value at its default; tests start from this.
    pub fn for_database(database_url: &str) -> Self {
        let mut config = Config::parse_from(["ark-broker"]);
        config.database_url = Some(database_url.to_owned());
        config.host = IpAddr::from([127, 0, 0, 1]);
        config.port = 0;
        config
    }

    /// The fallback poll period.
    pub fn poll_interval(&self) -> Duration {
        Duration::from_millis(self.poll_interval_ms)
    }

    /// The heartbeat period of `watch` streams.
    pub fn sse_heartbeat(&self) -> Duration {
        Duration::from_secs(self.sse_heartbeat_seconds)
    }

    /// How long shutdown waits for open requests.
    pub fn shutdown_timeout(&self) -> Duration {
        Duration::from_secs(self.shutdown_timeout_seconds)
    }
}
