//! Handlers of `/sessions`: parse, make one store call, answer in upstream's shapes. Each handler's
//! `#[utoipa::path]` is its route and its OpenAPI description.

use axum::{
    Json,
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde_json::Value;

use super::{
    RouteState,
    event::SessionEvent,
    model::{PostSession, QueryRemoved, SessionEntry, SessionList, SessionPage, SessionParams, WholeStore},
    watch,
};
use crate::{
    error::{ApiError, ErrorBody},
    http::{
        extract::{ApiQuery, json_body},
        params::{Page, PageRequest, flag},
        reply::{StatusMessage, Success},
        sse::SseEvent,
    },
    validate::{self, shape::from_body},
};

/// `GET /sessions`: the whole store; with `limit` or `cursor` a filtered, sorted page with `statusCounts`
/// (the cursor is an offset, as upstream's); with `watch=true` an SSE feed of every session, then changes.
#[utoipa::path(
    get,
    path = "/sessions",
    tag = "sessions",
    operation_id = "list_sessions",
    params(SessionParams),
    responses(
        (status = 200, description = "Every session by id; with `limit` or `cursor` a page; with `watch=true` one `data:` frame `{\"sessionId\",\"session\"}` per session, then per change",
            content((SessionList = "application/json"), (SseEvent = "text/event-stream"))),
        (status = 400, description = "A bad `status`, `sort`, `order`, `dateFrom`, `dateTo`, `limit`, `cursor` or `watch`", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn list(
    State(state): State<RouteState>,
    ApiQuery(params): ApiQuery<SessionParams>,
) -> Result<Response, ApiError> {
    let filter = params.filter()?;
    if flag("watch", params.watch.as_deref())? {
        return watch::respond(&state, params.session_id).await;
    }
    if !params.wants_page() {
        return Ok(Json(SessionList::Whole(WholeStore::new(state.sessions.all().await?))).into_response());
    }
    let page = PageRequest::parse(params.limit.as_deref(), params.cursor.as_deref())?;
    let (items, total, status_counts) = state.sessions.page(&filter, page.cursor, page.limit).await?;
    let end = page.cursor.saturating_add(page.limit);
    let has_more = end < total;
    let next_cursor = has_more.then_some(end);
    let page = Page { items, total: Some(total), has_more, next_cursor };
    Ok(Json(SessionList::Page(SessionPage { page, status_counts })).into_response())
}

/// `GET /sessions/{id}`: one session.
#[utoipa::path(get, path = "/sessions/{id}", tag = "sessions", operation_id = "get_session",
    params(("id" = String, Path, description = "The session id")),
    responses(
        (status = 200, description = "The session", body = SessionEntry),
        (status = 404, description = "`Session not found`", body = ErrorBody),
    ))]
#[tracing::instrument(level = "debug", skip_all, fields(session.id = %id))]
pub async fn get_one(State(state): State<RouteState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    match state.sessions.get(&id).await? {
        Some(entry) => Ok(Json(entry).into_response()),
        None => Err(ApiError::NotFound("Session not found".into())),
    }
}

/// `POST /sessions`: `{sessionId, queryName, …}` applied as an event's data would be; 201.
#[utoipa::path(
    post,
    path = "/sessions",
    tag = "sessions",
    operation_id = "post_session",
    request_body = PostSession,
    responses(
        (status = 201, description = "Applied (data without a `queryName` leaves the session as it is)", body = Success,
            links(("GetSession" = (operation_id = "get_session", parameters(("id" = "$request.body#/sessionId")))))),
        (status = 400, description = "`sessionId` is missing or wrong, or the body is not JSON", body = ErrorBody),
        (status = 415, description = "The body is not declared JSON", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn post(State(state): State<RouteState>, request: axum::extract::Request) -> Result<Response, ApiError> {
    let body: Value = json_body(request, &()).await?;
    let PostSession { session_id } = from_body(&body)?;
    validate::key("sessionId", &session_id)?;
    let data = body.as_object().cloned().unwrap_or_default();
    let reason = data.get("_reason").and_then(Value::as_str).unwrap_or_default().to_owned();
    // Upstream drops data without a query name; the session is then left as it is.
    if let Some(event) = SessionEvent::from_data(&data, &reason) {
        state.sessions.apply(&event, state.config.ttls().session_seconds).await?;
    }
    Ok((StatusCode::CREATED, Json(Success::new())).into_response())
}

/// `DELETE /sessions`: every session.
#[utoipa::path(delete, path = "/sessions", tag = "sessions", operation_id = "purge_sessions",
    responses((status = 200, description = "`Sessions purged`", body = StatusMessage)))]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn purge(State(state): State<RouteState>) -> Result<Json<StatusMessage>, ApiError> {
    state.sessions.delete_all().await?;
    Ok(Json(StatusMessage::success("Sessions purged")))
}

/// `DELETE /sessions/queries/{queryName}`: the controller's finalizer, when a Query is deleted. 200 even when
/// no session had it: the controller reads 404 as "this broker lacks the route" and would skip it.
#[utoipa::path(delete, path = "/sessions/queries/{queryName}", tag = "sessions", operation_id = "delete_session_query",
    params(("queryName" = String, Path, description = "The Query's name", min_length = 1, max_length = 512)),
    responses(
        (status = 200, description = "Removed from every session that had it; a session left empty is deleted; its open questions are cancelled", body = QueryRemoved),
        (status = 400, description = "A name longer than 512 bytes", body = ErrorBody),
    ))]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn delete_query(
    State(state): State<RouteState>,
    Path(query_name): Path<String>,
) -> Result<Json<QueryRemoved>, ApiError> {
    validate::key("queryName", &query_name)?;
    let removed = state.sessions.remove_query(&query_name).await?;
    // The Query is gone: nobody waits for the answers to what it asked.
    let cancelled = state.questions.cancel_for_query(&query_name).await?;
    if cancelled > 0 {
        tracing::info!(query = %query_name, cancelled, "cancelled the open questions of a deleted Query");
    }
    let reply = StatusMessage::success(format!("Query {query_name} removed from {removed} session(s)"));
    Ok(Json(QueryRemoved { reply, removed }))
}
