//! Execution events, upstream's `/events` routes: the controller posts every event of a Query (201
//! exactly), the dashboard pages and watches them. Each event also changes its session
//! ([`crate::sessions`]) in the same transaction.

pub mod model;
mod routes;
pub mod store;
mod watch;

pub use store::EventStore;

use axum::{Router, routing::get};

use crate::state::AppState;

/// The `/events` routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/events", get(routes::list).post(routes::append).delete(routes::purge))
        .route("/events/{query_id}", get(routes::query).delete(routes::delete_query))
}
