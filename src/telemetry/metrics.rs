//! Prometheus metrics: the process's recorder (`metrics` + `metrics-exporter-prometheus`, installed once),
//! the names every part of the broker records under, and the text a scrape of `GET /metrics` gets. Counters
//! and histograms are recorded where things happen; what is a count of rows (questions by status, outbox
//! backlogs) or of the pool is read when scraped (by the `/metrics` route).

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
/// From a feed's commit notification reaching this replica to its rows being handed to the readers, by `feed`.
pub const DELIVERY_LAG: &str = "ark_broker_notify_delivery_lag_seconds";
/// Times the LISTEN connection was lost and made again.
pub const LISTENER_RECONNECTS: &str = "ark_broker_listener_reconnects_total";
/// Attempts of outbox work that failed (`outbox`: `status_patches` or `channel_deliveries`).
pub const OUTBOX_FAILURES: &str = "ark_broker_outbox_failures_total";
/// Rows the reaper deleted (or questions it expired), by `kind`.
pub const REAPED: &str = "ark_broker_reaper_deleted_total";
/// Questions, by `status` (read at scrape).
pub const QUESTIONS: &str = "ark_broker_questions";
/// Outbox work not yet done, by `outbox` (read at scrape).
pub const OUTBOX_BACKLOG: &str = "ark_broker_outbox_backlog";
/// Database connections open, and idle, in this replica's pool (read at scrape).
pub const POOL_CONNECTIONS: &str = "ark_broker_db_pool_connections";
pub const POOL_IDLE: &str = "ark_broker_db_pool_idle_connections";
/// How long getting a pooled connection took when scraped: a pool that is used up shows here first.
pub const POOL_WAIT: &str = "ark_broker_db_pool_acquire_wait_seconds";

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
        for (_, gauge, help) in UPSTREAM_SIZES {
            ::metrics::describe_gauge!(*gauge, *help);
        }
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

/// The Prometheus text of every metric.
pub fn render() -> String {
    install().render()
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

/// Counts a lost and remade LISTEN connection.
pub fn listener_reconnected() {
    ::metrics::counter!(LISTENER_RECONNECTS).increment(1);
}

/// Counts a failed attempt of `outbox` work.
pub fn outbox_failed(outbox: &'static str) {
    ::metrics::counter!(OUTBOX_FAILURES, "outbox" => outbox).increment(1);
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
