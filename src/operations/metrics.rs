//! `GET /metrics`: Prometheus text. What is recorded as it happens comes from the recorder; counts of rows
//! (questions by status, outbox backlogs, upstream's `broker_*_count` table sizes) and of the pool are read
//! now, so every replica reports the same cluster-wide row counts and its own pool.

use std::time::Instant;

use axum::{extract::State, http::header, response::IntoResponse};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    db,
    query_status::store::PatchStore,
    retention::Retention,
    state::AppState,
    telemetry::metrics::{self, Outbox},
};

/// The metrics route.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(scrape))
}

/// `GET /metrics`: Prometheus text (open like the probes even with `--auth`).
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    operation_id = "metrics",
    responses((status = 200, description = "Prometheus text format 0.0.4", body = String,
        content_type = "text/plain"))
)]
#[tracing::instrument(level = "debug", skip_all)]
async fn scrape(State(state): State<AppState>) -> impl IntoResponse {
    let pool = &state.pool;
    metrics::set(metrics::POOL_CONNECTIONS, &[], f64::from(pool.inner().size()));
    metrics::set(metrics::POOL_IDLE, &[], pool.inner().num_idle() as f64);
    // While the database is known to be unreachable the scrape answers at once from what was recorded (row
    // counts keep their last value): each read would wait for the pool's timeout, past Prometheus's.
    if !state.listener.database_unreachable() {
        read_from_database(&state).await;
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], metrics::render())
}

/// The pool's wait and the cluster-wide row counts, read now; each is skipped (and keeps its last value)
/// when Postgres does not answer.
async fn read_from_database(state: &AppState) {
    let pool = &state.pool;
    let started = Instant::now();
    // The wait is what a request would wait now; the connection goes straight back.
    if pool.inner().acquire().await.is_ok() {
        metrics::set(metrics::POOL_WAIT, &[], started.elapsed().as_secs_f64());
    }
    if let Ok(counts) = state.questions.count_by_status().await {
        for (status, count) in counts {
            metrics::set(metrics::QUESTIONS, &[("status", status)], count as f64);
        }
    }
    if let Ok(backlog) = PatchStore::new(pool.clone()).backlog().await {
        let labels = [("outbox", Outbox::StatusPatches.name().into())];
        metrics::set(metrics::OUTBOX_BACKLOG, &labels, backlog as f64);
    }
    if let Ok(backlog) = state.channels.backlog().await {
        let labels = [("outbox", Outbox::ChannelDeliveries.name().into())];
        metrics::set(metrics::OUTBOX_BACKLOG, &labels, backlog as f64);
    }
    let keep = Retention::of(&state.config).streams;
    if let Ok(overdue) = state.chunks.store.retention_overdue(keep).await {
        metrics::set(metrics::RETENTION_OVERDUE, &[("table", "chunks".into())], overdue.num_seconds() as f64);
    }
    if let Ok(sizes) = db::sizes::read(pool).await {
        for (table, rows) in sizes {
            if let Some((_, gauge, _)) = metrics::UPSTREAM_SIZES.iter().find(|(name, _, _)| *name == table) {
                metrics::set(gauge, &[], rows);
            }
        }
    }
}
