//! Conversation memory, upstream's Memory API: `/messages`, `/conversations…`, `/memory-status` and
//! `/queries/{q}/messages`, with a `watch=true` SSE feed that is live across replicas.

pub mod model;
mod routes;
pub mod store;
mod watch;

pub use store::MessageStore;

use axum::{
    Router,
    routing::{delete, get},
};

use crate::state::AppState;

/// The Memory API routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/messages", get(routes::list).post(routes::append).delete(routes::purge))
        .route("/memory-status", get(routes::status))
        .route(
            "/conversations",
            get(routes::conversations).post(routes::new_conversation).delete(routes::purge_conversations),
        )
        .route("/conversations/{id}", get(routes::conversation).delete(routes::delete_conversation))
        .route(
            "/conversations/{conversation_id}/queries/{query_id}/messages",
            delete(routes::delete_conversation_query),
        )
        .route("/queries/{query_id}/messages", delete(routes::delete_query))
}
