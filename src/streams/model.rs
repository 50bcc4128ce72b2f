//! The shapes of chunk streams: stored rows, upstream's raw BrokerItem, and the replies of the write routes.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::typed::EventType;
use crate::timestamp::iso_timestamp;

/// What the completion marker's chunk reads as in raw pages and the global watch.
pub const DONE: &str = "[DONE]";

/// One stored chunk (or completion marker) of a stream.
#[derive(Debug, Clone)]
pub struct ChunkRow {
    /// Position in the global chunk feed (upstream's `sequenceNumber`).
    pub sequence: i64,
    /// The stream (query name).
    pub stream_id: String,
    /// Position within its stream: 1, 2, 3, … in commit order.
    pub position: i64,
    /// The id of the transaction that wrote it.
    pub tx: i64,
    /// The chunk's JSON text, exactly as received.
    pub chunk: String,
    /// Whether this is the completion marker.
    pub is_done: bool,
    /// When it was stored.
    pub created_at: DateTime<Utc>,
    /// The chunk's size in bytes.
    pub bytes: i32,
    /// The typed event's type; `None` for OpenAI chunks and the completion marker.
    pub event_type: Option<String>,
}

crate::feed_row!(ChunkRow, stream_id);

impl ChunkRow {
    /// The typed event this row holds, if it is one.
    pub fn event(&self) -> Option<EventType> {
        self.event_type.as_deref().and_then(EventType::parse)
    }

    /// Whether OpenAI-format readers see it: chunks, the completion marker and the abort frame.
    pub fn is_openai_visible(&self) -> bool {
        self.event_type.is_none() || self.event().is_some_and(EventType::is_openai_visible)
    }
}

/// One posted NDJSON line on its way to the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The line's JSON text.
    pub text: String,
    /// Its typed event's type, when it is one.
    pub event: Option<EventType>,
}

/// Upstream's raw item `{"sequenceNumber","timestamp","data":{"queryId","chunk"[,"complete"]}}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct BrokerItem {
    /// Its position in the global chunk feed; the page cursor.
    #[serde(rename = "sequenceNumber")]
    sequence_number: i64,
    /// When it was stored (ISO 8601).
    timestamp: String,
    /// The chunk and its stream.
    data: BrokerItemData,
}

/// What a [`BrokerItem`] carries.
#[derive(Debug, Serialize, ToSchema)]
pub struct BrokerItemData {
    /// The stream (the Query's name).
    #[serde(rename = "queryId")]
    query_id: String,
    /// The chunk as posted (`"[DONE]"` for the completion marker).
    #[schema(value_type = serde_json::Value)]
    chunk: Box<RawValue>,
    /// `true` on the completion marker (absent otherwise).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    complete: bool,
}

/// The reply to `POST /stream/{id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Processed {
    /// Always `stream_processed`.
    #[schema(value_type = String, pattern = "^stream_processed$")]
    pub status: &'static str,
    /// The stream.
    pub query: String,
    /// Lines handed over: every complete line of the body.
    pub chunks_received: usize,
    /// Lines stored: always the request's first ones.
    pub chunks_stored: usize,
    /// Lines skipped: not JSON, too long, a typed event without its fields, or what Postgres cannot store.
    pub invalid_lines: u64,
}

/// The reply to `POST /stream/{id}/complete`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Completed {
    /// Whether this call completed it or an earlier one had.
    pub status: CompletionStatus,
    /// The stream.
    pub query: String,
}

/// [`Completed::status`].
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CompletionStatus {
    /// The marker was appended now.
    Completed,
    /// It had been completed before.
    AlreadyCompleted,
}

impl BrokerItem {
    /// The item for a stored row.
    pub fn from_row(row: ChunkRow) -> Self {
        let chunk = RawValue::from_string(row.chunk).unwrap_or_else(|_| null_raw());
        BrokerItem {
            sequence_number: row.sequence,
            timestamp: iso_timestamp(row.created_at),
            data: BrokerItemData { query_id: row.stream_id, chunk, complete: row.is_done },
        }
    }

    /// Its sequence, the page cursor.
    pub fn sequence(&self) -> i64 {
        self.sequence_number
    }
}

fn null_raw() -> Box<RawValue> {
    RawValue::from_string("null".to_owned()).expect("null is JSON")
}

/// How `POST /stream/{id}/complete` went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// The marker was appended now.
    Completed,
    /// It had been completed before.
    AlreadyCompleted,
    /// No chunk was ever written to it.
    NotFound,
}
