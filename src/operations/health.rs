//! `/health` (the process answers) and `/readyz` (Postgres and the LISTEN connection are up, and the
//! replica is not draining), both plain text as upstream.

use std::time::Duration;

use axum::{Extension, extract::State, http::StatusCode};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{error::Verbatim, state::AppState};

/// How long `/readyz` waits for PostgreSQL to answer.
const READY_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The health routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(health)).routes(routes!(ready))
}

/// `GET /health`: the process answers (liveness).
#[utoipa::path(
    get,
    path = "/health",
    tag = "operations",
    operation_id = "health",
    responses((status = 200, description = "Always `OK`", body = String, content_type = "text/plain"))
)]
#[tracing::instrument(level = "debug", skip_all)]
async fn health() -> &'static str {
    "OK"
}

/// `GET /readyz`: Postgres and the LISTEN connection are up and the replica is not draining (readiness).
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    operation_id = "readyz",
    responses(
        (status = 200, description = "`OK`: ready", body = String, content_type = "text/plain"),
        (status = 503, description = "`Service Unavailable`: not ready (draining, or Postgres unreachable)",
            body = String, content_type = "text/plain"),
    )
)]
#[tracing::instrument(level = "debug", skip_all)]
async fn ready(State(state): State<AppState>) -> (StatusCode, Extension<Verbatim>, &'static str) {
    let unavailable = (StatusCode::SERVICE_UNAVAILABLE, Extension(Verbatim), "Service Unavailable");
    if state.shutdown.is_cancelled() || !state.listener.is_up() {
        return unavailable;
    }
    // Bounded: a connection the network lost answers nothing until keepalive gives up on it, and a probe
    // that hangs tells the kubelet less than a 503.
    match tokio::time::timeout(READY_CHECK_TIMEOUT, sqlx::query_scalar!("select 1 as one").fetch_one(&state.pool)).await
    {
        Ok(Ok(_)) => (StatusCode::OK, Extension(Verbatim), "OK"),
        _ => unavailable,
    }
}
