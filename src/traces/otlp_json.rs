//! What the OpenAPI document says of an OTLP/JSON export: the fields [`super::otlp::from_json`] and
//! [`super::model::NewSpan::new`] read by hand (leniently, keeping each span as sent, refusing with
//! upstream's messages, which serde could not give).

use serde_json::Value;

/// An OTLP/JSON `ExportTraceServiceRequest` as `from_json` reads it, for the OpenAPI document (other fields
/// are ignored; a span's other fields are not kept).
#[derive(Debug, utoipa::ToSchema)]
#[schema(rename_all = "camelCase")]
#[expect(
    dead_code,
    reason = "the OpenAPI document's description of an OTLP/JSON export; `from_json` reads the body"
)]
pub struct OtlpJson {
    /// One entry per resource.
    resource_spans: Vec<OtlpResourceSpans>,
}

/// `resourceSpans[]`.
#[derive(Debug, utoipa::ToSchema)]
#[schema(rename_all = "camelCase")]
#[expect(dead_code, reason = "for the OpenAPI document only, as `OtlpJson`")]
pub struct OtlpResourceSpans {
    /// The resource; its attributes are flattened into each span's `resource`.
    resource: Option<OtlpResource>,
    /// One entry per instrumentation scope.
    scope_spans: Option<Vec<OtlpScopeSpans>>,
}

/// `resourceSpans[].resource`.
#[derive(Debug, utoipa::ToSchema)]
#[expect(dead_code, reason = "for the OpenAPI document only, as `OtlpJson`")]
pub struct OtlpResource {
    /// `{key, value}` pairs.
    attributes: Option<Vec<OtlpKeyValue>>,
}

/// `resourceSpans[].scopeSpans[]`.
#[derive(Debug, utoipa::ToSchema)]
#[expect(dead_code, reason = "for the OpenAPI document only, as `OtlpJson`")]
pub struct OtlpScopeSpans {
    /// The spans.
    spans: Option<Vec<OtlpSpan>>,
}

/// A span; these fields are kept.
#[derive(Debug, utoipa::ToSchema)]
#[schema(rename_all = "camelCase")]
#[expect(dead_code, reason = "for the OpenAPI document only, as `OtlpJson`")]
pub struct OtlpSpan {
    /// Required: the trace.
    #[schema(min_length = 1, max_length = 512)]
    trace_id: String,
    /// The span.
    span_id: Option<String>,
    /// Its parent.
    parent_span_id: Option<String>,
    /// What it measured.
    name: Option<String>,
    /// `SPAN_KIND_…` or its number.
    kind: Option<Value>,
    /// Nanoseconds since the epoch, as a string (or a number).
    start_time_unix_nano: Option<Value>,
    /// Nanoseconds since the epoch, as a string (or a number).
    end_time_unix_nano: Option<Value>,
    /// `{key, value}` pairs (`ark.session.id` files it under a session).
    attributes: Option<Vec<OtlpKeyValue>>,
    /// Its status.
    status: Option<Value>,
}

/// An attribute.
#[derive(Debug, utoipa::ToSchema)]
#[expect(dead_code, reason = "for the OpenAPI document only, as `OtlpJson`")]
pub struct OtlpKeyValue {
    /// Its key.
    key: String,
    /// `{"stringValue": …}` and the like, or a plain value.
    value: Value,
}

