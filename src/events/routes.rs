//! Handlers of `/events`: parse, make one store call, answer in upstream's shapes (`201 {"status":"success"}`
//! on POST, which the controller's emitter requires exactly). Each handler's `#[utoipa::path]` is its route
//! and its OpenAPI description.

use axum::{
    Json,
    extract::{Path, Request, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};

use super::{
    RouteState,
    model::{NewEvent, PostEvent, Shape},
    watch,
};
use crate::{
    error::{ApiError, ErrorBody},
    http::{
        extract::{ApiQuery, json_body},
        params::{FeedParams, KeyFeedParams, Page, PageRequest, flag},
        reply::{StatusMessage, Success},
        sse::SseEvent,
    },
};

/// `POST /events`: stores the event and applies it to its session; 201.
#[utoipa::path(
    post,
    path = "/events",
    tag = "events",
    operation_id = "append_event",
    request_body = PostEvent,
    responses(
        (status = 201, description = "Stored, and applied to its session", body = Success, links(
            ("ListQueryEvents" = (operation_id = "list_query_events", parameters(("query_id" = "$request.body#/data/queryId")))),
            ("DeleteQueryEvents" = (operation_id = "delete_query_events", parameters(("query_id" = "$request.body#/data/queryId")))),
        )),
        (status = 400, description = "A field is missing or wrong (`VALIDATION_ERROR`), or the body is not JSON (`REQUEST_ERROR`)", body = ErrorBody),
        (status = 415, description = "The body is not declared JSON", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn append(State(state): State<RouteState>, request: Request) -> Result<Response, ApiError> {
    let event = NewEvent::parse(json_body(request, &()).await?)?;
    state.events.append(&event, state.config.ttls()).await?;
    Ok((StatusCode::CREATED, Json(Success::new())).into_response())
}

/// `GET /events`: a page (optionally of one session), or with `watch=true` an SSE feed.
#[utoipa::path(
    get,
    path = "/events",
    tag = "events",
    operation_id = "list_events",
    params(FeedParams),
    responses(
        (status = 200, description = "A page of events, oldest first (`nextCursor` is a sequence number; no `total`); with `watch=true` one `data:` frame per event",
            content((Page<Shape> = "application/json"), (SseEvent = "text/event-stream"))),
        (status = 400, description = "A bad `limit` or `cursor` (`PAGINATION_ERROR`), `watch` or `from-beginning`", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn list(
    State(state): State<RouteState>,
    ApiQuery(params): ApiQuery<FeedParams>,
) -> Result<Response, ApiError> {
    let page = PageRequest::parse(params.limit.as_deref(), params.cursor.as_deref())?;
    if flag("watch", params.watch.as_deref())? {
        let start = params.start(page)?;
        return watch::all(&state, params.session_id, start).await;
    }
    let records = state.events.list(params.session_id.as_deref(), None, page.cursor, page.limit + 1).await?;
    Ok(page_of(records, page.limit))
}

/// `GET /events/{queryUID}`: a page of one query's events, or with `watch=true` an SSE feed.
#[utoipa::path(
    get,
    path = "/events/{query_id}",
    tag = "events",
    operation_id = "list_query_events",
    params(("query_id" = String, Path, description = "The Query's UID (`data.queryId`)"), KeyFeedParams),
    responses(
        (status = 200, description = "A page of the Query's events, oldest first; with `watch=true` one `data:` frame per event",
            content((Page<Shape> = "application/json"), (SseEvent = "text/event-stream"))),
        (status = 400, description = "A bad `limit` or `cursor` (`PAGINATION_ERROR`), `watch` or `from-beginning`", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all, fields(query.id = %query_id))]
pub async fn query(
    State(state): State<RouteState>,
    Path(query_id): Path<String>,
    ApiQuery(params): ApiQuery<KeyFeedParams>,
) -> Result<Response, ApiError> {
    let page = PageRequest::parse(params.limit.as_deref(), params.cursor.as_deref())?;
    if flag("watch", params.watch.as_deref())? {
        let start = params.start(page)?;
        return watch::query(&state, query_id, start).await;
    }
    let records = state.events.list(None, Some(&query_id), page.cursor, page.limit + 1).await?;
    Ok(page_of(records, page.limit))
}

/// Upstream's page of events: the events themselves (no sequence on them), `nextCursor` a sequence, no
/// `total` (upstream's Postgres backend does not count).
fn page_of(records: Vec<super::model::EventRecord>, limit: i64) -> Response {
    let page = Page::from_overfetch(records, limit, None, |record| record.sequence);
    let items: Vec<_> = page.items.into_iter().map(|record| record.event).collect();
    Json(Page { items, total: None, has_more: page.has_more, next_cursor: page.next_cursor }).into_response()
}

/// `DELETE /events`: every event.
#[utoipa::path(delete, path = "/events", tag = "events", operation_id = "purge_events",
    responses((status = 200, description = "`Event data purged`", body = StatusMessage)))]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn purge(State(state): State<RouteState>) -> Result<Json<StatusMessage>, ApiError> {
    state.events.delete_all().await?;
    Ok(Json(StatusMessage::success("Event data purged")))
}

/// `DELETE /events/{uid}`: the controller's finalizer.
#[utoipa::path(delete, path = "/events/{query_id}", tag = "events", operation_id = "delete_query_events",
    params(("query_id" = String, Path, description = "The Query's UID")),
    responses((status = 200, description = "Deleted (or there was nothing)", body = StatusMessage)))]
#[tracing::instrument(level = "debug", skip_all, fields(query.id = %query_id))]
pub async fn delete_query(
    State(state): State<RouteState>,
    Path(query_id): Path<String>,
) -> Result<Json<StatusMessage>, ApiError> {
    state.events.delete_query(&query_id).await?;
    Ok(Json(StatusMessage::success(format!("Query {query_id} events deleted"))))
}
