//! What the OpenAPI document says of an OTLP/JSON export: the fields [`super::otlp::from_json`] and
//! [`super::model::NewSpan::new`] read by hand (leniently, keeping each span as sent, refusing with
//! upstream's messages, which serde could not give). The test below holds the two alike.

use serde_json::Value;

/// An OTLP/JSON `ExportTraceServiceRequest` as `from_json` reads it, for the OpenAPI document (other fields
/// are ignored; a span's other fields are not kept).
#[derive(Debug, utoipa::ToSchema)]
#[schema(rename_all = "camelCase")]
#[expect(
    dead_code,
    reason = "the OpenAPI document's description of an OTLP/JSON export; `from_json` reads the body, and the test below holds the two alike"
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::{
        http::documented::{assert_documented, document_of, property, request_body, resolve},
        traces::{otlp::SPAN_FIELDS, router},
        validate::MAX_KEY_BYTES,
    };

    /// Every field `from_json` and `NewSpan::new` read, as they read it: the arrays walked, each attribute's
    /// key, and the span's fields kept as sent (`any`: `kind`, the times, `status` are stored whatever they
    /// hold; the times are indexed when a string or a number).
    const READS: &[(&str, &str)] = &[
        ("resourceSpans", "array"),
        ("resourceSpans[].resource", "object"),
        ("resourceSpans[].resource.attributes", "array"),
        ("resourceSpans[].resource.attributes[].key", "string"),
        ("resourceSpans[].resource.attributes[].value", "any"),
        ("resourceSpans[].scopeSpans", "array"),
        ("resourceSpans[].scopeSpans[].spans", "array"),
        ("resourceSpans[].scopeSpans[].spans[]", "object"),
        ("resourceSpans[].scopeSpans[].spans[].traceId", "string"),
        ("resourceSpans[].scopeSpans[].spans[].spanId", "string"),
        ("resourceSpans[].scopeSpans[].spans[].parentSpanId", "string"),
        ("resourceSpans[].scopeSpans[].spans[].name", "string"),
        ("resourceSpans[].scopeSpans[].spans[].kind", "any"),
        ("resourceSpans[].scopeSpans[].spans[].startTimeUnixNano", "any"),
        ("resourceSpans[].scopeSpans[].spans[].endTimeUnixNano", "any"),
        ("resourceSpans[].scopeSpans[].spans[].attributes", "array"),
        ("resourceSpans[].scopeSpans[].spans[].attributes[].key", "string"),
        ("resourceSpans[].scopeSpans[].spans[].attributes[].value", "any"),
        ("resourceSpans[].scopeSpans[].spans[].status", "any"),
    ];

    #[test]
    fn every_field_the_json_reader_reads_is_documented_alike() {
        let document = document_of(router());
        let body = request_body(&document, "post", "/v1/traces", "application/json");
        assert_documented(&document, body, READS);
        // What `NewSpan::new` takes as a trace id is what the document says: 1 to MAX_KEY_BYTES long.
        let trace_id = property(&document, body, "resourceSpans[].scopeSpans[].spans[].traceId").unwrap();
        assert_eq!(
            (trace_id["minLength"].as_u64(), trace_id["maxLength"].as_u64()),
            (Some(1), Some(MAX_KEY_BYTES as u64))
        );
        let span = property(&document, body, "resourceSpans[].scopeSpans[].spans[]").unwrap();
        let span = resolve(&document, span);
        assert_eq!(span["required"], json!(["traceId"]), "a span without a traceId is refused");
        // The fields the reader keeps of a span, and only those, are the documented properties.
        let mut kept: Vec<&str> = SPAN_FIELDS.into_iter().chain(["attributes", "status"]).collect();
        let mut documented: Vec<&str> = span["properties"].as_object().unwrap().keys().map(String::as_str).collect();
        kept.sort();
        documented.sort();
        assert_eq!(kept, documented, "the fields kept of a span are the documented ones");
    }
}
