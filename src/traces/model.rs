//! A span as stored (its JSON in upstream's form plus the columns copied out of it) and as fan-out carries
//! it, and a trace as `/traces` serves it.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, value::RawValue};

use super::otlp::OtlpError;
use crate::validate;

/// A span about to be stored.
#[derive(Debug, Clone)]
pub struct NewSpan {
    /// The span in upstream's stored form.
    pub span: Value,
    /// `traceId`.
    pub trace_id: String,
    /// `spanId`.
    pub span_id: Option<String>,
    /// `parentSpanId` (`""` for a root span from protobuf).
    pub parent_span_id: Option<String>,
    /// `name`.
    pub name: Option<String>,
    /// Attribute `ark.session.id`, as `{stringValue}` or a plain string.
    pub session_id: Option<String>,
    /// Attribute `query.name`.
    pub query_name: Option<String>,
    /// `startTimeUnixNano`.
    pub start_time: Option<DateTime<Utc>>,
    /// `endTimeUnixNano`.
    pub end_time: Option<DateTime<Utc>>,
}

impl NewSpan {
    /// Copies the indexed fields out of a stored span; a span without a trace id cannot be stored.
    pub fn new(span: Value) -> Result<Self, OtlpError> {
        let text = |field: &str| span.get(field).and_then(Value::as_str).map(str::to_owned);
        let trace_id = text("traceId")
            .filter(|id| !id.is_empty())
            .ok_or_else(|| OtlpError::Span("Every span needs a traceId string.".into()))?;
        if validate::key("traceId", &trace_id).is_err() || validate::contains_nul(&span) {
            return Err(OtlpError::Span("Span ids must be short and text must not contain NUL.".into()));
        }
        Ok(NewSpan {
            span_id: text("spanId"),
            parent_span_id: text("parentSpanId"),
            name: text("name"),
            session_id: attribute(&span, "ark.session.id"),
            query_name: attribute(&span, "query.name"),
            start_time: nanos(span.get("startTimeUnixNano")),
            end_time: nanos(span.get("endTimeUnixNano")),
            trace_id,
            span,
        })
    }
}

/// A string attribute, whether written as `{"stringValue": …}` or as a plain string (upstream's
/// `spanMatchesSessionId`).
pub fn attribute(span: &Value, key: &str) -> Option<String> {
    let attribute =
        span.get("attributes")?.as_array()?.iter().find(|a| a.get("key").and_then(Value::as_str) == Some(key))?;
    let value = attribute.get("value")?;
    value.get("stringValue").unwrap_or(value).as_str().map(str::to_owned)
}

/// Nanoseconds since the epoch (a string, as stored, or a number); 0 means unset.
fn nanos(value: Option<&Value>) -> Option<DateTime<Utc>> {
    let nanos = match value? {
        Value::String(s) => s.parse::<i64>().ok()?,
        Value::Number(n) => n.as_i64()?,
        _ => return None,
    };
    (nanos > 0).then(|| DateTime::from_timestamp_nanos(nanos))
}

/// A stored span as readers get it.
#[derive(Debug)]
pub struct SpanRecord {
    /// The span's JSON text.
    pub span: Box<RawValue>,
    /// Its trace.
    pub trace_id: String,
    /// Its session, when it names one.
    pub session_id: Option<String>,
    /// Its place in the global spans feed.
    pub sequence: i64,
    /// Its position among its trace's spans.
    pub position: i64,
    /// The transaction that wrote it.
    pub tx: i64,
    /// Its size in bytes.
    pub bytes: i32,
}

crate::feed_row!(SpanRecord, trace_id);

/// A trace as `/traces` serves it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Trace {
    /// The trace id.
    pub trace_id: String,
    /// Its spans, in the order they arrived, in upstream's stored form (protobuf spans: base64 ids, enum
    /// names, 64-bit integers as strings; JSON spans as sent).
    #[schema(value_type = Vec<Object>)]
    pub spans: Vec<Box<RawValue>>,
}

/// `POST /v1/traces`'s reply: an empty object, as OTLP/HTTP's `ExportTraceServiceResponse` in JSON.
#[derive(Debug, Default, Serialize, utoipa::ToSchema)]
pub struct Exported {}

/// What a 400 of `POST /v1/traces` carries: upstream's legacy body when the export cannot be read, the API's
/// error body when the request body cannot be (a broken gzip stream).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum ExportRefused {
    /// The export cannot be read.
    Legacy(LegacyError),
    /// The body cannot be read.
    Body(crate::error::ErrorBody),
}

/// Upstream's legacy error body of `POST /v1/traces`: `{"error":"…"}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LegacyError {
    /// What was wrong with the export.
    pub error: String,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_indexed_columns_come_from_upstreams_span_fields() {
        let span = json!({"traceId": "t", "spanId": "s", "parentSpanId": "", "name": "n",
                          "startTimeUnixNano": "1763892000123456789", "endTimeUnixNano": 0,
                          "attributes": [{"key": "ark.session.id", "value": {"stringValue": "s-1"}},
                                         {"key": "query.name", "value": "q"}]});
        let new = NewSpan::new(span).unwrap();
        assert_eq!((new.session_id.as_deref(), new.query_name.as_deref()), (Some("s-1"), Some("q")));
        assert_eq!(new.start_time.unwrap().timestamp_nanos_opt(), Some(1_763_892_000_123_456_789));
        assert_eq!(new.end_time, None);
        assert!(NewSpan::new(json!({"spanId": "s"})).is_err());
    }
}
