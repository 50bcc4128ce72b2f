//! Questions an agent asks a person: the store, the REST API, and the Kubernetes-style watch with
//! `resourceVersion`.

mod announce;
pub mod answering;
pub mod bodies;
pub mod change_kind;
pub mod channel;
pub mod checks;
pub mod deadline;
pub mod deliveries;
mod field_order;
pub mod history;
pub mod list;
pub mod model;
pub mod policy;
pub mod record;
mod routes;
pub mod schema;
mod schema_keywords;
pub mod store;
pub mod stream_end;
pub mod tail;
pub mod tasks;
pub mod timeout;
pub mod tool_calls;
pub mod waiting;
mod watch;
pub mod watch_log;

pub use store::{Change, QuestionStore};

use std::sync::Arc;

use utoipa_axum::{router::OpenApiRouter, routes};

use self::policy::AnswerPolicy;
use crate::{auth::Authenticator, config::Config, db::wakeup::Wakeups, http::sse_end::StreamsEnd};

/// The part of the shared state the questions handlers reach. The whole state hands it out (`FromRef`), so this domain
/// never depends on the whole.
#[derive(Debug, Clone)]
pub struct RouteState {
    /// The settings this replica runs with.
    pub config: Arc<Config>,
    /// Whether authentication is on (a question then belongs to its asker).
    pub auth: Authenticator,
    /// Wake-ups for question watchers.
    pub wakeups: Wakeups,
    /// Questions.
    pub questions: QuestionStore,
    /// Who may answer them.
    pub policy: AnswerPolicy,
    /// When this replica's event streams end (shutdown, or PostgreSQL lost).
    pub streams_end: StreamsEnd,
}

/// The questions routes.
pub fn router() -> OpenApiRouter<RouteState> {
    OpenApiRouter::new()
        .routes(routes!(routes::list, routes::create))
        .routes(routes!(routes::get, routes::answer, routes::cancel))
        .routes(routes!(routes::decline))
        .routes(routes!(routes::history))
        .routes(routes!(routes::post_answer))
}
