//! Blocking `ask_question` (what Ark's controller calls today), `list_pending_questions`, and the caller's
//! identity from headers.

use serde_json::{Value, json};

use crate::support::{SseReader, TestApp, mcp::Mcp, within};

/// A watch on questions, opened before the call so the question's creation is an event to await.
async fn watch_questions(app: &TestApp) -> SseReader {
    let mut watch = SseReader::open(&app.client, &app.url("/questions?watch=true")).await;
    assert_eq!(watch.next_frame().await.as_deref(), Some(": connected"));
    watch
}

/// The next question created, from the watch.
async fn created(watch: &mut SseReader) -> Value {
    loop {
        let frame = watch.next_frame().await.expect("the watch stays open");
        if frame.starts_with("event: question_created") {
            let data = frame.lines().find_map(|line| line.strip_prefix("data: ")).expect("data");
            return serde_json::from_str(data).unwrap();
        }
    }
}

#[tokio::test]
async fn a_blocking_ask_sends_increasing_progress_until_it_is_answered() {
    let app = TestApp::spawn_with(|config| config.mcp_progress_interval_ms = 100).await;
    let mcp =
        Mcp::new(&app.mcp_url).with_header("x-ark-agent", "reviewer").with_header("x-ark-query", "team-a/review-42");
    let mut watch = watch_questions(&app).await;
    let (observer, mut progress_seen) = tokio::sync::mpsc::unbounded_channel();
    let call = tokio::spawn({
        let mcp = mcp.clone();
        async move {
            let params = json!({"name": "ask_question", "arguments": {"recipient": "ark://users/dave", "content": "block?"},
                                "_meta": {"progressToken": "tok-1"}});
            mcp.legacy_observed("tools/call", params, Some(observer)).await
        }
    });
    let question = created(&mut watch).await;
    assert_eq!(question["sender"], "ark://agents/reviewer", "the sender comes from the agent header");
    assert_eq!(question["query"], json!({"namespace": "team-a", "name": "review-42"}));
    let probe = Mcp::new(&app.mcp_url);
    let listed = probe.legacy("tools/call", json!({"name": "list_pending_questions", "arguments": {}})).await;
    assert_eq!(listed.result()["structuredContent"]["questions"].as_array().unwrap().len(), 1);
    let id = question["id"].as_str().unwrap();
    for _ in 0..2 {
        within("a progress notification", progress_seen.recv()).await.expect("progress while pending");
    }
    app.post_json(&format!("/questions/{id}/answer"), &json!({"response": "go"})).await;
    let reply = within("the blocking call", call).await.unwrap();
    let result = reply.result();
    assert_eq!(result["structuredContent"]["response"], "go");
    assert_eq!(result["content"][0]["type"], "text", "the answer is also text");
    let progress: Vec<f64> = reply.notifications.iter().map(|n| n["params"]["progress"].as_f64().unwrap()).collect();
    assert!(progress.len() >= 2, "progress was sent while waiting: {progress:?}");
    assert!(progress.windows(2).all(|w| w[0] < w[1]), "progress increases: {progress:?}");
    assert!(reply.notifications.iter().all(|n| n["params"]["progressToken"] == "tok-1"));
    assert!(reply.notifications[0]["params"]["message"].as_str().unwrap().contains("Question pending"));
}

#[tokio::test]
async fn a_cancelled_or_expired_question_ends_a_blocking_call_with_a_tool_error() {
    let app = TestApp::spawn().await;
    let mcp = Mcp::new(&app.mcp_url);
    let mut watch = watch_questions(&app).await;
    for (how, word) in [("cancel", "cancelled"), ("expire", "expired")] {
        let call = tokio::spawn({
            let mcp = mcp.clone();
            async move {
                mcp.legacy(
                    "tools/call",
                    json!({"name": "ask_question", "arguments": {"recipient": "ark://users/dave", "content": how}}),
                )
                .await
            }
        });
        let id = created(&mut watch).await["id"].as_str().unwrap().to_owned();
        if how == "cancel" {
            assert_eq!(app.delete(&format!("/questions/{id}")).await.status(), 200);
        } else {
            sqlx::query("update questions set expires_at = now() - interval '1 second' where id = $1")
                .bind(&id)
                .execute(&app.pool())
                .await
                .unwrap();
            crate::memory::reaper(&app).pass().await;
        }
        let reply = within("the blocking call", call).await.unwrap();
        assert_eq!(reply.result()["isError"], true, "{how}");
        assert!(reply.result()["content"][0]["text"].as_str().unwrap().contains(word), "{how}: {}", reply.message);
    }
}

#[tokio::test]
async fn a_client_disconnect_ends_the_wait_but_never_the_question() {
    let app = TestApp::spawn().await;
    let mcp = Mcp::new(&app.mcp_url);
    let mut watch = watch_questions(&app).await;
    let call = tokio::spawn(async move {
        mcp.legacy(
            "tools/call",
            json!({"name": "ask_question", "arguments": {"recipient": "ark://users/dave", "content": "left"}}),
        )
        .await
    });
    let id = created(&mut watch).await["id"].as_str().unwrap().to_owned();
    call.abort();
    let _ = call.await;
    // The server notices the closed connection and drops its waiter (nothing signals that, so look).
    let waiting = ark_broker::db::wakeup::Wakeup::Question(id.clone());
    within("the wait to end", async {
        while app.state.wakeups.has(&waiting) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    let question: Value = app.get(&format!("/questions/{id}")).await.json().await.unwrap();
    assert_eq!(question["status"], "pending", "the question outlives its caller");
    let answered = app.post_json(&format!("/questions/{id}/answer"), &json!({"response": "later"})).await;
    assert_eq!(answered.status(), 200);
}

#[tokio::test]
async fn list_pending_questions_shows_the_callers_own_when_the_caller_is_known() {
    let app = TestApp::spawn().await;
    for (sender, content) in [("ark://agents/a", "from a"), ("ark://agents/b", "from b")] {
        let body = json!({"sender": sender, "recipient": "ark://users/dave", "content": content});
        assert_eq!(app.post_json("/questions", &body).await.status(), 201);
    }
    let contents = |reply: crate::support::mcp::Reply| -> Vec<String> {
        let questions = reply.result()["structuredContent"]["questions"].as_array().unwrap().clone();
        questions.iter().map(|q| q["content"].as_str().unwrap().to_owned()).collect()
    };
    let anyone = Mcp::new(&app.mcp_url);
    let call = json!({"name": "list_pending_questions", "arguments": {}});
    assert_eq!(contents(anyone.legacy("tools/call", call.clone()).await), ["from a", "from b"]);
    let agent_a = Mcp::new(&app.mcp_url).with_header("x-ark-agent", "a");
    assert_eq!(contents(agent_a.legacy("tools/call", call.clone()).await), ["from a"]);
    let modern = agent_a.modern("tools/call", Some("list_pending_questions"), call, false).await;
    let first = &modern.result()["structuredContent"]["questions"][0];
    assert!(first["id"].is_string() && first["recipient"].is_string() && first["createdAt"].is_string());
}

#[tokio::test]
async fn a_2026_07_28_blocking_ask_answers_in_that_eras_shape_and_ends_its_wait_when_the_caller_goes() {
    let app = TestApp::spawn_with(|config| config.mcp_progress_interval_ms = 100).await;
    let mcp = Mcp::new(&app.mcp_url).with_header("x-ark-agent", "modern");
    let mut watch = watch_questions(&app).await;
    let ask = |content: &str, meta: Value| {
        let mcp = mcp.clone();
        let params = json!({"name": "ask_question", "_meta": meta,
                            "arguments": {"recipient": "ark://users/dave", "content": content}});
        tokio::spawn(async move { mcp.modern("tools/call", Some("ask_question"), params, false).await })
    };

    // With a progress token: SSE from the first progress notification on, then the era's result.
    let call = ask("with progress", json!({"progressToken": 7}));
    let question = created(&mut watch).await;
    assert_eq!(question["sender"], "ark://agents/modern");
    tokio::time::sleep(std::time::Duration::from_millis(350)).await;
    let id = question["id"].as_str().unwrap();
    app.post_json(&format!("/questions/{id}/answer"), &json!({"response": "go"})).await;
    let reply = within("the blocking call", call).await.unwrap();
    assert!(reply.sse && reply.status == 200, "{reply:?}");
    let result = reply.result();
    assert_eq!(result["resultType"], "complete", "2026-07-28 results say what they are");
    assert_eq!(result["structuredContent"]["response"], "go");
    assert_eq!(result["isError"], false);
    let progress: Vec<f64> = reply.notifications.iter().map(|n| n["params"]["progress"].as_f64().unwrap()).collect();
    assert!(progress.len() >= 2 && progress.windows(2).all(|w| w[0] < w[1]), "{progress:?}");
    assert!(reply.notifications.iter().all(|n| n["params"]["progressToken"] == 7));

    // Without one: a single JSON reply once the question closes.
    let call = ask("without progress", json!({}));
    let id = created(&mut watch).await["id"].as_str().unwrap().to_owned();
    assert_eq!(app.delete(&format!("/questions/{id}")).await.status(), 200);
    let reply = within("the blocking call", call).await.unwrap();
    assert!(!reply.sse && reply.status == 200, "{reply:?}");
    assert_eq!(reply.result()["resultType"], "complete");
    assert_eq!(reply.result()["isError"], true, "a cancelled question is a tool error");

    // A caller that goes away ends the wait, never the question.
    let call = ask("left", json!({}));
    let id = created(&mut watch).await["id"].as_str().unwrap().to_owned();
    call.abort();
    let _ = call.await;
    let waiting = ark_broker::db::wakeup::Wakeup::Question(id.clone());
    within("the wait to end", async {
        while app.state.wakeups.has(&waiting) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    let question: Value = app.get(&format!("/questions/{id}")).await.json().await.unwrap();
    assert_eq!(question["status"], "pending", "the question outlives its caller");
}
