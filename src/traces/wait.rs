//! The human wait as a span of the asking Query's trace: the W3C `traceparent` an `ask_question` carries (MCP
//! `_meta` or the HTTP header), and the span `execute_tool ask_question` (OpenTelemetry's GenAI conventions for
//! tool execution) the question's close writes, in upstream's stored form of a protobuf export.

use axum::http::HeaderMap;
use chrono::{DateTime, Utc};
use opentelemetry_proto::tonic::{
    common::v1::{AnyValue, KeyValue, any_value},
    trace::v1::{Span, Status, span::SpanKind, status::StatusCode},
};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::otlp::stored_span;
use crate::config::Config;

/// The tool whose wait the span measures.
const TOOL: &str = "ask_question";
/// `service.name` of the span's resource.
const SERVICE: &str = "ark-broker";

/// A W3C trace context's `traceparent`, as read (version 00's fields; later versions' extra fields ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace.
    pub trace_id: [u8; 16],
    /// The caller's span: the wait's parent.
    pub parent_id: [u8; 8],
    /// Whether the caller records the trace (flag `01`).
    pub sampled: bool,
}

impl TraceParent {
    /// Reads a `traceparent` as W3C Trace Context says a receiver must: anything malformed (a bad length,
    /// upper-case or non-hex digits, version `ff`, all-zero ids, version 00 with more fields) is `None`, to be
    /// ignored, never an error.
    pub fn parse(value: &str) -> Option<Self> {
        let value = value.trim();
        let lower_hex = |s: &str| s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        let fields: Vec<&str> = value.splitn(5, '-').collect();
        let &[version, trace, parent, flags] = &fields[..fields.len().min(4)] else { return None };
        if version.len() != 2 || !lower_hex(version) || version == "ff" {
            return None;
        }
        if (version == "00" && fields.len() > 4) || trace.len() != 32 || parent.len() != 16 || flags.len() != 2 {
            return None;
        }
        if !lower_hex(trace) || !lower_hex(parent) || !lower_hex(flags) {
            return None;
        }
        let trace_id: [u8; 16] = hex::decode(trace).ok()?.try_into().ok()?;
        let parent_id: [u8; 8] = hex::decode(parent).ok()?.try_into().ok()?;
        if trace_id == [0; 16] || parent_id == [0; 8] {
            return None;
        }
        let sampled = u8::from_str_radix(flags, 16).ok()? & 1 == 1;
        Some(TraceParent { trace_id, parent_id, sampled })
    }

    /// The version-00 form, as remembered with the question.
    pub fn header_value(&self) -> String {
        format!("00-{}-{}-{:02x}", hex::encode(self.trace_id), hex::encode(self.parent_id), u8::from(self.sampled))
    }
}

/// What a question asked with a trace context keeps until it closes: the caller's context, and how long the
/// span will be kept (the asking replica's `--span-ttl-seconds`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitTrace {
    /// The caller's context.
    pub parent: TraceParent,
    /// Seconds the span is kept once written.
    pub span_ttl_seconds: i64,
}

impl WaitTrace {
    /// The wait to record for a caller whose context is `traceparent`: none without one, for a malformed one,
    /// or when the caller does not record the trace (not sampled: the span would hang off a parent nobody has).
    pub fn of(traceparent: Option<&str>, config: &Config) -> Option<Self> {
        let parent = TraceParent::parse(traceparent?)?;
        parent.sampled.then_some(WaitTrace { parent, span_ttl_seconds: config.span_ttl_seconds as i64 })
    }

    /// The wait of a request whose `traceparent` header is its context (REST `POST /questions`, an MCP
    /// request); several such headers or a value that is no text count as none.
    pub fn from_headers(headers: &HeaderMap, config: &Config) -> Option<Self> {
        let mut values = headers.get_all("traceparent").iter();
        let (Some(value), None) = (values.next(), values.next()) else { return None };
        Self::of(value.to_str().ok(), config)
    }
}

/// How a question ended, as the span says it: for whom it waited and who ended the wait.
#[derive(Debug, Clone)]
pub struct ClosedWait<'a> {
    /// The question.
    pub question_id: &'a str,
    /// Who was asked (`ark://…`).
    pub recipient: &'a str,
    /// Who asked.
    pub sender: &'a str,
    /// `answered`, `declined`, `expired` or `cancelled`.
    pub status: &'a str,
    /// Who answered or declined (`system:timeout` for a default answer at the timeout).
    pub answered_by: Option<&'a str>,
    /// Through what it was answered or declined (`api`, `page`, `slack:…`, `github:…`, `timeout`), or why it
    /// was cancelled (`query-deleted`).
    pub via: Option<&'a str>,
    /// The LLM tool call the question answers.
    pub tool_call_id: Option<&'a str>,
    /// The asking Query's name and namespace.
    pub query_name: Option<&'a str>,
    pub query_namespace: Option<&'a str>,
}

/// The remembered wait of a question that just closed, with what its close transaction knows.
#[derive(Debug, Clone)]
pub struct Remembered {
    /// The caller's context (as [`TraceParent::header_value`] wrote it).
    pub trace_parent: String,
    /// When the question was asked.
    pub asked_at: DateTime<Utc>,
    /// When it closed (its close transaction's time, as `closedAt`).
    pub closed_at: DateTime<Utc>,
    /// The session of the asking Query, when one has it.
    pub session_id: Option<String>,
}

/// The wait's span in upstream's stored form of a protobuf export (base64 ids, enum names, 64-bit integers as
/// strings, the resource flattened), so it sits in the trace the caller's own protobuf-exported spans are
/// stored under. `None` when the remembered context no longer reads.
pub fn span(remembered: &Remembered, closed: &ClosedWait<'_>) -> Option<Value> {
    let parent = TraceParent::parse(&remembered.trace_parent)?;
    let text = |key: &str, value: &str| KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(any_value::Value::StringValue(value.into())) }),
        ..Default::default()
    };
    let mut attributes = vec![
        text("gen_ai.operation.name", "execute_tool"),
        text("gen_ai.tool.name", TOOL),
        text("ark.question.id", closed.question_id),
        text("ark.question.recipient", closed.recipient),
        text("ark.question.sender", closed.sender),
        text("ark.question.status", closed.status),
    ];
    let optional = [
        ("gen_ai.tool.call.id", closed.tool_call_id),
        ("ark.question.answered_by", closed.answered_by),
        ("ark.question.via", closed.via),
        ("query.name", closed.query_name),
        ("ark.query.namespace", closed.query_namespace),
        ("ark.session.id", remembered.session_id.as_deref()),
    ];
    attributes.extend(optional.into_iter().filter_map(|(key, value)| Some(text(key, value?))));
    // Expired and cancelled waits failed: nobody answered. An answer, or a refusal, is the tool's outcome.
    let failed = matches!(closed.status, "expired" | "cancelled");
    if failed {
        attributes.push(text("error.type", closed.status));
    }
    let status = Status {
        code: (if failed { StatusCode::Error } else { StatusCode::Unset }) as i32,
        message: if failed { format!("question {} before anyone answered it", closed.status) } else { String::new() },
    };
    let nanos = |at: DateTime<Utc>| at.timestamp_nanos_opt().map_or(0, |n| n.max(0) as u64);
    let span = Span {
        trace_id: parent.trace_id.to_vec(),
        span_id: fresh_span_id().to_vec(),
        parent_span_id: parent.parent_id.to_vec(),
        name: format!("execute_tool {TOOL}"),
        kind: SpanKind::Internal as i32,
        start_time_unix_nano: nanos(remembered.asked_at),
        end_time_unix_nano: nanos(remembered.closed_at.max(remembered.asked_at)),
        attributes,
        status: Some(status),
        ..Default::default()
    };
    let resource: Map<String, Value> =
        [("service.name".to_owned(), json!(SERVICE)), ("service.version".to_owned(), json!(env!("CARGO_PKG_VERSION")))]
            .into_iter()
            .collect();
    Some(stored_span(&span, &resource))
}

/// A random span id (never all zeros): 64 random bits of a v4 UUID (its two halves folded, so the version and
/// variant bits, at different places in each half, do not show).
fn fresh_span_id() -> [u8; 8] {
    loop {
        let random = Uuid::new_v4().as_u128();
        let id = (random as u64) ^ ((random >> 64) as u64);
        if id != 0 {
            return id.to_be_bytes();
        }
    }
}

#[cfg(test)]
#[path = "wait_tests.rs"]
mod tests;
