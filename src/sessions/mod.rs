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

use utoipa_axum::{router::OpenApiRouter, routes};

use crate::state::AppState;

/// The `/sessions` routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(routes::list, routes::post, routes::purge)).routes(routes!(routes::get_one))
}
