//! The page's errors as HTML. A person's browser gets a page saying what went wrong (and, for a form answer
//! that could not be stored, the form again with their text in it), never the API's JSON error body, which
//! the REST routes keep. The status code and `Retry-After` stay as the API would send them.

use axum::{
    extract::Request,
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use maud::{DOCTYPE, html};

use super::{
    answer_form::{For, refilled_answer_form},
    page::head,
};
use crate::{
    error::{ApiError, ErrorDetails, Verbatim, request_id},
    state::AppState,
};

/// A form answer that was not stored, for the error page to offer again.
#[derive(Debug, Clone)]
pub struct Unsent {
    pub id: String,
    pub response: String,
    pub answered_by: String,
    pub back: Option<String>,
    pub person: Option<String>,
}

/// Fails at once, as the API's fail-fast layer does, while this replica knows Postgres cannot be reached:
/// the page then shows its error page without waiting for the pool's timeout.
pub fn reachable(state: &AppState) -> Result<(), ApiError> {
    if state.listener.database_unreachable() {
        return Err(ApiError::Unavailable("the database cannot be reached".into()));
    }
    Ok(())
}

/// For the page's form posts, as the API's fail-fast layer treats a write: while this replica knows Postgres
/// cannot be reached, waits up to the ride-through window for it to come back (a primary changing over)
/// before failing, so an answer given during a switchover is stored as a REST answer would be.
pub async fn reachable_for_a_write(state: &AppState) -> Result<(), ApiError> {
    if state.listener.database_unreachable() && !state.listener.reachable_within(crate::db::outage::window()).await {
        return Err(ApiError::Unavailable("the database cannot be reached".into()));
    }
    Ok(())
}

/// Middleware in front of the page's requests: every error response becomes an HTML page.
pub async fn as_html(request: Request, next: Next) -> Response {
    let request_id = request_id(request.headers()).to_owned();
    // The path as routed (never an absolute-form target a client may send), so "Try again" stays here.
    let again = (request.method() == axum::http::Method::GET)
        .then(|| request.uri().path_and_query().map(ToString::to_string))
        .flatten();
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let message = match response.extensions().get::<ErrorDetails>() {
        Some(details) => details.message.clone(),
        None => status.canonical_reason().unwrap_or("Error").to_owned(),
    };
    let unsent = response.extensions().get::<Unsent>().cloned();
    let retry_after = response.headers().get(header::RETRY_AFTER).cloned();
    let challenge = response.headers().get(header::WWW_AUTHENTICATE).cloned();
    // A 408's `Connection: close` stays: the rest of the body may still be on its way.
    let connection = response.headers().get(header::CONNECTION).cloned();
    let mut page = render(status, &message, &request_id, again.as_deref(), unsent.as_ref());
    *page.status_mut() = status;
    if let Some(retry_after) = retry_after {
        page.headers_mut().insert(header::RETRY_AFTER, retry_after);
    }
    if let Some(challenge) = challenge {
        page.headers_mut().insert(header::WWW_AUTHENTICATE, challenge);
    }
    if let Some(connection) = connection {
        page.headers_mut().insert(header::CONNECTION, connection);
    }
    page.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // Already the body this route documents: the API's error-body layer leaves it alone.
    page.extensions_mut().insert(Verbatim);
    page
}

fn render(
    status: StatusCode,
    message: &str,
    request_id: &str,
    again: Option<&str>,
    unsent: Option<&Unsent>,
) -> Response {
    let (title, explanation) = match status {
        StatusCode::SERVICE_UNAVAILABLE => (
            "The broker is unavailable right now",
            "It cannot reach its database at the moment. Nothing was changed; try again in a moment.",
        ),
        StatusCode::NOT_FOUND => ("Not found", "There is nothing at this address."),
        s if s.is_server_error() => ("Something went wrong", "The broker could not do this; nothing was changed."),
        _ => ("This request could not be handled", ""),
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title, "/ui/assets/app.js"))
            body data-view="error" {
                header { h1 { (title) } nav { a href="/ui" { "Questions" } } }
                main .error-page {
                    p .flash .warn role="alert" { (explanation) " " span .detail { "(" (status.as_u16()) ": " (message) ")" } }
                    @if let Some(unsent) = unsent {
                        section .question .unsent {
                            p { "Your answer to " code { (unsent.id) } " was " strong { "not stored" } ". It is below; send it again when the broker is back." }
                            (refilled_answer_form(&unsent.id, For { back: unsent.back.as_deref(), person: unsent.person.as_deref() }, &unsent.response, &unsent.answered_by))
                        }
                    }
                    p .actions {
                        @if let Some(again) = again { a href=(again) { "Try again" } " · " }
                        a href="/ui" { "Back to the questions" }
                    }
                    @if !request_id.is_empty() { p .request-id { "Request ID: " code { (request_id) } } }
                }
            }
        }
    }
    .into_response()
}
