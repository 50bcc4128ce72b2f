//! The resume state's JSON (camelCase, the shape seed 002 sketches).

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::questions::model::QuestionStatus;

/// `GET /queries/{namespace}/{name}/state`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResumeState {
    /// Which Query.
    pub query: QueryName,
    /// `waiting` while a question of it is open or a tool approval is pending; otherwise `completed` once its
    /// stream was completed, else the latest `phase_change` in its stream (`running` when there is none).
    pub phase: String,
    /// The open question it waits on (the oldest), or null.
    pub waiting_for: Option<WaitingFor>,
    /// `tool_call_start`s of its stream without a `tool_call_result` (none once the stream completed).
    pub pending_tool_calls: Vec<PendingToolCall>,
    /// The tool approval Ark's executor asked for (`tool_approval_request` in its stream) and nobody gave
    /// yet: no `tool_approval_response` of its task, and the Query did not end since. Null otherwise.
    pub pending_tool_approval: Option<PendingToolApproval>,
    /// The question it is blocked on: the open one, else the latest closed one whose tool call has no
    /// result in the stream yet.
    pub blocked_on: Option<BlockedOn>,
    /// Whether the task it is blocked on has a result (answered, cancelled or expired).
    pub can_resume: bool,
    /// Where the conversation stands.
    pub conversation_checkpoint: Checkpoint,
}

/// Which Query.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueryName {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// What the Query waits on.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitingFor {
    /// The open question.
    pub question_id: String,
    /// Its MCP task.
    pub task_id: Option<Uuid>,
    /// The tool call that asked.
    pub tool_call_id: Option<String>,
    /// Since when (ISO 8601).
    pub since: String,
}

/// A tool call the LLM asked for that has no result yet.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingToolCall {
    /// The tool call.
    pub tool_call_id: String,
    /// The tool.
    pub tool_name: String,
    /// Its arguments: the parsed JSON, or the raw string.
    pub arguments: Value,
    /// Since when (ISO 8601).
    pub since: String,
}

/// A tool approval the executor waits for (its `tool_approval_request` frame).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingToolApproval {
    /// The executor's task that waits.
    pub task_id: String,
    /// The tool calls to approve, as the executor sent them (OpenAI's `{id, type, function: {name,
    /// arguments}}`).
    #[schema(value_type = Vec<Object>)]
    pub tool_calls: Value,
    /// The agent that would call them.
    pub agent_name: Option<String>,
    /// How long the executor waits, as it wrote it (a Go duration, `5m0s`).
    pub timeout: Option<String>,
    /// What happens then: `reject` or `proceed`.
    pub on_timeout: Option<String>,
    /// Since when (ISO 8601).
    pub since: String,
}

/// What blocks the Query.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockedOn {
    /// Always `question` (the only blocking kind the broker knows).
    #[serde(rename = "type")]
    #[schema(value_type = String, pattern = "^question$")]
    pub kind: &'static str,
    /// The question.
    pub question_id: String,
    /// Its MCP task.
    pub task_id: Option<Uuid>,
    /// The tool call that asked.
    pub tool_call_id: Option<String>,
    /// The question's status.
    #[schema(value_type = QuestionStatus)]
    pub status: String,
}

/// Where the conversation stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// The sequence number of the Query's last stored message (`GET /messages`), or null.
    pub last_message_sequence: Option<i64>,
    /// The pending tool call the Query is blocked on (else the latest pending one), or null.
    pub pending_tool_call: Option<PendingToolCall>,
}

/// The body of `PUT /queries/{namespace}/{name}/tool-calls/{toolCallId}`.
#[derive(Debug, serde::Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallMapping {
    /// The MCP task that answers the tool call: the `taskId` `ask_question` gave (an opaque string; one that
    /// names no task is 404).
    #[schema(min_length = 1, max_length = 512)]
    pub task_id: String,
}

/// The reply to `PUT /queries/{namespace}/{name}/tool-calls/{toolCallId}`: the mapping as recorded.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MappedToolCall {
    /// Which Query.
    pub query: QueryName,
    /// The tool call.
    pub tool_call_id: String,
    /// The task that answers it.
    pub task_id: Uuid,
    /// The task's question.
    pub question_id: String,
    /// The question's status.
    pub status: QuestionStatus,
}
