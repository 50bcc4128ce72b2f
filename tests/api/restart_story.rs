//! The controller-restart story end to end, across three broker processes (seeds 001 and 002): a scripted
//! controller streams an `ask_question` tool call into Query `ns/q`, asks as an MCP task on A, records the
//! tool call ↔ task mapping on B and is restarted; the resume state on C says it waits; a person answers on
//! the page on B; the state on A says it can resume; `tasks/result` on C returns the answer; the unified
//! stream on every replica tells the story in order.

use std::convert::Infallible;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::support::{Replica, SseReader, fresh_database, mcp::Mcp, open_body, within};

/// The controller's long-lived chunk POST (Ark's Go executor keeps one open for the whole query).
fn open_chunk_post(
    client: &reqwest::Client,
    url: String,
) -> (mpsc::Sender<Result<Bytes, Infallible>>, tokio::task::JoinHandle<()>) {
    let (lines, body) = open_body();
    let request = client.post(url).header("content-type", "application/x-ndjson").body(body);
    (lines, tokio::spawn(async move { drop(request.send().await) }))
}

fn chunk(delta: Value, finish: Value) -> Bytes {
    let chunk = json!({"id":"chatcmpl-7","object":"chat.completion.chunk","choices":[{"index":0,"delta":delta,"finish_reason":finish}],
                       "ark":{"query":"q","agent":"deployer"}});
    Bytes::from(format!("{chunk}\n"))
}

async fn state(client: &reqwest::Client, replica: &Replica) -> Value {
    let response = client.get(replica.url("/queries/ns/q/state")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test]
async fn a_restarted_controller_learns_from_any_replica_what_its_query_waits_on_and_resumes_it() {
    let url = fresh_database().await;
    let (a, b, c) = tokio::join!(Replica::start(&url), Replica::start(&url), Replica::start(&url));
    let client = reqwest::Client::new();
    let mut live = SseReader::open(&client, &c.url("/stream/q?format=unified")).await;

    // The controller streams the LLM's answer: a tool call to ask_question.
    let (lines, post) = open_chunk_post(&client, a.url("/stream/q"));
    lines.send(Ok(chunk(json!({"role":"assistant","content":"I need a decision."}), Value::Null))).await.unwrap();
    let call = json!({"tool_calls":[{"index":0,"id":"call_deploy","type":"function",
                                       "function":{"name":"ask_question","arguments":"{\"content\":\"Deploy?\"}"}}]});
    lines.send(Ok(chunk(call, Value::Null))).await.unwrap();
    lines.send(Ok(chunk(json!({}), json!("tool_calls")))).await.unwrap();
    // Stored (and seen live on C) before the tool runs, as a controller that streams before it calls.
    let seen: Vec<Value> = live.take_data(2).await.iter().map(|f| serde_json::from_str(f).unwrap()).collect();
    assert_eq!(seen[1]["event"], "tool_call_start");

    // It calls ask_question as an MCP task on A, naming its Query, and records the mapping on B.
    let controller = Mcp::new(&a.mcp_url).with_header("x-ark-query", "ns/q");
    let args = json!({"recipient":"ark://users/dave","content":"Deploy v2 to prod?"});
    let created =
        controller.legacy("tools/call", json!({"name":"ask_question","arguments":args,"task":{"ttl":600000}})).await;
    let task_id = created.result()["task"]["taskId"].as_str().expect("a task").to_owned();
    let mapped = client
        .put(b.url("/queries/ns/q/tool-calls/call_deploy"))
        .json(&json!({"taskId": task_id}))
        .send()
        .await
        .unwrap();
    assert_eq!(mapped.status(), 200);

    // The controller restarts: its connections are gone, it keeps nothing.
    drop(lines);
    post.abort();
    drop(controller);

    let waiting = state(&client, &c).await;
    assert_eq!(waiting["phase"], "waiting");
    assert_eq!(
        (waiting["waitingFor"]["taskId"].as_str(), waiting["waitingFor"]["toolCallId"].as_str()),
        (Some(task_id.as_str()), Some("call_deploy"))
    );
    assert_eq!(waiting["blockedOn"]["status"], "pending");
    assert_eq!(waiting["canResume"], false);
    assert_eq!(waiting["pendingToolCalls"][0]["toolCallId"], "call_deploy");
    let question_id = waiting["waitingFor"]["questionId"].as_str().unwrap().to_owned();

    // A person answers on the page served by B (its form, as a browser without JavaScript posts it).
    let no_redirects = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let answered = no_redirects
        .post(b.url(&format!("/ui/questions/{question_id}/answer")))
        .form(&[("response", "Yes, deploy"), ("answeredBy", "dave"), ("back", "/ui/queries/ns/q")])
        .send()
        .await
        .unwrap();
    assert_eq!(answered.headers()["location"], format!("/ui/queries/ns/q?answered={question_id}"));

    let resumable = state(&client, &a).await;
    assert_eq!((resumable["phase"].as_str(), resumable["canResume"].as_bool()), (Some("running"), Some(true)));
    assert_eq!(
        resumable["blockedOn"],
        json!({"type":"question","questionId":question_id,"taskId":task_id,"toolCallId":"call_deploy","status":"answered"})
    );

    // The new controller fetches the task's result on C.
    let restarted = Mcp::new(&c.mcp_url);
    let result = within("tasks/result", restarted.legacy("tasks/result", json!({"taskId": task_id}))).await;
    assert_eq!(result.result()["structuredContent"]["response"], "Yes, deploy");

    let story =
        ["text_delta", "tool_call_start", "question_raised", "phase_change", "question_answered", "phase_change"];
    for replica in [&a, &b, &c] {
        let mut reader = SseReader::open(&client, &replica.url("/stream/q?format=unified&from-beginning=true")).await;
        let frames: Vec<Value> = reader.take_data(6).await.iter().map(|f| serde_json::from_str(f).unwrap()).collect();
        let events: Vec<&str> = frames.iter().map(|f| f["event"].as_str().unwrap()).collect();
        assert_eq!(events, story, "on {}", replica.base);
        assert_eq!(frames[1]["data"]["tool_call_id"], "call_deploy");
        assert_eq!(
            (frames[2]["data"]["task_id"].as_str(), frames[2]["data"]["question_id"].as_str()),
            (Some(task_id.as_str()), Some(question_id.as_str()))
        );
        assert_eq!(
            (frames[3]["data"]["from"].as_str(), frames[3]["data"]["to"].as_str()),
            (Some("running"), Some("waiting"))
        );
        assert_eq!(frames[4]["data"], json!({"question_id":question_id,"response":"Yes, deploy","answered_by":"dave"}));
        assert_eq!(
            (frames[5]["data"]["from"].as_str(), frames[5]["data"]["to"].as_str()),
            (Some("waiting"), Some("running"))
        );
    }
    // The reader that was live on C from the start saw the same, as it happened.
    let frames: Vec<Value> = live.take_data(4).await.iter().map(|f| serde_json::from_str(f).unwrap()).collect();
    assert_eq!(frames.iter().map(|f| f["event"].as_str().unwrap()).collect::<Vec<_>>(), story[2..]);
}
