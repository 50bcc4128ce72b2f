//! Ark's own Python SDK (`ark-sdk`, pinned in tests/ark_sdk) against three broker processes: its
//! `BrokerClient` used as an execution engine uses it, and its executor app (the A2A adapter) driven as Ark's
//! controller drives it. Read back from the other replicas as Ark's readers do (one waiting before the first
//! chunk, the others after the end): the chunk stream (every chunk in order, the one carrying
//! `ark.completedQuery`, then `[DONE]`), the conversation's messages, and the session the controller's events
//! and the SDK's messages build.
//! ark-api's OpenAI-compatible endpoint, on the same SDK, is in `ark_api_openai.rs`.

use std::{
    path::{Path, PathBuf},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use serde_json::{Value, json};

use crate::{
    sessions::controller_event,
    support::{Replica, SseReader, balancer::Balancer, fresh_database},
};

const AGENT: &str = "weather-agent";

fn tool_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Runs `tests/ark_sdk/<script>` with the pinned SDK; fails the test unless it exits 0. Returns its last
/// stdout line as JSON.
pub async fn run_sdk_script(script: &str, args: &[&str]) -> Value {
    let python = tool_path("tests/ark_sdk/.venv/bin/python");
    assert!(
        python.exists(),
        "this test needs the pinned ark-sdk; ./scripts/test installs it (scripts/python-venv tests/ark_sdk)"
    );
    // What the script writes to the temp dir (executor_app.py's kubeconfig) goes to one of this run's own,
    // removed when the test ends, even if the script is killed at the timeout.
    let scratch = tempfile::Builder::new().prefix("ark-sdk-").tempdir().expect("create the script's temp dir");
    let run = tokio::process::Command::new(&python)
        .arg(tool_path(&format!("tests/ark_sdk/{script}")))
        .args(args)
        .env("TMPDIR", scratch.path())
        .env_remove("KUBECONFIG")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .kill_on_drop(true)
        .output();
    // Importing the SDK (its generated Kubernetes clients) alone takes seconds on a busy machine.
    let output = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .unwrap_or_else(|_| panic!("{script} did not finish in 120 s"))
        .expect("run python");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{script} failed:\n{stdout}\n{stderr}");
    let last = stdout.lines().last().unwrap_or_else(|| panic!("{script} printed nothing:\n{stderr}"));
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{script}'s last line is not JSON ({e}): {last}"))
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// `GET /stream/{query}?from-beginning=true` on `replica`: the chunks before `[DONE]`, after checking that
/// `[DONE]` comes and the response ends right after it. Each chunk's `created` (the SDK's clock) is checked
/// to lie in `since..` and removed, and a completed Query's `response.raw` is parsed, so the rest can be
/// compared exactly.
async fn stream_on(client: &reqwest::Client, replica: &Replica, query: &str, since: u64) -> Vec<Value> {
    read_to_done(open_stream(client, replica, query).await, query, since).await
}

/// Opens `GET /stream/{query}?from-beginning=true` on `replica`, as ark-api's chunk proxy does.
async fn open_stream(client: &reqwest::Client, replica: &Replica, query: &str) -> SseReader {
    SseReader::open(client, &replica.url(&format!("/stream/{query}?from-beginning=true"))).await
}

/// The rest of [`stream_on`] on a stream already open (for a reader that was waiting before any chunk).
async fn read_to_done(mut reader: SseReader, query: &str, since: u64) -> Vec<Value> {
    let mut chunks = Vec::new();
    loop {
        let data =
            reader.next_data().await.unwrap_or_else(|| panic!("{query}'s stream ended before [DONE]: {chunks:?}"));
        if data == "[DONE]" {
            break;
        }
        let mut chunk: Value =
            serde_json::from_str(&data).unwrap_or_else(|e| panic!("a chunk that is not JSON ({e}): {data}"));
        let created = chunk.as_object_mut().unwrap().remove("created").and_then(|c| c.as_u64());
        assert!(created.is_some_and(|c| (since..=unix_now()).contains(&c)), "`created` of {data}");
        // `response.raw` is the answer's messages as a JSON string (Python's formatting): compared as JSON.
        if let Some(raw) = chunk.pointer_mut("/ark/completedQuery/status/response/raw") {
            let text = raw.as_str().unwrap_or_else(|| panic!("`raw` is not a string: {data}")).to_owned();
            *raw = serde_json::from_str(&text).unwrap_or_else(|e| panic!("`raw` is not JSON ({e}): {data}"));
        }
        chunks.push(chunk);
    }
    reader.expect_end().await;
    chunks
}

/// A chunk as `BrokerClient.send_chunk` writes it (without `created`).
fn sdk_chunk(query: &str, conversation: &str, delta: Value, finish_reason: Value) -> Value {
    json!({"id": query, "object": "chat.completion.chunk", "model": format!("agent/{AGENT}"),
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
           "ark": {"query": query, "session": conversation, "agent": AGENT}})
}

/// The chunk `BrokerClient.send_final_chunk` writes: the completed Query in `ark.completedQuery`.
fn sdk_final_chunk(query: &str, conversation: &str, status_extra: Value, answer: &str) -> Value {
    let raw = json!([{"role": "assistant", "content": answer}]);
    let mut status = json!({"phase": "done", "conversationId": conversation,
                            "response": {"content": answer, "phase": "done", "raw": raw}});
    status.as_object_mut().unwrap().extend(status_extra.as_object().cloned().unwrap_or_default());
    json!({"id": "chatcmpl-final", "object": "chat.completion.chunk", "model": format!("agent/{AGENT}"),
           "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": "stop"}],
           "ark": {"query": query, "session": conversation, "agent": AGENT,
                   "completedQuery": {"metadata": {"name": query}, "status": status}}})
}

fn text(content: &str) -> Value {
    json!({"role": "assistant", "content": content})
}

/// `GET /messages?conversation_id=…` on `replica`: `(query_id, message)` of each item, after checking that
/// every item is in the conversation and the sequences increase.
async fn messages_on(client: &reqwest::Client, replica: &Replica, conversation: &str) -> Vec<(String, Value)> {
    let page: Value = client
        .get(replica.url(&format!("/messages?conversation_id={conversation}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page["hasMore"], false, "{page}");
    let items = page["items"].as_array().unwrap_or_else(|| panic!("no items: {page}"));
    let sequences: Vec<i64> = items.iter().map(|i| i["sequence"].as_i64().unwrap()).collect();
    assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{page}");
    for item in items {
        assert_eq!(item["conversation_id"], conversation, "{page}");
    }
    items.iter().map(|i| (i["query_id"].as_str().unwrap().to_owned(), i["message"].clone())).collect()
}

async fn post_event(client: &reqwest::Client, replica: &Replica, event: &Value) {
    let response = client.post(replica.url("/events")).json(event).send().await.unwrap();
    assert_eq!(response.status(), 201, "{event}");
}

async fn session_on(client: &reqwest::Client, replica: &Replica, id: &str) -> Value {
    let response = client.get(replica.url(&format!("/sessions/{id}"))).send().await.unwrap();
    assert_eq!(response.status(), 200, "GET /sessions/{id}");
    response.json().await.unwrap()
}

/// `(conversationId, name, participants, messageCount, participantType, errorCount)` of each conversation.
fn conversations_of(session: &Value) -> Vec<(String, String, Value, u64, String, u64)> {
    let list = session["conversations"].as_array().unwrap_or_else(|| panic!("no conversations: {session}"));
    list.iter()
        .map(|c| {
            let s = |field: &str| c[field].as_str().unwrap_or_default().to_owned();
            let n = |field: &str| c[field].as_u64().unwrap_or(u64::MAX);
            (
                s("conversationId"),
                s("name"),
                c["participants"].clone(),
                n("messageCount"),
                s("participantType"),
                n("errorCount"),
            )
        })
        .collect()
}

#[tokio::test]
#[ignore = "needs Python with ark-sdk (tests/ark_sdk): ./scripts/test installs it and runs it"]
async fn the_sdks_broker_client_on_three_replicas_is_read_back_whole_on_each() {
    let url = fresh_database().await;
    let (a, b, c) = tokio::join!(Replica::start(&url), Replica::start(&url), Replica::start(&url));
    let client = reqwest::Client::new();
    let (query, conversation, session) = ("weather-query", "conv-sdk-1", "session-sdk-1");
    // The controller announces the query (it does not know the conversation yet: the engine makes it).
    post_event(&client, &a, &controller_event(session, query, "QueryExecutionStart", json!({}))).await;
    // A chat reader on C is waiting before the first chunk exists.
    let waiting = open_stream(&client, &c, query).await;

    let since = unix_now();
    let sent = run_sdk_script("broker_client.py", &[query, conversation, &a.base, &b.base, &c.base]).await;
    assert_eq!(sent, json!({"warnings": []}), "every SDK call was answered 200 or 202");

    // The chunks from A, B, C and A again, then the final one from C, then [DONE] from A's complete (B's
    // second complete changes nothing): the same on every replica.
    let tool_call = json!({"index": 0, "id": "call_weather_1", "type": "function",
                           "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}});
    let answer = "The weather in Paris is sunny.";
    let usage = json!({"tokenUsage": {"promptTokens": 31, "completionTokens": 9, "totalTokens": 40}});
    let expected = vec![
        sdk_chunk(query, conversation, text("The weather"), Value::Null),
        sdk_chunk(query, conversation, text(" in Paris"), Value::Null),
        sdk_chunk(
            query,
            conversation,
            json!({"role": "assistant", "content": "", "tool_calls": [tool_call]}),
            Value::Null,
        ),
        sdk_chunk(query, conversation, text(" is sunny."), json!("stop")),
        sdk_final_chunk(query, conversation, usage, answer),
    ];
    assert_eq!(read_to_done(waiting, query, since).await, expected, "the stream live on C");
    for replica in [&a, &b, &c] {
        assert_eq!(stream_on(&client, replica, query, since).await, expected, "the stream on {}", replica.base);
    }

    // The conversation memory B took, read on C and A.
    let memory = vec![
        (query.to_owned(), json!({"role": "user", "content": "What is the weather in Paris?"})),
        (query.to_owned(), text(answer)),
    ];
    assert_eq!(messages_on(&client, &c, conversation).await, memory);
    assert_eq!(messages_on(&client, &a, conversation).await, memory);

    // The SDK's messages gave the running query its conversation; the controller's completion ends it.
    let running = session_on(&client, &c, session).await;
    assert_eq!(
        (running["queries"][query]["conversationId"].as_str(), running["queries"][query]["phase"].as_str()),
        (Some(conversation), Some("running")),
        "{running}"
    );
    assert_eq!(running["status"], "active");
    post_event(&client, &b, &controller_event(session, query, "QueryExecutionComplete", json!({}))).await;
    let done = session_on(&client, &a, session).await;
    assert_eq!(done["queries"][query]["phase"], "done", "{done}");
    assert_eq!(done["status"], "idle", "{done}");
    assert_eq!(
        conversations_of(&done),
        vec![(conversation.to_owned(), AGENT.to_owned(), json!([AGENT]), 1, "agent".to_owned(), 0)]
    );
    let listed: Value = client.get(b.url("/sessions")).send().await.unwrap().json().await.unwrap();
    assert_eq!(listed["sessions"][session], done, "GET /sessions on B lists the same session");
}

#[tokio::test]
#[ignore = "needs Python with ark-sdk (tests/ark_sdk): ./scripts/test installs it and runs it"]
async fn the_sdks_executor_app_streams_through_a_service_of_three_replicas_as_the_controller_drives_it() {
    let url = fresh_database().await;
    let (a, b, c) = tokio::join!(Replica::start(&url), Replica::start(&url), Replica::start(&url));
    // The engine reaches the broker through its Service: each of the SDK's calls (a new connection each) goes
    // to the next replica.
    let service = Balancer::start(&[&a.base, &b.base, &c.base]).await;
    let client = reqwest::Client::new();
    let session = "session-sdk-app";
    let (streaming, streaming_conversation) = ("streaming-query", "conv-streaming");
    let (plain, plain_conversation) = ("plain-query", "conv-plain");
    for (query, conversation) in [(streaming, streaming_conversation), (plain, plain_conversation)] {
        let start = controller_event(session, query, "QueryExecutionStart", json!({"conversationId": conversation}));
        post_event(&client, &a, &start).await;
    }

    // Chat readers on C are waiting before the first chunk of either query exists.
    let (waiting_streaming, waiting_plain) =
        (open_stream(&client, &c, streaming).await, open_stream(&client, &c, plain).await);

    let since = unix_now();
    let args = [service.base.as_str(), "default", streaming, streaming_conversation, plain, plain_conversation];
    let ran = run_sdk_script("executor_app.py", &args).await;
    assert_eq!(ran["warnings"], json!([]), "{ran}");
    let query_path =
        |kind: &str, name: &str| format!("GET /apis/ark.mckinsey.com/v1alpha1/namespaces/default/{kind}/{name}");
    assert_eq!(
        ran["kubernetes"],
        json!([
            query_path("queries", streaming),
            query_path("agents", AGENT),
            query_path("queries", plain),
            query_path("agents", AGENT)
        ]),
        "the adapter resolved each Query and its Agent"
    );
    // The A2A replies the controller gets back (the message id aside).
    for (query, conversation, answer) in
        [(streaming, streaming_conversation, "Sunny and 21°C"), (plain, plain_conversation, "Rain in Rome")]
    {
        let mut reply = ran["replies"][query].clone();
        assert!(reply.as_object_mut().and_then(|r| r.remove("messageId")).is_some(), "{ran}");
        assert_eq!(
            reply,
            json!({"contextId": conversation, "kind": "message", "role": "agent", "parts": [{"kind": "text", "text": answer}]})
        );
    }

    let tool_call = json!({"index": 0, "id": "call_weather_1", "type": "function",
                           "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}});
    let streamed = vec![
        sdk_chunk(streaming, streaming_conversation, text("Sunny"), Value::Null),
        sdk_chunk(
            streaming,
            streaming_conversation,
            json!({"role": "assistant", "content": "", "tool_calls": [tool_call]}),
            Value::Null,
        ),
        sdk_chunk(streaming, streaming_conversation, text(" and 21°C"), Value::Null),
        sdk_final_chunk(streaming, streaming_conversation, json!({}), "Sunny and 21°C"),
    ];
    // The executor that streamed nothing: the adapter sends its answer as one chunk.
    let whole = vec![
        sdk_chunk(plain, plain_conversation, text("Rain in Rome"), json!("stop")),
        sdk_final_chunk(plain, plain_conversation, json!({}), "Rain in Rome"),
    ];
    assert_eq!(read_to_done(waiting_streaming, streaming, since).await, streamed, "{streaming} live on C");
    assert_eq!(read_to_done(waiting_plain, plain, since).await, whole, "{plain} live on C");
    for replica in [&a, &b, &c] {
        assert_eq!(stream_on(&client, replica, streaming, since).await, streamed, "{streaming} on {}", replica.base);
        assert_eq!(stream_on(&client, replica, plain, since).await, whole, "{plain} on {}", replica.base);
    }
    // The adapter's memory: the user's input, then the answer.
    assert_eq!(
        messages_on(&client, &b, streaming_conversation).await,
        vec![
            (streaming.to_owned(), json!({"role": "user", "content": "What is the weather in Paris?"})),
            (streaming.to_owned(), text("Sunny and 21°C"))
        ]
    );
    assert_eq!(
        messages_on(&client, &c, plain_conversation).await,
        vec![
            (plain.to_owned(), json!({"role": "user", "content": "And in Rome?"})),
            (plain.to_owned(), text("Rain in Rome"))
        ]
    );

    for query in [streaming, plain] {
        post_event(&client, &b, &controller_event(session, query, "QueryExecutionComplete", json!({}))).await;
    }
    let done = session_on(&client, &c, session).await;
    for query in [streaming, plain] {
        assert_eq!(done["queries"][query]["phase"], "done", "{done}");
    }
    assert_eq!(done["status"], "idle", "{done}");
    let conversation = |id: &str| (id.to_owned(), AGENT.to_owned(), json!([AGENT]), 1, "agent".to_owned(), 0);
    assert_eq!(conversations_of(&done), vec![conversation(streaming_conversation), conversation(plain_conversation)]);
}
