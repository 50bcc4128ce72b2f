//! Questions an agent asks a person: the store, the REST API, and the Kubernetes-style watch with
//! `resourceVersion`.

mod announce;
pub mod deliveries;
pub mod model;
pub mod record;
mod routes;
pub mod store;
pub mod tail;
pub mod tasks;
pub mod tool_calls;
pub mod waiting;
mod watch;
pub mod watch_log;

pub use store::{Change, QuestionStore};

use axum::{
    Router,
    routing::{get, post},
};

use crate::state::AppState;

/// The questions routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/questions", get(routes::list).post(routes::create))
        .route("/questions/{id}", get(routes::get).patch(routes::answer).delete(routes::cancel))
        .route("/questions/{id}/answer", post(routes::answer))
}
