//! The unified format of a stream (seed 002): every stored row becomes typed events
//! `{"event","timestamp","query","data"}`. OpenAI chunks are translated — `text_delta` from
//! `delta.content`, `tool_call_start` assembled from `delta.tool_calls` fragments, `completed_query` from
//! `ark.completedQuery`, `error` from an error chunk — and typed rows pass through. The same fold gives the
//! resume state its tool calls, so the stream and the state cannot disagree.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::{ChunkStore, model::ChunkRow, typed::EventType};
use crate::{db::StoreResult, timestamp::iso_timestamp};

/// The `event` of an error frame (an error chunk, or the broker's abort frame).
pub const ERROR: &str = "error";

/// Frames Ark's newest executor writes beside the OpenAI chunks, `{"type": …, …}` (its
/// `ark/executors/completions/streaming.go` at 1c5c368f): each is a typed event of its own name, its
/// `data` the frame's other fields as the executor wrote them (`taskId`, `toolCalls`, `timeout`, …).
pub const EXECUTOR_EVENTS: [&str; 3] = [TOOL_APPROVAL_REQUEST, TOOL_APPROVAL_RESPONSE, A2A_STATUS];
/// The executor stops for a person to approve tool calls (`taskId`, `toolCalls`, `timeout`, `onTimeout`,
/// `agentName`, `agentContext`); the Query then waits (`input-required`).
pub const TOOL_APPROVAL_REQUEST: &str = "tool_approval_request";
/// The approval's outcome (`taskId`, `action`: `approved` or `rejected`, `timestamp`).
pub const TOOL_APPROVAL_RESPONSE: &str = "tool_approval_response";
/// A remote A2A agent's interim status (`taskId`, `state`, `message`, `agentName`).
pub const A2A_STATUS: &str = "a2a_status";

/// One typed event of the unified stream.
#[derive(Debug, Clone, PartialEq)]
pub struct UnifiedEvent {
    /// Its type (`text_delta`, `tool_call_start`, …, or `error`).
    pub event: &'static str,
    /// When the row that produced it was stored.
    pub at: DateTime<Utc>,
    /// Its `data`.
    pub data: Value,
}

#[derive(Serialize)]
struct Frame<'a> {
    event: &'static str,
    timestamp: String,
    query: &'a str,
    data: &'a Value,
}

impl UnifiedEvent {
    /// The SSE frame's JSON for stream `query`: one line.
    pub fn frame(&self, query: &str) -> String {
        let frame = Frame { event: self.event, timestamp: iso_timestamp(self.at), query, data: &self.data };
        serde_json::to_string(&frame).expect("a frame serialises")
    }

    /// Whether the stream ends after it (`[DONE]` follows).
    pub fn ends_stream(&self) -> bool {
        self.event == ERROR
    }
}

/// A tool call whose fragments are still arriving.
#[derive(Debug)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Translates one stream's rows, in order, into typed events. Holds the tool calls being assembled.
#[derive(Debug, Default)]
pub struct Unifier {
    /// Calls being assembled, by (choice index, tool call index).
    calls: BTreeMap<(u64, u64), PartialCall>,
    /// Tool call ids already sent, so a call the writer also posted as `tool_call_start` is sent once.
    started: HashSet<String>,
}

impl Unifier {
    /// A unifier at the start of a stream.
    pub fn new() -> Self {
        Unifier::default()
    }

    /// The typed events `row` stands for (none for chunks that carry nothing of interest, e.g. a role).
    pub fn push(&mut self, row: &ChunkRow) -> Vec<UnifiedEvent> {
        let at = row.created_at;
        let mut out = Vec::new();
        if row.is_done {
            self.flush(None, at, &mut out);
            return out;
        }
        let Ok(mut value) = serde_json::from_str::<Value>(&row.chunk) else {
            return out;
        };
        match row.event() {
            Some(EventType::StreamAborted) => {
                // The writer is gone: calls it was still sending are as complete as they will get.
                self.flush(None, at, &mut out);
                out.push(error_event(&value, at));
            }
            Some(kind) => {
                let data = value.get_mut("data").map(Value::take).unwrap_or(Value::Null);
                let id = data.get("tool_call_id").and_then(Value::as_str).unwrap_or_default();
                if kind != EventType::ToolCallStart || self.started.insert(id.to_owned()) {
                    out.push(UnifiedEvent { event: kind.as_str(), at, data });
                }
            }
            None => self.translate(&value, at, &mut out),
        }
        out
    }

    /// Translates an OpenAI chunk, or an executor's frame. A content boundary (an empty `content` with
    /// `finish_reason`, which the executor sends between two remote artifacts) sends no text: the text
    /// before and after it reads on as one.
    fn translate(&mut self, chunk: &Value, at: DateTime<Utc>, out: &mut Vec<UnifiedEvent>) {
        if let Some((event, data)) = executor_event(chunk) {
            out.push(UnifiedEvent { event, at, data });
            return;
        }
        if is_error(chunk) {
            self.flush(None, at, out);
            out.push(error_event(chunk, at));
            return;
        }
        for (position, choice) in chunk.get("choices").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let choice_index = choice.get("index").and_then(Value::as_u64).unwrap_or(position as u64);
            let delta = choice.get("delta");
            if let Some(content) = delta.and_then(|d| d.get("content")).and_then(Value::as_str)
                && !content.is_empty()
            {
                out.push(UnifiedEvent { event: EventType::TextDelta.as_str(), at, data: json!({"content": content}) });
            }
            let fragments = delta.and_then(|d| d.get("tool_calls")).and_then(Value::as_array);
            for (position, fragment) in fragments.into_iter().flatten().enumerate() {
                self.fragment(choice_index, position as u64, fragment, at, out);
            }
            if choice.get("finish_reason").is_some_and(|reason| !reason.is_null()) {
                self.flush(Some(choice_index), at, out);
            }
        }
        if let Some(completed) = chunk.get("ark").and_then(|ark| ark.get("completedQuery"))
            && !completed.is_null()
        {
            self.flush(None, at, out);
            out.push(UnifiedEvent { event: EventType::CompletedQuery.as_str(), at, data: completed.clone() });
        }
    }

    /// Adds one `delta.tool_calls[]` fragment. A fragment for a slot not seen yet is the next call starting:
    /// earlier calls whose arguments are already complete JSON are sent then; the others (interleaved
    /// parallel calls) wait for `finish_reason`.
    fn fragment(
        &mut self,
        choice: u64,
        position: u64,
        fragment: &Value,
        at: DateTime<Utc>,
        out: &mut Vec<UnifiedEvent>,
    ) {
        let index = fragment.get("index").and_then(Value::as_u64).unwrap_or(position);
        let key = (choice, index);
        let id = fragment.get("id").and_then(Value::as_str).filter(|id| !id.is_empty());
        if let (Some(id), Some(call)) = (id, self.calls.get(&key))
            && !call.id.is_empty()
            && call.id != id
        {
            // A new call reusing the slot (a provider that restarts indexes): the old one is complete.
            let call = self.calls.remove(&key).expect("just seen");
            self.send(call, at, out);
        }
        if !self.calls.contains_key(&key) {
            let complete: Vec<(u64, u64)> = self
                .calls
                .iter()
                .filter(|((c, _), call)| *c == choice && serde_json::from_str::<Value>(&call.arguments).is_ok())
                .map(|(slot, _)| *slot)
                .collect();
            for slot in complete {
                let call = self.calls.remove(&slot).expect("just seen");
                self.send(call, at, out);
            }
            self.calls.insert(key, PartialCall { id: String::new(), name: String::new(), arguments: String::new() });
        }
        let call = self.calls.get_mut(&key).expect("just inserted");
        if let Some(id) = id {
            call.id = id.to_owned();
        }
        let function = fragment.get("function");
        if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str) {
            call.name.push_str(name);
        }
        if let Some(arguments) = function.and_then(|f| f.get("arguments")).and_then(Value::as_str) {
            call.arguments.push_str(arguments);
        }
    }

    /// Sends every call being assembled (of one choice, or of all), in index order.
    fn flush(&mut self, choice: Option<u64>, at: DateTime<Utc>, out: &mut Vec<UnifiedEvent>) {
        let slots: Vec<(u64, u64)> =
            self.calls.keys().filter(|(c, _)| choice.is_none_or(|choice| *c == choice)).copied().collect();
        for slot in slots {
            let call = self.calls.remove(&slot).expect("just listed");
            self.send(call, at, out);
        }
    }

    fn send(&mut self, call: PartialCall, at: DateTime<Utc>, out: &mut Vec<UnifiedEvent>) {
        // A call without an id (some providers send none) cannot be a duplicate of a posted one.
        if !call.id.is_empty() && !self.started.insert(call.id.clone()) {
            return;
        }
        let arguments = serde_json::from_str::<Value>(&call.arguments).unwrap_or(Value::String(call.arguments));
        let data = json!({"tool_call_id": call.id, "tool_name": call.name, "arguments": arguments});
        out.push(UnifiedEvent { event: EventType::ToolCallStart.as_str(), at, data });
    }
}

/// Every typed event of stream `stream_id` as stored now, in order (the stream read from its first row),
/// with the tool calls still being assembled at its end.
pub async fn replay(store: &ChunkStore, stream_id: &str) -> StoreResult<Vec<UnifiedEvent>> {
    let (mut unifier, mut events, mut after, mut last_at) = (Unifier::new(), Vec::new(), 0, None);
    loop {
        let page = store.stream_page(stream_id, after).await?;
        for row in &page.rows {
            events.extend(unifier.push(row));
            last_at = Some(row.created_at);
        }
        after = page.next;
        if page.caught_up {
            // Calls still being assembled are shown as they stand (their arguments raw if incomplete).
            if let Some(at) = last_at {
                unifier.flush(None, at, &mut events);
            }
            return Ok(events);
        }
    }
}

/// An executor's frame (one of [`EXECUTOR_EVENTS`]) as its event and data: its fields but `type`.
fn executor_event(chunk: &Value) -> Option<(&'static str, Value)> {
    let kind = chunk.get("type")?.as_str()?;
    let event = EXECUTOR_EVENTS.into_iter().find(|event| *event == kind)?;
    let mut data = chunk.as_object()?.clone();
    data.remove("type");
    Some((event, Value::Object(data)))
}

/// Whether a chunk is an error frame `{"error":{"message",…},…}`, after which upstream ends the stream.
pub fn is_error(chunk: &Value) -> bool {
    chunk.get("error").is_some_and(|error| error.is_object() && error.get("message").is_some())
}

/// The `error` event for an error chunk `{"error":{"message","type","code"},…}`.
pub fn error_event(chunk: &Value, at: DateTime<Utc>) -> UnifiedEvent {
    let error = chunk.get("error").and_then(Value::as_object).cloned().unwrap_or_else(Map::new);
    let field = |name: &str| error.get(name).cloned().unwrap_or(Value::Null);
    let data = json!({"message": field("message"), "type": field("type"), "code": field("code")});
    UnifiedEvent { event: ERROR, at, data }
}

#[cfg(test)]
#[path = "unified_tests.rs"]
mod tests;
