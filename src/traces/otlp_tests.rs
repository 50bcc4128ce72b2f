//! The stored form of spans, from protobuf and from JSON, checked against what upstream's protobufjs
//! conversion writes.

use opentelemetry_proto::tonic::{
    common::v1::{ArrayValue, KeyValueList},
    resource::v1::Resource,
    trace::v1::{ResourceSpans, ScopeSpans, Status},
};
use serde_json::json;

use super::*;

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
}

#[test]
fn protobuf_spans_are_stored_as_upstreams_protobufjs_writes_them() {
    use any_value::Value as V;
    let span = Span {
        trace_id: vec![0xab; 16],
        span_id: vec![1, 2, 3, 4, 5, 6, 7, 8],
        parent_span_id: Vec::new(),
        name: "query".into(),
        kind: SpanKind::Server as i32,
        start_time_unix_nano: 1_763_892_000_123_456_789,
        end_time_unix_nano: 1_763_892_001_000_000_000,
        attributes: vec![
            kv("ark.session.id", V::StringValue("s-1".into())),
            kv("tokens", V::IntValue(42)),
            kv("ratio", V::DoubleValue(0.5)),
            kv("ok", V::BoolValue(true)),
            kv(
                "tags",
                V::ArrayValue(ArrayValue { values: vec![AnyValue { value: Some(V::StringValue("a".into())) }] }),
            ),
            kv("map", V::KvlistValue(KeyValueList { values: vec![kv("k", V::IntValue(-1))] })),
            kv("blob", V::BytesValue(vec![0xff])),
        ],
        status: Some(Status { message: String::new(), code: StatusCode::Ok as i32 }),
        ..Default::default()
    };
    let resource = Resource {
        attributes: vec![kv("service.name", V::StringValue("ark".into())), kv("pid", V::IntValue(7))],
        ..Default::default()
    };
    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource),
            scope_spans: vec![ScopeSpans { spans: vec![span], ..Default::default() }],
            ..Default::default()
        }],
    };
    let spans = from_protobuf(&request.encode_to_vec()).unwrap();
    assert_eq!(
        spans,
        vec![json!({
            "traceId": "q6urq6urq6urq6urq6urqw==",
            "spanId": "AQIDBAUGBwg=",
            "parentSpanId": "",
            "name": "query",
            "kind": "SPAN_KIND_SERVER",
            "startTimeUnixNano": "1763892000123456789",
            "endTimeUnixNano": "1763892001000000000",
            "attributes": [
                {"key": "ark.session.id", "value": {"stringValue": "s-1"}},
                {"key": "tokens", "value": {"intValue": "42"}},
                {"key": "ratio", "value": {"doubleValue": 0.5}},
                {"key": "ok", "value": {"boolValue": true}},
                {"key": "tags", "value": {"arrayValue": {"values": [{"stringValue": "a"}]}}},
                {"key": "map", "value": {"kvlistValue": {"values": [{"key": "k", "value": {"intValue": "-1"}}]}}},
                {"key": "blob", "value": {"bytesValue": "/w=="}},
            ],
            "status": {"message": "", "code": "STATUS_CODE_OK"},
            "resource": {"service.name": "ark", "pid": "7"},
        })]
    );
    assert_eq!(from_protobuf(b"\xff\xff\xff"), Err(OtlpError::Protobuf));
}

#[test]
fn json_spans_keep_their_fields_as_sent() {
    let body = json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
        "scopeSpans": [{"spans": [
            {"traceId": "trace-1", "spanId": "span-1", "name": "n", "kind": 2, "ignored": true,
             "attributes": [{"key": "ark.session.id", "value": "plain"}]},
        ]}],
    }]});
    let spans = from_json(body.to_string().as_bytes()).unwrap();
    assert_eq!(
        spans,
        vec![json!({"traceId": "trace-1", "spanId": "span-1", "name": "n", "kind": 2,
                    "attributes": [{"key": "ark.session.id", "value": "plain"}], "resource": {"service.name": "svc"}})]
    );
    assert_eq!(from_json(b"{}"), Err(OtlpError::Format));
    assert_eq!(from_json(b"not json"), Err(OtlpError::Format));
    let bad = json!({"resourceSpans": [{"scopeSpans": {"spans": []}}]});
    assert_eq!(
        from_json(bad.to_string().as_bytes()).unwrap_err().to_string(),
        "Invalid OTLP request format. resourceSpans.0.scopeSpans: expected array"
    );
}
