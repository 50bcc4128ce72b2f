//! The SSE readers of chunk streams: `GET /stream/{id}` (upstream's chunk framing, `[DONE]`, the
//! `wait-for-query` timeout) and `GET /stream?watch=true` (the generic feed of every chunk). Both take their
//! rows from this replica's fan-out and read Postgres only to catch up.

use std::time::Duration;

use axum::response::{Response, sse::Event};
use futures::StreamExt;
use tokio::time::Instant;

use super::model::{ChunkRow, DONE};
use crate::{
    db::{self, fanout::FeedRow, feed::GlobalCursor, follow::follow, tail::FeedSource},
    error::ApiError,
    http::sse,
    state::AppState,
};

/// Upstream's frame when `wait-for-query` runs out before the first live chunk.
const TIMEOUT_FRAME: &str = r#"{"error":{"message":"Request timeout waiting for streaming query response","type":"timeout_error","code":"timeout"}}"#;

/// How one `GET /stream/{id}` reads.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    /// Replay stored chunks first (otherwise only new ones are sent).
    pub from_beginning: bool,
    /// Give up with the timeout frame unless a live chunk arrives within this time.
    pub wait_for_query: Option<Duration>,
}

/// Serves one stream until its completion marker, an error chunk, the timeout, or shutdown. "New" chunks
/// are those stored after this call: the start is fixed before the response goes out.
pub async fn stream_response(state: &AppState, stream_id: String, options: ReadOptions) -> Result<Response, ApiError> {
    let store = state.chunks.clone();
    let subscription = state.chunk_fanout.subscribe_key(&stream_id);
    let start = store.last_position(&stream_id).await?;
    let read = move |after| {
        let (store, stream_id) = (store.clone(), stream_id.clone());
        async move { store.stream_page(&stream_id, after).await }
    };
    let from = if options.from_beginning { 0 } else { start };
    let mut rows =
        Box::pin(follow(subscription, from, state.config.poll_interval(), read, <ChunkRow as FeedRow>::position));
    let events = async_stream::stream! {
        // Armed until the first live chunk (one stored after we started); replayed chunks do not disarm it.
        let mut deadline = options.wait_for_query.map(|wait| Instant::now() + wait);
        loop {
            let row = match deadline {
                Some(at) => tokio::select! {
                    row = rows.next() => row,
                    _ = tokio::time::sleep_until(at) => {
                        yield sse::data(TIMEOUT_FRAME);
                        yield sse::data(DONE);
                        return;
                    }
                },
                None => rows.next().await,
            };
            let Some(row) = row else { return };
            if row.position > start {
                deadline = None;
            }
            if row.is_done {
                yield sse::data(DONE);
                return;
            }
            let is_error = is_error_chunk(&row.chunk);
            yield sse::data(&row.chunk);
            if is_error {
                yield sse::data(DONE);
                return;
            }
        }
    };
    Ok(sse::respond(events, state.shutdown.clone(), None))
}

/// Serves every new chunk of every stream (`GET /stream?watch=true`): the `chunk` field only, the
/// completion marker as `"[DONE]"`. Chunks come in global order (see [`crate::db::feed`]): each stream's in
/// its own order, and none is skipped for committing late.
pub async fn feed_response(state: &AppState) -> Result<Response, ApiError> {
    let store = state.chunks.clone();
    let subscription = state.chunk_fanout.subscribe_global();
    let start = db::start_snapshot(&state.pool).await?;
    let read = move |after: GlobalCursor| {
        let store = store.clone();
        async move { store.global_page(after).await }
    };
    let chunks =
        follow(subscription, start.cursor(), state.config.poll_interval(), read, <ChunkRow as FeedRow>::global)
            .filter(move |row| std::future::ready(start.is_new(row.tx)))
            .map(|row| feed_event(&row));
    Ok(sse::watch(chunks, state.shutdown.clone(), state.config.sse_heartbeat()))
}

fn feed_event(row: &ChunkRow) -> Event {
    if row.is_done { sse::data(format!("\"{DONE}\"")) } else { sse::data(&row.chunk) }
}

/// Whether a chunk is an error frame `{"error":{"message",…},…}`, after which upstream ends the stream.
fn is_error_chunk(chunk: &str) -> bool {
    // Cheap test first: nearly every chunk is a normal completion delta.
    if !chunk.contains("\"error\"") {
        return false;
    }
    serde_json::from_str::<serde_json::Value>(chunk)
        .ok()
        .and_then(|value| value.get("error").map(|error| error.is_object() && error.get("message").is_some()))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::is_error_chunk;

    #[test]
    fn error_chunks_are_recognised() {
        assert!(is_error_chunk(r#"{"error":{"message":"boom","type":"server_error"},"ark":{}}"#));
        assert!(!is_error_chunk(r#"{"choices":[{"delta":{"content":"an \"error\" word"}}]}"#));
        assert!(!is_error_chunk(r#"{"ark":{"error":"x"}}"#));
    }
}
