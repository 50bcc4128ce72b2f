//! Handlers of the chunk-stream routes. Each handler's `#[utoipa::path]` is its route and its OpenAPI
//! description.

use std::time::Duration;

use axum::{
    Json,
    body::Body,
    extract::{Path, State},
    response::{IntoResponse, Response},
};
use serde::Deserialize;
use utoipa::IntoParams;

use super::{
    RouteState, completion,
    ingest::Ingest,
    model::{BrokerItem, Completed, Completion, CompletionStatus, Processed},
    reader::{self, Format, ReadOptions},
};
use crate::{
    error::{ApiError, ErrorBody},
    http::{
        extract::ApiQuery,
        params::{Flag, ListParams, Page, PageRequest, flag},
        reply::StatusMessage,
        sse::SseEvent,
    },
    idempotency::{KeyHeader, KeyState, StoredReply},
    validate,
};

/// `POST /stream/{id}`: NDJSON read as it arrives; chunks are committed (and visible to readers) while the
/// request is still open. Answers once every received chunk is committed, saying how many lines were
/// stored; they are always the request's first lines. With an `Idempotency-Key`, a retry stores only the
/// lines beyond those an earlier attempt stored, and once one attempt has answered, retries get its reply.
/// While the replica's budget for partly received lines is used up, it answers 503 before reading anything
/// ([`super::budget`]).
#[utoipa::path(
    post,
    path = "/stream/{id}",
    tag = "streams",
    operation_id = "post_chunks",
    params(
        ("id" = String, Path, description = "The stream (the Query's name)", min_length = 1, max_length = 512),
        ("Idempotency-Key" = Option<String>, Header, description = "1 to 255 visible ASCII characters: a retry within 24 h stores only the lines beyond those stored"),
    ),
    request_body(content = String, content_type = "application/x-ndjson",
        description = "NDJSON: one OpenAI chunk (or typed event) per line; lines that are not JSON are skipped and counted"),
    responses(
        (status = 200, description = "Every received line is stored or skipped", body = Processed, links(
            ("CompleteStream" = (operation_id = "complete_stream", parameters(("id" = "$response.body#/query")))),
            ("ReadStream" = (operation_id = "read_stream", parameters(("id" = "$response.body#/query")))),
        )),
        (status = 400, description = "A bad id or `Idempotency-Key`, or the body broke off", body = ErrorBody),
        (status = 422, description = "The `Idempotency-Key` was first used for another stream or body", body = ErrorBody),
        (status = 503, description = "Stopped early (draining, a failed write, the NDJSON budget used up): the body's `chunks_stored`, next to `error`, says how many of the first lines are stored; send the rest again",
            body = ErrorBody, headers(("Retry-After" = i64, description = "Always 1"))),
    )
)]
#[tracing::instrument(level = "debug", skip_all, fields(stream.id = %id))]
pub async fn ingest(
    State(state): State<RouteState>,
    Path(id): Path<String>,
    KeyHeader(key): KeyHeader,
    body: Body,
) -> Result<Response, ApiError> {
    validate::key("query", &id)?;
    let share = state.ndjson_budget.admit()?;
    if let Some(key) = &key {
        match state.chunks.claim_key(key, &id).await? {
            KeyState::Finished(reply) => return Ok(reply.into_response()),
            KeyState::Reused => return Err(KeyState::reused_error()),
            KeyState::New | KeyState::Unfinished { .. } => {}
        }
    }
    let mut ingest = Ingest::new(&state, &id, key.clone(), share);
    ingest.register().await?;
    let fed = ingest.feed(body).await;
    // Even after a failure: what was handed over before it may still be stored, and the reply counts it.
    let settled = ingest.settle().await;
    ingest.release().await;
    if let Err(cause) = fed.and(settled) {
        return Err(ApiError::PartlyStored { cause: Box::new(cause), chunks_stored: ingest.stored });
    }
    if ingest.lines.invalid() > 0 {
        tracing::warn!(stream.id = %id, invalid_lines = ingest.lines.invalid(), "skipped lines that are not JSON");
    }
    let processed = Processed {
        status: "stream_processed",
        query: id,
        chunks_received: ingest.received,
        chunks_stored: ingest.stored,
        invalid_lines: ingest.lines.invalid(),
    };
    let reply = StoredReply { status: 200, body: serde_json::to_value(processed).ok() };
    match &key {
        Some(key) => match state.chunks.finish_key(key, &reply).await {
            Ok(standing) => Ok(standing.into_response()),
            Err(error) => Err(ApiError::PartlyStored { cause: Box::new(error.into()), chunks_stored: ingest.stored }),
        },
        None => Ok(reply.into_response()),
    }
}

/// `POST /stream/{id}/complete`: appends the completion marker after every line received before it
/// ([`super::completion`]); readers get `[DONE]`.
#[utoipa::path(
    post,
    path = "/stream/{id}/complete",
    tag = "streams",
    operation_id = "complete_stream",
    params(("id" = String, Path, description = "The stream (the Query's name)", min_length = 1, max_length = 512)),
    responses(
        (status = 200, description = "Completed now, or before", body = Completed),
        (status = 400, description = "A bad id", body = ErrorBody),
        (status = 404, description = "`Stream not found`: nothing was ever written to it", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all, fields(stream.id = %id))]
pub async fn complete(State(state): State<RouteState>, Path(id): Path<String>) -> Result<Json<Completed>, ApiError> {
    validate::key("query", &id)?;
    let status = match completion::complete(&state.chunks, &state.open_writers, &id).await? {
        Completion::Completed => CompletionStatus::Completed,
        Completion::AlreadyCompleted => CompletionStatus::AlreadyCompleted,
        Completion::NotFound => return Err(ApiError::NotFound("Stream not found".into())),
    };
    state.stream_ends.ended(&id);
    Ok(Json(Completed { status, query: id }))
}

/// Parameters of `GET /stream/{id}`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReadParams {
    /// `true` replays the stored chunks first; otherwise only new ones are sent.
    #[serde(rename = "from-beginning")]
    #[param(rename = "from-beginning", value_type = Option<Flag>, inline)]
    from_beginning: Option<String>,
    /// Seconds (1 to 300; clamped) to wait for a live chunk before ending with upstream's timeout frame.
    #[serde(rename = "wait-for-query")]
    #[param(rename = "wait-for-query", value_type = Option<f64>)]
    wait_for_query: Option<String>,
    /// Accepted for compatibility; upstream parses it and never uses it.
    #[serde(rename = "max-chunk-size")]
    #[param(rename = "max-chunk-size")]
    _max_chunk_size: Option<String>,
    /// `openai` (the default: the chunks as stored) or `unified` (typed events).
    #[param(value_type = Option<Format>, inline)]
    format: Option<String>,
    /// `unified=true` is `format=unified` (seed 002 names both).
    #[param(value_type = Option<Flag>, inline)]
    unified: Option<String>,
}

impl ReadParams {
    fn format(&self) -> Result<Format, ApiError> {
        let unified = flag("unified", self.unified.as_deref())?;
        match self.format.as_deref() {
            None | Some("") if unified => Ok(Format::Unified),
            None | Some("") | Some("openai") => Ok(Format::OpenAi),
            Some("unified") => Ok(Format::Unified),
            Some(other) => {
                Err(ApiError::Validation(format!("format: expected 'openai' or 'unified', received '{other}'")))
            }
        }
    }
}

/// `GET /stream/{id}`: SSE of one stream's chunks.
#[utoipa::path(
    get,
    path = "/stream/{id}",
    tag = "streams",
    operation_id = "read_stream",
    params(("id" = String, Path, description = "The stream (the Query's name)", min_length = 1, max_length = 512), ReadParams),
    responses(
        (status = 200, description = "One `data:` frame per chunk (or typed event with `format=unified`), `[DONE]` after the completion marker or an error chunk; open until then",
            body = SseEvent, content_type = "text/event-stream"),
        (status = 400, description = "A bad id, flag, `format` or `wait-for-query`", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all, fields(stream.id = %id))]
pub async fn read(
    State(state): State<RouteState>,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<ReadParams>,
) -> Result<Response, ApiError> {
    validate::key("query", &id)?;
    let from_beginning = flag("from-beginning", params.from_beginning.as_deref())?;
    let wait_for_query = params.wait_for_query.as_deref().map(parse_wait).transpose()?;
    let format = params.format()?;
    let idle_timeout = Duration::from_millis(state.config.stream_idle_timeout_ms);
    reader::stream_response(&state, id, ReadOptions { from_beginning, wait_for_query, idle_timeout, format }).await
}

/// `wait-for-query` in seconds, clamped to 1–300 as upstream does.
fn parse_wait(raw: &str) -> Result<Duration, ApiError> {
    let seconds: f64 = raw.trim().parse().ok().filter(|s: &f64| s.is_finite()).ok_or_else(|| {
        ApiError::Validation(format!("wait-for-query: Expected a number of seconds, received '{raw}'"))
    })?;
    Ok(Duration::from_secs_f64(seconds.clamp(1.0, 300.0)))
}

/// `GET /stream`: a page of raw items, or with `watch=true` the SSE feed of every new chunk.
#[utoipa::path(
    get,
    path = "/stream",
    tag = "streams",
    operation_id = "list_chunks",
    params(ListParams),
    responses(
        (status = 200, description = "A page of raw items of every stream, oldest first (typed events left out); with `watch=true` one `data:` frame per new chunk",
            content((Page<BrokerItem> = "application/json"), (SseEvent = "text/event-stream"))),
        (status = 400, description = "A bad `limit` or `cursor` (`PAGINATION_ERROR`) or `watch`", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn list(
    State(state): State<RouteState>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Response, ApiError> {
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

/// `DELETE /stream`: every stream.
#[utoipa::path(delete, path = "/stream", tag = "streams", operation_id = "purge_streams",
    responses((status = 200, description = "`Stream data purged`", body = StatusMessage)))]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn purge(State(state): State<RouteState>) -> Result<Json<StatusMessage>, ApiError> {
    state.chunks.delete_all().await?;
    Ok(Json(StatusMessage::success("Stream data purged")))
}
