//! Command-line flags with environment fallbacks: the one place the broker's settings are defined.

pub mod access;
pub mod budgets;
pub mod channels;
pub mod durable;
mod durations;
mod load;
mod ttls;
pub mod upstream;
mod values;

use std::{net::IpAddr, path::PathBuf};

use clap::Parser;

pub use ttls::{ConfigError, Ttls};
pub use values::{AnswerPolicy, AuthMode, DatabaseUrl, LogFormat, Secret, StatusPatching};

/// Ark Broker: Postgres-backed memory, chunk streams and questions for Ark, served by identical replicas.
///
/// Environment names follow the upstream TypeScript broker where it has one (`PORT`, `HOST`, `DATABASE_URL`,
/// `DATABASE_POOL_MAX`, `LOG_LEVEL`); the rest are prefixed `ARK_BROKER_`. Upstream's names for settings named
/// otherwise here (`CHUNK_TTL_SECONDS`, `SHUTDOWN_DRAIN_TIMEOUT_MS`, …) are accepted too; ours win.
#[derive(Debug, Clone, Parser)]
#[command(name = "ark-broker", version, about)]
pub struct Config {
    /// Address the HTTP API binds to.
    #[arg(long, env = "HOST", default_value = "0.0.0.0")]
    pub host: IpAddr,

    /// Port of the HTTP API (REST and SSE). 0 picks a free port.
    #[arg(long, env = "PORT", default_value_t = 8080)]
    pub port: u16,

    /// Port of the MCP endpoint (`/mcp`, Streamable HTTP). 0 picks a free port.
    #[arg(long, env = "MCP_PORT", default_value_t = 8081)]
    pub mcp_port: u16,

    /// Host names the MCP endpoint accepts in `Host` (comma-separated), or `*` for any (DNS-rebinding
    /// protection off). The default accepts only loopback names; behind a Service, list its DNS names (the
    /// chart does).
    #[arg(
        long,
        env = "ARK_BROKER_MCP_ALLOWED_HOSTS",
        value_delimiter = ',',
        default_value = "localhost,127.0.0.1,[::1]"
    )]
    pub mcp_allowed_hosts: Vec<String>,

    /// Browser origins the MCP endpoint accepts (comma-separated, with scheme, e.g. `https://app.example:*`);
    /// empty accepts origins on the allowed hosts (requests without `Origin` always pass).
    #[arg(long, env = "ARK_BROKER_MCP_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub mcp_allowed_origins: Vec<String>,

    /// Host names (comma-separated) the broker's pages are served under, e.g. an Ingress's `ark.example`;
    /// browser requests that change state must come from a page on one of them (DNS-rebinding protection).
    /// `*` allows any. Requests without `Origin` or `Referer` (curl, SDKs, Ark's components) are not affected.
    #[arg(long, env = "ARK_BROKER_ALLOWED_HOSTS", value_delimiter = ',', default_value = "localhost,127.0.0.1,[::1]")]
    pub allowed_hosts: Vec<String>,

    /// Browser origins (comma-separated, e.g. `https://dashboard.example`) allowed to call the REST API
    /// cross-origin (CORS) and to change state from their pages. Empty (the default): CORS is off, and only the
    /// broker's own pages may post from a browser.
    #[arg(long, env = "ARK_BROKER_CORS_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub cors_allowed_origins: Vec<String>,

    /// Milliseconds between `notifications/progress` while a blocking `ask_question` waits.
    #[arg(long, env = "ARK_BROKER_MCP_PROGRESS_INTERVAL_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(50..=300_000))]
    pub mcp_progress_interval_ms: u64,

    /// TTL, in seconds, of an MCP task whose client asked for none; it also bounds the question's life.
    #[arg(long, env = "ARK_BROKER_MCP_TASK_TTL_SECONDS", default_value_t = 86_400,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub mcp_task_ttl_seconds: u64,

    /// Largest TTL, in seconds, a client may ask for on an MCP task (larger requests are clamped).
    #[arg(long, env = "ARK_BROKER_MCP_TASK_MAX_TTL_SECONDS", default_value_t = 7 * 86_400,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub mcp_task_max_ttl_seconds: u64,

    /// Poll interval, in milliseconds, suggested to MCP task clients.
    #[arg(long, env = "ARK_BROKER_MCP_TASK_POLL_INTERVAL_MS", default_value_t = 5_000)]
    pub mcp_task_poll_interval_ms: u64,

    /// Serve the MCP conformance suite's fixture tools beside ours (a test build only: `--features
    /// conformance-fixtures`).
    #[cfg(feature = "conformance-fixtures")]
    #[arg(long, env = "ARK_BROKER_MCP_CONFORMANCE_FIXTURES")]
    pub mcp_conformance_fixtures: bool,

    /// The broker's HTTP address as people reach it (e.g. `https://ark.example`), for links to a question's
    /// page (`mcp:caller` in URL mode). Without it, the MCP request's host with `--port`, over http.
    #[arg(long, env = "ARK_BROKER_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// HTTP header on MCP requests naming the calling agent (the question's sender `ark://agents/<name>`).
    #[arg(long, env = "ARK_BROKER_AGENT_HEADER", default_value = "x-ark-agent")]
    pub agent_header: String,

    /// HTTP header on MCP requests naming the calling Query (`name` or `namespace/name`).
    #[arg(long, env = "ARK_BROKER_QUERY_HEADER", default_value = "x-ark-query")]
    pub query_header: String,

    /// HTTP header on MCP requests naming the calling Query's namespace (when the query header has none).
    #[arg(long, env = "ARK_BROKER_QUERY_NAMESPACE_HEADER", default_value = "x-ark-query-namespace")]
    pub query_namespace_header: String,

    /// Patch the asking Query's status while a question waits: `auto` uses the in-cluster service account or
    /// a kubeconfig when there is one (and stays off, logging it once, when there is none); `off` never patches.
    #[arg(long, env = "ARK_BROKER_KUBE_STATUS_PATCHING", value_enum, default_value_t = StatusPatching::Auto)]
    pub kube_status_patching: StatusPatching,

    /// The Query phase set while a question waits: `input-required` (accepted by Ark's CRD) or `waiting`
    /// (for clusters whose CRD has it).
    #[arg(long, env = "ARK_BROKER_WAITING_PHASE", default_value = "input-required",
          value_parser = ["input-required", "waiting"])]
    pub waiting_phase: String,

    /// Kubernetes API server URL to use without credentials instead of the in-cluster or kubeconfig one
    /// (for tests and local development).
    #[arg(long, env = "ARK_BROKER_KUBE_API_URL")]
    pub kube_api_url: Option<String>,

    /// PostgreSQL connection URL. When unset, the broker starts its own local PostgreSQL from the
    /// machine's binaries in `<data-dir>/postgres` and stops it on exit (the embedded default).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<DatabaseUrl>,

    /// A direct PostgreSQL URL for the LISTEN connection and the migrations, when `DATABASE_URL` goes through
    /// a pooler in transaction mode (PgBouncer, CloudNativePG's `Pooler`), which LISTEN and session advisory
    /// locks cannot go through. Set, request connections are made for the pooler (docs/deploying.md: "Through a
    /// pooler"); unset, everything uses `DATABASE_URL`.
    #[arg(long, env = "DATABASE_LISTEN_URL", hide_env_values = true)]
    pub database_listen_url: Option<DatabaseUrl>,

    /// A CA certificate (PEM) to verify PostgreSQL's TLS certificate with (a managed PostgreSQL with its own
    /// CA). Set, every connection uses TLS and verifies the certificate and the host name (`verify-full`;
    /// `sslmode=verify-ca` in the URL keeps the host name unchecked); unset, the URL's `sslmode` decides.
    #[arg(long, env = "DATABASE_SSL_ROOT_CERT_PATH")]
    pub database_ssl_root_cert: Option<PathBuf>,

    /// Milliseconds to wait for PostgreSQL to accept a new connection at start-up; a request waits for a
    /// pooled connection at most this long, and never more than 5 s.
    #[arg(long, env = "DATABASE_CONNECT_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub db_connect_timeout_ms: u64,

    /// Milliseconds any statement of a request may run before Postgres cancels it.
    #[arg(long, env = "ARK_BROKER_DB_STATEMENT_TIMEOUT_MS", default_value_t = 15_000,
          value_parser = clap::value_parser!(u64).range(100..))]
    pub db_statement_timeout_ms: u64,

    /// Milliseconds a statement may wait for a lock (a stream or conversation another replica is writing).
    #[arg(long, env = "ARK_BROKER_DB_LOCK_TIMEOUT_MS", default_value_t = 8_000,
          value_parser = clap::value_parser!(u64).range(10..))]
    pub db_lock_timeout_ms: u64,

    /// Milliseconds a replica may sit idle inside a transaction before Postgres ends its session and
    /// releases its locks (a frozen or partitioned replica then harms only itself).
    #[arg(long, env = "ARK_BROKER_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS", default_value_t = 4_000,
          value_parser = clap::value_parser!(u64).range(100..))]
    pub db_idle_in_transaction_timeout_ms: u64,

    /// Milliseconds a PostgreSQL connection may go unanswered by the network (no reply to what it sent, no
    /// reply to keepalive probes) before it counts as lost, on the broker's side and the server's: a partition
    /// then fails requests with 503 and takes the replica out of readiness within this, instead of hanging.
    #[arg(long, env = "ARK_BROKER_DB_NETWORK_TIMEOUT_MS", default_value_t = 4_000,
          value_parser = clap::value_parser!(u64).range(1_000..=600_000))]
    pub db_network_timeout_ms: u64,

    /// Milliseconds a write waits for PostgreSQL to answer again (a switchover or failover of the primary, a
    /// restart) before it fails with 503: an open chunk POST keeps its lines meanwhile, other writes wait.
    #[arg(long, env = "ARK_BROKER_DB_RIDE_THROUGH_MS", default_value_t = 15_000,
          value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub db_ride_through_ms: u64,

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

    /// Fallback poll, in milliseconds, that backs LISTEN/NOTIFY while readers wait. Keep it at most 1000;
    /// larger values exist only so tests can prove a wake-up came through NOTIFY.
    #[arg(long, env = "ARK_BROKER_POLL_INTERVAL_MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(10..=600_000))]
    pub poll_interval_ms: u64,

    /// Replicas hear of commits through one LISTEN relay once at least this many are live: one replica
    /// LISTENs and passes each notification on over HTTP, since PostgreSQL 15 wakes every listening backend
    /// for every notifying commit. 0: every replica always listens itself (docs/deploying.md: "Many replicas").
    #[arg(long, env = "ARK_BROKER_LISTEN_RELAY_FROM", default_value_t = 8)]
    pub listen_relay_from: u32,

    /// The address (IP or host name, without the port) the other replicas reach this one at when it is the
    /// LISTEN relay; unset, the one PostgreSQL sees it connect from (a pod's IP). The chart sets the pod's IP.
    #[arg(long, env = "ARK_BROKER_RELAY_ADDRESS")]
    pub relay_address: Option<String>,

    /// Seconds between `: heartbeat` comments on `watch=true` SSE streams.
    #[arg(long, env = "ARK_BROKER_SSE_HEARTBEAT_SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub sse_heartbeat_seconds: u64,

    /// Seconds the broker waits for open requests after SIGTERM before it exits anyway: long enough for an
    /// LLM answer streaming into an open chunk POST to finish (Ark's executors never reopen one).
    #[arg(long, env = "ARK_BROKER_SHUTDOWN_TIMEOUT_SECONDS", default_value_t = 120)]
    pub shutdown_timeout_seconds: u64,

    /// Milliseconds a whole request may take to arrive, streamed chunk POSTs included (upstream's
    /// `REQUEST_TIMEOUT_MS`, Node's `server.requestTimeout`); 0: no such bound. Slower requests get 408 (a
    /// chunk POST with its `chunks_stored`). A whole body is also bounded by `--body-read-timeout-seconds`:
    /// the shorter wins.
    #[arg(long, env = "REQUEST_TIMEOUT_MS", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=2_147_483_647))]
    pub request_timeout_ms: u64,

    /// Milliseconds a `GET /stream/{id}` reader may go without a live chunk before it gets upstream's timeout
    /// frame and `[DONE]` (upstream's `STREAM_IDLE_TIMEOUT_MS`); each live chunk starts it again. The stream
    /// itself is not ended: another reader, or this one reconnecting, reads on.
    #[arg(long, env = "STREAM_IDLE_TIMEOUT_MS", default_value_t = 300_000,
          value_parser = clap::value_parser!(u64).range(1..=2_147_483_647))]
    pub stream_idle_timeout_ms: u64,

    /// Largest JSON request body, in bytes (upstream: 10 MB). Larger bodies get 413.
    #[arg(long, env = "ARK_BROKER_MAX_BODY_BYTES", default_value_t = 10 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Largest single NDJSON line on `POST /stream/{id}`, in bytes; longer lines are skipped and counted.
    #[arg(long, env = "ARK_BROKER_MAX_CHUNK_BYTES", default_value_t = 10 * 1024 * 1024)]
    pub max_chunk_bytes: usize,

    /// Seconds a stream may go without a write after a chunk POST to it broke mid-body (a reset, not a clean
    /// end) before it is marked aborted: its readers then get the abort frame and `[DONE]`.
    #[arg(long, env = "ARK_BROKER_STREAM_ABORT_GRACE_SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub stream_abort_grace_seconds: u64,

    /// Seconds between passes of the reaper (expired rows, finished streams, logs and outboxes; see docs/retention.md);
    /// 0 turns it off on this replica (upstream's `ROW_REAP_INTERVAL_SECONDS=0` does the same).
    #[arg(long, env = "ARK_BROKER_REAP_INTERVAL_SECONDS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(0..=2_147_483))]
    pub reap_interval_seconds: u64,

    /// Rows the reaper deletes per statement: each holds at most this many row locks and is short.
    #[arg(long, env = "ROW_REAP_BATCH_SIZE", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub reap_batch_size: u64,

    /// Seconds the questions watch log keeps a change; a watch resuming from an older version gets 410.
    #[arg(long, env = "ARK_BROKER_QUESTION_LOG_SECONDS", default_value_t = 86_400,
          value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    pub question_log_seconds: u64,

    /// Seconds each step of a question's decision (`GET /questions/{id}/history`) is kept.
    #[arg(long, env = "ARK_BROKER_QUESTION_HISTORY_SECONDS", default_value_t = 7_776_000,
          value_parser = clap::value_parser!(u64).range(1..=3_153_600_000))]
    pub question_history_seconds: u64,

    /// Seconds a completed or aborted stream and its chunks are kept (upstream's Redis keeps chunks an hour).
    #[arg(long, env = "ARK_BROKER_STREAM_RETENTION_SECONDS", default_value_t = 86_400,
          value_parser = clap::value_parser!(u64).range(60..=31_536_000))]
    pub stream_retention_seconds: u64,

    /// Seconds of chunks one time bucket holds: the reaper drops a bucket whole once its streams are past
    /// the retention, so a chunk stays at most 1.5 buckets past it (docs/retention.md). 0: a twelfth of the
    /// stream retention, at least 60 s; never more than the retention.
    #[arg(long, env = "ARK_BROKER_STREAM_BUCKET_SECONDS", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=31_536_000))]
    pub stream_bucket_seconds: u64,

    /// Seconds an event is kept when its `POST /events` sets no `ttl_seconds` (upstream's default: 30 days).
    #[arg(long, env = "EVENT_VISIBILITY_TTL_SECONDS", default_value_t = 2_592_000,
          value_parser = clap::value_parser!(u64).range(1..=3_153_600_000))]
    pub event_ttl_seconds: u64,

    /// Seconds a message is kept when its `POST /messages` sets no `ttl_seconds` (upstream's default: 30 days).
    #[arg(long, env = "MESSAGE_VISIBILITY_TTL_SECONDS", default_value_t = 2_592_000,
          value_parser = clap::value_parser!(u64).range(1..=3_153_600_000))]
    pub message_ttl_seconds: u64,

    /// Seconds a session is kept after its latest event or message (upstream's default: 30 days); at least the
    /// message and event TTLs, so a session never disappears while what it indexes is still kept.
    #[arg(long, env = "SESSIONS_VISIBILITY_TTL_SECONDS", default_value_t = 2_592_000,
          value_parser = clap::value_parser!(u64).range(1..=3_153_600_000))]
    pub session_ttl_seconds: u64,

    /// Most events kept; the reaper deletes the oldest beyond it (0: no cap).
    #[arg(long, env = "MAX_EVENTS", default_value_t = 0)]
    pub max_events: u64,

    /// Seconds a span is kept after it arrives.
    #[arg(long, env = "ARK_BROKER_SPAN_TTL_SECONDS", default_value_t = 86_400,
          value_parser = clap::value_parser!(u64).range(1..=3_153_600_000))]
    pub span_ttl_seconds: u64,

    /// Most spans kept; the reaper deletes the oldest beyond it (0: no cap; upstream's chart: 100000).
    #[arg(long, env = "MAX_SPANS", default_value_t = 100_000)]
    pub max_spans: u64,

    /// Most chunks one group commit writes (many streams, one transaction, one NOTIFY).
    #[arg(long, env = "ARK_BROKER_FLUSH_MAX_ROWS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..=50_000))]
    pub flush_max_rows: u64,

    // Connections and memory (issue 12): what one client, or many, may hold of a replica.
    /// Seconds a client has to send a request's headers: from accepting the connection, or from the first
    /// byte of the next request on a kept-alive one. Slower connections are closed.
    #[arg(long, env = "ARK_BROKER_HEADER_READ_TIMEOUT_SECONDS", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub header_read_timeout_seconds: u64,

    /// Seconds a kept-alive connection may sit with no request in flight and no bytes received before it is
    /// closed. Requests in flight (an SSE reader, an open chunk POST) are never cut by it.
    #[arg(long, env = "ARK_BROKER_IDLE_TIMEOUT_SECONDS", default_value_t = 75,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub idle_timeout_seconds: u64,

    /// Seconds a client connection may be silent before it gets TCP keepalive probes; one that answers none
    /// of three (a third of this apart) is closed. A client that vanished without closing (a node gone, a
    /// partition) is noticed within twice this: its open chunk POST then counts as broken (`aborted` after
    /// the grace) and its SSE reader is freed. A silent client that is there answers the probes.
    #[arg(long, env = "ARK_BROKER_CLIENT_KEEPALIVE_SECONDS", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(1..=7_200))]
    pub client_keepalive_seconds: u64,

    /// Most open connections per replica, HTTP and MCP ports together. Beyond it a few more are let in to
    /// answer `/health` and `/readyz` (everything else gets 503); the rest are closed at once.
    #[arg(long, env = "ARK_BROKER_MAX_CONNECTIONS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,

    /// Seconds a whole request body (JSON, an OTLP export, an MCP message) may take to arrive; slower bodies
    /// get 408. Chunk POSTs (NDJSON, streamed) have no such deadline.
    #[arg(long, env = "ARK_BROKER_BODY_READ_TIMEOUT_SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub body_read_timeout_seconds: u64,

    /// Bytes of partly received NDJSON lines all open chunk POSTs of a replica may hold; once reached, new
    /// chunk POSTs get 503 with `Retry-After` until lines complete or requests end, and an open one whose
    /// partial line grows past 64 KiB is ended with 503 and `chunks_stored`.
    #[arg(long, env = "ARK_BROKER_NDJSON_BUFFER_BUDGET_BYTES", default_value_t = 128 * 1024 * 1024,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub ndjson_buffer_budget_bytes: u64,

    #[command(flatten)]
    pub access: access::Access,

    #[command(flatten)]
    pub budgets: budgets::ByteBudgets,

    #[command(flatten)]
    pub channels: channels::ChannelCredentials,

    #[command(flatten)]
    pub durable: durable::DurableStreams,
}
