//! The resume state's JSON (camelCase, the shape seed 002 sketches).

use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

/// `GET /queries/{namespace}/{name}/state`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeState {
    pub query: QueryName,
    /// `waiting` while a question of it is open; otherwise `completed` once its stream was completed, else
    /// the latest `phase_change` in its stream (`running` when there is none).
    pub phase: String,
    /// The open question it waits on (the oldest), or null.
    pub waiting_for: Option<WaitingFor>,
    /// `tool_call_start`s of its stream without a `tool_call_result` (none once the stream completed).
    pub pending_tool_calls: Vec<PendingToolCall>,
    /// The question it is blocked on: the open one, else the latest closed one whose tool call has no
    /// result in the stream yet.
    pub blocked_on: Option<BlockedOn>,
    /// Whether the task it is blocked on has a result (answered, cancelled or expired).
    pub can_resume: bool,
    pub conversation_checkpoint: Checkpoint,
}

/// Which Query.
#[derive(Debug, Serialize)]
pub struct QueryName {
    pub namespace: String,
    pub name: String,
}

/// What the Query waits on.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitingFor {
    pub question_id: String,
    pub task_id: Option<Uuid>,
    pub tool_call_id: Option<String>,
    pub since: String,
}

/// A tool call the LLM asked for that has no result yet.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingToolCall {
    pub tool_call_id: String,
    pub tool_name: String,
    pub arguments: Value,
    pub since: String,
}

/// What blocks the Query.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockedOn {
    /// Always `question` (the only blocking kind the broker knows).
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub question_id: String,
    pub task_id: Option<Uuid>,
    pub tool_call_id: Option<String>,
    /// The question's status: `pending`, `answered`, `cancelled` or `expired`.
    pub status: String,
}

/// Where the conversation stands.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// The sequence number of the Query's last stored message (`GET /messages`), or null.
    pub last_message_sequence: Option<i64>,
    /// The pending tool call the Query is blocked on (else the latest pending one), or null.
    pub pending_tool_call: Option<PendingToolCall>,
}

/// The body of `PUT /queries/{namespace}/{name}/tool-calls/{toolCallId}`.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallMapping {
    pub task_id: String,
}
