//! Handlers of the resume-state routes.

use axum::{
    Json,
    extract::{Path, State},
};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{
    model::{ResumeState, ToolCallMapping},
    resume,
};
use crate::{error::ApiError, http::extract::ApiJson, questions::tool_calls::Mapping, state::AppState, validate};

/// `GET /queries/{namespace}/{name}/state`: 404 when the broker knows nothing of the Query (no question
/// named it, it has no stream and no messages).
pub async fn state(
    State(state): State<AppState>,
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
pub async fn map_tool_call(
    State(state): State<AppState>,
    Path((namespace, name, tool_call_id)): Path<(String, String, String)>,
    ApiJson(body): ApiJson<ToolCallMapping>,
) -> Result<Json<Value>, ApiError> {
    validate::key("namespace", &namespace)?;
    validate::key("name", &name)?;
    validate::key("toolCallId", &tool_call_id)?;
    let task_id = Uuid::parse_str(body.task_id.trim()).map_err(|_| {
        ApiError::Validation(format!("taskId: expected a task id (a UUID), received '{}'", body.task_id))
    })?;
    match state.questions.map_tool_call(&namespace, &name, &tool_call_id, task_id).await? {
        Mapping::Recorded(question) => Ok(Json(json!({
            "query": {"namespace": namespace, "name": name},
            "toolCallId": tool_call_id,
            "taskId": task_id,
            "questionId": question.id,
            "status": question.status,
        }))),
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
