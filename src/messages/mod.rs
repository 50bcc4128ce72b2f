//! Conversation memory, upstream's Memory API: `/messages`, `/conversations…`, `/memory-status` and
//! `/queries/{q}/messages`, with a `watch=true` SSE feed that is live across replicas.

use crate::db::pool::Pool;
pub mod model;
mod routes;
pub mod store;
mod watch;

pub use store::MessageStore;

use std::sync::Arc;

use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{config::Config, db::live::LiveFeed, http::sse_end::StreamsEnd, questions::store::QuestionStore};

/// The part of the shared state the Memory API's handlers reach. The whole state hands it out (`FromRef`), so this
/// domain never depends on the whole.
#[derive(Debug, Clone)]
pub struct RouteState {
    /// The settings this replica runs with.
    pub config: Arc<Config>,
    /// The request pool.
    pub pool: Pool,
    /// Conversation memory.
    pub messages: LiveFeed<MessageStore>,
    /// Questions (a deleted Query's open ones are cancelled).
    pub questions: QuestionStore,
    /// When this replica's event streams end (shutdown, or PostgreSQL lost).
    pub streams_end: StreamsEnd,
}

/// The Memory API routes.
pub fn router() -> OpenApiRouter<RouteState> {
    OpenApiRouter::new()
        .routes(routes!(routes::list, routes::append, routes::purge))
        .routes(routes!(routes::status))
        .routes(routes!(routes::conversations, routes::new_conversation, routes::purge_conversations))
        .routes(routes!(routes::conversation, routes::delete_conversation))
        .routes(routes!(routes::delete_conversation_query))
        .routes(routes!(routes::delete_query))
}
