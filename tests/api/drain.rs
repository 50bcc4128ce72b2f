//! SIGTERM while an agent waits: a blocking `ask_question` ends with a JSON-RPC error telling the caller to
//! retry (not an HTTP 500), its question stays pending for another replica; an open chunk POST is let
//! finish, and only one still open near the shutdown timeout is answered with how many of its lines are
//! stored; the process exits cleanly.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Replica, fresh_database, mcp::Mcp, open_body, within};

#[tokio::test]
async fn sigterm_ends_a_blocking_ask_with_a_retryable_error_and_keeps_the_question() {
    let url = fresh_database().await;
    let (mut a, b) = tokio::join!(Replica::start(&url), Replica::start(&url));
    let client = reqwest::Client::new();
    let mcp = Mcp::new(&a.mcp_url);
    let call = tokio::spawn(async move {
        let params = json!({"name": "ask_question", "arguments": {"recipient": "ark://users/dave", "content": "Still there?"},
                            "_meta": {"progressToken": "p"}});
        mcp.legacy("tools/call", params).await
    });
    let id = within("the question to be stored", async {
        loop {
            let list: Value =
                client.get(b.url("/questions?status=pending")).send().await.unwrap().json().await.unwrap();
            if let Some(id) = list["items"][0]["id"].as_str() {
                return id.to_owned();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;

    a.terminate();
    let reply = within("the blocking call to end", call).await.unwrap();
    assert_eq!(reply.status, 200, "a JSON-RPC answer, not an HTTP error: {:?}", reply.message);
    let error = &reply.message["error"];
    assert!(error["message"].as_str().unwrap().contains("retry"), "{error}");
    assert_eq!(error["data"], json!({"questionId": id, "retry": true}));
    assert!(a.wait().await, "the replica exits cleanly");

    let question: Value = client.get(b.url(&format!("/questions/{id}"))).send().await.unwrap().json().await.unwrap();
    assert_eq!(question["status"], "pending", "the question outlives the call");
}

#[tokio::test]
async fn sigterm_lets_an_open_chunk_post_finish_and_stores_every_line() {
    let url = fresh_database().await;
    let (mut a, b) = tokio::join!(Replica::start(&url), Replica::start(&url));
    let client = reqwest::Client::new();
    let (lines, body) = open_body();
    let post = tokio::spawn({
        let request = client.post(a.url("/stream/finishing")).header("content-type", "application/x-ndjson").body(body);
        async move { request.send().await.unwrap() }
    });
    let mut reader = crate::support::SseReader::open(&client, &b.url("/stream/finishing?from-beginning=true")).await;
    for n in 0..3 {
        lines.send(Ok(bytes::Bytes::from(format!("{{\"n\":{n}}}\n")))).await.unwrap();
    }
    assert_eq!(reader.take_data(3).await.len(), 3, "the first lines are stored");

    a.terminate();
    within("readiness to fail", async {
        while let Ok(response) = client.get(a.url("/readyz")).send().await
            && response.status() == 200
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    for n in 3..6 {
        lines.send(Ok(bytes::Bytes::from(format!("{{\"n\":{n}}}\n")))).await.unwrap();
    }
    assert_eq!(reader.take_data(3).await.len(), 3, "lines sent while draining are stored too");
    drop(lines);
    let reply = within("the chunk POST to be answered", post).await.unwrap();
    assert_eq!(reply.status(), 200, "the POST finishes as if nothing happened");
    let body: Value = reply.json().await.unwrap();
    assert_eq!((body["chunks_received"].clone(), body["chunks_stored"].clone()), (json!(6), json!(6)), "{body}");
    assert!(a.wait().await, "the replica exits cleanly once its last POST is answered");
}

#[tokio::test]
async fn a_chunk_post_still_open_near_the_shutdown_timeout_gets_503_with_what_it_stored() {
    let url = fresh_database().await;
    let args = ["--shutdown-timeout-seconds", "3"];
    let (mut a, b) = tokio::join!(Replica::start_with(&url, &args), Replica::start(&url));
    let client = reqwest::Client::new();
    let (lines, body) = open_body();
    let post = tokio::spawn({
        let request = client.post(a.url("/stream/draining")).header("content-type", "application/x-ndjson").body(body);
        async move { request.send().await.unwrap() }
    });
    let mut reader = crate::support::SseReader::open(&client, &b.url("/stream/draining?from-beginning=true")).await;
    for n in 0..3 {
        lines.send(Ok(bytes::Bytes::from(format!("{{\"n\":{n}}}\n")))).await.unwrap();
    }
    assert_eq!(reader.take_data(3).await.len(), 3, "the three lines are stored");
    lines.send(Ok(bytes::Bytes::from_static(b"{\"n\":3, \"cut\":"))).await.unwrap();

    a.terminate();
    let reply = within("the chunk POST to be answered", post).await.unwrap();
    assert_eq!(reply.status(), 503);
    assert_eq!(reply.headers()["retry-after"], "1");
    let body: Value = reply.json().await.unwrap();
    assert_eq!(body["chunks_stored"], 3, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("shutting down"), "{body}");
    assert!(a.wait().await, "the replica exits cleanly with the POST still open");
    drop(lines);
}
