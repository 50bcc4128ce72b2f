//! Handlers of the resume-state routes. Each handler's `#[utoipa::path]` is its route and its OpenAPI
//! description. The first segment is the Query's namespace; it is named `query_id` because the router
//! shares it with `/queries/{query_id}/messages` (one name per segment).

use axum::{
    Json,
    extract::{Path, State},
};
use serde_json::Map;
use uuid::Uuid;

use super::{
    RouteState,
    model::{MappedToolCall, QueryName, ResumeState, ToolCallMapping},
    resume,
};
use crate::{
    error::{ApiError, ErrorBody},
    http::extract::ApiJson,
    questions::store::tool_calls::Mapping,
    validate,
};

/// `GET /queries/{namespace}/{name}/state`: 404 when the broker knows nothing of the Query (no question
/// named it, it has no stream and no messages).
#[utoipa::path(
    get,
    path = "/queries/{query_id}/{name}/state",
    tag = "queries",
    operation_id = "query_state",
    params(
        ("query_id" = String, Path, description = "The Query's namespace", min_length = 1, max_length = 512),
        ("name" = String, Path, description = "The Query's name", min_length = 1, max_length = 512),
    ),
    responses(
        (status = 200, description = "Its resume state", body = ResumeState),
        (status = 400, description = "A bad namespace or name", body = ErrorBody),
        (status = 404, description = "`Query not found`: the broker knows nothing of it", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn state(
    State(state): State<RouteState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Result<Json<ResumeState>, ApiError> {
    validate::key("namespace", &namespace)?;
    validate::key("name", &name)?;
    match resume::load(&state, namespace, name).await? {
        Some(resume) => Ok(Json(resume)),
        None => Err(ApiError::NotFound("Query not found".into())),
    }
}

/// `PUT /queries/{namespace}/{name}/tool-calls/{toolCallId}` `{"taskId"}`: records which task answers the
/// tool call. Idempotent; 404 for an unknown task, 409 when the task belongs to another Query or tool call.
/// Task ids are opaque to clients, so a `taskId` that is not of our form (ours are UUIDs) is an unknown task
/// (404), not a malformed request: a client cannot know what our ids look like.
#[utoipa::path(
    put,
    path = "/queries/{query_id}/{name}/tool-calls/{tool_call_id}",
    tag = "queries",
    operation_id = "map_tool_call",
    params(
        ("query_id" = String, Path, description = "The Query's namespace", min_length = 1, max_length = 512),
        ("name" = String, Path, description = "The Query's name", min_length = 1, max_length = 512),
        ("tool_call_id" = String, Path, description = "The LLM's tool call", min_length = 1, max_length = 512),
    ),
    request_body = ToolCallMapping,
    responses(
        (status = 200, description = "Recorded (or it was already)", body = MappedToolCall),
        (status = 400, description = "A bad parameter, a `taskId` that is empty, over 512 bytes or holds NUL, or the body is not JSON", body = ErrorBody),
        (status = 404, description = "`Task not found`: no task has that id (task ids are opaque strings)", body = ErrorBody),
        (status = 409, description = "The task was asked by another Query, or already answers another tool call", body = ErrorBody),
        (status = 415, description = "The body is not declared JSON", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn map_tool_call(
    State(state): State<RouteState>,
    Path((namespace, name, tool_call_id)): Path<(String, String, String)>,
    ApiJson(body): ApiJson<ToolCallMapping>,
) -> Result<Json<MappedToolCall>, ApiError> {
    validate::key("namespace", &namespace)?;
    validate::key("name", &name)?;
    validate::key("toolCallId", &tool_call_id)?;
    validate::key("taskId", &body.task_id)?;
    let Ok(task_id) = Uuid::parse_str(body.task_id.trim()) else {
        return Err(ApiError::NotFound("Task not found".into()));
    };
    match state.questions.map_tool_call(&namespace, &name, &tool_call_id, task_id).await? {
        Mapping::Recorded(question) => Ok(Json(MappedToolCall {
            query: QueryName { namespace, name },
            tool_call_id,
            task_id,
            question_id: question.id,
            status: question.status,
        })),
        Mapping::UnknownTask => Err(ApiError::NotFound("Task not found".into())),
        Mapping::OtherQuery(query) => {
            let asked_by = match query {
                Some(query) => format!("Query {}/{}", query.namespace.unwrap_or_default(), query.name),
                None => "a caller that named no Query".to_owned(),
            };
            Err(conflict(format!("task {task_id} was asked by {asked_by}, not by Query {namespace}/{name}")))
        }
        Mapping::OtherToolCall(existing) => {
            Err(conflict(format!("task {task_id} already answers tool call {existing}")))
        }
    }
}

fn conflict(message: String) -> ApiError {
    ApiError::Conflict { message, current: Map::new() }
}
