//! `GET /messages?watch=true`: upstream's generic SSE (`: connected`, one `data:` line per MessageItem,
//! heartbeats), live across replicas. A watch of one conversation follows that conversation's positions;
//! any other watch follows the global feed in `(tx, sequence)` order below the visibility horizon (see
//! [`crate::db::feed`]), so a message that commits late is never skipped.

use axum::response::Response;
use futures::StreamExt;

use super::{RouteState, model::MessageFilter};
use crate::{
    db::watch::{Start, follow_all, follow_key},
    error::ApiError,
    http::sse,
};

/// Streams messages after upstream's `cursor` (a message's sequence) when given, or only those stored
/// after this call. The start is fixed before the response goes out, so a client that has the response
/// never misses a message committed after it.
pub async fn respond(
    state: &RouteState,
    filter: MessageFilter,
    resume_after: Option<i64>,
) -> Result<Response, ApiError> {
    let retry = state.config.poll_interval();
    let start = Start::of(false, resume_after);
    let items = match filter.conversation_id.clone() {
        Some(conversation_id) => follow_key(&state.messages, conversation_id, start, retry).await?,
        None => follow_all(&state.messages, start.global(&state.messages).await?, retry).await?,
    };
    let items = items
        .filter(move |item| std::future::ready(filter.matches(item)))
        .map(|item| sse::data(serde_json::to_string(&*item).unwrap_or_default()));
    Ok(sse::watch(items, state.streams_end.token(), state.config.sse_heartbeat()))
}
