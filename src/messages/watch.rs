//! `GET /messages?watch=true`: upstream's generic SSE (`: connected`, one `data:` line per MessageItem,
//! heartbeats), fed from Postgres so writes on any replica reach it.

use axum::response::Response;

use super::model::MessageFilter;
use crate::{app::AppState, db::hub::Topic, error::ApiError, http::sse};

/// Rows read per round trip while catching up.
const BATCH: i64 = 500;

/// Streams messages after `resume_after` (the `cursor` parameter), or only those stored after this call when
/// it is absent. The start is fixed before the response goes out, so a client that has the response never
/// misses a message committed after it.
pub async fn respond(state: &AppState, filter: MessageFilter, resume_after: Option<i64>) -> Result<Response, ApiError> {
    let store = state.messages.clone();
    let mut subscription = state.hub.subscribe(Topic::Messages);
    let mut last = match resume_after {
        Some(cursor) => cursor,
        None => store.latest_sequence().await?,
    };
    let retry_pause = state.config.poll_interval();
    let events = async_stream::stream! {
        yield sse::connected();
        loop {
            match store.list(&filter, last, BATCH).await {
                Ok(items) => {
                    let full = items.len() as i64 == BATCH;
                    for item in items {
                        last = item.sequence;
                        yield sse::data(serde_json::to_string(&item).unwrap_or_default());
                    }
                    if full {
                        continue;
                    }
                    subscription.woken().await;
                }
                Err(error) => {
                    tracing::warn!(%error, "message watch read failed; retrying");
                    tokio::select! {
                        _ = subscription.woken() => {}
                        _ = tokio::time::sleep(retry_pause) => {}
                    }
                }
            }
        }
    };
    Ok(sse::respond(events, state.shutdown.clone(), Some(state.config.sse_heartbeat())))
}
