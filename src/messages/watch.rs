//! `GET /messages?watch=true`: upstream's generic SSE (`: connected`, one `data:` line per MessageItem,
//! heartbeats), fed from Postgres so writes on any replica reach it.

use axum::response::Response;

use super::model::MessageFilter;
use crate::{app::AppState, db::hub::Topic, http::sse};

/// Rows read per round trip while catching up.
const BATCH: i64 = 500;

/// Streams messages after `resume_after` (the `cursor` parameter), or only new ones when it is absent.
pub fn respond(state: &AppState, filter: MessageFilter, resume_after: Option<i64>) -> Response {
    let store = state.messages.clone();
    let mut subscription = state.hub.subscribe(Topic::Messages);
    let retry_pause = state.config.poll_interval();
    let events = async_stream::stream! {
        yield sse::connected();
        let mut last = match resume_after {
            Some(cursor) => Some(cursor),
            None => store.latest_sequence().await.ok(),
        };
        loop {
            let Some(after) = last else {
                // Could not even learn where "now" is; try again shortly.
                tokio::time::sleep(retry_pause).await;
                last = store.latest_sequence().await.ok();
                continue;
            };
            match store.list(&filter, after, BATCH).await {
                Ok(items) => {
                    let full = items.len() as i64 == BATCH;
                    for item in items {
                        last = Some(item.sequence);
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
    sse::respond(events, state.shutdown.clone(), Some(state.config.sse_heartbeat()))
}
