//! Sessions: upstream's live index of queries grouped by `sessionId`, derived from events and messages by
//! upstream's rules ([`rules`]) but kept in Postgres and changed in the writer's transaction, so every
//! replica serves the same sessions and a `watch` on any replica sees changes written on any other.

mod derive;
pub mod event;
pub mod model;
mod routes;
pub mod rules;
pub mod state;
pub mod store;
mod watch;

pub use store::SessionStore;

use std::sync::Arc;

use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{config::Config, db::live::LiveFeed, http::sse_end::StreamsEnd, questions::QuestionStore};

/// The part of the shared state the `/sessions` handlers reach. The registry builds it when it registers the feed
/// (`state/registry.rs`), so this domain never depends on the whole.
#[derive(Debug, Clone)]
pub struct RouteState {
    /// The settings this replica runs with.
    pub config: Arc<Config>,
    /// Sessions.
    pub sessions: LiveFeed<SessionStore>,
    /// Questions (a deleted Query's open ones are cancelled).
    pub questions: QuestionStore,
    /// When this replica's event streams end (shutdown, or PostgreSQL lost).
    pub streams_end: StreamsEnd,
}

/// The `/sessions` routes.
pub fn router() -> OpenApiRouter<RouteState> {
    OpenApiRouter::new()
        .routes(routes!(routes::list, routes::post, routes::purge))
        .routes(routes!(routes::get_one))
        .routes(routes!(routes::delete_query))
}
