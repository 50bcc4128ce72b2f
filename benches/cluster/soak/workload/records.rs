//! The soak's events and messages: around each chunk stream, the Query's `QueryExecutionStart` event and its
//! user message before the writing, its assistant message and `QueryExecutionComplete` event after, all on the
//! writer's replica; then each is read back once on the visitor's replica (`GET /events/{queryUID}`,
//! `GET /messages?conversation_id=`). Five consecutive streams share a session and a conversation, so sessions
//! go idle, expire and are reaped as the run goes on.

use serde_json::{Value, json};
use tokio::time::Instant;

use super::load::causes;
use super::{Context, count};

/// Streams per session (and conversation).
const STREAMS_PER_SESSION: usize = 5;
const REASONS: [&str; 2] = ["QueryExecutionStart", "QueryExecutionComplete"];

/// What was acknowledged for one stream's Query.
#[derive(Debug)]
pub(super) struct Posted {
    query: String,
    session: String,
    /// The reasons and message contents acknowledged, in order.
    events: Vec<&'static str>,
    messages: Vec<String>,
    /// When the first was posted: a read-back later than half the TTL is skipped.
    first_at: Instant,
}

/// Posts the start event and the user message of stream `n` (Query `query`) on its writer's replica.
pub(super) async fn begin(context: &Context, n: usize, query: &str) -> Posted {
    let session = format!("soak-{}-session-{}", context.workload.tag, n / STREAMS_PER_SESSION);
    let mut posted =
        Posted { query: query.to_owned(), session, events: Vec::new(), messages: Vec::new(), first_at: Instant::now() };
    let base = context.replica(n);
    event(context, base, &mut posted, REASONS[0]).await;
    message(context, base, &mut posted, "user").await;
    posted
}

/// Posts the assistant message and the end event.
pub(super) async fn end(context: &Context, n: usize, posted: &mut Posted) {
    let base = context.replica(n);
    message(context, base, posted, "assistant").await;
    event(context, base, posted, REASONS[1]).await;
}

async fn event(context: &Context, base: &str, posted: &mut Posted, reason: &'static str) {
    let body = json!({
        "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "eventType": "Normal",
        "reason": reason,
        "message": format!("{reason} for {}", posted.query),
        "data": {"queryId": posted.query, "queryName": posted.query, "queryNamespace": "default",
                 "sessionId": posted.session},
    });
    let url = format!("{base}/events");
    match context.client.post(&url).json(&body).send().await {
        Ok(reply) if reply.status() == 201 => {
            posted.events.push(reason);
            count(&context.tally, |t| t.events_posted += 1);
        }
        Ok(reply) => context.error(format!("POST {url}: HTTP {}", reply.status())),
        Err(error) => context.error(format!("POST {url}: {}", causes(&error))),
    }
}

async fn message(context: &Context, base: &str, posted: &mut Posted, role: &str) {
    let content = format!("{role} turn of {}", posted.query);
    let body = json!({"conversation_id": posted.session, "query_id": posted.query,
                      "messages": [{"role": role, "content": content}]});
    let url = format!("{base}/messages");
    match context.client.post(&url).json(&body).send().await {
        Ok(reply) if reply.status() == 200 => {
            posted.messages.push(content);
            count(&context.tally, |t| t.messages_posted += 1);
        }
        Ok(reply) => context.error(format!("POST {url}: HTTP {}", reply.status())),
        Err(error) => context.error(format!("POST {url}: {}", causes(&error))),
    }
}

/// Reads stream `n`'s events and messages back on the visitor's replica: each acknowledged one exactly once,
/// in order.
pub(super) async fn verify(context: &Context, n: usize, posted: &Posted) {
    if posted.first_at.elapsed() > context.workload.record_ttl / 2 {
        count(&context.tally, |t| t.records_skipped += 1);
        return;
    }
    let base = context.replica(n + 2);
    let Some(events) = items(context, &format!("{base}/events/{}", posted.query)).await else { return };
    let reasons: Vec<&str> = events.iter().filter_map(|e| e["reason"].as_str()).collect();
    let Some(messages) = items(context, &format!("{base}/messages?conversation_id={}", posted.session)).await else {
        return;
    };
    let contents: Vec<&str> = messages
        .iter()
        .filter(|m| m["query_id"] == posted.query.as_str())
        .filter_map(|m| m["message"]["content"].as_str())
        .collect();
    let (lost, duplicated) = compare(&posted.events, &reasons);
    let messages_posted: Vec<&str> = posted.messages.iter().map(String::as_str).collect();
    let (messages_lost, messages_duplicated) = compare(&messages_posted, &contents);
    count(&context.tally, |t| {
        t.records_checked += 1;
        t.records_lost += lost + messages_lost;
        t.records_duplicated += duplicated + messages_duplicated;
    });
}

/// `(lost, duplicated)`: acknowledged items read back no time, or more than once, or out of their order
/// (counted as lost).
fn compare(acknowledged: &[&str], read: &[&str]) -> (u64, u64) {
    let times = |item: &str| read.iter().filter(|r| **r == item).count();
    let lost = acknowledged.iter().filter(|a| times(a) == 0).count() as u64;
    let duplicated = acknowledged.iter().map(|a| times(a).saturating_sub(1) as u64).sum();
    let in_order = read.iter().filter(|r| acknowledged.contains(*r)).copied().eq(acknowledged.iter().copied());
    let misordered = u64::from(lost == 0 && duplicated == 0 && !in_order);
    (lost + misordered, duplicated)
}

/// The `items` of a page, or `None` (counted as an error) when the read fails.
async fn items(context: &Context, url: &str) -> Option<Vec<Value>> {
    let page = match context.client.get(url).send().await {
        Ok(reply) if reply.status() == 200 => reply.json::<Value>().await.map_err(|e| causes(&e)),
        Ok(reply) => Err(format!("HTTP {}", reply.status())),
        Err(error) => Err(causes(&error)),
    };
    match page.map(|mut page| page["items"].take()) {
        Ok(Value::Array(items)) => Some(items),
        Ok(other) => {
            context.error(format!("GET {url}: no items in {other}"));
            None
        }
        Err(error) => {
            context.error(format!("GET {url}: {error}"));
            None
        }
    }
}
