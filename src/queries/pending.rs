//! The tool calls of a Query's stream still waiting for a result: the stream folded through the same
//! translation the unified format uses, so the state and the stream agree on every call.

use serde_json::Value;

use super::model::PendingToolCall;
use crate::{
    db::StoreResult,
    streams::{ChunkStore, typed::EventType, unified},
    timestamp::iso_timestamp,
};

/// `tool_call_start`s of stream `stream_id` without a `tool_call_result`, oldest first.
pub async fn pending_tool_calls(chunks: &ChunkStore, stream_id: &str) -> StoreResult<Vec<PendingToolCall>> {
    let mut pending: Vec<PendingToolCall> = Vec::new();
    for event in unified::replay(chunks, stream_id).await? {
        let text = |field: &str| event.data.get(field).and_then(Value::as_str).unwrap_or_default().to_owned();
        if event.event == EventType::ToolCallStart.as_str() {
            pending.push(PendingToolCall {
                tool_call_id: text("tool_call_id"),
                tool_name: text("tool_name"),
                arguments: event.data.get("arguments").cloned().unwrap_or(Value::Null),
                since: iso_timestamp(event.at),
            });
        } else if event.event == EventType::ToolCallResult.as_str() {
            let id = text("tool_call_id");
            pending.retain(|call| call.tool_call_id != id);
        }
    }
    Ok(pending)
}
