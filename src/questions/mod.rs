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

use utoipa_axum::{router::OpenApiRouter, routes};

use crate::state::AppState;

/// The questions routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(routes::list, routes::create))
        .routes(routes!(routes::get, routes::answer, routes::cancel))
        .routes(routes!(routes::post_answer))
}
