//! Handlers of the Memory API: parse, make one store call, answer in upstream's shapes. Each handler's
//! `#[utoipa::path]` is its route and its OpenAPI description.

use axum::{
    Json,
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde_json::{Map, Value};

use super::{
    RouteState,
    model::{
        AppendMessages, Conversation, ConversationCounts, ConversationIds, MemoryStatus, MessageFilter, MessageItem,
        MessageParams, NewConversation,
    },
    watch,
};
use crate::{
    error::{ApiError, ErrorBody},
    http::{
        extract::{ApiJson, ApiQuery},
        params::{Page, PageRequest, flag},
        reply::StatusMessage,
        sse::SseEvent,
    },
    idempotency::{KeyHeader, KeyState},
};

/// `POST /messages`: 200 with an empty body once stored. With an `Idempotency-Key`, a retry of the same body
/// stores nothing more and gets the first reply.
#[utoipa::path(
    post,
    path = "/messages",
    tag = "memory",
    operation_id = "append_messages",
    params(("Idempotency-Key" = Option<String>, Header, description = "1 to 255 visible ASCII characters: a retry within 24 h has exactly one effect")),
    request_body = AppendMessages,
    responses(
        (status = 200, description = "Stored (an empty body)", links(
            ("GetConversation" = (operation_id = "get_conversation", parameters(("id" = "$request.body#/conversation_id")))),
            ("DeleteConversationQueryMessages" = (operation_id = "delete_conversation_query_messages",
                parameters(("conversation_id" = "$request.body#/conversation_id"), ("query_id" = "$request.body#/query_id")))),
        )),
        (status = 400, description = "A field is missing or wrong (`VALIDATION_ERROR`), or the body is not JSON (`REQUEST_ERROR`)", body = ErrorBody),
        (status = 415, description = "The body is not declared JSON", body = ErrorBody),
        (status = 422, description = "The `Idempotency-Key` was first used for another body", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all, fields(conversation.id, query.id))]
pub async fn append(
    State(state): State<RouteState>,
    KeyHeader(key): KeyHeader,
    ApiJson(body): ApiJson<AppendMessages>,
) -> Result<Response, ApiError> {
    body.validate()?;
    let span = tracing::Span::current();
    span.record("conversation.id", body.conversation_id.as_str()).record("query.id", body.query_id.as_str());
    let fingerprint = key.as_ref().map(|_| body.fingerprint());
    let once = key.as_ref().zip(fingerprint.as_deref());
    let ttls = state.config.ttls();
    let state = state
        .messages
        .append(&body.conversation_id, &body.query_id, &body.messages, body.ttl_seconds, ttls, once)
        .await?;
    match state {
        KeyState::New => Ok(StatusCode::OK.into_response()),
        KeyState::Finished(reply) => Ok(reply.into_response()),
        KeyState::Reused => Err(KeyState::reused_error()),
        // Only if the key was reaped between two statements: the retry will find it new.
        KeyState::Unfinished { .. } => Err(ApiError::Unavailable("idempotency key changed meanwhile".into())),
    }
}

/// `GET /messages`: a page, or with `watch=true` an SSE feed.
#[utoipa::path(
    get,
    path = "/messages",
    tag = "memory",
    operation_id = "list_messages",
    params(MessageParams),
    responses(
        (status = 200, description = "A page of messages, oldest first; with `watch=true` one `data:` frame per new message (a `MessageItem`)",
            content((Page<MessageItem> = "application/json"), (SseEvent = "text/event-stream"))),
        (status = 400, description = "A bad `limit` or `cursor` (`PAGINATION_ERROR`) or `watch`", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn list(
    State(state): State<RouteState>,
    ApiQuery(params): ApiQuery<MessageParams>,
) -> Result<Response, ApiError> {
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

/// `DELETE /messages`: every message.
#[utoipa::path(delete, path = "/messages", tag = "memory", operation_id = "purge_messages",
    responses((status = 200, description = "`Memory purged`", body = StatusMessage)))]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn purge(State(state): State<RouteState>) -> Result<Json<StatusMessage>, ApiError> {
    state.messages.delete_all().await?;
    Ok(Json(StatusMessage::success("Memory purged")))
}

/// `GET /memory-status`: counts per conversation.
#[utoipa::path(get, path = "/memory-status", tag = "memory", operation_id = "memory_status",
    responses((status = 200, description = "The counts", body = MemoryStatus)))]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn status(State(state): State<RouteState>) -> Result<Json<MemoryStatus>, ApiError> {
    let counts = state.messages.counts().await?;
    let total_messages: i64 = counts.iter().map(|c| c.message_count).sum();
    let conversations: Map<String, Value> = counts
        .iter()
        .map(|c| {
            let counts = ConversationCounts { message_count: c.message_count, query_count: c.query_count };
            (c.conversation_id.clone(), serde_json::to_value(counts).unwrap_or_default())
        })
        .collect();
    Ok(Json(MemoryStatus { total_conversations: counts.len(), total_messages, conversations }))
}

/// `GET /conversations`: the ids of conversations with visible messages.
#[utoipa::path(get, path = "/conversations", tag = "memory", operation_id = "list_conversations",
    responses((status = 200, description = "The ids", body = ConversationIds)))]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn conversations(State(state): State<RouteState>) -> Result<Json<ConversationIds>, ApiError> {
    Ok(Json(ConversationIds { conversations: state.messages.conversation_ids().await? }))
}

/// `POST /conversations`: a fresh id; nothing is stored until messages arrive.
#[utoipa::path(post, path = "/conversations", tag = "memory", operation_id = "new_conversation",
    responses((status = 201, description = "A new conversation id", body = NewConversation)))]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn new_conversation() -> (StatusCode, Json<NewConversation>) {
    (StatusCode::CREATED, Json(NewConversation { conversation_id: uuid::Uuid::new_v4().to_string() }))
}

/// `GET /conversations/{id}`: all its visible messages, or 404.
#[utoipa::path(get, path = "/conversations/{id}", tag = "memory", operation_id = "get_conversation",
    params(("id" = String, Path, description = "The conversation")),
    responses(
        (status = 200, description = "Its messages", body = Conversation),
        (status = 404, description = "`Conversation not found`: no visible message", body = ErrorBody),
    ))]
#[tracing::instrument(level = "debug", skip_all, fields(conversation.id = %id))]
pub async fn conversation(
    State(state): State<RouteState>,
    Path(id): Path<String>,
) -> Result<Json<Conversation>, ApiError> {
    let filter = MessageFilter { conversation_id: Some(id.clone()), query_id: None };
    let messages = state.messages.list(&filter, 0, i64::MAX).await?;
    if messages.is_empty() {
        return Err(ApiError::NotFound("Conversation not found".into()));
    }
    Ok(Json(Conversation { conversation_id: id, messages }))
}

/// `DELETE /conversations/{id}` (idempotent).
#[utoipa::path(delete, path = "/conversations/{id}", tag = "memory", operation_id = "delete_conversation",
    params(("id" = String, Path, description = "The conversation")),
    responses((status = 200, description = "Deleted (or there was nothing)", body = StatusMessage)))]
#[tracing::instrument(level = "debug", skip_all, fields(conversation.id = %id))]
pub async fn delete_conversation(
    State(state): State<RouteState>,
    Path(id): Path<String>,
) -> Result<Json<StatusMessage>, ApiError> {
    state.messages.delete_conversation(&id).await?;
    Ok(Json(StatusMessage::success(format!("Conversation {id} deleted"))))
}

/// `DELETE /conversations`: every message.
#[utoipa::path(delete, path = "/conversations", tag = "memory", operation_id = "purge_conversations",
    responses((status = 200, description = "`All conversations deleted`", body = StatusMessage)))]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn purge_conversations(State(state): State<RouteState>) -> Result<Json<StatusMessage>, ApiError> {
    state.messages.delete_all().await?;
    Ok(Json(StatusMessage::success("All conversations deleted")))
}

/// `DELETE /conversations/{c}/queries/{q}/messages`: one query's messages in one conversation.
#[utoipa::path(delete, path = "/conversations/{conversation_id}/queries/{query_id}/messages", tag = "memory",
    operation_id = "delete_conversation_query_messages",
    params(("conversation_id" = String, Path, description = "The conversation"),
        ("query_id" = String, Path, description = "The query (name)")),
    responses((status = 200, description = "Deleted (or there was nothing)", body = StatusMessage)))]
#[tracing::instrument(level = "debug", skip_all, fields(conversation.id = %conversation_id, query.id = %query_id))]
pub async fn delete_conversation_query(
    State(state): State<RouteState>,
    Path((conversation_id, query_id)): Path<(String, String)>,
) -> Result<Json<StatusMessage>, ApiError> {
    state.messages.delete_query(Some(&conversation_id), &query_id).await?;
    Ok(Json(StatusMessage::success(format!("Query {query_id} messages deleted from conversation {conversation_id}"))))
}

/// `DELETE /queries/{q}/messages` (the controller's finalizer): one query's messages everywhere.
#[utoipa::path(delete, path = "/queries/{query_id}/messages", tag = "memory", operation_id = "delete_query_messages",
    params(("query_id" = String, Path, description = "The query (name)")),
    responses((status = 200, description = "Deleted (or there was nothing); the Query's open questions are cancelled", body = StatusMessage)))]
#[tracing::instrument(level = "debug", skip_all, fields(query.id = %query_id))]
pub async fn delete_query(
    State(state): State<RouteState>,
    Path(query_id): Path<String>,
) -> Result<Json<StatusMessage>, ApiError> {
    state.messages.delete_query(None, &query_id).await?;
    // The finalizer of a deleted Query calls this: nobody waits for the answers to what it asked.
    if crate::validate::key("queryName", &query_id).is_ok() {
        state.questions.cancel_for_query(&query_id).await?;
    }
    Ok(Json(StatusMessage::success(format!("Query {query_id} messages deleted"))))
}
