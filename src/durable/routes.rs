//! The protocol's operations on `/v1/stream/{path}`: `PUT` creates (or forks), `POST` appends or closes,
//! `DELETE`, `HEAD`, and `GET` — a catch-up read here, long-poll and SSE in [`super::live`]. Thin: requests
//! are read by [`super::model`], decided and stored by the store, answered by [`super::reply`].

use axum::{
    body::Bytes,
    extract::{Path, Query, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::Deserialize;

use super::{
    RouteState,
    appends::Appended,
    live, model,
    offset::{self, Start},
    reply::{self, Headers},
    rules::Stream,
    writes::{CreateRefusal, Created, Deleted},
};
use crate::error::ApiError;

/// Most rows one catch-up answer holds (JSON messages, or byte appends).
const MOST_ROWS: i64 = 1000;
/// About the most bytes one catch-up answer holds (at least one row, whatever its size).
const MOST_BYTES: usize = 1 << 20;

/// The query of a `GET`.
#[derive(Debug, Deserialize)]
pub struct ReadQuery {
    /// Where to start: `-1`, `now`, or an offset a response handed out.
    pub offset: Option<String>,
    /// `long-poll` or `sse`; absent for a catch-up read.
    pub live: Option<String>,
    /// The `Stream-Cursor` the client last got.
    pub cursor: Option<String>,
}

/// The stream a path names, as requests on it see it: 404 when there is none (or it expired), 410 when it
/// was soft-deleted.
pub(super) async fn serving(state: &RouteState, path: &str) -> Result<Stream, Response> {
    match state.store.find(path).await {
        Err(error) => Err(ApiError::from(error).into_response()),
        Ok(None) => Err(reply::not_found()),
        Ok(Some(stream)) if stream.deleted => Err(reply::gone()),
        Ok(Some(stream)) if stream.expired => Err(reply::not_found()),
        Ok(Some(stream)) => Ok(stream),
    }
}

/// `PUT`: create the stream (or a fork), or find it as asked.
pub async fn create(
    State(state): State<RouteState>,
    Path(path): Path<String>,
    request_headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = match model::create(&request_headers, body) {
        Ok(request) => request,
        Err(refusal) => return reply::invalid(refusal),
    };
    let (status, stream) = match state.store.create(&path, &request).await {
        Err(error) => return ApiError::from(error).into_response(),
        Ok(Created::New(stream)) => (StatusCode::CREATED, stream),
        Ok(Created::Existing(stream)) => (StatusCode::OK, stream),
        Ok(Created::Refused(CreateRefusal::Conflict)) => return reply::exists_otherwise(),
        Ok(Created::Refused(CreateRefusal::SourceMissing)) => return reply::not_found(),
        Ok(Created::Refused(CreateRefusal::Invalid(refusal))) => return reply::invalid(refusal),
    };
    let mut headers = Headers::default().content_type(&stream).next(0, stream.tail).closed(stream.closed);
    if status == StatusCode::CREATED {
        headers = headers.with(header::LOCATION, stream_url(&request_headers, &path));
    }
    headers.answer(status, ())
}

/// The absolute URL of the stream at `path`, as the client addressed the broker (`Host`, or a proxy's
/// `X-Forwarded-Host` and `X-Forwarded-Proto`).
pub(super) fn stream_url(request: &HeaderMap, path: &str) -> String {
    let named =
        |name: &str| request.get(name).and_then(|v| v.to_str().ok()).map(|v| v.split(',').next().unwrap_or(v).trim());
    let host = named("x-forwarded-host").or_else(|| named("host")).unwrap_or("localhost");
    let scheme = named("x-forwarded-proto").filter(|p| *p == "https").unwrap_or("http");
    format!("{scheme}://{host}{}{path}", super::PREFIX)
}

/// `POST`: append, close, or both.
pub async fn append(
    State(state): State<RouteState>,
    Path(path): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = match model::append(&headers, body) {
        Ok(request) => request,
        Err(refusal) => return reply::invalid(refusal),
    };
    let (epoch, sent_seq) = request.producer.as_ref().map(|p| (p.epoch, p.seq)).unzip();
    let has_body = !request.body.is_empty();
    let producer = |headers: Headers, seq: Option<i64>| match (epoch, seq) {
        (Some(epoch), Some(seq)) => {
            headers.with(reply::PRODUCER_EPOCH, epoch.to_string()).with(reply::PRODUCER_SEQ, seq.to_string())
        }
        _ => headers,
    };
    match state.appends.append(path, request).await {
        Err(error) => ApiError::from(error).into_response(),
        Ok(Appended::NotFound) => reply::not_found(),
        Ok(Appended::Gone) => reply::gone(),
        Ok(Appended::Refused(stream, refusal)) => reply::refused_append(&stream, refusal),
        Ok(Appended::Duplicate(stream, seq)) => {
            producer(Headers::default().next(0, stream.tail).closed(stream.closed), seq)
                .answer(StatusCode::NO_CONTENT, ())
        }
        Ok(Appended::Taken(stream)) => {
            // A producer's new data is 200 (its duplicates 204); plain appends and closes are 204.
            let status = if sent_seq.is_some() && has_body { StatusCode::OK } else { StatusCode::NO_CONTENT };
            producer(Headers::default().next(0, stream.tail).closed(stream.closed), sent_seq).answer(status, ())
        }
    }
}

/// `DELETE`.
pub async fn delete(State(state): State<RouteState>, Path(path): Path<String>) -> Response {
    match state.store.delete(&path).await {
        Err(error) => ApiError::from(error).into_response(),
        Ok(Deleted::Done) => StatusCode::NO_CONTENT.into_response(),
        Ok(Deleted::NotFound) => reply::not_found(),
        Ok(Deleted::Gone) => reply::gone(),
    }
}

/// `HEAD`: the stream's metadata (it does not restart a sliding TTL).
pub async fn head(State(state): State<RouteState>, Path(path): Path<String>) -> Response {
    let stream = match serving(&state, &path).await {
        Ok(stream) => stream,
        Err(refusal) => return refusal,
    };
    Headers::default()
        .content_type(&stream)
        .next(0, stream.tail)
        .expiry(stream.expiry)
        .closed(stream.closed)
        .with(header::CACHE_CONTROL, "no-store")
        .answer(StatusCode::OK, ())
}

/// `GET`: a catch-up read, or a live one (`live=long-poll`, `live=sse`).
pub async fn read(
    State(state): State<RouteState>,
    Path(path): Path<String>,
    Query(query): Query<ReadQuery>,
    headers: HeaderMap,
) -> Response {
    let (start, mode) = match read_mode(&query) {
        Ok(read) => read,
        Err(refusal) => return reply::invalid(refusal),
    };
    let stream = match serving(&state, &path).await {
        Ok(stream) => stream,
        Err(refusal) => return refusal,
    };
    let Some(from) = position(&stream, start) else {
        return reply::invalid(model::Refusal("offset: beyond the stream's tail".into()));
    };
    if stream.expiry != model::Expiry::Never
        && let Err(error) = state.store.touch(stream.id).await
    {
        return ApiError::from(error).into_response();
    }
    match mode {
        Some(Live::LongPoll) => live::long_poll(state, stream, from, query.cursor).await,
        Some(Live::Sse) => live::sse(state, stream, from, query.cursor),
        None => catch_up(&state, &stream, from, start == Start::Now, &headers).await,
    }
}

/// A live read's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Live {
    /// `live=long-poll`.
    LongPoll,
    /// `live=sse`.
    Sse,
}

/// Where a read starts and how it goes on (`None`: a catch-up read); refused (a 400) for what is not the
/// protocol's.
pub(super) fn read_mode(query: &ReadQuery) -> Result<(Start, Option<Live>), model::Refusal> {
    let Some(start) = Start::parse(query.offset.as_deref()) else {
        return Err(model::Refusal("offset: must be -1, now, or an offset the stream gave".into()));
    };
    let mode = match query.live.as_deref() {
        None => None,
        Some(_) if query.offset.is_none() => {
            return Err(model::Refusal("offset: required for a live read".into()));
        }
        Some("long-poll") => Some(Live::LongPoll),
        Some("sse") => Some(Live::Sse),
        Some(_) => return Err(model::Refusal("live: must be long-poll or sse".into())),
    };
    Ok((start, mode))
}

/// Where a read starts in `stream`; `None` for an offset that is not the stream's.
fn position(stream: &Stream, start: Start) -> Option<i64> {
    match start {
        Start::Beginning => Some(0),
        Start::Now => Some(stream.tail),
        Start::At(offset) if offset.run != 0 || offset.position > stream.tail => None,
        Start::At(offset) => Some(offset.position),
    }
}

/// A catch-up read from `from`: what is stored up to the tail as read, at most one answer's worth.
async fn catch_up(state: &RouteState, stream: &Stream, from: i64, now: bool, request: &HeaderMap) -> Response {
    let pieces = match state.store.read(stream, from, stream.tail, MOST_ROWS, MOST_BYTES).await {
        Ok(pieces) => pieces,
        Err(error) => return ApiError::from(error).into_response(),
    };
    let next = pieces.last().map_or(from, |piece| piece.end);
    let at_tail = next >= stream.tail;
    let mut headers = Headers::default().content_type(stream).next(0, next).closed(stream.closed && at_tail);
    if at_tail {
        headers = headers.with(reply::UP_TO_DATE, "true");
    }
    if now {
        // The tail moves: an answer for `now` is never cached, and has no ETag.
        headers = headers.with(header::CACHE_CONTROL, "no-store");
    } else {
        let etag = format!("\"{}:{from}:{next}{}\"", stream.id, if stream.closed { ":c" } else { "" });
        if request.get(header::IF_NONE_MATCH).is_some_and(|sent| sent.as_bytes() == etag.as_bytes()) {
            return headers.with(header::ETAG, etag).answer(StatusCode::NOT_MODIFIED, ());
        }
        let cache = if state.private_reads { "private" } else { "public" };
        headers = headers
            .with(header::ETAG, etag)
            .with(header::CACHE_CONTROL, format!("{cache}, max-age=60, stale-while-revalidate=300"));
    }
    headers = headers.with(reply::CURSOR, offset::cursor(None));
    headers.answer(StatusCode::OK, live::body(stream, &pieces))
}
