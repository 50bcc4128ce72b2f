//! Execution events, upstream's `/events` routes: the controller posts every event of a Query (201
//! exactly), the dashboard pages and watches them. Each event also changes its session
//! ([`crate::sessions`]) in the same transaction.

use crate::db::pool::Pool;
pub mod model;
mod routes;
pub mod store;
mod watch;

pub use store::EventStore;

use std::sync::Arc;

use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{config::Config, db::live::LiveFeed, http::sse_end::StreamsEnd};

/// The part of the shared state the `/events` handlers reach. The registry builds it when it registers the feed
/// (`state/registry.rs`), so this domain never depends on the whole.
#[derive(Debug, Clone)]
pub struct RouteState {
    /// The settings this replica runs with.
    pub config: Arc<Config>,
    /// The request pool.
    pub pool: Pool,
    /// Execution events.
    pub events: LiveFeed<EventStore>,
    /// When this replica's event streams end (shutdown, or PostgreSQL lost).
    pub streams_end: StreamsEnd,
}

/// The `/events` routes; their document's `EventData` also lists the `data` fields checked by hand.
pub fn router() -> OpenApiRouter<RouteState> {
    let mut router = OpenApiRouter::new()
        .routes(routes!(routes::list, routes::append, routes::purge))
        .routes(routes!(routes::query, routes::delete_query));
    model::document_data_fields(router.get_openapi_mut());
    router
}
