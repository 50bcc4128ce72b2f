//! While this replica knows Postgres cannot be reached (its LISTEN connection is down and connecting again
//! fails), requests that need the database get 503 with `Retry-After` at once instead of each waiting the
//! pool's timeout. Probes and the scrape (`/metrics`) are served as usual, and so is the page (`/ui…`), which fails as fast by itself but
//! with an HTML error page for a person's browser instead of the API's JSON (`ui::error_page`). In front of
//! the REST API and of MCP.

use axum::{
    extract::{Request, State},
    middleware::Next,
    response::Response,
};

use super::POLLED_PATHS;
use crate::{
    db::listener::ListenerStatus,
    error::{self, ApiError},
};

/// The middleware.
pub async fn fail_fast(State(listener): State<ListenerStatus>, request: Request, next: Next) -> Response {
    match refusal(&listener, &request) {
        Some(refusal) => refusal,
        None => next.run(request).await,
    }
}

/// The 503 to answer `request` with at once, if Postgres is known to be unreachable and it needs it.
pub fn refusal(listener: &ListenerStatus, request: &Request) -> Option<Response> {
    let path = request.uri().path();
    let answers_itself = POLLED_PATHS.contains(&path) || path == "/ui" || path.starts_with("/ui/");
    (!answers_itself && listener.database_unreachable())
        .then(|| error::refuse(request, ApiError::Unavailable("the database cannot be reached".into())))
}
