//! SSE responses: upstream's framing (single-line `data:` frames, `: heartbeat` comments), ended by the
//! replica's [`super::sse_end::StreamsEnd`] token (shutdown, PostgreSQL lost) with a `retry:` hint so clients
//! reconnect to another replica.

use std::{convert::Infallible, time::Duration};

use axum::response::{
    IntoResponse, Response,
    sse::{Event, KeepAlive, Sse},
};
use futures::{Stream, StreamExt, future::ready, stream};
use tokio_util::sync::CancellationToken;

use crate::telemetry::metrics;

/// One server-sent event, as the OpenAPI document describes the events of a `text/event-stream` response
/// (comments such as `: connected` and `: heartbeat` are not events). `data` is one line: JSON text, or
/// `[DONE]` at the end of a chunk stream.
#[derive(Debug, utoipa::ToSchema)]
pub struct SseEvent {
    /// The frame's `data:` line.
    pub data: String,
    /// The `event:` name (`message` when the frame has none).
    pub event: Option<String>,
    /// The `id:` (a question watch's resourceVersion).
    pub id: Option<String>,
    /// The `retry:` hint in milliseconds (sent when the replica shuts down).
    pub retry: Option<u64>,
}

/// How long a client should wait before reconnecting after the broker ends a stream (shutdown, PostgreSQL lost).
pub const RETRY_AFTER_SHUTDOWN: Duration = Duration::from_secs(1);

/// The `: connected` comment generic watch streams start with.
pub fn connected() -> Event {
    Event::default().comment("connected")
}

/// A `data:` frame holding one line of JSON text (the caller guarantees it has no line breaks).
pub fn data(json: impl AsRef<str>) -> Event {
    Event::default().data(json.as_ref())
}

/// Serves a generic watch: `: connected`, then `events`, with heartbeats (upstream's framing).
pub fn watch<S>(events: S, end: CancellationToken, heartbeat: Duration) -> Response
where
    S: Stream<Item = Event> + Send + 'static,
{
    respond(stream::once(async { connected() }).chain(events), end, Some(heartbeat))
}

/// Serves `events` as `text/event-stream`. With `heartbeat`, idle periods get `: heartbeat` comments.
/// When `end` fires the stream ends with a `retry:` frame instead of being cut mid-way.
pub fn respond<S>(events: S, end: CancellationToken, heartbeat: Option<Duration>) -> Response
where
    S: Stream<Item = Event> + Send + 'static,
{
    let ended = end.clone();
    // Counted open for as long as the body lives: the client going away drops it.
    let open = metrics::Open::new(metrics::SSE_READERS);
    let events = events
        .take_until(end.cancelled_owned())
        .chain(
            stream::once(async move { ended.is_cancelled().then(|| Event::default().retry(RETRY_AFTER_SHUTDOWN)) })
                .filter_map(ready),
        )
        .map(move |event| {
            let _still_open = &open;
            Ok::<_, Infallible>(event)
        });
    // Tells nginx-style balancers not to buffer the stream.
    let headers = [("x-accel-buffering", "no")];
    match heartbeat {
        Some(period) => {
            (headers, Sse::new(events).keep_alive(KeepAlive::new().interval(period).text("heartbeat"))).into_response()
        }
        None => (headers, Sse::new(events)).into_response(),
    }
}
