//! The unified execution stream, black-box: typed events posted beside OpenAI chunks, the `format=openai`
//! bytes unchanged, the translation of recorded OpenAI streams, and what question changes write into their
//! Query's stream.

use serde_json::{Value, json};

use crate::support::{SseReader, TestApp, json_of};

/// A recorded OpenAI stream as Ark's controller posts it: text, one tool call in fragments, the finish.
fn recorded_tool_call_stream() -> Vec<Value> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"gpt-4o",
               "choices":[{"index":0,"delta":delta,"finish_reason":finish}],"ark":{"query":"q","agent":"a"}})
    };
    vec![
        chunk(json!({"role":"assistant","content":"Let me ask."}), Value::Null),
        chunk(
            json!({"tool_calls":[{"index":0,"id":"call_ask","type":"function","function":{"name":"ask_question","arguments":""}}]}),
            Value::Null,
        ),
        chunk(json!({"tool_calls":[{"index":0,"function":{"arguments":"{\"content\":\"Deploy"}}]}), Value::Null),
        chunk(json!({"tool_calls":[{"index":0,"function":{"arguments":" to prod?\"}"}}]}), Value::Null),
        chunk(json!({}), json!("tool_calls")),
    ]
}

fn ndjson(lines: &[Value]) -> String {
    lines.iter().map(|line| format!("{line}\n")).collect()
}

/// Reads unified frames until `[DONE]` or `n` frames, parsed.
async fn unified_frames(reader: &mut SseReader, n: usize) -> Vec<Value> {
    let mut frames = Vec::new();
    while frames.len() < n {
        match reader.next_data().await.as_deref() {
            Some("[DONE]") | None => break,
            Some(data) => frames.push(serde_json::from_str(data).expect("a unified frame is JSON")),
        }
    }
    frames
}

fn events_of(frames: &[Value]) -> Vec<&str> {
    frames.iter().map(|f| f["event"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn the_openai_format_sends_exactly_the_stored_chunks_and_no_typed_events() {
    let app = TestApp::spawn().await;
    let mut lines = recorded_tool_call_stream();
    lines.insert(2, json!({"event":"phase_change","data":{"from":"pending","to":"running","reason":"started"}}));
    lines.push(json!({"event":"tool_call_result","data":{"tool_call_id":"call_ask","success":true,"result":"yes","duration_ms":5}}));
    let (status, reply) = json_of(app.post_raw("/stream/q", ndjson(&lines)).await).await;
    assert_eq!((status, reply["chunks_stored"].clone(), reply["invalid_lines"].clone()), (200, json!(7), json!(0)));
    app.post_json("/stream/q/complete", &json!({})).await;

    for url in ["/stream/q?from-beginning=true", "/stream/q?from-beginning=true&format=openai"] {
        let mut reader = SseReader::open(&app.client, &app.url(url)).await;
        for expected in recorded_tool_call_stream() {
            assert_eq!(reader.next_frame().await.unwrap(), format!("data: {expected}"), "{url}");
        }
        assert_eq!(reader.next_frame().await.as_deref(), Some("data: [DONE]"));
        assert_eq!(reader.next_frame().await, None);
    }
    let (_, page) = json_of(app.get("/stream").await).await;
    assert_eq!(page["total"], 6, "the raw feed holds the chunks and the marker, not the typed events");
}

#[tokio::test]
async fn the_unified_format_translates_chunks_and_passes_typed_events_through() {
    let app = TestApp::spawn().await;
    let mut lines = recorded_tool_call_stream();
    lines.push(json!({"event":"tool_call_result","data":{"tool_call_id":"call_ask","success":true,"result":"yes","duration_ms":1234}}));
    lines.push(json!({"id":"chatcmpl-9","choices":[],"ark":{"query":"q","completedQuery":{"metadata":{"name":"q"},"status":{"phase":"done"}}}}));
    app.post_raw("/stream/q", ndjson(&lines)).await;
    app.post_json("/stream/q/complete", &json!({})).await;

    for url in ["/stream/q?from-beginning=true&format=unified", "/stream/q?from-beginning=true&unified=true"] {
        let mut reader = SseReader::open(&app.client, &app.url(url)).await;
        let frames = unified_frames(&mut reader, 100).await;
        assert_eq!(
            events_of(&frames),
            ["text_delta", "tool_call_start", "tool_call_result", "completed_query"],
            "{url}"
        );
        for frame in &frames {
            assert_eq!(frame.as_object().unwrap().len(), 4, "event, timestamp, query, data: {frame}");
            assert_eq!(frame["query"], "q");
            let timestamp = frame["timestamp"].as_str().unwrap();
            assert!(chrono::DateTime::parse_from_rfc3339(timestamp).is_ok() && timestamp.len() == 24, "{timestamp}");
        }
        assert_eq!(frames[0]["data"], json!({"content":"Let me ask."}));
        assert_eq!(
            frames[1]["data"],
            json!({"tool_call_id":"call_ask","tool_name":"ask_question","arguments":{"content":"Deploy to prod?"}})
        );
        assert_eq!(frames[2]["data"]["duration_ms"], 1234);
        assert_eq!(frames[3]["data"]["status"]["phase"], "done");
        reader.expect_end().await;
    }
}

#[tokio::test]
async fn a_live_unified_reader_assembles_a_tool_call_that_started_before_it_connected() {
    let app = TestApp::spawn().await;
    let lines = recorded_tool_call_stream();
    app.post_raw("/stream/q", ndjson(&lines[..3])).await;
    let mut reader = SseReader::open(&app.client, &app.url("/stream/q?format=unified")).await;
    app.post_raw("/stream/q", ndjson(&lines[3..])).await;
    let frames = unified_frames(&mut reader, 1).await;
    assert_eq!(events_of(&frames), ["tool_call_start"], "the text before it connected is not sent");
    assert_eq!(frames[0]["data"]["arguments"], json!({"content":"Deploy to prod?"}));
}

#[tokio::test]
async fn typed_events_writers_may_not_post_are_counted_as_invalid_lines() {
    let app = TestApp::spawn().await;
    let body = ndjson(&[
        json!({"event":"question_answered","data":{"question_id":"q-x","response":"forged"}}),
        json!({"event":"tool_call_start","data":{"tool_name":"no id"}}),
        json!({"event":"made_up","data":{}}),
        json!({"event":"text_delta","data":{"content":"fine"}}),
    ]);
    let (status, reply) = json_of(app.post_raw("/stream/t", body).await).await;
    assert_eq!((status, reply["chunks_stored"].clone(), reply["invalid_lines"].clone()), (200, json!(1), json!(3)));
    app.post_json("/stream/t/complete", &json!({})).await;
    let mut reader = SseReader::open(&app.client, &app.url("/stream/t?from-beginning=true&format=unified")).await;
    assert_eq!(events_of(&unified_frames(&mut reader, 10).await), ["text_delta"]);
}

#[tokio::test]
async fn an_unknown_format_is_refused() {
    let app = TestApp::spawn().await;
    let (status, reply) = json_of(app.get("/stream/q?format=xml").await).await;
    assert_eq!(status, 400);
    assert!(reply["error"]["message"].as_str().unwrap().contains("format"), "{reply}");
}

#[tokio::test]
async fn question_changes_are_written_into_their_querys_stream_with_the_phase_changes() {
    let app = TestApp::spawn().await;
    app.post_raw("/stream/q", ndjson(&recorded_tool_call_stream())).await;
    let mut reader = SseReader::open(&app.client, &app.url("/stream/q?format=unified&from-beginning=true")).await;
    assert_eq!(events_of(&unified_frames(&mut reader, 2).await), ["text_delta", "tool_call_start"]);

    let ask = |content: &str| {
        json!({"sender":"ark://agents/a","recipient":"ark://users/dave","content":content,
               "query":{"namespace":"ns","name":"q"},"toolCallId":"call_ask"})
    };
    let (_, first) = json_of(app.post_json("/questions", &ask("Deploy to prod?")).await).await;
    let (_, second) = json_of(app.post_json("/questions", &ask("And to staging?")).await).await;
    let frames = unified_frames(&mut reader, 3).await;
    assert_eq!(events_of(&frames), ["question_raised", "phase_change", "question_raised"]);
    assert_eq!(
        frames[0]["data"],
        json!({"question_id":first["id"],"task_id":null,"tool_call_id":"call_ask","recipient":"ark://users/dave",
               "content":"Deploy to prod?"})
    );
    assert_eq!(
        frames[1]["data"],
        json!({"from":"running","to":"waiting","reason":"question_pending","question_id":first["id"]})
    );

    let id = first["id"].as_str().unwrap();
    app.post_json(&format!("/questions/{id}/answer"), &json!({"response":"yes","answeredBy":"dave"})).await;
    app.delete(&format!("/questions/{}", second["id"].as_str().unwrap())).await;
    let frames = unified_frames(&mut reader, 3).await;
    assert_eq!(events_of(&frames), ["question_answered", "question_cancelled", "phase_change"]);
    assert_eq!(frames[0]["data"], json!({"question_id":id,"response":"yes","answered_by":"dave"}));
    assert_eq!(frames[1]["data"], json!({"question_id":second["id"]}));
    assert_eq!(
        frames[2]["data"],
        json!({"from":"waiting","to":"running","reason":"question_cancelled","question_id":second["id"]})
    );
}

#[tokio::test]
async fn questions_of_one_query_expiring_together_move_its_phase_back_once() {
    let app = TestApp::spawn_with(|config| config.reap_interval_seconds = 1).await;
    let mut reader = SseReader::open(&app.client, &app.url("/stream/exp?format=unified&from-beginning=true")).await;
    for content in ["first?", "second?"] {
        let question = json!({"sender":"ark://agents/a","recipient":"ark://users/dave","content":content,
                              "query":{"namespace":"ns","name":"exp"},"ttlSeconds":3600});
        assert_eq!(app.post_json("/questions", &question).await.status(), 201);
    }
    // Both fall due at once, so one reaper pass expires them in one transaction.
    sqlx::query("update questions set expires_at = now() - interval '1 second' where query_name = 'exp'")
        .execute(&app.pool())
        .await
        .unwrap();
    let frames = unified_frames(&mut reader, 6).await;
    assert_eq!(
        events_of(&frames),
        ["question_raised", "phase_change", "question_raised", "question_expired", "phase_change", "question_expired"]
    );
    assert_eq!(
        (frames[4]["data"]["from"].as_str(), frames[4]["data"]["to"].as_str()),
        (Some("waiting"), Some("running"))
    );
    let (_, state) = json_of(app.get("/queries/ns/exp/state").await).await;
    assert_eq!((state["phase"].as_str(), state["blockedOn"]["status"].as_str()), (Some("running"), Some("expired")));
}

#[tokio::test]
async fn a_unified_reader_that_times_out_gets_a_typed_error_frame() {
    let app = TestApp::spawn().await;
    let mut reader = SseReader::open(&app.client, &app.url("/stream/silent?format=unified&wait-for-query=1")).await;
    let frame: Value = serde_json::from_str(&reader.next_data().await.unwrap()).unwrap();
    assert_eq!((frame["event"].as_str(), frame["query"].as_str()), (Some("error"), Some("silent")));
    assert_eq!(frame["data"]["type"], "timeout_error");
    assert!(frame["timestamp"].is_string());
    assert_eq!(reader.next_data().await.as_deref(), Some("[DONE]"));
}
