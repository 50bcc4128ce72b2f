//! The SSE readers of chunk streams: `GET /stream/{id}` (upstream's chunk framing, `[DONE]`, the
//! `wait-for-query` and idle timeouts; OpenAI chunks as stored, or the unified format's typed events) and
//! `GET /stream?watch=true` (the generic feed of every chunk). Both take their rows from this replica's
//! fan-out and read Postgres only to catch up.

use std::time::Duration;

use axum::response::{Response, sse::Event};
use futures::StreamExt;
use tokio::time::Instant;

use super::{
    RouteState,
    model::{ChunkRow, DONE},
    typed::EventType,
    unified::{self, Unifier},
};
use crate::{
    db::watch::{self, GlobalStart},
    error::ApiError,
    http::sse,
};

/// Upstream's frame when `wait-for-query` runs out before the first live chunk.
const TIMEOUT_FRAME: &str = r#"{"error":{"message":"Request timeout waiting for streaming query response","type":"timeout_error","code":"timeout"}}"#;
/// Upstream's frame when a reader went `STREAM_IDLE_TIMEOUT_MS` without a live chunk.
const IDLE_FRAME: &str =
    r#"{"error":{"message":"Streaming query response timed out","type":"timeout_error","code":"timeout"}}"#;

/// How one `GET /stream/{id}` reads.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    /// Replay stored chunks first (otherwise only new ones are sent).
    pub from_beginning: bool,
    /// Give up with the timeout frame unless a live chunk arrives within this time.
    pub wait_for_query: Option<Duration>,
    /// Give up with the idle frame when no live chunk arrived for this long (each one starts it again).
    pub idle_timeout: Duration,
    /// The OpenAI chunks as stored, or the unified format.
    pub format: Format,
}

/// What `GET /stream/{id}` sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum Format {
    /// The chunks exactly as stored (upstream's bytes); typed events are left out.
    OpenAi,
    /// Every row as typed events (seed 002).
    Unified,
}

/// How the frames of one reader are made.
enum Render {
    OpenAi,
    /// The unified translation; its state must see every row of the stream from the first.
    Unified(Unifier),
}

impl Render {
    /// Adds the frames `row` stands for to `frames`; true when the stream ends after them (`[DONE]` is among
    /// them). A `superseded` end (rows follow it) does not end a unified stream. The chunk's text is
    /// copied once, into its frame, as before the unified format.
    fn frames(&mut self, stream_id: &str, row: &ChunkRow, superseded: bool, frames: &mut Vec<Event>) -> bool {
        match self {
            Render::OpenAi if !row.is_openai_visible() => false,
            Render::OpenAi if row.is_done => {
                frames.push(sse::data(DONE));
                true
            }
            Render::OpenAi => {
                frames.push(sse::data(&row.chunk));
                let ends = is_error_chunk(&row.chunk);
                if ends {
                    frames.push(sse::data(DONE));
                }
                ends
            }
            Render::Unified(unifier) => {
                let events = unifier.push(row);
                let ends = !superseded && (row.is_done || events.iter().any(|e| e.ends_stream()));
                frames.extend(events.iter().map(|e| sse::data(e.frame(stream_id))));
                if ends {
                    frames.push(sse::data(DONE));
                }
                ends
            }
        }
    }
}

/// Serves one stream until its completion marker, an error chunk, a timeout, or shutdown. "New" chunks
/// are those stored after this call: the start is fixed before the response goes out. A unified reader
/// reads the stream from its first row even when it sends only new ones: a tool call's fragments may have
/// started before it connected.
pub async fn stream_response(
    state: &RouteState,
    stream_id: String,
    options: ReadOptions,
) -> Result<Response, ApiError> {
    let store = state.chunks.clone();
    let start = store.last_position(&stream_id).await?;
    let mut render = match options.format {
        Format::OpenAi => Render::OpenAi,
        Format::Unified => Render::Unified(Unifier::new()),
    };
    // Rows up to here are not sent; the unified translation still sees them.
    let sent_after = if options.from_beginning { 0 } else { start };
    let from = if options.format == Format::Unified { 0 } else { sent_after };
    let mut rows = watch::key_after(&state.chunks, stream_id.clone(), from, state.config.poll_interval());
    let events = async_stream::stream! {
        // Armed until the first live chunk (one stored after we started); replayed chunks do not disarm it.
        let mut deadline = options.wait_for_query.map(|wait| Instant::now() + wait);
        // Started again by each live chunk, as upstream's: the bound is silence between chunks, so a reader
        // of a stream whose writer died before `[DONE]` is not left hanging.
        let mut idle_at = Instant::now() + options.idle_timeout;
        // Reused for every row, so sending a chunk allocates nothing but its frame.
        let mut frames: Vec<Event> = Vec::new();
        loop {
            let (at, frame) = match deadline {
                Some(at) if at <= idle_at => (at, TIMEOUT_FRAME),
                _ => (idle_at, IDLE_FRAME),
            };
            let row = tokio::select! {
                row = rows.next() => row,
                _ = tokio::time::sleep_until(at) => {
                    yield sse::data(timeout_frame(options.format, &stream_id, frame));
                    yield sse::data(DONE);
                    return;
                }
            };
            let Some(row) = row else { return };
            if row.position <= sent_after {
                // Not sent (only a unified reader reads these): its translation still needs them.
                if let Render::Unified(unifier) = &mut render {
                    unifier.push(&row);
                }
                continue;
            }
            // An end ends the stream only while nothing comes after it. A `[DONE]` with the writer's rows
            // after it was a pause: a Query resumed after an approval writes its stream again after
            // `/complete`, so a replay tells both runs and ends at the last `[DONE]` (the broker's own events
            // after an end, such as a question cancelled when the Query finished, do not reopen it). An abort
            // frame with rows after it means the writer came back; in the unified format it stays as an
            // `error` event, followed by what came later (the broker's question events, or the writer's). In
            // the OpenAI format a superseded end is skipped.
            let writers_only = row.is_done || options.format == Format::OpenAi;
            let mut superseded = false;
            if (row.is_done || row.event() == Some(EventType::StreamAborted))
                && store.written_after(&stream_id, row.position, writers_only).await.unwrap_or(false)
            {
                if options.format == Format::OpenAi {
                    continue;
                }
                superseded = true;
            }
            let ends = render.frames(&stream_id, &row, superseded, &mut frames);
            if row.position > start && (options.format == Format::Unified || row.is_openai_visible()) {
                deadline = None;
                idle_at = Instant::now() + options.idle_timeout;
            }
            for frame in frames.drain(..) {
                yield frame;
            }
            if ends {
                return;
            }
        }
    };
    Ok(sse::respond(events, state.streams_end.token(), None))
}

/// Serves every new chunk of every stream (`GET /stream?watch=true`): the `chunk` field only, the
/// completion marker as `"[DONE]"`. Chunks come in global order (see [`crate::db::feed`]): each stream's in
/// its own order, and none is skipped for committing late.
pub async fn feed_response(state: &RouteState) -> Result<Response, ApiError> {
    let start = GlobalStart::Live;
    let chunks = watch::follow_all(&state.chunks, start, state.config.poll_interval())
        .await?
        .filter(|row| std::future::ready(row.is_openai_visible()))
        .map(|row| feed_event(&row));
    Ok(sse::watch(chunks, state.streams_end.token(), state.config.sse_heartbeat()))
}

/// The frame sent when a timeout runs out (`frame`: upstream's), or it as a typed `error` event.
fn timeout_frame(format: Format, stream_id: &str, frame: &str) -> String {
    match format {
        Format::OpenAi => frame.to_owned(),
        Format::Unified => {
            let frame = serde_json::from_str(frame).expect("the timeout frame is JSON");
            unified::error_event(&frame, chrono::Utc::now()).frame(stream_id)
        }
    }
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
    serde_json::from_str::<serde_json::Value>(chunk).is_ok_and(|value| unified::is_error(&value))
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
