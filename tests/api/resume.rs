//! The resume state and the tool_call_id ↔ task_id mapping on one broker: what a restarted controller reads
//! before, while and after a Query waits on a question asked as an MCP task.

use serde_json::{Value, json};

use crate::support::{TestApp, json_of, mcp::Mcp};

/// A Query's stream with text and one `ask_question` tool call, as the controller posts it.
fn tool_call_chunks(call_id: &str) -> String {
    let chunk = |delta: Value, finish: Value| json!({"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":delta,"finish_reason":finish}]});
    [
        chunk(json!({"content":"Checking with a person."}), Value::Null),
        chunk(
            json!({"tool_calls":[{"index":0,"id":call_id,"type":"function","function":{"name":"ask_question","arguments":"{\"content\":"}}]}),
            Value::Null,
        ),
        chunk(json!({"tool_calls":[{"index":0,"function":{"arguments":"\"Ship it?\"}"}}]}), Value::Null),
        chunk(json!({}), json!("tool_calls")),
    ]
    .iter()
    .map(|c| format!("{c}\n"))
    .collect()
}

/// Asks as a 2025-11-25 MCP task for Query `ns/name`; returns the task id.
async fn ask_as_task(app: &TestApp, query: &str) -> String {
    let mcp = Mcp::new(&app.mcp_url).with_header("x-ark-query", query);
    let created = mcp
        .legacy(
            "tools/call",
            json!({"name":"ask_question","arguments":{"recipient":"ark://users/dave","content":"Ship it?"},"task":{"ttl":600000}}),
        )
        .await;
    created.result()["task"]["taskId"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn the_state_of_an_unknown_query_is_not_found() {
    let app = TestApp::spawn().await;
    let (status, body) = json_of(app.get("/queries/ns/nobody/state").await).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("NOT_FOUND")));
}

#[tokio::test]
async fn a_query_waiting_on_a_task_cannot_resume_until_the_task_has_a_result() {
    let app = TestApp::spawn().await;
    app.post_raw("/stream/q", tool_call_chunks("call_1")).await;
    let (status, state) = json_of(app.get("/queries/ns/q/state").await).await;
    assert_eq!(status, 200, "a Query with a stream is known: {state}");
    assert_eq!(
        (state["phase"].as_str(), &state["waitingFor"], &state["blockedOn"]),
        (Some("running"), &Value::Null, &Value::Null)
    );
    assert_eq!(state["pendingToolCalls"][0]["toolCallId"], "call_1");
    assert_eq!(state["pendingToolCalls"][0]["arguments"], json!({"content":"Ship it?"}));

    let task_id = ask_as_task(&app, "ns/q").await;
    let app = &app;
    let put = |tool_call: &str, task: &str| {
        let path = format!("/queries/ns/q/tool-calls/{tool_call}");
        let body = json!({"taskId": task});
        async move { json_of(app.client.put(app.url(&path)).json(&body).send().await.unwrap()).await }
    };
    let (status, mapped) = put("call_1", &task_id).await;
    assert_eq!(
        (status, mapped["toolCallId"].as_str(), mapped["taskId"].as_str()),
        (200, Some("call_1"), Some(task_id.as_str()))
    );
    assert_eq!(put("call_1", &task_id).await.0, 200, "recording the same mapping again is fine");
    assert_eq!(put("call_2", &task_id).await.0, 409, "a task answers one tool call");
    assert_eq!(put("call_1", &uuid::Uuid::new_v4().to_string()).await.0, 404, "an unknown task");
    // Task ids are opaque: one not of our form is a task we do not have, not a malformed request.
    let (status, body) = put("call_1", "task-from-another-broker").await;
    assert_eq!((status, body["error"]["message"].as_str()), (404, Some("Task not found")), "{body}");
    assert_eq!(put("call_1", "").await.0, 400, "an empty taskId names nothing");
    let other = app.client.put(app.url("/queries/other/q/tool-calls/call_1")).json(&json!({"taskId": task_id}));
    assert_eq!(other.send().await.unwrap().status(), 409, "the task was asked by ns/q");

    let (_, state) = json_of(app.get("/queries/ns/q/state").await).await;
    assert_eq!(state["query"], json!({"namespace":"ns","name":"q"}));
    assert_eq!(state["phase"], "waiting");
    assert_eq!(state["waitingFor"]["taskId"], task_id.as_str());
    assert_eq!(state["waitingFor"]["toolCallId"], "call_1");
    assert!(state["waitingFor"]["since"].is_string() && state["waitingFor"]["questionId"].is_string());
    assert_eq!(
        state["blockedOn"],
        json!({"type":"question","questionId":state["waitingFor"]["questionId"],"taskId":task_id,"toolCallId":"call_1","status":"pending"})
    );
    assert_eq!(state["canResume"], false);
    assert_eq!(state["conversationCheckpoint"]["pendingToolCall"]["toolCallId"], "call_1");

    let question_id = state["waitingFor"]["questionId"].as_str().unwrap().to_owned();
    app.post_json(&format!("/questions/{question_id}/answer"), &json!({"response":"yes"})).await;
    let (_, state) = json_of(app.get("/queries/ns/q/state").await).await;
    assert_eq!((state["phase"].as_str(), &state["waitingFor"]), (Some("running"), &Value::Null));
    assert_eq!(state["blockedOn"]["status"], "answered");
    assert_eq!(state["canResume"], true);

    // The resumed controller reports the tool call's result: nothing blocks the Query any more.
    let result = json!({"event":"tool_call_result","data":{"tool_call_id":"call_1","success":true,"result":"yes","duration_ms":5}});
    app.post_raw("/stream/q", format!("{result}\n")).await;
    let (_, state) = json_of(app.get("/queries/ns/q/state").await).await;
    assert_eq!((&state["blockedOn"], &state["canResume"]), (&Value::Null, &json!(false)));
    assert_eq!(state["pendingToolCalls"], json!([]));
}

#[tokio::test]
async fn the_tool_call_id_given_to_ask_question_is_the_mapping_and_sql_reads_it() {
    let app = TestApp::spawn().await;
    let mcp = Mcp::new(&app.mcp_url).with_header("x-ark-query", "ns/r");
    let created = mcp
        .legacy(
            "tools/call",
            json!({"name":"ask_question","arguments":{"recipient":"ark://users/dave","content":"Go?","toolCallId":"call_9"},"task":{}}),
        )
        .await;
    let task_id = created.result()["task"]["taskId"].as_str().unwrap().to_owned();
    let (_, state) = json_of(app.get("/queries/ns/r/state").await).await;
    assert_eq!(
        (state["blockedOn"]["toolCallId"].as_str(), state["blockedOn"]["taskId"].as_str()),
        (Some("call_9"), Some(task_id.as_str()))
    );

    let pool = app.pool();
    let (tool_call, task): (String, uuid::Uuid) =
        sqlx::query_as("select tool_call_id, task_id from tool_call_tasks where namespace = 'ns' and name = 'r'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((tool_call.as_str(), task.to_string()), ("call_9", task_id.clone()));
    let (phase, can_resume): (String, bool) =
        sqlx::query_as("select phase, can_resume from query_resume_states where namespace = 'ns' and name = 'r'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((phase.as_str(), can_resume), ("waiting", false));
}

#[tokio::test]
async fn a_question_that_named_only_the_querys_name_is_its_state_in_any_namespace() {
    let app = TestApp::spawn().await;
    let question =
        json!({"sender":"ark://agents/a","recipient":"ark://users/dave","content":"Go?","query":{"name":"bare"}});
    let asked: Value = app.post_json("/questions", &question).await.json().await.unwrap();
    let (status, state) = json_of(app.get("/queries/default/bare/state").await).await;
    assert_eq!(status, 200);
    assert_eq!(
        (state["phase"].as_str(), state["waitingFor"]["questionId"].as_str()),
        (Some("waiting"), asked["id"].as_str())
    );
}
