//! Sessions: upstream's live index of queries grouped by `sessionId`, derived from events and messages by
//! upstream's rules ([`rules`]) but kept in Postgres and changed in the writer's transaction, so every
//! replica serves the same sessions and a `watch` on any replica sees changes written on any other.

pub mod event;
pub mod model;
mod routes;
pub mod rules;
pub mod store;
mod watch;

pub use store::SessionStore;

use axum::{Router, routing::get};

use crate::state::AppState;

/// The `/sessions` routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/sessions", get(routes::list).post(routes::post).delete(routes::purge))
        .route("/sessions/{id}", get(routes::get_one))
}
