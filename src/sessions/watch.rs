//! `GET /sessions?watch=true[&session_id=…]`: every current session, then each session again whenever it
//! changes, as `data: {"sessionId":…,"session":SessionEntry}` — live across replicas. It follows the
//! sessions feed from its beginning: a session's row carries the transaction that last changed it, so the
//! catch-up read delivers every session once, and a later change moves it past the reader's cursor again.

use axum::response::Response;
use futures::StreamExt;

use super::RouteState;
use crate::{
    db::watch::{GlobalStart, follow_all},
    error::ApiError,
    http::sse,
};

/// Starts the watch (optionally of one session).
pub async fn respond(state: &RouteState, session_id: Option<String>) -> Result<Response, ApiError> {
    let retry = state.config.poll_interval();
    let changes = follow_all(&state.sessions, GlobalStart::Beginning, retry)
        .await?
        .filter(move |change| std::future::ready(session_id.as_deref().is_none_or(|id| id == change.session_id)))
        .map(|change| sse::data(&change.frame));
    Ok(sse::watch(changes, state.streams_end.token(), state.config.sse_heartbeat()))
}
