//! `GET /sessions?watch=true[&session_id=…]`: every current session, then each session again whenever it
//! changes, as `data: {"sessionId":…,"session":SessionEntry}` — live across replicas. It follows the
//! sessions feed from its beginning: a session's row carries the transaction that last changed it, so the
//! catch-up read delivers every session once, and a later change moves it past the reader's cursor again.

use axum::response::Response;
use futures::StreamExt;

use super::{RouteState, model::SessionChange};
use crate::{
    db::{fanout::FeedRow, feed::GlobalCursor, follow::follow},
    http::sse,
};

/// Starts the watch (optionally of one session).
pub fn respond(state: &RouteState, session_id: Option<String>) -> Response {
    let store = state.sessions.clone();
    let subscription = state.session_fanout.subscribe_global();
    let read = move |after| {
        let store = store.clone();
        async move { store.changes_after(after).await }
    };
    let changes = follow(
        subscription,
        GlobalCursor::default(),
        state.config.poll_interval(),
        read,
        <SessionChange as FeedRow>::global,
    )
    .filter(move |change| std::future::ready(session_id.as_deref().is_none_or(|id| id == change.session_id)))
    .map(|change| sse::data(&change.frame));
    sse::watch(changes, state.streams_end.token(), state.config.sse_heartbeat())
}
