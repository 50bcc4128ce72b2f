//! Ark's chunk streams read with the protocol, read-only, at `/v1/stream/ark/{stream}` (its runs as they
//! begin) and `/v1/stream/ark/{stream}/runs/{n}` (run `n`'s chunks, closed at its `[DONE]`): catch-up,
//! long-poll and SSE, over the rows upstream's `POST /stream/{id}` stored (see [`super::ark_runs`]). Live
//! reads follow the stream's rows as every chunk reader does ([`crate::db::watch::key_after`]), so a chunk
//! written through any replica reaches them. Writes get 405.

use std::convert::Infallible;

use axum::{
    body::{Body, Bytes},
    extract::{Path, Query, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
};
use futures::{FutureExt, StreamExt, stream::BoxStream};
use tokio::time::Instant;

use super::{
    RouteState,
    ark_runs::{self, ArkPath, View},
    live, model,
    offset::{self, Offset, Start},
    reply::{self, Headers},
    routes::{Live, ReadQuery, read_mode},
};
use crate::{
    db::watch,
    error::ApiError,
    streams::{model::ChunkRow, runs_store::RunMarks},
};

/// Most messages one answer (or one SSE `data` event) holds.
const MOST_MESSAGES: usize = 1000;

/// A view as it stands: its offsets' run, where it starts and ends, and whether it is closed.
#[derive(Debug, Clone, Copy)]
struct Extent {
    run: i64,
    start: i64,
    tail: i64,
    closed: bool,
}

/// `view` of a stream with `marks`; `None` for a run the stream has not begun.
fn extent(view: &View, marks: &RunMarks) -> Option<Extent> {
    match view {
        View::Runs => Some(Extent { run: 0, start: 0, tail: ark_runs::run_count(marks), closed: false }),
        View::Run(number) => ark_runs::run(marks, *number).map(|run| Extent {
            run: run.number,
            start: run.start,
            tail: run.tail,
            closed: run.closed,
        }),
    }
}

/// The path's view and the stream's marks now: 404 for no such stream, run or path.
async fn look(state: &RouteState, rest: &str) -> Result<(ArkPath, RunMarks, Extent), Response> {
    let Some(path) = ArkPath::parse(rest) else { return Err(reply::not_found()) };
    let marks = match state.chunks.run_marks(&path.stream_id).await {
        Err(error) => return Err(ApiError::from(error).into_response()),
        Ok(None) => return Err(reply::not_found()),
        Ok(Some(marks)) => marks,
    };
    let Some(extent) = extent(&path.view, &marks) else { return Err(reply::not_found()) };
    Ok((path, marks, extent))
}

/// `HEAD`.
pub async fn head(State(state): State<RouteState>, Path(rest): Path<String>) -> Response {
    match look(&state, &rest).await {
        Err(refusal) => refusal,
        Ok((_, _, extent)) => Headers::default()
            .with(header::CONTENT_TYPE, "application/json")
            .next(extent.run, extent.tail)
            .closed(extent.closed)
            .with(header::CACHE_CONTROL, "no-store")
            .answer(StatusCode::OK, ()),
    }
}

/// `GET`: a catch-up read, or a live one.
pub async fn read(
    State(state): State<RouteState>,
    Path(rest): Path<String>,
    Query(query): Query<ReadQuery>,
    headers: HeaderMap,
) -> Response {
    let (start, mode) = match read_mode(&query) {
        Ok(read) => read,
        Err(refusal) => return reply::invalid(refusal),
    };
    let (path, marks, extent) = match look(&state, &rest).await {
        Ok(found) => found,
        Err(refusal) => return refusal,
    };
    let from = match start {
        Start::Beginning => extent.start,
        Start::Now => extent.tail,
        Start::At(Offset { run, position })
            if run == extent.run && (extent.start..=extent.tail).contains(&position) =>
        {
            position
        }
        Start::At(_) => return reply::invalid(model::Refusal("offset: not one this stream gave".into())),
    };
    let reader = Reader { state, path, marks, from, cursor: query.cursor };
    match mode {
        Some(Live::LongPoll) => reader.long_poll().await,
        Some(Live::Sse) => reader.sse(),
        None => reader.catch_up(start == Start::Now, &headers).await,
    }
}

/// One read of a view from `from`.
struct Reader {
    state: RouteState,
    path: ArkPath,
    marks: RunMarks,
    from: i64,
    cursor: Option<String>,
}

/// What a read gathered: its messages, the offset after them, and the view as it then stood.
#[derive(Debug, Default)]
struct Gathered {
    messages: Vec<Bytes>,
    next: i64,
}

impl Reader {
    fn extent(&self) -> Extent {
        extent(&self.path.view, &self.marks).expect("a view the stream has begun stays begun")
    }

    /// What is stored after `from`, up to the view's tail as looked up, at most one answer's worth.
    async fn stored(&self) -> Result<Gathered, ApiError> {
        let extent = self.extent();
        let mut gathered = Gathered { messages: Vec::new(), next: self.from };
        match self.path.view {
            View::Runs => {
                let last = extent.tail.min(self.from + MOST_MESSAGES as i64);
                gathered.messages =
                    (self.from + 1..=last).map(|n| Bytes::from(ark_runs::run_entry(&self.path.stream_id, n))).collect();
                gathered.next = last.max(self.from);
            }
            View::Run(_) => {
                let page = self.state.chunks.stream_page(&self.path.stream_id, self.from).await?;
                let mut reached_tail = page.caught_up;
                for row in &page.rows {
                    if row.position > extent.tail {
                        reached_tail = true;
                        break;
                    }
                    gathered.next = row.position;
                    if ark_runs::shows(row) {
                        gathered.messages.push(Bytes::copy_from_slice(row.chunk.as_bytes()));
                    }
                }
                if reached_tail {
                    gathered.next = extent.tail;
                }
            }
        }
        Ok(gathered)
    }

    /// The headers of an answer that ends at `next`.
    fn headers(&self, next: i64) -> Headers {
        let extent = self.extent();
        let at_tail = next >= extent.tail;
        let mut headers = Headers::default()
            .with(header::CONTENT_TYPE, "application/json")
            .next(extent.run, next)
            .closed(extent.closed && at_tail);
        if at_tail {
            headers = headers.with(reply::UP_TO_DATE, "true");
        }
        if !(extent.closed && at_tail) {
            headers = headers.with(reply::CURSOR, offset::cursor(self.cursor.as_deref()));
        }
        headers
    }

    async fn catch_up(self, now: bool, request: &HeaderMap) -> Response {
        let gathered = match self.stored().await {
            Ok(gathered) => gathered,
            Err(error) => return error.into_response(),
        };
        let extent = self.extent();
        let mut headers = self.headers(gathered.next);
        if now {
            headers = headers.with(header::CACHE_CONTROL, "no-store");
        } else {
            let closed = if extent.closed { ":c" } else { "" };
            let etag =
                format!("\"ark:{}:{}:{}:{}{closed}\"", self.path.stream_id, extent.run, self.from, gathered.next);
            if request.get(header::IF_NONE_MATCH).is_some_and(|sent| sent.as_bytes() == etag.as_bytes()) {
                return headers.with(header::ETAG, etag).answer(StatusCode::NOT_MODIFIED, ());
            }
            let cache = if self.state.private_reads { "private" } else { "public" };
            headers = headers
                .with(header::ETAG, etag)
                .with(header::CACHE_CONTROL, format!("{cache}, max-age=60, stale-while-revalidate=300"));
        }
        headers.answer(StatusCode::OK, live::json_array(gathered.messages.iter().map(|m| &m[..])))
    }

    /// The stream's rows after what this read has seen, live, from every replica's writes.
    fn rows(&self) -> BoxStream<'static, std::sync::Arc<ChunkRow>> {
        let after = match self.path.view {
            View::Runs => self.marks.last,
            View::Run(_) => self.from,
        };
        watch::key_after(&self.state.chunks, self.path.stream_id.clone(), after, self.state.config.poll_interval())
    }

    /// Takes in `row`: the marks move on when it is new to them; a run's message is gathered when the run
    /// shows it. False once `row` lies past a closed view's tail.
    fn take(&mut self, row: &ChunkRow, gathered: &mut Gathered) -> bool {
        if row.position > self.marks.last {
            if row.is_done {
                self.marks.ends.push(row.position);
            } else if ark_runs::shows(row) {
                self.marks.last_written = row.position;
            }
            self.marks.last = row.position;
        }
        let extent = self.extent();
        match self.path.view {
            View::Runs => {
                self.gather_runs(gathered);
                true
            }
            View::Run(_) if row.position > extent.tail => false,
            View::Run(_) => {
                if ark_runs::shows(row) {
                    gathered.messages.push(Bytes::copy_from_slice(row.chunk.as_bytes()));
                }
                gathered.next = row.position;
                true
            }
        }
    }

    /// The runs list's entries after `gathered.next`, up to the runs begun as the marks stand.
    fn gather_runs(&self, gathered: &mut Gathered) {
        let begun = self.extent().tail;
        for number in gathered.next + 1..=begun {
            gathered.messages.push(Bytes::from(ark_runs::run_entry(&self.path.stream_id, number)));
        }
        gathered.next = gathered.next.max(begun);
    }

    /// What a live read has at once, before it waits: the runs list's entries it has not read (a run's rows
    /// come through [`Reader::rows`], which starts at `from`).
    fn at_once(&self) -> Gathered {
        let mut gathered = Gathered { messages: Vec::new(), next: self.from };
        if self.path.view == View::Runs {
            self.gather_runs(&mut gathered);
        }
        gathered
    }

    /// Whether the view is closed and read to its end at `next`.
    fn finished(&self, next: i64) -> bool {
        let extent = self.extent();
        extent.closed && next >= extent.tail
    }

    /// Takes in the rows that are there without waiting (after one that was), up to one answer's worth.
    fn take_ready(&mut self, rows: &mut BoxStream<'static, std::sync::Arc<ChunkRow>>, gathered: &mut Gathered) {
        while gathered.messages.len() < MOST_MESSAGES && !self.finished(gathered.next) {
            match rows.next().now_or_never() {
                Some(Some(row)) if self.take(&row, gathered) => {}
                _ => break,
            }
        }
    }

    async fn long_poll(mut self) -> Response {
        let deadline = Instant::now() + self.state.config.durable.long_poll();
        let end = self.state.streams_end.token();
        let mut rows = self.rows();
        let mut gathered = self.at_once();
        while gathered.messages.is_empty() && !self.finished(gathered.next) {
            let row = tokio::select! {
                row = rows.next() => row,
                () = tokio::time::sleep_until(deadline) => None,
                () = end.cancelled() => None,
            };
            let Some(row) = row else { break };
            if self.take(&row, &mut gathered) {
                self.take_ready(&mut rows, &mut gathered);
            }
        }
        if gathered.messages.is_empty() {
            let headers = self.headers(gathered.next).with(reply::UP_TO_DATE, "true");
            return headers.with(header::CACHE_CONTROL, "no-store").answer(StatusCode::NO_CONTENT, ());
        }
        self.headers(gathered.next)
            .with(header::CACHE_CONTROL, "private, max-age=60, stale-while-revalidate=300")
            .answer(StatusCode::OK, live::json_array(gathered.messages.iter().map(|m| &m[..])))
    }

    fn sse(mut self) -> Response {
        let events = async_stream::stream! {
            let lifetime = tokio::time::sleep(self.state.config.durable.sse_lifetime());
            tokio::pin!(lifetime);
            let end = self.state.streams_end.token();
            let mut rows = self.rows();
            let ready = self.at_once();
            let mut next = ready.next;
            let mut first = Vec::new();
            if !ready.messages.is_empty() {
                first = live::data_event(&live::json_array(ready.messages.iter().map(|m| &m[..])), false);
            }
            first.extend_from_slice(&control(&self, next));
            yield Ok::<Bytes, Infallible>(Bytes::from(first));
            if self.finished(next) {
                return;
            }
            loop {
                let row = tokio::select! {
                    row = rows.next() => row,
                    () = tokio::time::sleep(live::KEEP_ALIVE) => {
                        yield Ok(Bytes::from_static(b": keep-alive\n\n"));
                        continue;
                    }
                    () = &mut lifetime => None,
                    () = end.cancelled() => None,
                };
                let Some(row) = row else { break };
                let mut gathered = Gathered { messages: Vec::new(), next };
                if self.take(&row, &mut gathered) {
                    self.take_ready(&mut rows, &mut gathered);
                }
                if gathered.messages.is_empty() && !self.finished(gathered.next) {
                    next = gathered.next;
                    continue;
                }
                next = gathered.next;
                let mut pair = Vec::new();
                if !gathered.messages.is_empty() {
                    pair = live::data_event(&live::json_array(gathered.messages.iter().map(|m| &m[..])), false);
                }
                pair.extend_from_slice(&control(&self, next));
                yield Ok(Bytes::from(pair));
                if self.finished(next) {
                    break;
                }
            }
        };
        live::sse_answer(Body::from_stream(events), false)
    }
}

/// The `control` event of `reader` at `next`.
fn control(reader: &Reader, next: i64) -> Vec<u8> {
    let extent = reader.extent();
    let at_tail = next >= extent.tail;
    live::control_event(
        Offset { run: extent.run, position: next },
        extent.closed && at_tail,
        at_tail,
        reader.cursor.as_deref(),
    )
}
