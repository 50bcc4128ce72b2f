//! The built-in web page at `/ui`: pending questions with an answer form that works without JavaScript
//! (POST, then a redirect back), kept live from the questions watch when JavaScript runs; and a page per
//! Query (`/ui/queries/{namespace}/{name}`) rendering its unified stream, live from the same stream.
//! Server-rendered, assets embedded in the binary, no CDN.

mod page;
mod query_page;
mod routes;

use axum::{
    Router,
    routing::{get, post},
};

use crate::state::AppState;

/// The page's routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/ui", get(routes::page))
        .route("/ui/", get(routes::page))
        .route("/ui/questions/{id}/answer", post(routes::answer))
        .route("/ui/queries/{namespace}/{name}", get(routes::query_page))
        .route("/ui/assets/app.js", get(routes::script))
        .route("/ui/assets/query.js", get(routes::query_script))
        .route("/ui/assets/app.css", get(routes::stylesheet))
}
