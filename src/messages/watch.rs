//! `GET /messages?watch=true`: upstream's generic SSE (`: connected`, one `data:` line per MessageItem,
//! heartbeats), fed from Postgres so writes on any replica reach it.

use axum::response::Response;
use futures::{StreamExt, stream};

use super::model::MessageFilter;
use crate::{
    db::{follow::follow, hub::Topic},
    error::ApiError,
    http::sse,
    state::AppState,
};

/// Streams messages after `resume_after` (the `cursor` parameter), or only those stored after this call when
/// it is absent. The start is fixed before the response goes out, so a client that has the response never
/// misses a message committed after it.
pub async fn respond(state: &AppState, filter: MessageFilter, resume_after: Option<i64>) -> Result<Response, ApiError> {
    let store = state.messages.clone();
    let subscription = state.hub.subscribe(Topic::Messages);
    let after = match resume_after {
        Some(cursor) => cursor,
        None => store.latest_sequence().await?,
    };
    let read = move |after, limit| {
        let (store, filter) = (store.clone(), filter.clone());
        async move { store.list(&filter, after, limit).await }
    };
    let items = follow(subscription, after, state.config.poll_interval(), read, |item| item.sequence)
        .map(|item| sse::data(serde_json::to_string(&item).unwrap_or_default()));
    let events = stream::once(async { sse::connected() }).chain(items);
    Ok(sse::respond(events, state.shutdown.clone(), Some(state.config.sse_heartbeat())))
}
