//! Execution events, upstream's `/events` routes: the controller posts every event of a Query (201
//! exactly), the dashboard pages and watches them. Each event also changes its session
//! ([`crate::sessions`]) in the same transaction.

pub mod model;
mod routes;
pub mod store;
mod watch;

pub use store::EventStore;

use utoipa_axum::{router::OpenApiRouter, routes};

use crate::state::AppState;

/// The `/events` routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(routes::list, routes::append, routes::purge))
        .routes(routes!(routes::query, routes::delete_query))
}
