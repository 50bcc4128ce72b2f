//! Handlers of the resume-state routes.

use axum::{
    Json,
    extract::{Path, State},
};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{
    model::{BlockedOn, Checkpoint, QueryName, ResumeState, ToolCallMapping, WaitingFor},
    pending::pending_tool_calls,
};
use crate::{
    error::ApiError,
    http::{extract::ApiJson, reply::iso_timestamp},
    questions::tool_calls::Mapping,
    state::AppState,
    validate,
};

/// `GET /queries/{namespace}/{name}/state`: 404 when the broker knows nothing of the Query (no question
/// named it, it has no stream and no messages).
pub async fn state(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Result<Json<ResumeState>, ApiError> {
    validate::key("namespace", &namespace)?;
    validate::key("name", &name)?;
    let resume = state.query_state.resume_row(&namespace, &name).await?;
    let stream = state.query_state.stream_phase(&name).await?;
    let last_message_sequence = state.query_state.last_message_sequence(&name).await?;
    if resume.is_none() && stream.is_none() && last_message_sequence.is_none() {
        return Err(ApiError::NotFound("Query not found".into()));
    }
    let pending = match &stream {
        Some(stream) if !stream.completed => pending_tool_calls(&state.chunks, &name).await?,
        _ => Vec::new(),
    };
    let phase = match (&resume, &stream) {
        (Some(resume), _) => resume.phase.clone(),
        (None, Some(stream)) => stream.phase.clone(),
        // Only messages: a Query that did not stream, and whose phase only Kubernetes knows.
        (None, None) => "unknown".to_owned(),
    };
    let blocked_on = resume.as_ref().and_then(|row| {
        Some(BlockedOn {
            kind: "question",
            question_id: row.question_id.clone()?,
            task_id: row.task_id,
            tool_call_id: row.tool_call_id.clone(),
            status: row.question_status.clone()?,
        })
    });
    let waiting_for = resume.as_ref().and_then(|row| {
        let since = row.waiting_since?;
        Some(WaitingFor {
            question_id: row.question_id.clone()?,
            task_id: row.task_id,
            tool_call_id: row.tool_call_id.clone(),
            since: iso_timestamp(since),
        })
    });
    let blocking_call = blocked_on.as_ref().and_then(|b| b.tool_call_id.as_deref());
    let pending_tool_call =
        pending.iter().find(|call| Some(call.tool_call_id.as_str()) == blocking_call).or(pending.last()).cloned();
    Ok(Json(ResumeState {
        query: QueryName { namespace, name },
        phase,
        waiting_for,
        pending_tool_calls: pending,
        can_resume: resume.as_ref().is_some_and(|row| row.can_resume),
        blocked_on,
        conversation_checkpoint: Checkpoint { last_message_sequence, pending_tool_call },
    }))
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
