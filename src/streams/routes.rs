//! Handlers of the chunk-stream routes.

use std::{collections::VecDeque, sync::Arc, time::Duration};

use axum::{
    Json,
    body::Body,
    extract::{Path, State},
    response::{IntoResponse, Response},
};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    model::{BrokerItem, Completion},
    ndjson::NdjsonLines,
    reader::{self, ReadOptions},
    writer::{Ack, Request},
};
use crate::{
    error::ApiError,
    http::{
        extract::ApiQuery,
        params::{ListParams, Page, PageRequest, flag},
        reply::StatusMessage,
    },
    state::AppState,
    validate,
};

/// Acks a request may have outstanding before it waits for the oldest; bounds memory per request.
const MAX_PENDING_ACKS: usize = 64;

/// `POST /stream/{id}`: NDJSON read as it arrives; chunks are committed (and visible to readers) while the
/// request is still open. Answers once every received chunk is committed.
pub async fn ingest(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    validate::key("query", &id)?;
    let stream_id: Arc<str> = Arc::from(id.as_str());
    let mut lines = NdjsonLines::new(state.config.max_chunk_bytes);
    let request = Arc::new(Request::default());
    let mut pending: VecDeque<Ack> = VecDeque::new();
    let mut received = 0usize;
    let mut body = body.into_data_stream();
    while let Some(piece) = body.next().await {
        let piece = piece.map_err(|e| ApiError::BadRequest(format!("reading the request body failed: {e}")))?;
        let chunks = lines.push(&piece);
        received += submit(&state, &request, &stream_id, chunks, &mut pending).await?;
    }
    received += submit(&state, &request, &stream_id, lines.finish(), &mut pending).await?;
    for ack in pending {
        wait_stored(ack).await?;
    }
    if lines.invalid() > 0 {
        tracing::warn!(stream.id = %stream_id, invalid_lines = lines.invalid(), "skipped lines that are not JSON");
    }
    Ok(Json(json!({
        "status": "stream_processed",
        "query": id,
        "chunks_received": received,
        "invalid_lines": lines.invalid(),
    })))
}

async fn submit(
    state: &AppState,
    request: &Arc<Request>,
    stream_id: &Arc<str>,
    chunks: Vec<String>,
    pending: &mut VecDeque<Ack>,
) -> Result<usize, ApiError> {
    let count = chunks.len();
    if count == 0 {
        return Ok(0);
    }
    pending.push_back(state.writer.write(request, stream_id.clone(), chunks).await?);
    if pending.len() > MAX_PENDING_ACKS
        && let Some(oldest) = pending.pop_front()
    {
        wait_stored(oldest).await?;
    }
    Ok(count)
}

async fn wait_stored(ack: Ack) -> Result<(), ApiError> {
    match ack.await {
        Ok(Ok(())) => Ok(()),
        _ => Err(ApiError::Unavailable("chunks could not be stored; retry".into())),
    }
}

/// `POST /stream/{id}/complete`.
pub async fn complete(State(state): State<AppState>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    validate::key("query", &id)?;
    let status = match state.chunks.complete(&id).await? {
        Completion::Completed => "completed",
        Completion::AlreadyCompleted => "already_completed",
        Completion::NotFound => return Err(ApiError::NotFound("Stream not found".into())),
    };
    Ok(Json(json!({"status": status, "query": id})))
}

/// Parameters of `GET /stream/{id}`.
#[derive(Debug, Deserialize)]
pub struct ReadParams {
    #[serde(rename = "from-beginning")]
    from_beginning: Option<String>,
    #[serde(rename = "wait-for-query")]
    wait_for_query: Option<String>,
    /// Accepted for compatibility; upstream parses it and never uses it.
    #[serde(rename = "max-chunk-size")]
    _max_chunk_size: Option<String>,
}

/// `GET /stream/{id}`: SSE of one stream's chunks.
pub async fn read(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<ReadParams>,
) -> Result<Response, ApiError> {
    validate::key("query", &id)?;
    let from_beginning = flag("from-beginning", params.from_beginning.as_deref())?;
    let wait_for_query = params.wait_for_query.as_deref().map(parse_wait).transpose()?;
    reader::stream_response(&state, id, ReadOptions { from_beginning, wait_for_query }).await
}

/// `wait-for-query` in seconds, clamped to 1–300 as upstream does.
fn parse_wait(raw: &str) -> Result<Duration, ApiError> {
    let seconds: f64 = raw.trim().parse().ok().filter(|s: &f64| s.is_finite()).ok_or_else(|| {
        ApiError::Validation(format!("wait-for-query: Expected a number of seconds, received '{raw}'"))
    })?;
    Ok(Duration::from_secs_f64(seconds.clamp(1.0, 300.0)))
}

/// `GET /stream`: a page of raw items, or with `watch=true` the SSE feed of every new chunk.
pub async fn list(State(state): State<AppState>, ApiQuery(params): ApiQuery<ListParams>) -> Result<Response, ApiError> {
    let watching = flag("watch", params.watch.as_deref())?;
    let page = PageRequest::parse(params.limit.as_deref(), params.cursor.as_deref())?;
    if watching {
        return reader::feed_response(&state).await;
    }
    let rows = state.chunks.feed_after(page.cursor, page.limit + 1).await?;
    let total = state.chunks.count().await?;
    let items: Vec<BrokerItem> = rows.into_iter().map(BrokerItem::from_row).collect();
    Ok(Json(Page::from_overfetch(items, page.limit, Some(total), BrokerItem::sequence)).into_response())
}

/// `DELETE /stream`.
pub async fn purge(State(state): State<AppState>) -> Result<Json<StatusMessage>, ApiError> {
    state.chunks.delete_all().await?;
    Ok(Json(StatusMessage::success("Stream data purged")))
}
