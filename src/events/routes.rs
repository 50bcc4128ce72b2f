//! Handlers of `/events`: parse, make one store call, answer in upstream's shapes (`201 {"status":"success"}`
//! on POST, which the controller's emitter requires exactly).

use axum::{
    Json,
    extract::{Path, Request, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde_json::json;

use super::{model::NewEvent, watch};
use crate::{
    error::ApiError,
    http::{
        extract::{ApiQuery, json_body},
        params::{FeedParams, Page, PageRequest, flag},
        reply::StatusMessage,
    },
    state::AppState,
};

/// `POST /events`: stores the event and applies it to its session; 201.
pub async fn append(State(state): State<AppState>, request: Request) -> Result<Response, ApiError> {
    let event = NewEvent::parse(json_body(request, &()).await?)?;
    state.events.append(&event, state.config.event_ttl_seconds as i64).await?;
    Ok((StatusCode::CREATED, Json(json!({"status": "success"}))).into_response())
}

/// `GET /events`: a page (optionally of one session), or with `watch=true` an SSE feed.
pub async fn list(State(state): State<AppState>, ApiQuery(params): ApiQuery<FeedParams>) -> Result<Response, ApiError> {
    let page = PageRequest::parse(params.limit.as_deref(), params.cursor.as_deref())?;
    if flag("watch", params.watch.as_deref())? {
        let start = params.start(page)?;
        return watch::all(&state, params.session_id, start).await;
    }
    let records = state.events.list(params.session_id.as_deref(), None, page.cursor, page.limit + 1).await?;
    Ok(page_of(records, page.limit))
}

/// `GET /events/{queryUID}`: a page of one query's events, or with `watch=true` an SSE feed.
pub async fn query(
    State(state): State<AppState>,
    Path(query_id): Path<String>,
    ApiQuery(params): ApiQuery<FeedParams>,
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

/// `DELETE /events`.
pub async fn purge(State(state): State<AppState>) -> Result<Json<StatusMessage>, ApiError> {
    state.events.delete_all().await?;
    Ok(Json(StatusMessage::success("Event data purged")))
}

/// `DELETE /events/{uid}`: the controller's finalizer.
pub async fn delete_query(
    State(state): State<AppState>,
    Path(query_id): Path<String>,
) -> Result<Json<StatusMessage>, ApiError> {
    state.events.delete_query(&query_id).await?;
    Ok(Json(StatusMessage::success(format!("Query {query_id} events deleted"))))
}
