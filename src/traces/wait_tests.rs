//! Reading `traceparent` as W3C Trace Context says, and the wait's span in upstream's stored protobuf form.

use base64::{Engine, engine::general_purpose::STANDARD};
use chrono::TimeZone;

use super::*;

const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[test]
fn a_valid_traceparent_reads_and_writes_back_in_version_00() {
    let parent = TraceParent::parse(VALID).expect("the spec's example");
    assert_eq!(hex::encode(parent.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(hex::encode(parent.parent_id), "00f067aa0ba902b7");
    assert!(parent.sampled);
    assert_eq!(parent.header_value(), VALID);
    let unsampled = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
    assert!(!unsampled.sampled);
    // W3C level 2's random-trace-id flag (the OpenTelemetry SDKs set it) beside the sampled one.
    let random = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03").unwrap();
    assert_eq!((random.sampled, random.header_value()), (true, VALID.to_owned()));
    // A later version may add fields after the flags; its first four are read.
    let later = TraceParent::parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-what-comes").unwrap();
    assert_eq!((later.sampled, later.header_value()), (true, VALID.to_owned()));
}

#[test]
fn a_malformed_traceparent_is_ignored() {
    for bad in [
        "",
        "garbage",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
    ] {
        assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
    }
}

#[test]
fn only_a_sampled_context_asks_for_a_span() {
    let config = Config::for_database("postgres://unused");
    assert_eq!(WaitTrace::of(Some(VALID), &config).map(|w| w.span_ttl_seconds), Some(86_400));
    assert_eq!(WaitTrace::of(Some(&VALID.replace("-01", "-00")), &config), None);
    assert_eq!(WaitTrace::of(Some("nonsense"), &config), None);
    assert_eq!(WaitTrace::of(None, &config), None);
    let mut headers = HeaderMap::new();
    headers.insert("traceparent", VALID.parse().unwrap());
    assert!(WaitTrace::from_headers(&headers, &config).is_some());
    headers.append("traceparent", VALID.parse().unwrap());
    assert_eq!(WaitTrace::from_headers(&headers, &config), None, "two contexts: neither is the caller's");
}

fn closed(status: &str) -> ClosedWait<'_> {
    ClosedWait {
        question_id: "q-1",
        recipient: "ark://users/dave",
        sender: "ark://agents/deployer",
        status,
        answered_by: (status == "answered").then_some("dave"),
        via: (status == "answered").then_some("api"),
        tool_call_id: Some("call_1"),
        query_name: Some("review-42"),
        query_namespace: None,
    }
}

fn attribute<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["attributes"].as_array().unwrap().iter().find(|a| a["key"] == key).map(|a| &a["value"]["stringValue"])
}

#[test]
fn the_span_is_a_child_of_the_callers_from_the_ask_to_the_close() {
    let asked_at = Utc.timestamp_opt(1_763_892_000, 123_456_789).unwrap();
    let remembered = Remembered {
        trace_parent: VALID.into(),
        asked_at,
        closed_at: asked_at + chrono::Duration::seconds(90),
        session_id: Some("session-1".into()),
    };
    let span = span(&remembered, &closed("answered")).unwrap();
    assert_eq!(span["name"], "execute_tool ask_question");
    assert_eq!(span["kind"], "SPAN_KIND_INTERNAL");
    assert_eq!(span["traceId"], STANDARD.encode(hex::decode("4bf92f3577b34da6a3ce929d0e0e4736").unwrap()));
    assert_eq!(span["parentSpanId"], STANDARD.encode(hex::decode("00f067aa0ba902b7").unwrap()));
    let span_id = STANDARD.decode(span["spanId"].as_str().unwrap()).unwrap();
    assert_eq!(span_id.len(), 8);
    assert_ne!(span_id, hex::decode("00f067aa0ba902b7").unwrap(), "a span of its own");
    assert_eq!(span["startTimeUnixNano"], "1763892000123456789");
    assert_eq!(span["endTimeUnixNano"], "1763892090123456789");
    assert_eq!(span["status"], json!({"message": "", "code": "STATUS_CODE_UNSET"}));
    assert_eq!(span["resource"]["service.name"], "ark-broker");
    for (key, value) in [
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", "ask_question"),
        ("gen_ai.tool.call.id", "call_1"),
        ("ark.question.id", "q-1"),
        ("ark.question.recipient", "ark://users/dave"),
        ("ark.question.status", "answered"),
        ("ark.question.answered_by", "dave"),
        ("query.name", "review-42"),
        ("ark.session.id", "session-1"),
    ] {
        assert_eq!(attribute(&span, key), Some(&json!(value)), "{key}");
    }
    assert_eq!(attribute(&span, "ark.query.namespace"), None, "unknown fields are left out");
    assert_eq!(attribute(&span, "error.type"), None);
    let other = super::span(&remembered, &closed("answered")).unwrap();
    assert_ne!(other["spanId"], span["spanId"], "every span id is fresh");
}

#[test]
fn an_expired_or_cancelled_wait_is_an_error() {
    let at = Utc.timestamp_opt(1_763_892_000, 0).unwrap();
    let remembered = Remembered { trace_parent: VALID.into(), asked_at: at, closed_at: at, session_id: None };
    for status in ["expired", "cancelled"] {
        let span = span(&remembered, &closed(status)).unwrap();
        assert_eq!(span["status"]["code"], "STATUS_CODE_ERROR", "{status}");
        assert_eq!(attribute(&span, "error.type"), Some(&json!(status)));
        assert_eq!(attribute(&span, "ark.session.id"), None);
    }
    let declined = span(&remembered, &closed("declined")).unwrap();
    assert_eq!(declined["status"]["code"], "STATUS_CODE_UNSET", "a refusal is an answer of sorts");
    let broken = Remembered { trace_parent: "broken".into(), ..remembered };
    assert_eq!(span(&broken, &closed("answered")), None);
}
