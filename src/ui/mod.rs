//! The built-in web page at `/ui`: pending and closed questions (searched, filtered, paged) with an answer
//! form shaped by each question's form and a Decline button, both working without JavaScript (POST, then a
//! redirect back), and the record of each decision, kept live from the questions watch when
//! JavaScript runs; and a page per Query (`/ui/queries/{namespace}/{name}`) rendering its unified stream, live
//! from the same stream. Server-rendered (content from Markdown, sanitised), errors as HTML pages, assets
//! embedded in the binary, no CDN.

mod answer_form;
mod cards;
mod error_page;
mod filters;
mod form_post;
mod history;
mod markdown;
mod page;
mod query_page;
mod question_page;
mod routes;
mod typed_answer;

use axum::{
    Router,
    extract::Request,
    http::{HeaderValue, header},
    middleware::{self, Next},
    response::Response,
    routing::{get, post},
};

use crate::state::AppState;

/// The page's routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/ui", get(routes::page))
        .route("/ui/", get(routes::page))
        .route("/ui/questions/{id}/answer", post(form_post::answer))
        .route("/ui/questions/{id}/decline", post(form_post::decline))
        .route("/ui/questions/{id}", get(routes::question_page))
        .route("/ui/questions/{id}/card", get(routes::card))
        .route("/ui/queries/{namespace}/{name}", get(routes::query_page))
        .route("/ui/assets/app.js", get(routes::script))
        .route("/ui/assets/query.js", get(routes::query_script))
        .route("/ui/assets/form.js", get(routes::form_script))
        .route("/ui/assets/app.css", get(routes::stylesheet))
        .layer(middleware::map_response(security_headers))
}

/// Middleware in front of every route and of the layers before them (authentication, the same-origin check,
/// the refusal of NUL bytes, the 404 fallback): a request for the page (`/ui…`) that fails gets the HTML
/// error page with the page's headers, never the API's JSON error body.
pub async fn errors_as_html(request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if path == "/ui" || path.starts_with("/ui/") {
        security_headers(error_page::as_html(request, next).await).await
    } else {
        next.run(request).await
    }
}

/// The policy of every page: scripts, styles and connections only from the broker itself (no inline script),
/// never framed, forms only back to the broker.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}
