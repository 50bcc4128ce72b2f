//! Live reads: long-poll (`live=long-poll`: the next data, or 204 when none came in time) and SSE
//! (`live=sse`: `data` events, each followed by a `control` event with the next offset). A reader is woken by
//! the feed's notifications ([`super::tail`]) and reads what is new from Postgres; writes on any replica
//! reach it. Both end at once on a closed stream's tail.

use std::{convert::Infallible, time::Duration};

use axum::{
    body::{Body, Bytes},
    http::{HeaderName, StatusCode, header},
    response::{IntoResponse, Response},
};
use base64::Engine;
use serde_json::json;
use tokio::time::Instant;

use super::{
    RouteState, model,
    offset::{self, Offset},
    reply::{self, Headers},
    rules::Stream,
    store::Piece,
};
use crate::{db::wakeup::Wakeup, error::ApiError};

/// Most rows one live answer or one SSE `data` event holds.
const MOST_ROWS: i64 = 1000;
/// About the most bytes one of them holds.
const MOST_BYTES: usize = 1 << 20;
/// How often an idle SSE read sends a comment, so proxies keep it open.
pub(super) const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The body of an answer holding `pieces`: a JSON stream's messages as one array, a byte stream's bytes.
pub fn body(stream: &Stream, pieces: &[Piece]) -> Bytes {
    if stream.json_mode {
        json_array(pieces.iter().map(|piece| &piece.data[..]))
    } else if pieces.len() == 1 {
        pieces[0].data.clone()
    } else {
        Bytes::from(pieces.iter().flat_map(|p| p.data.iter().copied()).collect::<Vec<u8>>())
    }
}

/// JSON messages (each one's text) as one array.
pub fn json_array<'a>(messages: impl Iterator<Item = &'a [u8]> + Clone) -> Bytes {
    let mut out = Vec::with_capacity(messages.clone().map(|m| m.len() + 1).sum::<usize>() + 2);
    out.push(b'[');
    for (i, message) in messages.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(message);
    }
    out.push(b']');
    Bytes::from(out)
}

/// A long-poll read from `from`: data as soon as there is some, 204 when the wait ends without, at once on
/// a closed stream's tail.
pub async fn long_poll(state: RouteState, stream: Stream, from: i64, cursor: Option<String>) -> Response {
    let mut wake = state.wakeups.subscribe(Wakeup::Durable(stream.id));
    let deadline = Instant::now() + state.config.durable.long_poll();
    let end = state.streams_end.token();
    loop {
        let current = match state.store.current(stream.id).await {
            Err(error) => return ApiError::from(error).into_response(),
            Ok(Some(current)) if !current.deleted && !current.expired => current,
            Ok(Some(current)) if current.deleted => return reply::gone(),
            Ok(_) => return reply::not_found(),
        };
        if current.tail > from {
            let pieces = match state.store.read(&current, from, current.tail, MOST_ROWS, MOST_BYTES).await {
                Ok(pieces) => pieces,
                Err(error) => return ApiError::from(error).into_response(),
            };
            let next = pieces.last().map_or(from, |p| p.end);
            let at_tail = next >= current.tail;
            let mut headers = Headers::default().content_type(&current).next(0, next).closed(current.closed && at_tail);
            if at_tail {
                headers = headers.with(reply::UP_TO_DATE, "true");
            }
            if !(current.closed && at_tail) {
                headers = headers.with(reply::CURSOR, offset::cursor(cursor.as_deref()));
            }
            let etag = format!("\"{}:{from}:{next}{}\"", current.id, if current.closed { ":c" } else { "" });
            return headers
                .with(header::ETAG, etag)
                .with(header::CACHE_CONTROL, "private, max-age=60, stale-while-revalidate=300")
                .answer(StatusCode::OK, body(&current, &pieces));
        }
        let timed_out = current.closed
            || tokio::select! {
                () = wake.woken() => false,
                () = tokio::time::sleep_until(deadline) => true,
                () = end.cancelled() => true,
            };
        if timed_out {
            let mut headers =
                Headers::default().next(0, current.tail).with(reply::UP_TO_DATE, "true").closed(current.closed);
            if !current.closed {
                headers = headers.with(reply::CURSOR, offset::cursor(cursor.as_deref()));
            }
            return headers.with(header::CACHE_CONTROL, "no-store").answer(StatusCode::NO_CONTENT, ());
        }
    }
}

/// An SSE read from `from`: catch-up and live data as `data` events, each followed by a `control` event;
/// a first `control` at once when there is nothing to send; the end after a closed stream's last one, or
/// after `--durable-sse-seconds`.
pub fn sse(state: RouteState, stream: Stream, from: i64, cursor: Option<String>) -> Response {
    let base64 = !model::is_text(&stream.content_type);
    let events = async_stream::stream! {
        let mut wake = state.wakeups.subscribe(Wakeup::Durable(stream.id));
        let lifetime = tokio::time::sleep(state.config.durable.sse_lifetime());
        tokio::pin!(lifetime);
        let end = state.streams_end.token();
        let mut position = from;
        let mut sent_any = false;
        loop {
            let current = match state.store.current(stream.id).await {
                Ok(Some(current)) if !current.deleted && !current.expired => current,
                _ => break,
            };
            if current.tail > position {
                let Ok(pieces) = state.store.read(&current, position, current.tail, MOST_ROWS, MOST_BYTES).await else {
                    break;
                };
                let next = pieces.last().map_or(position, |p| p.end);
                let payload = body(&current, &pieces);
                position = next;
                let at_tail = next >= current.tail;
                // One write for the pair: a reader that stops at the end of the data event has its control too.
                let mut pair = data_event(&payload, base64);
                pair.extend_from_slice(&control(&current, next, at_tail, cursor.as_deref()));
                yield Ok::<Bytes, Infallible>(Bytes::from(pair));
                sent_any = true;
                if current.closed && at_tail {
                    break;
                }
                continue;
            }
            if current.closed {
                yield Ok(Bytes::from(control(&current, position, true, None)));
                break;
            }
            if !sent_any {
                yield Ok(Bytes::from(control(&current, position, true, cursor.as_deref())));
                sent_any = true;
            }
            tokio::select! {
                () = wake.woken() => {}
                () = tokio::time::sleep(KEEP_ALIVE) => yield Ok(Bytes::from_static(b": keep-alive\n\n")),
                () = &mut lifetime => break,
                () = end.cancelled() => break,
            }
        }
    };
    sse_answer(Body::from_stream(events), base64)
}

/// The answer of an SSE read whose events are `events`.
pub(super) fn sse_answer(events: Body, base64: bool) -> Response {
    let mut headers =
        Headers::default().with(header::CONTENT_TYPE, "text/event-stream").with(header::CACHE_CONTROL, "no-cache");
    if base64 {
        headers = headers.with(HeaderName::from_static("stream-sse-data-encoding"), "base64");
    }
    headers.answer(StatusCode::OK, events)
}

/// A `data` event: the payload's lines (base64 text for a binary stream).
pub(super) fn data_event(payload: &[u8], base64: bool) -> Vec<u8> {
    let text = if base64 {
        base64::engine::general_purpose::STANDARD.encode(payload)
    } else {
        String::from_utf8_lossy(payload).into_owned()
    };
    let mut out = String::with_capacity(text.len() + 32);
    out.push_str("event: data\n");
    // SSE has no escape for a line break: each line of the payload is a `data:` line, which the client joins
    // with `\n` again.
    // The suite expects `data:` with no space; a line that starts with one gets a space more, which every
    // SSE client strips.
    for line in text.split("\r\n").flat_map(|l| l.split(['\n', '\r'])) {
        out.push_str(if line.starts_with(' ') { "data: " } else { "data:" });
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out.into_bytes()
}

/// A `control` event after data (or in place of it) at position `next`.
fn control(stream: &Stream, next: i64, at_tail: bool, cursor: Option<&str>) -> Vec<u8> {
    control_event(Offset::at(next), stream.closed && at_tail, at_tail, cursor)
}

/// A `control` event naming offset `next`: the stream's closure when `closed`, else a cursor.
pub(super) fn control_event(next: Offset, closed: bool, at_tail: bool, cursor: Option<&str>) -> Vec<u8> {
    let mut fields = serde_json::Map::new();
    fields.insert("streamNextOffset".into(), json!(next.to_string()));
    if closed {
        fields.insert("streamClosed".into(), json!(true));
    } else {
        fields.insert("streamCursor".into(), json!(offset::cursor(cursor)));
    }
    if at_tail {
        fields.insert("upToDate".into(), json!(true));
    }
    format!("event: control\ndata:{}\n\n", serde_json::Value::Object(fields)).into_bytes()
}
