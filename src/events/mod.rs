//! Execution events, upstream's `/events` routes: the controller posts every event of a Query (201
//! exactly), the dashboard pages and watches them. Each event also changes its session
//! ([`crate::sessions`]) in the same transaction.

pub mod model;
mod routes;
pub mod store;
mod watch;

pub use store::EventStore;

use std::sync::Arc;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use utoipa_axum::{router::OpenApiRouter, routes};

use self::model::EventRecord;
use crate::{config::Config, db::fanout::Fanout};

/// The part of the shared state the `/events` handlers reach. The whole state hands it out (`FromRef`), so this domain
/// never depends on the whole.
#[derive(Debug, Clone)]
pub struct RouteState {
    /// The settings this replica runs with.
    pub config: Arc<Config>,
    /// The request pool.
    pub pool: PgPool,
    /// Execution events.
    pub events: EventStore,
    /// This replica's readers of events.
    pub event_fanout: Fanout<EventRecord>,
    /// Cancelled when the replica starts shutting down: SSE responses end.
    pub shutdown: CancellationToken,
}

/// The `/events` routes.
pub fn router() -> OpenApiRouter<RouteState> {
    OpenApiRouter::new()
        .routes(routes!(routes::list, routes::append, routes::purge))
        .routes(routes!(routes::query, routes::delete_query))
}
