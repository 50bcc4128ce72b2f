//! The tool calls of a Query's stream still waiting for a result: the stream folded through the same
//! translation the unified format uses, so the state and the stream agree on every call.

use serde_json::Value;

use super::model::PendingToolCall;
use crate::{
    db::StoreResult,
    http::reply::iso_timestamp,
    streams::{ChunkStore, typed::EventType, unified::Unifier},
};

/// `tool_call_start`s of stream `stream_id` without a `tool_call_result`, oldest first.
pub async fn pending_tool_calls(chunks: &ChunkStore, stream_id: &str) -> StoreResult<Vec<PendingToolCall>> {
    let mut unifier = Unifier::new();
    let mut pending: Vec<PendingToolCall> = Vec::new();
    let mut after = 0;
    loop {
        let page = chunks.stream_page(stream_id, after).await?;
        for row in &page.rows {
            for event in unifier.push(row) {
                let id = || event.data.get("tool_call_id").and_then(Value::as_str).unwrap_or_default().to_owned();
                if event.event == EventType::ToolCallStart.as_str() {
                    let call = PendingToolCall {
                        tool_call_id: id(),
                        tool_name: event.data.get("tool_name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                        arguments: event.data.get("arguments").cloned().unwrap_or(Value::Null),
                        since: iso_timestamp(event.at),
                    };
                    pending.push(call);
                } else if event.event == EventType::ToolCallResult.as_str() {
                    let id = id();
                    pending.retain(|call| call.tool_call_id != id);
                }
            }
        }
        after = page.next;
        if page.caught_up {
            break;
        }
    }
    Ok(pending)
}
