//! The human-in-the-loop wake: a question asked as an MCP task (2025-11-25 era) on replica C, its
//! `tasks/result` waiting on replica B, the answer given over REST on replica A; latency = from sending the
//! answer to receiving the `tasks/result` reply.
//!
//! "Waiting" is an event, not a sleep: B subscribes to the question before it sends the reply's headers
//! (an SSE reply, since we accept `text/event-stream`), so once the headers are here B is waiting.

use std::time::Instant;

use futures::StreamExt;
use serde_json::{Value, json};

use crate::replicas::Replica;

const PROTOCOL: &str = "2025-11-25";
const RECIPIENT: &str = "ark://users/bench-hitl";
const RECIPIENT_ENCODED: &str = "ark%3A%2F%2Fusers%2Fbench-hitl";

/// Wake latencies (µs, sorted) and failed iterations.
#[derive(Debug, Default)]
pub struct Wakes {
    /// Answer sent → `tasks/result` reply received, per successful iteration.
    pub latencies_us: Vec<u64>,
    /// Iterations that went wrong, with why.
    pub errors: Vec<String>,
}

/// Runs `iterations` wakes: ask on `c`, wait on `b`, answer on `a`.
pub async fn run(client: &reqwest::Client, a: &Replica, b: &Replica, c: &Replica, iterations: usize) -> Wakes {
    let mut wakes = Wakes::default();
    for i in 0..iterations {
        match wake(client, a, b, c, i).await {
            Ok(latency) => wakes.latencies_us.push(latency),
            Err(error) => wakes.errors.push(format!("iteration {i}: {error}")),
        }
    }
    wakes.latencies_us.sort_unstable();
    wakes
}

async fn wake(client: &reqwest::Client, a: &Replica, b: &Replica, c: &Replica, i: usize) -> Result<u64, String> {
    let content = format!("bench question {i}");
    let arguments = json!({"recipient": RECIPIENT, "content": content});
    let params = json!({"name": "ask_question", "arguments": arguments, "task": {"ttl": 60000}});
    let created = read_reply(mcp(client, &c.mcp_url, "tools/call", &params).await?).await?;
    let task_id = created
        .pointer("/result/task/taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("no task in {created}"))?
        .to_owned();
    let question_id = pending_question(client, a, &content).await?;

    let waiting = mcp(client, &b.mcp_url, "tasks/result", &json!({"taskId": task_id})).await?;
    let waiting = tokio::spawn(async move {
        let reply = read_reply(waiting).await;
        (reply, Instant::now())
    });
    let sent = Instant::now();
    let answered = client
        .post(format!("{}/questions/{question_id}/answer", a.base))
        .json(&json!({"response": "ok"}))
        .send()
        .await
        .map_err(|e| format!("answer: {e}"))?;
    if !answered.status().is_success() {
        return Err(format!("answer: HTTP {}", answered.status()));
    }
    let (reply, received) = waiting.await.map_err(|e| e.to_string())?;
    let reply = reply?;
    if reply.pointer("/result/structuredContent/response") != Some(&json!("ok")) {
        return Err(format!("unexpected tasks/result reply {reply}"));
    }
    Ok((received - sent).as_micros() as u64)
}

/// The id of the one pending question with `content` (the task reply names only the task).
async fn pending_question(client: &reqwest::Client, a: &Replica, content: &str) -> Result<String, String> {
    let list: Value = client
        .get(format!("{}/questions?status=pending&recipient={RECIPIENT_ENCODED}", a.base))
        .send()
        .await
        .map_err(|e| format!("list questions: {e}"))?
        .json()
        .await
        .map_err(|e| format!("list questions: {e}"))?;
    list["items"]
        .as_array()
        .and_then(|items| items.iter().find(|q| q["content"] == content))
        .and_then(|q| q["id"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| format!("the question is not listed as pending: {list}"))
}

/// Sends a 2025-11-25 JSON-RPC request; returns once the reply's headers are here.
async fn mcp(client: &reqwest::Client, url: &str, method: &str, params: &Value) -> Result<reqwest::Response, String> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", PROTOCOL)
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("{method}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("{method}: HTTP {}", response.status()));
    }
    Ok(response)
}

/// The JSON-RPC response of a reply, plain JSON or the first SSE message with an `id`.
async fn read_reply(response: reqwest::Response) -> Result<Value, String> {
    let is_sse = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_sse {
        return response.json().await.map_err(|e| e.to_string());
    }
    let mut body = response.bytes_stream();
    let mut buffer = String::new();
    while let Some(piece) = body.next().await {
        buffer.push_str(&String::from_utf8_lossy(&piece.map_err(|e| e.to_string())?));
        while let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            for data in frame.lines().filter_map(|line| line.strip_prefix("data:")) {
                if let Ok(message) = serde_json::from_str::<Value>(data.trim())
                    && message.get("id").is_some()
                {
                    return Ok(message);
                }
            }
        }
    }
    Err("the reply ended without a response".to_owned())
}
