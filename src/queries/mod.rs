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

use crate::{questions::store::QuestionStore, streams::store::ChunkStore};

/// The part of the shared state the `/queries/…` handlers reach. The whole state hands it out (`FromRef`), so this
/// domain never depends on the whole.
#[derive(Debug, Clone)]
pub struct RouteState {
    /// Queries' resume state.
    pub query_state: QueryStore,
    /// Chunk streams.
    pub chunks: ChunkStore,
    /// Questions.
    pub questions: QuestionStore,
}

/// The `/queries/{namespace}/{name}/…` routes.
pub fn router() -> OpenApiRouter<RouteState> {
    // The first segment is named as in `/queries/{query_id}/messages` (the router needs one name per segment).
    OpenApiRouter::new().routes(routes!(routes::state)).routes(routes!(routes::map_tool_call))
}
