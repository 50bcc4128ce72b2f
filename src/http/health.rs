//! `/health` (the process answers) and `/readyz` (Postgres and the LISTEN connection are up, and the
//! replica is not draining), both plain text as upstream.

use axum::{Extension, Router, extract::State, http::StatusCode, routing::get};

use crate::{error::Verbatim, state::AppState};

/// The health routes.
pub fn router() -> Router<AppState> {
    Router::new().route("/health", get(health)).route("/readyz", get(ready))
}

async fn health() -> &'static str {
    "OK"
}

async fn ready(State(state): State<AppState>) -> (StatusCode, Extension<Verbatim>, &'static str) {
    let unavailable = (StatusCode::SERVICE_UNAVAILABLE, Extension(Verbatim), "Service Unavailable");
    if state.shutdown.is_cancelled() || !state.listener.is_up() {
        return unavailable;
    }
    match sqlx::query_scalar!("select 1 as one").fetch_one(&state.pool).await {
        Ok(_) => (StatusCode::OK, Extension(Verbatim), "OK"),
        Err(_) => unavailable,
    }
}
