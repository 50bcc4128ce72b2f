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

/// Frames as Ark's newest executor writes them (`ark/executors/completions/streaming.go` at 1c5c368f): its
/// approval request, then (`answer`) the response or the Query's end, then `/complete`.
async fn executor_stream(app: &TestApp, query: &str, answer: Option<Value>) {
    let text = |content: &str, finish: Value| {
        json!({"id":query,"object":"chat.completion.chunk","model":"agent/hitl-agent",
               "choices":[{"index":0,"delta":{"content":content},"finish_reason":finish}],"ark":{"query":query}})
    };
    let request = json!({"type":"tool_approval_request","taskId":format!("task-{query}"),
        "toolCalls":[{"id":"call_1","function":{"arguments":"{\"env\":\"prod\"}","name":"deploy-application"},"type":"function"}],
        "timeout":"5m0s","onTimeout":"reject","agentName":"hitl-agent"});
    let status =
        json!({"type":"a2a_status","taskId":"remote-1","state":"working","message":"Planning","agentName":"planner"});
    let mut frames =
        vec![text("Plan: ", Value::Null), status, text("", json!("stop")), text("deploy.", Value::Null), request];
    frames.extend(answer);
    let body: String = frames.iter().map(|frame| format!("{frame}\n")).collect();
    let (status, reply) = json_of(app.post_raw(&format!("/stream/{query}"), body).await).await;
    assert_eq!((status, reply["chunks_received"].as_u64()), (200, Some(frames.len() as u64)), "{reply}");
    assert_eq!(app.post_raw(&format!("/stream/{query}/complete"), "{}").await.status(), 200);
}

#[tokio::test]
async fn a_tool_approval_the_executor_asked_for_is_pending_in_the_state_until_answered_or_the_query_ends() {
    let app = TestApp::spawn().await;
    executor_stream(&app, "approve-me", None).await;
    let (status, state) = json_of(app.get("/queries/ns/approve-me/state").await).await;
    assert_eq!(status, 200);
    assert_eq!(state["phase"], "waiting", "{state}");
    let approval = &state["pendingToolApproval"];
    assert_eq!(approval["taskId"], "task-approve-me");
    assert_eq!(approval["toolCalls"][0]["function"]["name"], "deploy-application");
    assert_eq!((approval["agentName"].as_str(), approval["timeout"].as_str()), (Some("hitl-agent"), Some("5m0s")));
    assert_eq!(approval["onTimeout"], "reject");
    assert!(approval["since"].as_str().is_some_and(|since| since.ends_with('Z')), "{approval}");

    // The unified stream has the same frames as typed events; the boundary between "Plan: " and "deploy."
    // sends no text of its own.
    let mut reader =
        crate::support::SseReader::open(&app.client, &app.url("/stream/approve-me?format=unified&from-beginning=true"))
            .await;
    let mut events = Vec::new();
    while let Some(data) = reader.next_data().await.filter(|data| data != "[DONE]") {
        let frame: Value = serde_json::from_str(&data).unwrap();
        events.push((frame["event"].as_str().unwrap().to_owned(), frame["data"].clone()));
    }
    let names: Vec<&str> = events.iter().map(|(event, _)| event.as_str()).collect();
    assert_eq!(names, ["text_delta", "a2a_status", "text_delta", "tool_approval_request"], "{events:?}");
    assert_eq!(events[1].1, json!({"taskId":"remote-1","state":"working","message":"Planning","agentName":"planner"}));
    assert_eq!(events[3].1["toolCalls"], approval["toolCalls"]);

    // Answered: the matching response clears it; another task's does not.
    let response = |task: &str| json!({"type":"tool_approval_response","taskId":task,"action":"approved","timestamp":"2026-09-01T12:00:00Z"});
    executor_stream(&app, "other-task", Some(response("task-someone-else"))).await;
    let (_, state) = json_of(app.get("/queries/ns/other-task/state").await).await;
    assert_eq!(state["pendingToolApproval"]["taskId"], "task-other-task", "{state}");
    executor_stream(&app, "approved", Some(response("task-approved"))).await;
    let (_, state) = json_of(app.get("/queries/ns/approved/state").await).await;
    assert_eq!(
        (state["pendingToolApproval"].clone(), state["phase"].as_str()),
        (Value::Null, Some("completed")),
        "{state}"
    );
    // The Query ended (its final chunk carries ark.completedQuery): nothing is pending any more.
    let ended =
        json!({"id":"ended","object":"chat.completion.chunk","choices":[],"ark":{"completedQuery":{"name":"ended"}}});
    executor_stream(&app, "ended", Some(ended)).await;
    let (_, state) = json_of(app.get("/queries/ns/ended/state").await).await;
    assert_eq!(state["pendingToolApproval"], Value::Null, "{state}");
}
