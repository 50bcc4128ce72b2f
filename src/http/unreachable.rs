//! While this replica knows Postgres cannot be reached (its LISTEN connection is down and connecting again
//! fails), reads that need the database get 503 with `Retry-After` at once instead of each waiting the
//! pool's timeout. Writes (any method but GET, HEAD and OPTIONS; every MCP call) wait up to the ride-through
//! window for it to come back (a primary changing: [`crate::db::outage`]), then get the same 503. Probes and the scrape (`/metrics`) are served as usual, and so is the page (`/ui…`), which fails as fast by itself but
//! with an HTML error page for a person's browser instead of the API's JSON (`ui::error_page`). In front of
//! the REST API and of MCP.

use axum::{
    extract::{Request, State},
    http::Method,
    middleware::Next,
    response::Response,
};

use super::POLLED_PATHS;
use crate::{
    db::{listener::ListenerStatus, outage},
    error::{self, ApiError},
};

/// The middleware.
pub async fn fail_fast(State(listener): State<ListenerStatus>, request: Request, next: Next) -> Response {
    match admit(&listener, request).await {
        Ok(request) => next.run(request).await,
        Err(refusal) => refusal,
    }
}

/// `request` back if it may go on, or the 503 to answer it with: Postgres is known to be unreachable, it
/// needs it, and (a write) it did not come back within the ride-through window.
pub async fn admit(listener: &ListenerStatus, request: Request) -> Result<Request, Response> {
    let path = request.uri().path();
    let answers_itself = POLLED_PATHS.contains(&path) || path == "/ui" || path.starts_with("/ui/");
    if answers_itself || !listener.database_unreachable() {
        return Ok(request);
    }
    let reads = [Method::GET, Method::HEAD, Method::OPTIONS].contains(request.method());
    if !reads && listener.reachable_within(outage::window()).await {
        return Ok(request);
    }
    Err(error::refuse(&request, ApiError::Unavailable("the database cannot be reached".into())))
}
