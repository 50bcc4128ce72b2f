//! Handlers of the Memory API: parse, make one store call, answer in upstream's shapes.

use axum::{
    Json,
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde_json::{Map, Value, json};

use super::{
    model::{AppendMessages, MessageFilter},
    watch,
};
use crate::{
    error::ApiError,
    http::{
        extract::{ApiJson, ApiQuery},
        params::{ListParams, Page, PageRequest, flag},
        reply::StatusMessage,
    },
    idempotency::{KeyHeader, KeyState},
    state::AppState,
};

/// `POST /messages`: 200 with an empty body once stored. With an `Idempotency-Key`, a retry of the same body
/// stores nothing more and gets the first reply.
pub async fn append(
    State(state): State<AppState>,
    KeyHeader(key): KeyHeader,
    ApiJson(body): ApiJson<AppendMessages>,
) -> Result<Response, ApiError> {
    body.validate()?;
    let fingerprint = key.as_ref().map(|_| body.fingerprint());
    let once = key.as_ref().zip(fingerprint.as_deref());
    let state =
        state.messages.append(&body.conversation_id, &body.query_id, &body.messages, body.ttl_seconds, once).await?;
    match state {
        KeyState::New => Ok(StatusCode::OK.into_response()),
        KeyState::Finished(reply) => Ok(reply.into_response()),
        KeyState::Reused => Err(KeyState::reused_error()),
        // Only if the key was reaped between two statements: the retry will find it new.
        KeyState::Unfinished { .. } => Err(ApiError::Unavailable("idempotency key changed meanwhile".into())),
    }
}

/// `GET /messages`: a page, or with `watch=true` an SSE feed.
pub async fn list(State(state): State<AppState>, ApiQuery(params): ApiQuery<ListParams>) -> Result<Response, ApiError> {
    let watching = flag("watch", params.watch.as_deref())?;
    let page = PageRequest::parse(params.limit.as_deref(), params.cursor.as_deref())?;
    let filter = MessageFilter { conversation_id: params.conversation_id, query_id: params.query_id };
    if watching {
        let resume_after = params.cursor.is_some().then_some(page.cursor);
        return watch::respond(&state, filter, resume_after).await;
    }
    let items = state.messages.list(&filter, page.cursor, page.limit + 1).await?;
    Ok(Json(Page::from_overfetch(items, page.limit, None, |item| item.sequence)).into_response())
}

/// `DELETE /messages`.
pub async fn purge(State(state): State<AppState>) -> Result<Json<StatusMessage>, ApiError> {
    state.messages.delete_all().await?;
    Ok(Json(StatusMessage::success("Memory purged")))
}

/// `GET /memory-status`.
pub async fn status(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let counts = state.messages.counts().await?;
    let total_messages: i64 = counts.iter().map(|c| c.message_count).sum();
    let conversations: Map<String, Value> = counts
        .iter()
        .map(|c| (c.conversation_id.clone(), json!({"message_count": c.message_count, "query_count": c.query_count})))
        .collect();
    Ok(Json(json!({
        "total_conversations": counts.len(),
        "total_messages": total_messages,
        "conversations": conversations,
    })))
}

/// `GET /conversations`.
pub async fn conversations(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({"conversations": state.messages.conversation_ids().await?})))
}

/// `POST /conversations`: a fresh id; nothing is stored until messages arrive.
pub async fn new_conversation() -> (StatusCode, Json<Value>) {
    (StatusCode::CREATED, Json(json!({"conversation_id": uuid::Uuid::new_v4().to_string()})))
}

/// `GET /conversations/{id}`: all its visible messages, or 404.
pub async fn conversation(State(state): State<AppState>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let filter = MessageFilter { conversation_id: Some(id.clone()), query_id: None };
    let messages = state.messages.list(&filter, 0, i64::MAX).await?;
    if messages.is_empty() {
        return Err(ApiError::NotFound("Conversation not found".into()));
    }
    Ok(Json(json!({"conversation_id": id, "messages": messages})))
}

/// `DELETE /conversations/{id}` (idempotent).
pub async fn delete_conversation(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<StatusMessage>, ApiError> {
    state.messages.delete_conversation(&id).await?;
    Ok(Json(StatusMessage::success(format!("Conversation {id} deleted"))))
}

/// `DELETE /conversations`.
pub async fn purge_conversations(State(state): State<AppState>) -> Result<Json<StatusMessage>, ApiError> {
    state.messages.delete_all().await?;
    Ok(Json(StatusMessage::success("All conversations deleted")))
}

/// `DELETE /conversations/{c}/queries/{q}/messages`.
pub async fn delete_conversation_query(
    State(state): State<AppState>,
    Path((conversation_id, query_id)): Path<(String, String)>,
) -> Result<Json<StatusMessage>, ApiError> {
    state.messages.delete_query(Some(&conversation_id), &query_id).await?;
    Ok(Json(StatusMessage::success(format!("Query {query_id} messages deleted from conversation {conversation_id}"))))
}

/// `DELETE /queries/{q}/messages` (the controller's finalizer).
pub async fn delete_query(
    State(state): State<AppState>,
    Path(query_id): Path<String>,
) -> Result<Json<StatusMessage>, ApiError> {
    state.messages.delete_query(None, &query_id).await?;
    Ok(Json(StatusMessage::success(format!("Query {query_id} messages deleted"))))
}
