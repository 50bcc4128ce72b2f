//! What a Query's stream leaves waiting: its tool calls without a result, and a tool approval the executor
//! asked for without an answer. The stream is folded through the same translation the unified format uses,
//! so the state and the stream agree.

use serde_json::Value;

use super::model::{PendingToolApproval, PendingToolCall};
use crate::{
    db::StoreResult,
    streams::{
        ChunkStore,
        typed::EventType,
        unified::{self, ERROR, TOOL_APPROVAL_REQUEST, TOOL_APPROVAL_RESPONSE},
    },
    timestamp::iso_timestamp,
};

/// What stream `stream_id` leaves waiting.
#[derive(Debug, Default)]
pub struct Pending {
    /// `tool_call_start`s without a `tool_call_result`, oldest first.
    pub tool_calls: Vec<PendingToolCall>,
    /// The last `tool_approval_request`, unless a `tool_approval_response` of its task, the Query's end
    /// (`completed_query`), an error or the Query's output (it was resumed) came after it.
    pub tool_approval: Option<PendingToolApproval>,
}

/// Folds stream `stream_id` as stored now.
pub async fn pending(chunks: &ChunkStore, stream_id: &str) -> StoreResult<Pending> {
    let mut pending = Pending::default();
    for event in unified::replay(chunks, stream_id).await? {
        let text = |field: &str| event.data.get(field).and_then(Value::as_str).unwrap_or_default().to_owned();
        let optional = |field: &str| event.data.get(field).and_then(Value::as_str).map(str::to_owned);
        if runs_again(event.event) {
            // Output after the approval request: the Query was resumed (it writes its stream again after its
            // `/complete`), so the approval it waited for was given.
            pending.tool_approval = None;
        }
        match event.event {
            kind if kind == EventType::ToolCallStart.as_str() => pending.tool_calls.push(PendingToolCall {
                tool_call_id: text("tool_call_id"),
                tool_name: text("tool_name"),
                arguments: event.data.get("arguments").cloned().unwrap_or(Value::Null),
                since: iso_timestamp(event.at),
            }),
            kind if kind == EventType::ToolCallResult.as_str() => {
                let id = text("tool_call_id");
                pending.tool_calls.retain(|call| call.tool_call_id != id);
            }
            TOOL_APPROVAL_REQUEST => {
                pending.tool_approval = Some(PendingToolApproval {
                    task_id: text("taskId"),
                    tool_calls: event.data.get("toolCalls").cloned().unwrap_or(Value::Array(Vec::new())),
                    agent_name: optional("agentName"),
                    timeout: optional("timeout"),
                    on_timeout: optional("onTimeout"),
                    since: iso_timestamp(event.at),
                })
            }
            TOOL_APPROVAL_RESPONSE => {
                let task = text("taskId");
                pending.tool_approval.take_if(|approval| approval.task_id == task);
            }
            kind if kind == EventType::CompletedQuery.as_str() || kind == ERROR => pending.tool_approval = None,
            _ => {}
        }
    }
    Ok(pending)
}

/// Whether an event of kind `kind` is the Query's own output (what only a running Query writes).
fn runs_again(kind: &str) -> bool {
    [EventType::TextDelta, EventType::ToolCallStart, EventType::ToolCallResult].iter().any(|own| own.as_str() == kind)
}
