//! What a restarted controller asks about a Query (seeds 001 and 002): its resume state — phase, the question
//! it waits on, its pending tool calls, whether it can resume — and the tool_call_id ↔ task_id mapping the
//! controller records. Everything is read from what the broker stores, so every replica answers the same.

pub mod model;
mod pending;
pub mod resume;
mod routes;
pub mod store;

pub use store::QueryStore;

use utoipa_axum::{router::OpenApiRouter, routes};

use crate::state::AppState;

/// The `/queries/{namespace}/{name}/…` routes.
pub fn router() -> OpenApiRouter<AppState> {
    // The first segment is named as in `/queries/{query_id}/messages` (the router needs one name per segment).
    OpenApiRouter::new().routes(routes!(routes::state)).routes(routes!(routes::map_tool_call))
}
