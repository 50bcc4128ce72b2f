//! Conversation memory, upstream's Memory API: `/messages`, `/conversations…`, `/memory-status` and
//! `/queries/{q}/messages`, with a `watch=true` SSE feed that is live across replicas.

pub mod model;
mod routes;
pub mod store;
mod watch;

pub use store::MessageStore;

use utoipa_axum::{router::OpenApiRouter, routes};

use crate::state::AppState;

/// The Memory API routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(routes::list, routes::append, routes::purge))
        .routes(routes!(routes::status))
        .routes(routes!(routes::conversations, routes::new_conversation, routes::purge_conversations))
        .routes(routes!(routes::conversation, routes::delete_conversation))
        .routes(routes!(routes::delete_conversation_query))
        .routes(routes!(routes::delete_query))
}
