//! `GET /messages?watch=true`: upstream's generic SSE (`: connected`, one `data:` line per MessageItem,
//! heartbeats), live across replicas. A watch of one conversation follows that conversation's positions;
//! any other watch follows the global feed in `(tx, sequence)` order below the visibility horizon (see
//! [`crate::db::feed`]), so a message that commits late is never skipped.

use axum::response::Response;
use futures::StreamExt;

use super::model::{MessageFilter, MessageItem};
use crate::{
    db::{self, fanout::FeedRow, follow::follow},
    error::ApiError,
    http::sse,
    state::AppState,
};

/// Streams messages after upstream's `cursor` (a message's sequence) when given, or only those stored
/// after this call. The start is fixed before the response goes out, so a client that has the response
/// never misses a message committed after it.
pub async fn respond(state: &AppState, filter: MessageFilter, resume_after: Option<i64>) -> Result<Response, ApiError> {
    let store = state.messages.clone();
    let retry = state.config.poll_interval();
    let items = match filter.conversation_id.clone() {
        Some(conversation_id) => {
            let subscription = state.message_fanout.subscribe_key(&conversation_id);
            let start = match resume_after {
                Some(sequence) => store.position_after_sequence(&conversation_id, sequence).await?,
                None => store.last_position(&conversation_id).await?,
            };
            let query_id = filter.query_id.clone();
            let read = move |after| {
                let (store, conversation_id, query_id) = (store.clone(), conversation_id.clone(), query_id.clone());
                async move { store.conversation_page(&conversation_id, query_id.as_deref(), after).await }
            };
            follow(subscription, start, retry, read, <MessageItem as FeedRow>::position).boxed()
        }
        None => {
            let subscription = state.message_fanout.subscribe_global();
            let (start, snapshot) = match resume_after {
                Some(sequence) => (store.global_cursor_of(sequence).await?, None),
                None => {
                    let snapshot = db::start_snapshot(&state.pool).await?;
                    (snapshot.cursor(), Some(snapshot))
                }
            };
            let read = move |after| {
                let store = store.clone();
                async move { store.global_page(after).await }
            };
            follow(subscription, start, retry, read, <MessageItem as FeedRow>::global)
                .filter(move |item| std::future::ready(snapshot.as_ref().is_none_or(|s| s.is_new(item.tx))))
                .boxed()
        }
    };
    let items = items
        .filter(move |item| std::future::ready(filter.matches(item)))
        .map(|item| sse::data(serde_json::to_string(&*item).unwrap_or_default()));
    Ok(sse::watch(items, state.shutdown.clone(), state.config.sse_heartbeat()))
}
