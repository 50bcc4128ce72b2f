//! Questions an agent asks a person. Its rooms: `store/` (every statement on the questions tables), `form/`
//! (the form an answer fills), `timeout/` (when the wait ends and what happens then), `record/` (what a change
//! is and the steps of a decision); beside them the model and bodies, who may answer (`policy`) and how
//! (`answering`), where a question goes (`channel`), and the REST API with its Kubernetes-style watch.

pub mod answering;
pub mod bodies;
pub mod channel;
pub mod checks;
pub mod form;
pub mod model;
pub mod policy;
pub mod record;
mod routes;
pub mod store;
pub mod stream_end;
pub mod tail;
pub mod timeout;
mod watch;

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
