//! Handlers of `POST /v1/traces` (upstream's legacy `{"error": "…"}` bodies) and `/traces`. Each handler's
//! `#[utoipa::path]` is its route and its OpenAPI description.

use std::sync::Arc;

use axum::{
    Json,
    extract::{Path, Request, State},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use futures::{StreamExt, stream::BoxStream};

use super::{
    RouteState,
    model::{ExportRefused, Exported, LegacyError, NewSpan, SpanRecord, Trace},
    otlp::{self, OtlpError},
    otlp_json::OtlpJson,
};
use crate::{
    db::watch::{Start, follow_all, follow_key},
    error::{ApiError, ErrorBody},
    http::{
        extract::{ApiQuery, whole_body},
        params::{FeedParams, KeyFeedParams, Page, PageRequest, flag},
        reply::StatusMessage,
        sse::{self, SseEvent},
    },
};

/// `POST /v1/traces`: an OTLP export, protobuf or JSON (gzip-encoded or not); 200 `{}`.
#[utoipa::path(
    post,
    path = "/v1/traces",
    tag = "traces",
    operation_id = "export_traces",
    params(("Content-Encoding" = Option<String>, Header, description = "`gzip` for a compressed body")),
    request_body(description = "An OTLP `ExportTraceServiceRequest`, protobuf (`application/x-protobuf`) or JSON (any other type)",
        content((OtlpJson = "application/json"), (String = "application/x-protobuf"))),
    responses(
        (status = 200, description = "Stored", body = Exported, links(("GetTrace" = (operation_id = "get_trace",
            parameters(("id" = "$request.body#/resourceSpans/0/scopeSpans/0/spans/0/traceId")))))),
        (status = 400, description = "The export cannot be read (upstream's `{\"error\"}`), or the body cannot be decoded",
            body = ExportRefused),
        (status = 415, description = "A `Content-Encoding` other than `gzip` (or `identity`)", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn export(State(state): State<RouteState>, request: Request) -> Result<Response, ApiError> {
    let protobuf = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/x-protobuf"));
    let body = whole_body(request, &()).await?;
    let decoded = if protobuf { otlp::from_protobuf(&body) } else { otlp::from_json(&body) };
    let spans = match decoded.and_then(|spans| spans.into_iter().map(NewSpan::new).collect::<Result<Vec<_>, _>>()) {
        Ok(spans) => spans,
        Err(error) => return Ok(legacy_error(&error)),
    };
    state.spans.append(&spans, state.config.span_ttl_seconds as i64).await?;
    Ok(Json(Exported::default()).into_response())
}

/// Upstream's `/v1/traces` errors keep the old body `{"error": "…"}`.
fn legacy_error(error: &OtlpError) -> Response {
    (StatusCode::BAD_REQUEST, Json(LegacyError { error: error.to_string() })).into_response()
}

/// `GET /traces`: traces newest first (by their first span's arrival), or with `watch=true` their spans as
/// they arrive.
#[utoipa::path(
    get,
    path = "/traces",
    tag = "traces",
    operation_id = "list_traces",
    params(FeedParams),
    responses(
        (status = 200, description = "A page of traces, newest first (`nextCursor` continues before it); with `watch=true` one `data:` frame per new span (`from-beginning` is not taken here)",
            content((Page<Trace> = "application/json"), (SseEvent = "text/event-stream"))),
        (status = 400, description = "A bad `limit` or `cursor` (`PAGINATION_ERROR`) or `watch`", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn list(
    State(state): State<RouteState>,
    ApiQuery(params): ApiQuery<FeedParams>,
) -> Result<Response, ApiError> {
    let page = PageRequest::parse(params.limit.as_deref(), params.cursor.as_deref())?;
    if flag("watch", params.watch.as_deref())? {
        // Upstream's watch of all traces has no from-beginning.
        let start = Start::of(false, params.cursor.is_some().then_some(page.cursor));
        let retry = state.config.poll_interval();
        let start = start.global(&state.spans).await?;
        let spans = follow_all(&state.spans, start, retry).await?;
        let session_id = params.session_id;
        let spans = spans
            .filter(move |span| {
                std::future::ready(session_id.as_deref().is_none_or(|id| span.session_id.as_deref() == Some(id)))
            })
            .boxed();
        return Ok(respond(&state, spans));
    }
    let before = if params.cursor.is_some() { page.cursor } else { i64::MAX };
    let found = state.spans.page(params.session_id.as_deref(), before, page.limit + 1).await?;
    let has_more = found.traces.len() as i64 > page.limit;
    let mut traces = found.traces;
    traces.truncate(page.limit as usize);
    let next_cursor = has_more.then(|| found.firsts[page.limit as usize - 1]);
    Ok(Json(Page { items: traces, total: Some(found.total), has_more, next_cursor }).into_response())
}

/// `GET /traces/{id}`: the trace, or with `watch=true` its spans (`from-beginning`, `cursor`).
#[utoipa::path(
    get,
    path = "/traces/{id}",
    tag = "traces",
    operation_id = "get_trace",
    params(("id" = String, Path, description = "The trace id"), KeyFeedParams),
    responses(
        (status = 200, description = "The trace; with `watch=true` one `data:` frame per span",
            content((Trace = "application/json"), (SseEvent = "text/event-stream"))),
        (status = 400, description = "A bad `limit`, `cursor`, `watch` or `from-beginning`", body = ErrorBody),
        (status = 404, description = "`Trace not found`", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn trace(
    State(state): State<RouteState>,
    Path(trace_id): Path<String>,
    ApiQuery(params): ApiQuery<KeyFeedParams>,
) -> Result<Response, ApiError> {
    let page = PageRequest::parse(params.limit.as_deref(), params.cursor.as_deref())?;
    if flag("watch", params.watch.as_deref())? {
        let start = params.start(page)?;
        let retry = state.config.poll_interval();
        let spans = follow_key(&state.spans, trace_id, start, retry).await?;
        return Ok(respond(&state, spans));
    }
    let spans = state.spans.trace(&trace_id).await?;
    if spans.is_empty() {
        return Err(ApiError::NotFound("Trace not found".into()));
    }
    Ok(Json(Trace { trace_id, spans }).into_response())
}

fn respond(state: &RouteState, spans: BoxStream<'static, Arc<SpanRecord>>) -> Response {
    let frames = spans.map(|span| sse::data(span.span.get()));
    sse::watch(frames, state.streams_end.token(), state.config.sse_heartbeat())
}

/// `DELETE /traces`: every span.
#[utoipa::path(delete, path = "/traces", tag = "traces", operation_id = "purge_traces",
    responses((status = 200, description = "`Trace data purged`", body = StatusMessage)))]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn purge(State(state): State<RouteState>) -> Result<Json<StatusMessage>, ApiError> {
    state.spans.delete_all().await?;
    Ok(Json(StatusMessage::success("Trace data purged")))
}
