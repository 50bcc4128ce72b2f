//! The traffic of the primary-change scenarios: Ark's chunk writers and readers and the rest of its writes,
//! and what each saw.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::REPLY;
use crate::support::open_body;

/// What one chunk writer saw: lines sent, when its body took no more (seconds into the load), the POST's status
/// and `chunks_stored` (or why it got no reply), the `/complete` status.
pub struct Writer {
    pub stream: String,
    pub sent: Vec<String>,
    pub cut_at: Option<f64>,
    pub reply: Result<(u16, Option<u64>), String>,
    pub complete: Result<u16, String>,
}

/// What one reader saw: the lines of each response (it comes back from the beginning when one ends early),
/// and whether the last ended with `[DONE]`.
pub struct Reading {
    pub segments: Vec<Vec<String>>,
    pub done: bool,
}

/// A write the broker acknowledged, to look for on the new primary.
#[derive(Debug)]
pub enum Ack {
    Message(String),
    Event(String),
    Asked(String),
    Answered(String),
    AskedOverMcp(String),
}

/// A request's status and body, or why it got none (a hang is anything over [`REPLY`]).
pub async fn call(request: reqwest::RequestBuilder) -> Result<(u16, String), String> {
    let exchange = async {
        let response = request.send().await?;
        let status = response.status().as_u16();
        Ok::<_, reqwest::Error>((status, response.text().await?))
    };
    match tokio::time::timeout(REPLY, exchange).await {
        Ok(Ok(reply)) => Ok(reply),
        Ok(Err(error)) => Err(format!("no reply: {error}")),
        Err(_) => Err(format!("no reply within {REPLY:?}")),
    }
}

/// One stream as Ark's executor writes it: one chunk POST held open, a line every 20–50 ms until `stop` (or
/// until the body takes no more), then the body ends and the stream is completed on another replica (every
/// fourth writer calls `/complete` before it ends its body).
pub async fn write(bases: Vec<String>, w: usize, stop: CancellationToken, t0: Instant) -> Writer {
    let (stream, client) = (format!("w{w}"), reqwest::Client::new());
    let (sender, body) = open_body();
    let request =
        client.post(format!("{}/stream/{stream}", bases[w % 3])).header("content-type", "application/x-ndjson");
    let post = tokio::spawn(call(request.body(body)));
    let mut ticker = tokio::time::interval(Duration::from_millis(20 + (w as u64 * 7) % 31));
    let (mut sent, mut cut_at) = (Vec::new(), None);
    loop {
        tokio::select! { _ = stop.cancelled() => break, _ = ticker.tick() => {} }
        let line = json!({"w": w, "n": sent.len()}).to_string();
        let delivered = tokio::select! {
            delivered = sender.send(Ok(bytes::Bytes::from(format!("{line}\n")))) => delivered.is_ok(),
            _ = stop.cancelled() => break,
        };
        if !delivered || post.is_finished() {
            cut_at = Some(t0.elapsed().as_secs_f64());
            break;
        }
        sent.push(line);
    }
    let complete = client.post(format!("{}/stream/{stream}/complete", bases[(w + 2) % 3])).json(&json!({}));
    // The writers that end during the switch call `/complete` at once, with their POST still open (its last
    // lines possibly still held for the new primary), as Ark's executor does; the others after their reply.
    let completing = (w % 4 == 3).then(|| tokio::spawn(call(complete.try_clone().expect("a JSON body"))));
    if completing.is_some() {
        // The executor closes its body once it has called: let the call reach the broker first.
        tokio::task::yield_now().await;
    }
    drop(sender);
    let reply = post.await.expect("the POST task").map(|(status, body)| {
        (status, serde_json::from_str::<Value>(&body).ok().and_then(|v| v["chunks_stored"].as_u64()))
    });
    let complete = match completing {
        Some(completing) => completing.await.expect("the /complete task"),
        None => call(complete).await,
    };
    let complete = complete.map(|(status, _)| status);
    Writer { stream, sent, cut_at, reply, complete }
}

/// Reads a stream from the beginning until `[DONE]`, coming back from the beginning whenever a response ends
/// first (or is refused), until `stop`; adds a permit to `flowing` once the first line arrived.
pub async fn read(url: String, mut flowing: Option<Arc<Semaphore>>, stop: CancellationToken) -> Reading {
    let client = reqwest::Client::new();
    let mut reading = Reading { segments: Vec::new(), done: false };
    loop {
        let response =
            tokio::select! { response = client.get(&url).send() => response, _ = stop.cancelled() => return reading };
        let Some(response) = response.ok().filter(|r| r.status() == 200) else {
            tokio::select! { _ = tokio::time::sleep(Duration::from_millis(100)) => continue, _ = stop.cancelled() => return reading };
        };
        let (mut body, mut buffer) = (response.bytes_stream(), String::new());
        reading.segments.push(Vec::new());
        let lines = reading.segments.last_mut().unwrap();
        loop {
            let next = tokio::select! { next = body.next() => next, _ = stop.cancelled() => return reading };
            let Some(Ok(bytes)) = next else { break };
            buffer.push_str(&String::from_utf8_lossy(&bytes));
            while let Some(end) = buffer.find("\n\n") {
                let frame: String = buffer.drain(..end + 2).collect();
                match frame.trim_end().strip_prefix("data: ") {
                    Some("[DONE]") => return Reading { done: true, ..reading },
                    Some(data) => lines.push(data.to_owned()),
                    None => {}
                }
            }
            if !lines.is_empty()
                && let Some(flowing) = flowing.take()
            {
                flowing.add_permits(1);
            }
        }
    }
}

/// The rest of Ark's writes, one every 100 ms until `stop`, round-robin over the replicas: `kind` 0 appends
/// messages, 1 posts events, 2 asks questions and answers each on another replica, 3 asks over MCP (a task).
/// Returns what was acknowledged (and when it was sent, in seconds into the load) and what failed.
pub async fn side_load(
    kind: usize,
    bases: Vec<String>,
    mcps: Vec<String>,
    stop: CancellationToken,
    t0: Instant,
) -> (Vec<(Ack, f64)>, Vec<String>) {
    let client = reqwest::Client::new();
    let (mut acks, mut errors) = (Vec::new(), Vec::new());
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    for i in 0.. {
        tokio::select! { _ = stop.cancelled() => break, _ = ticker.tick() => {} }
        let (base, other, at) = (&bases[i % 3], &bases[(i + 1) % 3], t0.elapsed().as_secs_f64());
        let (what, request, expected, ack) = match kind {
            0 => {
                let (text, query) = (format!("m-{i}"), "failover");
                let body = json!({"conversation_id": query, "query_id": query, "messages": [text]});
                ("message", client.post(format!("{base}/messages")).json(&body), 200, Some(Ack::Message(text)))
            }
            1 => {
                let (text, data) = (format!("e-{i}"), json!({"queryId": "failover", "queryName": "failover"}));
                let body = json!({"timestamp": "2026-11-23T10:00:00Z", "eventType": "Normal", "reason": "Failover",
                                  "message": text, "data": data});
                ("event", client.post(format!("{base}/events")).json(&body), 201, Some(Ack::Event(text)))
            }
            2 => {
                let body = json!({"sender": "ark://agents/failover", "recipient": "ark://users/dave", "content": "?"});
                ("question", client.post(format!("{base}/questions")).json(&body), 201, None)
            }
            _ => {
                let arguments = json!({"recipient": "ark://users/dave", "content": format!("mcp-{i}")});
                let params = json!({"name": "ask_question", "arguments": arguments, "task": {}});
                let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
                let request = (client.post(&mcps[i % 3]).json(&call))
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-protocol-version", "2025-11-25");
                ("MCP ask", request, 200, Some(Ack::AskedOverMcp(format!("mcp-{i}"))))
            }
        };
        let mut fail = |what: String, at: f64, reply: Result<(u16, String), String>| {
            let reply = reply.map_or_else(|e| e, |(status, body)| format!("{status} {body}"));
            errors.push(format!("{what} sent at +{at:.2}s: {reply}"));
        };
        let body = match call(request).await {
            // An MCP call's JSON-RPC error comes with a 200 too.
            Ok((status, body)) if status == expected && !body.contains(r#""error""#) => body,
            reply => {
                fail(format!("{what} {i}"), at, reply);
                continue;
            }
        };
        // A question's acknowledgement carries its id; it is then answered on another replica.
        if let Some(ack) = ack {
            acks.push((ack, at));
            continue;
        }
        let id = serde_json::from_str::<Value>(&body).unwrap()["id"].as_str().unwrap().to_owned();
        acks.push((Ack::Asked(id.clone()), at));
        let at = t0.elapsed().as_secs_f64();
        match call(client.patch(format!("{other}/questions/{id}")).json(&json!({"response": "yes"}))).await {
            Ok((200, _)) => acks.push((Ack::Answered(id), at)),
            reply => fail(format!("answer to question {i}"), at, reply),
        }
    }
    (acks, errors)
}
