//! `POST /v1/traces` bodies into spans in upstream's stored form. Protobuf (`application/x-protobuf`, what
//! the controller's and the Python SDK's exporters send) is decoded with the OpenTelemetry proto types and
//! written the way upstream's protobufjs `toObject({longs: String, enums: String, bytes: String, defaults:
//! true})` writes it: base64 ids (root spans get `parentSpanId: ""`), enum names, 64-bit integers as
//! strings. Any other body is OTLP/JSON and kept as sent. Either way only upstream's span fields are kept,
//! with the resource's attributes flattened into `resource`.

use base64::{Engine, engine::general_purpose::STANDARD};
use opentelemetry_proto::tonic::{
    collector::trace::v1::ExportTraceServiceRequest,
    common::v1::{AnyValue, KeyValue, any_value},
    trace::v1::{Span, span::SpanKind, status::StatusCode},
};
use prost::Message;
use serde_json::{Map, Value, json};

/// Why a body is refused; the text is upstream's legacy `{"error": "…"}` message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OtlpError {
    /// Not an `ExportTraceServiceRequest` in protobuf.
    #[error("Failed to decode protobuf data")]
    Protobuf,
    /// JSON without a `resourceSpans` array (or not JSON at all).
    #[error("Invalid OTLP request format. Expected resourceSpans array.")]
    Format,
    /// A span the broker cannot index.
    #[error("Invalid OTLP request format. {0}")]
    Span(String),
}

/// Reads a protobuf export request.
pub fn from_protobuf(body: &[u8]) -> Result<Vec<Value>, OtlpError> {
    let request = ExportTraceServiceRequest::decode(body).map_err(|_| OtlpError::Protobuf)?;
    let mut spans = Vec::new();
    for resource_spans in request.resource_spans {
        let resource = resource_spans.resource.map(|r| r.attributes).unwrap_or_default();
        let resource: Map<String, Value> =
            resource.iter().map(|kv| (kv.key.clone(), flatten(&key_value(kv)["value"]))).collect();
        for scope_spans in resource_spans.scope_spans {
            spans.extend(scope_spans.spans.iter().map(|span| stored_span(span, &resource)));
        }
    }
    Ok(spans)
}

/// A protobuf span in upstream's stored form, with `resource`'s attributes (already flattened).
pub(super) fn stored_span(span: &Span, resource: &Map<String, Value>) -> Value {
    let kind = SpanKind::try_from(span.kind).map_or_else(|_| json!(span.kind), |k| json!(k.as_str_name()));
    let status = span.status.as_ref().map_or(Value::Null, |status| {
        let code = StatusCode::try_from(status.code).map_or_else(|_| json!(status.code), |c| json!(c.as_str_name()));
        json!({"message": status.message, "code": code})
    });
    json!({
        "traceId": STANDARD.encode(&span.trace_id),
        "spanId": STANDARD.encode(&span.span_id),
        "parentSpanId": STANDARD.encode(&span.parent_span_id),
        "name": span.name,
        "kind": kind,
        "startTimeUnixNano": span.start_time_unix_nano.to_string(),
        "endTimeUnixNano": span.end_time_unix_nano.to_string(),
        "attributes": span.attributes.iter().map(key_value).collect::<Vec<_>>(),
        "status": status,
        "resource": resource,
    })
}

fn key_value(kv: &KeyValue) -> Value {
    json!({"key": kv.key, "value": kv.value.as_ref().map_or(Value::Null, any_value)})
}

/// An AnyValue as protobufjs writes it: only the field that is set (a oneof gets no defaults).
fn any_value(value: &AnyValue) -> Value {
    use any_value::Value as V;
    match &value.value {
        Some(V::StringValue(s)) => json!({"stringValue": s}),
        Some(V::BoolValue(b)) => json!({"boolValue": b}),
        Some(V::IntValue(i)) => json!({"intValue": i.to_string()}),
        Some(V::DoubleValue(d)) => json!({"doubleValue": d}),
        Some(V::ArrayValue(array)) => {
            json!({"arrayValue": {"values": array.values.iter().map(any_value).collect::<Vec<_>>()}})
        }
        Some(V::KvlistValue(list)) => {
            json!({"kvlistValue": {"values": list.values.iter().map(key_value).collect::<Vec<_>>()}})
        }
        Some(V::BytesValue(bytes)) => json!({"bytesValue": STANDARD.encode(bytes)}),
        // Field 8 is for profiles only; other signals treat it as absent.
        Some(V::StringValueStrindex(_)) | None => json!({}),
    }
}

/// A resource attribute's value as upstream flattens it: the scalar itself, else the value as it is.
fn flatten(value: &Value) -> Value {
    ["stringValue", "intValue", "doubleValue", "boolValue", "arrayValue", "kvlistValue"]
        .iter()
        .find_map(|field| value.get(field).cloned())
        .unwrap_or_else(|| value.clone())
}

/// The fields of an OTLP/JSON span kept as sent (with its `attributes` and `status`); the OpenAPI document's
/// `OtlpSpan` lists the same.
pub(super) const SPAN_FIELDS: [&str; 7] =
    ["traceId", "spanId", "parentSpanId", "name", "kind", "startTimeUnixNano", "endTimeUnixNano"];

/// Reads an OTLP/JSON export request, keeping each span's fields as sent.
pub fn from_json(body: &[u8]) -> Result<Vec<Value>, OtlpError> {
    let body: Value = serde_json::from_slice(body).map_err(|_| OtlpError::Format)?;
    let resource_spans = body.get("resourceSpans").and_then(Value::as_array).ok_or(OtlpError::Format)?;
    let mut spans = Vec::new();
    for (r, resource_spans) in resource_spans.iter().enumerate() {
        let resource: Map<String, Value> =
            array_at(resource_spans, &["resource", "attributes"], || format!("resourceSpans.{r}"))?
                .iter()
                .filter_map(|kv| Some((kv.get("key")?.as_str()?.to_owned(), flatten(kv.get("value")?))))
                .collect();
        for (s, scope_spans) in
            array_at(resource_spans, &["scopeSpans"], || format!("resourceSpans.{r}"))?.iter().enumerate()
        {
            for (n, span) in
                array_at(scope_spans, &["spans"], || format!("resourceSpans.{r}.scopeSpans.{s}"))?.iter().enumerate()
            {
                let Some(span) = span.as_object() else {
                    return Err(OtlpError::Span(format!(
                        "resourceSpans.{r}.scopeSpans.{s}.spans.{n}: expected object"
                    )));
                };
                let mut stored = Map::new();
                for field in SPAN_FIELDS {
                    if let Some(value) = span.get(field).filter(|v| !v.is_null()) {
                        stored.insert(field.into(), value.clone());
                    }
                }
                let attributes: Vec<Value> = match span.get("attributes") {
                    Some(Value::Array(attributes)) => {
                        attributes.iter().map(|kv| json!({"key": kv.get("key"), "value": kv.get("value")})).collect()
                    }
                    _ => Vec::new(),
                };
                stored.insert("attributes".into(), attributes.into());
                if let Some(status) = span.get("status").filter(|v| !v.is_null()) {
                    stored.insert("status".into(), status.clone());
                }
                stored.insert("resource".into(), resource.clone().into());
                spans.push(Value::Object(stored));
            }
        }
    }
    Ok(spans)
}

/// The array at `path` under `value` (absent counts as empty); anything else is refused, naming where.
fn array_at<'a>(value: &'a Value, path: &[&str], place: impl Fn() -> String) -> Result<&'a [Value], OtlpError> {
    match path.iter().try_fold(value, |value, step| value.get(step)) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(OtlpError::Span(format!("{}.{}: expected array", place(), path.join(".")))),
    }
}

#[cfg(test)]
#[path = "otlp_tests.rs"]
mod tests;
