//! The unified translation of recorded OpenAI streams (shapes as OpenAI's API and Ark's controller send them).

use chrono::{TimeZone, Utc};
use serde_json::{Value, json};

use super::*;

fn rows(lines: &[&str]) -> Vec<ChunkRow> {
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let event_type = serde_json::from_str::<Value>(line)
                .ok()
                .and_then(|v| v.get("event").and_then(Value::as_str).map(str::to_owned));
            ChunkRow {
                sequence: i as i64 + 1,
                stream_id: "q".into(),
                position: i as i64 + 1,
                tx: 1,
                chunk: (*line).to_owned(),
                is_done: *line == "\"[DONE]\"",
                created_at: Utc.timestamp_millis_opt(1_700_000_000_000 + i as i64).unwrap(),
                bytes: line.len() as i32,
                event_type,
            }
        })
        .collect()
}

/// The frames of a whole stream, as `(event, data)`.
fn unify(lines: &[&str]) -> Vec<(&'static str, Value)> {
    let mut unifier = Unifier::new();
    rows(lines).iter().flat_map(|row| unifier.push(row)).map(|e| (e.event, e.data)).collect()
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    json!({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o",
           "choices":[{"index":0,"delta":delta,"finish_reason":finish}],
           "ark":{"query":"q","agent":"a"}})
    .to_string()
}

#[test]
fn text_only_streams_become_text_deltas() {
    let lines = [
        chunk(json!({"role":"assistant","content":""}), None),
        chunk(json!({"content":"Hello"}), None),
        chunk(json!({"content":", world"}), None),
        chunk(json!({}), Some("stop")),
        "\"[DONE]\"".to_owned(),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    assert_eq!(
        unify(&lines),
        vec![("text_delta", json!({"content":"Hello"})), ("text_delta", json!({"content":", world"}))]
    );
}

#[test]
fn one_tool_call_is_assembled_from_its_fragments_and_sent_at_finish() {
    let lines = [
        chunk(json!({"role":"assistant","content":"Let me search."}), None),
        chunk(
            json!({"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"web_search","arguments":""}}]}),
            None,
        ),
        chunk(json!({"tool_calls":[{"index":0,"function":{"arguments":"{\"query\":"}}]}), None),
        chunk(json!({"tool_calls":[{"index":0,"function":{"arguments":"\"kubernetes operators\"}"}}]}), None),
        chunk(json!({}), Some("tool_calls")),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let frames = unify(&lines);
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[0], ("text_delta", json!({"content":"Let me search."})));
    assert_eq!(
        frames[1],
        (
            "tool_call_start",
            json!({"tool_call_id":"call_abc","tool_name":"web_search","arguments":{"query":"kubernetes operators"}})
        )
    );
}

#[test]
fn parallel_tool_calls_with_interleaved_fragments_are_each_assembled() {
    let lines = [
        chunk(
            json!({"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":""}}]}),
            None,
        ),
        chunk(json!({"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}), None),
        chunk(json!({"tool_calls":[{"index":1,"function":{"arguments":"{\"tz\":\"UTC\"}"}}]}), None),
        chunk(json!({"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}), None),
        chunk(json!({}), Some("tool_calls")),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    assert_eq!(
        unify(&lines),
        vec![
            (
                "tool_call_start",
                json!({"tool_call_id":"call_a","tool_name":"get_weather","arguments":{"city":"Paris"}})
            ),
            ("tool_call_start", json!({"tool_call_id":"call_b","tool_name":"get_time","arguments":{"tz":"UTC"}})),
        ]
    );
}

#[test]
fn a_call_is_sent_when_the_next_one_starts_once_its_arguments_are_complete() {
    let lines = [
        chunk(
            json!({"tool_calls":[{"index":0,"id":"call_a","function":{"name":"one","arguments":"{\"x\":1}"}}]}),
            None,
        ),
        chunk(json!({"tool_calls":[{"index":1,"id":"call_b","function":{"name":"two","arguments":"not json"}}]}), None),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let mut unifier = Unifier::new();
    let rows = rows(&lines);
    assert!(unifier.push(&rows[0]).is_empty(), "the first call may still be growing");
    let sent = unifier.push(&rows[1]);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].data["tool_call_id"], "call_a");
    // The second is never finished by the LLM; the completion marker sends it, its arguments kept raw.
    let done = ChunkRow { is_done: true, chunk: "\"[DONE]\"".into(), ..rows[1].clone() };
    let sent = unifier.push(&done);
    assert_eq!(sent[0].data, json!({"tool_call_id":"call_b","tool_name":"two","arguments":"not json"}));
}

#[test]
fn an_error_chunk_becomes_an_error_event_that_ends_the_stream() {
    let lines = [r#"{"error":{"message":"rate limited","type":"server_error","code":"429"},"ark":{"query":"q"}}"#];
    let mut unifier = Unifier::new();
    let events = unifier.push(&rows(&lines)[0]);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].data, json!({"message":"rate limited","type":"server_error","code":"429"}));
    assert!(events[0].ends_stream());
}

#[test]
fn the_completed_query_payload_of_the_final_chunk_is_sent() {
    let completed = json!({"metadata":{"name":"q"},"status":{"phase":"done","response":{"content":"Hi"}}});
    let last = json!({"id":"chatcmpl-1","choices":[],"ark":{"query":"q","completedQuery":completed}}).to_string();
    assert_eq!(unify(&[&last]), vec![("completed_query", completed)]);
}

#[test]
fn typed_rows_pass_through_and_a_posted_start_is_not_sent_twice() {
    let posted =
        r#"{"event":"tool_call_start","data":{"tool_call_id":"call_abc","tool_name":"web_search","arguments":{}}}"#;
    let fragment = chunk(
        json!({"tool_calls":[{"index":0,"id":"call_abc","function":{"name":"web_search","arguments":"{}"}}]}),
        Some("tool_calls"),
    );
    let result = r#"{"event":"tool_call_result","data":{"tool_call_id":"call_abc","success":true,"result":"15 results","duration_ms":2333}}"#;
    let frames = unify(&[posted, &fragment, result]);
    assert_eq!(frames.iter().map(|(event, _)| *event).collect::<Vec<_>>(), ["tool_call_start", "tool_call_result"]);
    assert_eq!(frames[1].1["duration_ms"], 2333);
}

#[test]
fn frames_carry_type_timestamp_query_and_data() {
    let mut unifier = Unifier::new();
    let event = unifier.push(&rows(&[&chunk(json!({"content":"Hi"}), None)])[0]).remove(0);
    let frame: Value = serde_json::from_str(&event.frame("my-query")).unwrap();
    assert_eq!(
        frame,
        json!({"event":"text_delta","timestamp":"2023-11-14T22:13:20.000Z","query":"my-query","data":{"content":"Hi"}})
    );
}

#[test]
fn calls_without_ids_are_each_sent() {
    let lines = [
        chunk(json!({"tool_calls":[{"index":0,"function":{"name":"one","arguments":"{}"}}]}), None),
        chunk(json!({"tool_calls":[{"index":1,"function":{"name":"two","arguments":"{}"}}]}), Some("tool_calls")),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let names: Vec<Value> = unify(&lines).into_iter().map(|(_, data)| data["tool_name"].clone()).collect();
    assert_eq!(names, [json!("one"), json!("two")]);
}

#[test]
fn a_call_cut_off_by_the_abort_frame_is_sent_as_it_stands() {
    let fragment =
        chunk(json!({"tool_calls":[{"index":0,"id":"call_x","function":{"name":"f","arguments":"{\"a\":"}}]}), None);
    let abort =
        r#"{"error":{"message":"stream aborted: the writer disconnected","type":"stream_aborted","code":"aborted"}}"#;
    let mut rows = rows(&[&fragment, abort]);
    rows[1].event_type = Some("stream_aborted".into());
    let mut unifier = Unifier::new();
    let events: Vec<UnifiedEvent> = rows.iter().flat_map(|row| unifier.push(row)).collect();
    assert_eq!(events.iter().map(|e| e.event).collect::<Vec<_>>(), ["tool_call_start", "error"]);
    assert_eq!(events[0].data["arguments"], "{\"a\":");
}

#[test]
fn the_executors_approval_and_a2a_frames_are_typed_events_and_a_content_boundary_sends_no_text() {
    let request = json!({"type":"tool_approval_request","taskId":"t-1",
        "toolCalls":[{"id":"call_1","function":{"arguments":"{\"env\":\"prod\"}","name":"deploy"},"type":"function"}],
        "timeout":"5m0s","onTimeout":"reject","agentName":"hitl-agent"});
    let response =
        json!({"type":"tool_approval_response","taskId":"t-1","action":"approved","timestamp":"2026-09-01T12:00:00Z"});
    let status =
        json!({"type":"a2a_status","taskId":"t-2","state":"working","message":"Searching","agentName":"researcher"});
    let lines = [
        chunk(json!({"content": "Hel"}), None),
        status.to_string(),
        // The executor's boundary between two remote artifacts: empty content, finish_reason "stop".
        chunk(json!({"content": ""}), Some("stop")),
        chunk(json!({"content": "lo"}), None),
        request.to_string(),
        response.to_string(),
        // A chunk that merely has a `type` field of another kind stays an OpenAI chunk.
        json!({"type":"something_else","choices":[{"index":0,"delta":{"content":"!"}}]}).to_string(),
    ];
    let events = unify(&lines.iter().map(String::as_str).collect::<Vec<_>>());
    let without_type = |frame: &Value| {
        let mut data = frame.clone();
        data.as_object_mut().unwrap().remove("type");
        data
    };
    assert_eq!(
        events,
        vec![
            ("text_delta", json!({"content": "Hel"})),
            ("a2a_status", without_type(&status)),
            ("text_delta", json!({"content": "lo"})),
            ("tool_approval_request", without_type(&request)),
            ("tool_approval_response", without_type(&response)),
            ("text_delta", json!({"content": "!"})),
        ]
    );
}
