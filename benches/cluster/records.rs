//! Records in the benchmark (issue 27, point 4): events applied to one team's session, the sessions list at
//! 100k sessions, and a messages page and a watch resume at 1M messages. Each is measured as rows/s and
//! p50 / p99 through the three replicas, beside the same work done straight in PostgreSQL in the same run
//! (the raw baseline: the statements a minimal service would run, from a pool in this process).

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use serde_json::{Value, json};
use sqlx::{Executor, PgPool, postgres::PgPoolOptions};

mod raw;
mod sample;

use crate::{
    load::causes,
    phases::Bench,
    postgres::{BROKER_DB, RECORDS_DB},
    report::Row,
};
use sample::{closed_loop, expect, row, seed_row};

/// How big and how long.
#[derive(Debug, Clone)]
pub struct Sizes {
    /// Queries writing events into the one session.
    pub team_queries: usize,
    /// Sessions stored before the list is measured.
    pub sessions: usize,
    /// Conversations × messages each, stored before pages and resumes are measured.
    pub conversations: usize,
    pub messages_per_conversation: usize,
    /// Closed-loop time of each measurement.
    pub duration: Duration,
}

/// Upstream's event reasons a Query goes through, in order; the last one completes it.
pub(crate) const REASONS: [&str; 6] = [
    "QueryExecutionStart",
    "AgentExecutionStart",
    "ToolCallStart",
    "ToolCallComplete",
    "AgentExecutionComplete",
    "QueryExecutionComplete",
];

/// The team's session id and one event of query `query` (its `iteration`th).
pub(crate) fn team_event(query: usize, iteration: u64) -> Value {
    let reason = REASONS[iteration as usize % REASONS.len()];
    json!({
        "timestamp": "2026-11-26T10:00:00.000000000Z",
        "eventType": "Normal",
        "reason": reason,
        "message": format!("{reason} for team-q-{query}"),
        "data": {"queryId": format!("uid-team-q-{query}"), "queryName": format!("team-q-{query}"),
                 "queryNamespace": "default", "sessionId": "session-bench-team", "agent": format!("agent-{}", query % 5),
                 "team": "bench-team", "conversationId": format!("conv-team-q-{query}"), "durationMs": "12.5"},
    })
}

impl Bench<'_> {
    /// Runs the record phases on a fresh set of records; returns their rows.
    pub async fn records(&mut self, sizes: &Sizes) -> Vec<Row> {
        self.pg.create_database(RECORDS_DB).await;
        let raw = PgPoolOptions::new()
            .max_connections(64)
            .connect(&self.pg.url(RECORDS_DB))
            .await
            .expect("connect to the raw baseline database");
        raw.execute(raw::SCHEMA).await.expect("the raw baseline's tables");
        let broker = PgPoolOptions::new()
            .max_connections(16)
            .connect(&self.pg.url(BROKER_DB))
            .await
            .expect("connect to the brokers' database");
        let mut rows = vec![self.team_events(sizes, &raw).await];
        rows.extend(self.sessions_list(sizes, &raw, &broker).await);
        rows.extend(self.messages(sizes, &raw, &broker).await);
        raw.close().await;
        broker.close().await;
        self.pg.drop_database(RECORDS_DB).await;
        rows
    }

    fn replica_base(&self, n: usize) -> String {
        self.replicas[n % self.replicas.len()].base.clone()
    }

    /// `POST /events` from every Query of one team session at once, over the replicas.
    async fn team_events(&mut self, sizes: &Sizes, raw: &PgPool) -> Row {
        eprintln!("phase records-events: {} queries in one session for {:?}", sizes.team_queries, sizes.duration);
        self.pg.settle().await;
        let bases: Vec<String> = (0..self.replicas.len()).map(|n| self.replica_base(n)).collect();
        let client = self.client.clone();
        let broker = closed_loop(sizes.team_queries, sizes.duration, move |query, iteration| {
            let request =
                client.post(format!("{}/events", bases[query % bases.len()])).json(&team_event(query, iteration));
            Box::pin(async move { expect(request, 201).await.map(|_| Some(1)) })
        })
        .await;
        self.pg.settle().await;
        let pool = raw.clone();
        let raw_sample = closed_loop(sizes.team_queries, sizes.duration, move |query, iteration| {
            let pool = pool.clone();
            Box::pin(async move { raw::event(&pool, query, iteration).await.map(|_| Some(1)) })
        })
        .await;
        row(
            "records-events-session",
            &broker,
            &raw_sample,
            format!(
                "POST /events, {} Queries of one session each posting back to back; raw: the event INSERT, the \
                 query's UPSERT and the session's UPDATE in one transaction",
                sizes.team_queries
            ),
        )
    }

    /// 100k sessions, then `GET /sessions` pages and the whole store.
    async fn sessions_list(&mut self, sizes: &Sizes, raw: &PgPool, broker_db: &PgPool) -> Vec<Row> {
        eprintln!("phase records-sessions: storing {} sessions", sizes.sessions);
        let bases: Vec<String> = (0..self.replicas.len()).map(|n| self.replica_base(n)).collect();
        let client = self.client.clone();
        let total = sizes.sessions as u64;
        let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let seeded = closed_loop(64, Duration::from_secs(600), {
            let (bases, client) = (bases.clone(), client.clone());
            move |writer, _| {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let reason = ["QueryExecutionStart", "QueryExecutionComplete", "QueryExecutionError"][n as usize % 3];
                let body = json!({"sessionId": format!("session-bench-{n:06}"), "queryName": format!("q-{n}"),
                                  "agent": format!("agent-{}", n % 50), "_reason": reason});
                let request = client.post(format!("{}/sessions", bases[writer % bases.len()])).json(&body);
                Box::pin(async move {
                    if n >= total {
                        return Ok(None);
                    }
                    expect(request, 201).await.map(|_| Some(1))
                })
            }
        })
        .await;
        let mut rows = vec![seed_row("records-sessions-seed", &seeded, "POST /sessions, 64 clients".to_owned())];
        raw::copy_sessions(broker_db, raw).await;

        self.pg.settle().await;
        let pages = (sizes.sessions / 50).min(20) as u64;
        let page_of = move |client: usize, iteration: u64| ((client as u64 * 7 + iteration) % pages) * 50;
        let broker = closed_loop(8, sizes.duration, {
            let (bases, client) = (bases.clone(), client.clone());
            move |c, i| {
                let url = format!("{}/sessions?limit=50&cursor={}", bases[c % bases.len()], page_of(c, i));
                let request = client.get(url);
                Box::pin(async move { expect(request, 200).await.map(|_| Some(50)) })
            }
        })
        .await;
        let pool = raw.clone();
        let raw_sample = closed_loop(8, sizes.duration, move |c, i| {
            let pool = pool.clone();
            Box::pin(async move { raw::sessions_page(&pool, page_of(c, i) as i64).await.map(Some) })
        })
        .await;
        rows.push(row(
            "records-sessions-page",
            &broker,
            &raw_sample,
            format!(
                "GET /sessions?limit=50 (one of the first {pages} pages, newest first, with total and status counts) \
                 at {} sessions, 8 clients; raw: the page of sessions with their queries, and the counts",
                sizes.sessions
            ),
        ));

        self.pg.settle().await;
        let broker = closed_loop(2, sizes.duration, {
            let (bases, client) = (bases.clone(), client.clone());
            move |c, _| {
                let request = client.get(format!("{}/sessions", bases[c % bases.len()]));
                Box::pin(async move {
                    let body = expect(request, 200).await?;
                    let whole: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
                    Ok(Some(whole["sessions"].as_object().map_or(0, |o| o.len()) as u64))
                })
            }
        })
        .await;
        let pool = raw.clone();
        let raw_sample = closed_loop(2, sizes.duration, move |_, _| {
            let pool = pool.clone();
            Box::pin(async move { raw::all_sessions(&pool).await.map(Some) })
        })
        .await;
        rows.push(row(
            "records-sessions-whole",
            &broker,
            &raw_sample,
            format!(
                "GET /sessions without paging (upstream's whole store by id) at {} sessions, 2 clients; raw: every \
                 session with its queries",
                sizes.sessions
            ),
        ));
        rows
    }

    /// 1M messages, then a conversation's page and a watch resumed 100 messages before the head.
    async fn messages(&mut self, sizes: &Sizes, raw: &PgPool, broker_db: &PgPool) -> Vec<Row> {
        let (conversations, each) = (sizes.conversations, sizes.messages_per_conversation);
        eprintln!("phase records-messages: storing {conversations} × {each} messages");
        let bases: Vec<String> = (0..self.replicas.len()).map(|n| self.replica_base(n)).collect();
        let client = self.client.clone();
        let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let per_post = each.min(1000);
        let posts = (conversations * each.div_ceil(per_post)) as u64;
        let seeded = closed_loop(16, Duration::from_secs(900), {
            let (bases, client) = (bases.clone(), client.clone());
            move |writer, _| {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let conversation = n as usize % conversations;
                let messages: Vec<Value> = (0..per_post)
                    .map(|m| json!({"role": if m % 2 == 0 { "user" } else { "assistant" },
                                    "content": format!("message {m} of bench conversation {conversation}: the quick brown fox")}))
                    .collect();
                let body = json!({"conversation_id": format!("bench-conv-{conversation}"),
                                  "query_id": format!("q-{conversation}"), "messages": messages});
                let request = client.post(format!("{}/messages", bases[writer % bases.len()])).json(&body);
                Box::pin(async move {
                    if n >= posts {
                        return Ok(None);
                    }
                    expect(request, 200).await.map(|_| Some(per_post as u64))
                })
            }
        })
        .await;
        let mut rows = vec![seed_row(
            "records-messages-seed",
            &seeded,
            format!("POST /messages, {per_post} messages per request, 16 clients"),
        )];
        raw::copy_messages(broker_db, raw).await;
        let head: i64 = sqlx::query_scalar("select coalesce(max(sequence_number), 0) from messages")
            .fetch_one(broker_db)
            .await
            .expect("the messages' head");

        self.pg.settle().await;
        let broker = closed_loop(8, sizes.duration, {
            let (bases, client) = (bases.clone(), client.clone());
            move |c, i| {
                let conversation = (c * 131 + i as usize * 17) % conversations;
                let url =
                    format!("{}/messages?conversation_id=bench-conv-{conversation}&limit=100", bases[c % bases.len()]);
                let request = client.get(url);
                Box::pin(async move { page_items(expect(request, 200).await?).map(Some) })
            }
        })
        .await;
        let pool = raw.clone();
        let raw_sample = closed_loop(8, sizes.duration, move |c, i| {
            let pool = pool.clone();
            let conversation = (c * 131 + i as usize * 17) % conversations;
            Box::pin(async move { raw::messages_page(&pool, &format!("bench-conv-{conversation}")).await.map(Some) })
        })
        .await;
        rows.push(row(
            "records-messages-page",
            &broker,
            &raw_sample,
            format!(
                "GET /messages?conversation_id=…&limit=100 at {} messages, 8 clients; raw: the conversation's first \
                 100 messages",
                conversations * each
            ),
        ));

        self.pg.settle().await;
        let behind = 100;
        let broker = closed_loop(4, sizes.duration, {
            let (bases, client) = (bases.clone(), client.clone());
            move |c, _| {
                let url = format!("{}/messages?watch=true&cursor={}", bases[c % bases.len()], head - behind);
                let request = client.get(url);
                Box::pin(async move { resume(request, behind as u64).await.map(Some) })
            }
        })
        .await;
        let pool = raw.clone();
        let raw_sample = closed_loop(4, sizes.duration, move |_, _| {
            let pool = pool.clone();
            Box::pin(async move { raw::resume(&pool, head - behind).await.map(Some) })
        })
        .await;
        rows.push(row(
            "records-messages-resume",
            &broker,
            &raw_sample,
            format!(
                "GET /messages?watch=true&cursor=(head − {behind}) at {} messages until the {behind} messages after \
                 the cursor arrived, 4 clients; raw: the {behind} rows after the cursor",
                conversations * each
            ),
        ));
        rows
    }
}

/// The items of a `{"items": […]}` page.
fn page_items(body: bytes::Bytes) -> Result<u64, String> {
    let page: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
    Ok(page["items"].as_array().map_or(0, Vec::len) as u64)
}

/// Opens a watch and reads until `count` `data:` frames came; the watch is then dropped.
async fn resume(request: reqwest::RequestBuilder, count: u64) -> Result<u64, String> {
    let response = request.send().await.map_err(|e| causes(&e))?;
    if !response.status().is_success() {
        return Err(format!("watch answered {}", response.status()));
    }
    let mut body = response.bytes_stream();
    let (mut frames, mut pending) = (0, Vec::new());
    while frames < count {
        let Some(piece) = tokio::time::timeout(Duration::from_secs(10), body.next()).await.map_err(|_| "stalled")?
        else {
            return Err(format!("the watch ended after {frames} frames"));
        };
        pending.extend_from_slice(&piece.map_err(|e| causes(&e))?);
        while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
            if pending.starts_with(b"data:") {
                frames += 1;
            }
            pending.drain(..end + 2);
        }
    }
    Ok(frames)
}
