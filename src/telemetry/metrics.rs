//! Prometheus metrics: the process's recorder (`metrics` + `metrics-exporter-prometheus`, installed once),
//! the names every part of the broker records under, and the text a scrape of `GET /metrics` gets, the
//! process's own `process_*` families included. Counters and histograms are recorded where things happen;
//! what is a count of rows (questions by status, outbox backlogs), of the pool or of the process is read when
//! scraped (by the `/metrics` route).
//!
//! Every family has its help text from the start, and every series whose labels are known before anything
//! happens ([`start_at_zero`]) is exported at zero from start-up, so a dashboard or an alert on a healthy,
//! idle replica reads 0 rather than "no data". Only the request series wait for their first request: their
//! `route` and `status` labels are not known before.

use std::{sync::OnceLock, time::Duration};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// The build, as a gauge that is always 1: `version` and `git_sha` labels.
pub const BUILD_INFO: &str = "ark_broker_build_info";
/// Requests answered, by `method`, matched `route` and `status`.
pub const HTTP_REQUESTS: &str = "ark_broker_http_requests_total";
/// Request latency until the response head, by `method` and matched `route`.
pub const HTTP_DURATION: &str = "ark_broker_http_request_duration_seconds";
/// SSE responses open on this replica.
pub const SSE_READERS: &str = "ark_broker_sse_readers";
/// MCP calls waiting on this replica for a question to close (blocking `ask_question`, `tasks/result`).
pub const MCP_WAITERS: &str = "ark_broker_mcp_waiters";
/// NDJSON chunk lines taken in.
pub const INGEST_LINES: &str = "ark_broker_ingest_lines_total";
/// Rows per group commit of the chunk writer.
pub const FLUSH_ROWS: &str = "ark_broker_flush_rows";
/// How long a group commit of the chunk writer took.
pub const FLUSH_DURATION: &str = "ark_broker_flush_duration_seconds";
/// From a feed's commit notification reaching this replica to its rows being handed to the readers (for
/// questions: its waiters and watchers woken), by `feed`.
pub const DELIVERY_LAG: &str = "ark_broker_notify_delivery_lag_seconds";
/// Times the LISTEN connection was lost and made again.
pub const LISTENER_RECONNECTS: &str = "ark_broker_listener_reconnects_total";
/// How this replica hears of commits now (1 for the `mode`, 0 for the others): `listening` itself, as the
/// `relay` for others too, or `following` the relay.
pub const LISTEN_MODE: &str = "ark_broker_listen_mode";
/// Whether this replica's Slack Socket Mode connection is up (1) or not (0).
pub const SLACK_SOCKET_CONNECTED: &str = "ark_broker_slack_socket_connected";
/// Times the Slack Socket Mode connection was made again (Slack asked, or it was lost).
pub const SLACK_SOCKET_RECONNECTS: &str = "ark_broker_slack_socket_reconnects_total";
/// Attempts of outbox work that failed (`outbox`: `status_patches` or `channel_deliveries`).
pub const OUTBOX_FAILURES: &str = "ark_broker_outbox_failures_total";
/// Outbox work not yet done, by `outbox` (read at scrape).
pub const OUTBOX_BACKLOG: &str = "ark_broker_outbox_backlog";
/// Rows the reaper deleted (or questions it expired), by `kind`.
pub const REAPED: &str = "ark_broker_reaper_deleted_total";
/// Seconds the oldest rows of a table kept in time buckets are past the time they should have been dropped
/// by (0 while the reaper keeps up), by `table` (read at scrape).
pub const RETENTION_OVERDUE: &str = "ark_broker_retention_overdue_seconds";
/// Questions, by `status` (read at scrape).
pub const QUESTIONS: &str = "ark_broker_questions";
/// Database connections open, and idle, in this replica's pool (read at scrape).
pub const POOL_CONNECTIONS: &str = "ark_broker_db_pool_connections";
/// Idle connections in this replica's pool (read at scrape).
pub const POOL_IDLE: &str = "ark_broker_db_pool_idle_connections";
/// How long getting a pooled connection took when scraped: a pool that is used up shows here first.
pub const POOL_WAIT: &str = "ark_broker_db_pool_acquire_wait_seconds";

/// The help text of each of the broker's own families (`# HELP` in the scrape).
const HELP: &[(&str, Kind, &str)] = &[
    (BUILD_INFO, Kind::Gauge, "The build: always 1, with its version and git_sha as labels"),
    (HTTP_REQUESTS, Kind::Counter, "HTTP requests answered, by method, route template and status"),
    (HTTP_DURATION, Kind::Histogram, "HTTP request latency until the response head, by method and route template"),
    (SSE_READERS, Kind::Gauge, "SSE responses open on this replica"),
    (MCP_WAITERS, Kind::Gauge, "MCP calls waiting on this replica for a question to close"),
    (INGEST_LINES, Kind::Counter, "NDJSON chunk lines taken in by this replica"),
    (FLUSH_ROWS, Kind::Histogram, "Chunk rows per group commit of this replica's chunk writer"),
    (FLUSH_DURATION, Kind::Histogram, "How long a group commit of this replica's chunk writer took"),
    (
        DELIVERY_LAG,
        Kind::Histogram,
        "From a feed's commit notification reaching this replica to its rows being handed to the readers, by feed",
    ),
    (LISTENER_RECONNECTS, Kind::Counter, "Times this replica's LISTEN connection was lost and made again"),
    (
        LISTEN_MODE,
        Kind::Gauge,
        "How this replica hears of commits (1 for the mode): listening itself, as the relay, or following the relay",
    ),
    (SLACK_SOCKET_CONNECTED, Kind::Gauge, "Whether this replica's Slack Socket Mode connection is up (1) or not (0)"),
    (
        SLACK_SOCKET_RECONNECTS,
        Kind::Counter,
        "Times this replica's Slack Socket Mode connection was made again (Slack asked, or it was lost)",
    ),
    (OUTBOX_FAILURES, Kind::Counter, "Failed attempts of outbox work on this replica, by outbox"),
    (OUTBOX_BACKLOG, Kind::Gauge, "Outbox work not yet done, by outbox (rows in PostgreSQL, read at scrape)"),
    (REAPED, Kind::Counter, "Rows the reaper deleted (or questions it expired) on this replica, by kind"),
    (
        RETENTION_OVERDUE,
        Kind::Gauge,
        "Seconds the oldest bucket of a table is past the time it should have been dropped by, by table (read at scrape)",
    ),
    (QUESTIONS, Kind::Gauge, "Questions, by status (rows in PostgreSQL, read at scrape)"),
    (POOL_CONNECTIONS, Kind::Gauge, "Database connections open in this replica's pool (read at scrape)"),
    (POOL_IDLE, Kind::Gauge, "Idle database connections in this replica's pool (read at scrape)"),
    (POOL_WAIT, Kind::Gauge, "How long getting a pooled connection took at the last scrape"),
];

/// Which `describe_*!` a family takes.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// The outboxes: failed attempts ([`OUTBOX_FAILURES`]) and backlog ([`OUTBOX_BACKLOG`]) are labelled with
/// their names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outbox {
    /// Query status patches to Kubernetes.
    StatusPatches,
    /// Questions delivered to channels (Slack, GitHub).
    ChannelDeliveries,
}

impl Outbox {
    /// Every outbox.
    pub const ALL: [Outbox; 2] = [Outbox::StatusPatches, Outbox::ChannelDeliveries];

    /// The `outbox` label.
    pub fn name(self) -> &'static str {
        match self {
            Outbox::StatusPatches => "status_patches",
            Outbox::ChannelDeliveries => "channel_deliveries",
        }
    }
}

/// Upstream's size gauges, by the table each counts (read at scrape; no labels, as upstream's): the names and
/// the type Ark's dashboards and alerts read. Upstream counts its in-process caches; here the rows are in
/// PostgreSQL, the same on every replica (`db::sizes`: exact up to 10000 rows, the planner's estimate above).
pub const UPSTREAM_SIZES: &[(&str, &str, &str)] = &[
    ("messages", "broker_messages_count", "Messages currently held (rows in PostgreSQL; estimated above 10000)"),
    ("chunks", "broker_chunks_count", "Completion chunks currently held (rows in PostgreSQL; estimated above 10000)"),
    ("spans", "broker_spans_count", "OTEL spans currently held (rows in PostgreSQL; estimated above 10000)"),
    ("events", "broker_events_count", "Operation events currently held (rows in PostgreSQL; estimated above 10000)"),
    ("sessions", "broker_sessions_count", "Sessions currently held (rows in PostgreSQL; estimated above 10000)"),
    (
        "session_queries",
        "broker_session_queries_count",
        "Queries held across all sessions (rows in PostgreSQL; estimated above 10000)",
    ),
];

/// Latency buckets in seconds: 1 ms to 10 s.
const SECONDS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
/// Rows per flush: 1 to the largest group commit.
const ROWS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 5000.0];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
/// The process's own metrics (`process_*`: memory, CPU seconds, file descriptors, threads, start time), as
/// Prometheus' clients export them; read from `/proc` at each scrape.
static PROCESS: OnceLock<metrics_process::Collector> = OnceLock::new();

/// Installs the recorder once per process (tests start many brokers in one), sets the build info and keeps
/// the histograms' buffers drained.
pub fn install() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS)
            .and_then(|builder| builder.set_buckets_for_metric(Matcher::Full(FLUSH_ROWS.into()), ROWS))
            .expect("the buckets are not empty")
            .build_recorder();
        let handle = recorder.handle();
        // Another recorder may be installed already (a test harness's); ours still renders its own metrics.
        let _ = ::metrics::set_global_recorder(recorder);
        ::metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION"), "git_sha" => env!("ARK_BROKER_GIT_SHA"))
            .set(1.0);
        for (name, kind, help) in HELP {
            match kind {
                Kind::Counter => ::metrics::describe_counter!(*name, *help),
                Kind::Gauge => ::metrics::describe_gauge!(*name, *help),
                Kind::Histogram => ::metrics::describe_histogram!(*name, *help),
            }
        }
        for (_, gauge, help) in UPSTREAM_SIZES {
            ::metrics::describe_gauge!(*gauge, *help);
        }
        let process = PROCESS.get_or_init(metrics_process::Collector::default);
        process.describe();
        process.collect();
        let upkeep = handle.clone();
        std::thread::Builder::new()
            .name("metrics-upkeep".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(Duration::from_secs(5));
                    upkeep.run_upkeep();
                }
            })
            .expect("a thread can be started");
        handle
    })
}

/// Registers every series whose labels are known before anything happens, at zero: the open readers and
/// waiters, ingest, flushes and delivery lag (`feeds`), listener and Slack Socket Mode reconnects (and the
/// latter's connection, down) and outbox failures (every [`Outbox`]); the reaper's kinds are registered at zero
/// as their duties are (`retention::Duty`). Nothing already counted changes (the recorder is the process's, and
/// tests start many brokers in one): counters and gauges are moved by 0, histograms only registered, which the
/// exporter renders as buckets, sum and count of 0.
pub fn start_at_zero(feeds: &[&'static str]) {
    install();
    for gauge in [SSE_READERS, MCP_WAITERS, SLACK_SOCKET_CONNECTED] {
        ::metrics::gauge!(gauge).increment(0.0);
    }
    for counter in [INGEST_LINES, LISTENER_RECONNECTS, SLACK_SOCKET_RECONNECTS] {
        ::metrics::counter!(counter).increment(0);
    }
    // A histogram's handle is only taken, to register the series: nothing is recorded.
    for histogram in [FLUSH_ROWS, FLUSH_DURATION] {
        let _ = ::metrics::histogram!(histogram);
    }
    for feed in feeds {
        let _ = ::metrics::histogram!(DELIVERY_LAG, "feed" => *feed);
    }
    for outbox in Outbox::ALL {
        ::metrics::counter!(OUTBOX_FAILURES, "outbox" => outbox.name()).increment(0);
    }
}

/// The Prometheus text of every metric.
pub fn render() -> String {
    let handle = install();
    if let Some(process) = PROCESS.get() {
        process.collect();
    }
    handle.render()
}

/// Counts one answered request and its latency.
pub fn http_request(method: &str, route: &str, status: u16, elapsed: Duration) {
    let (method, route) = (method.to_owned(), route.to_owned());
    ::metrics::counter!(HTTP_REQUESTS, "method" => method.clone(), "route" => route.clone(), "status" => status.to_string())
        .increment(1);
    ::metrics::histogram!(HTTP_DURATION, "method" => method, "route" => route).record(elapsed.as_secs_f64());
}

/// Counts something open while this guard lives (an SSE response, an MCP waiter).
#[derive(Debug)]
pub struct Open(&'static str);

impl Open {
    /// One more `gauge` open, until the guard is dropped.
    pub fn new(gauge: &'static str) -> Self {
        ::metrics::gauge!(gauge).increment(1.0);
        Open(gauge)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        ::metrics::gauge!(self.0).decrement(1.0);
    }
}

/// Counts chunk lines handed to the writer.
pub fn ingested(lines: usize) {
    ::metrics::counter!(INGEST_LINES).increment(lines as u64);
}

/// Records a group commit of `rows` chunk rows that took `elapsed`.
pub fn flushed(rows: usize, elapsed: Duration) {
    ::metrics::histogram!(FLUSH_ROWS).record(rows as f64);
    ::metrics::histogram!(FLUSH_DURATION).record(elapsed.as_secs_f64());
}

/// Records how long `feed`'s rows took from their notification to the readers.
pub fn delivered(feed: &'static str, elapsed: Duration) {
    ::metrics::histogram!(DELIVERY_LAG, "feed" => feed).record(elapsed.as_secs_f64());
}

/// Says how this replica hears of commits now (`None`: it does not, its connection is down).
pub fn listen_mode(mode: Option<&str>) {
    for each in ["listening", "relay", "following"] {
        ::metrics::gauge!(LISTEN_MODE, "mode" => each).set(if mode == Some(each) { 1.0 } else { 0.0 });
    }
}

/// Counts a lost and remade LISTEN connection.
pub fn listener_reconnected() {
    ::metrics::counter!(LISTENER_RECONNECTS).increment(1);
}

/// Counts a Slack Socket Mode connection made again.
pub fn slack_socket_reconnected() {
    ::metrics::counter!(SLACK_SOCKET_RECONNECTS).increment(1);
}

/// Records whether the Slack Socket Mode connection is up.
pub fn slack_socket_connected(up: bool) {
    ::metrics::gauge!(SLACK_SOCKET_CONNECTED).set(if up { 1.0 } else { 0.0 });
}

/// Counts a failed attempt of `outbox` work.
pub fn outbox_failed(outbox: Outbox) {
    ::metrics::counter!(OUTBOX_FAILURES, "outbox" => outbox.name()).increment(1);
}

/// Counts what a reaper pass deleted.
pub fn reaped(kind: &'static str, rows: usize) {
    ::metrics::counter!(REAPED, "kind" => kind).increment(rows as u64);
}

/// Sets a gauge read at scrape.
pub fn set(gauge: &'static str, labels: &[(&'static str, String)], value: f64) {
    let labels: Vec<::metrics::Label> =
        labels.iter().map(|(key, value)| ::metrics::Label::new(*key, value.clone())).collect();
    ::metrics::gauge!(gauge, labels).set(value);
}
