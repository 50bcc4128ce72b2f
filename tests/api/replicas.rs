//! Several broker processes on one database: start-up together, writes on one replica read live on the
//! others, no gaps under concurrent writers, a SIGKILLed replica, a killed LISTEN connection, SIGTERM.

use std::{collections::HashSet, time::Duration};

use serde_json::{Value, json};

use crate::support::{
    Replica, SseReader, fresh_database, open_body,
    pgbouncer::{PgBouncer, three_replicas_through_pgbouncer},
    within,
};

async fn three_replicas() -> (String, [Replica; 3]) {
    let url = fresh_database().await;
    let (a, b, c) = tokio::join!(Replica::start(&url), Replica::start(&url), Replica::start(&url));
    (url, [a, b, c])
}

/// Where the replicas' request connections go: straight to PostgreSQL, or through PgBouncer in transaction
/// mode (issue 35: the same contract through a pooler).
#[derive(Debug, Clone, Copy)]
enum Via {
    Direct,
    PgBouncer,
}

async fn three_replicas_via(via: Via) -> (Option<PgBouncer>, [Replica; 3]) {
    match via {
        Via::Direct => (None, three_replicas().await.1),
        Via::PgBouncer => {
            let (bouncer, replicas) = three_replicas_through_pgbouncer([&[], &[], &[]]).await;
            (Some(bouncer), replicas)
        }
    }
}

async fn post_ndjson(client: &reqwest::Client, url: String, body: String) -> Value {
    let response = client.post(url).header("content-type", "application/x-ndjson").body(body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test]
async fn three_replicas_started_at_once_on_an_empty_database_all_become_ready() {
    let (_, replicas) = three_replicas().await;
    let client = reqwest::Client::new();
    for replica in &replicas {
        let response = client.get(replica.url("/readyz")).send().await.unwrap();
        assert_eq!(response.status(), 200, "{}", replica.log());
    }
}

#[tokio::test]
async fn chunks_posted_to_one_replica_are_read_live_on_every_replica_in_the_same_order() {
    chunks_posted_to_one_replica_are_read_live_on_every_replica_in_the_same_order_via(Via::Direct).await;
}

#[tokio::test]
#[ignore = "needs pgbouncer: ./scripts/test installs it and runs it"]
async fn chunks_posted_to_one_replica_are_read_live_on_every_replica_in_the_same_order_through_pgbouncer() {
    chunks_posted_to_one_replica_are_read_live_on_every_replica_in_the_same_order_via(Via::PgBouncer).await;
}

async fn chunks_posted_to_one_replica_are_read_live_on_every_replica_in_the_same_order_via(via: Via) {
    let (_bouncer, [a, b, c]) = three_replicas_via(via).await;
    let client = reqwest::Client::new();
    let mut readers = Vec::new();
    for replica in [&a, &b, &c] {
        readers.push(SseReader::open(&client, &replica.url("/stream/q")).await);
    }
    let body: String = (0..50).map(|n| format!("{{\"n\":{n}}}\n")).collect();
    let reply = post_ndjson(&client, a.url("/stream/q"), body).await;
    assert_eq!(reply["chunks_received"], 50);
    assert_eq!(client.post(a.url("/stream/q/complete")).json(&json!({})).send().await.unwrap().status(), 200);
    let mut expected: Vec<String> = (0..50).map(|n| format!("{{\"n\":{n}}}")).collect();
    expected.push("[DONE]".into());
    for reader in &mut readers {
        assert_eq!(reader.take_data(51).await, expected);
        reader.expect_end().await;
    }
}

#[tokio::test]
async fn a_watch_on_one_replica_sees_messages_posted_to_another() {
    a_watch_on_one_replica_sees_messages_posted_to_another_via(Via::Direct).await;
}

#[tokio::test]
#[ignore = "needs pgbouncer: ./scripts/test installs it and runs it"]
async fn a_watch_on_one_replica_sees_messages_posted_to_another_through_pgbouncer() {
    a_watch_on_one_replica_sees_messages_posted_to_another_via(Via::PgBouncer).await;
}

async fn a_watch_on_one_replica_sees_messages_posted_to_another_via(via: Via) {
    let (_bouncer, [a, b, _c]) = three_replicas_via(via).await;
    let client = reqwest::Client::new();
    let mut watch = SseReader::open(&client, &b.url("/messages?watch=true")).await;
    assert_eq!(watch.next_frame().await.as_deref(), Some(": connected"));
    let body = json!({"conversation_id": "c", "query_id": "q", "messages": ["from A"]});
    assert_eq!(client.post(a.url("/messages")).json(&body).send().await.unwrap().status(), 200);
    let item: Value = serde_json::from_str(&watch.next_data().await.unwrap()).unwrap();
    assert_eq!(item["message"], "from A");
}

#[tokio::test]
async fn concurrent_writers_on_three_replicas_leave_no_gaps_for_live_readers() {
    concurrent_writers_on_three_replicas_leave_no_gaps_for_live_readers_via(Via::Direct).await;
}

#[tokio::test]
#[ignore = "needs pgbouncer: ./scripts/test installs it and runs it"]
async fn concurrent_writers_on_three_replicas_leave_no_gaps_for_live_readers_through_pgbouncer() {
    concurrent_writers_on_three_replicas_leave_no_gaps_for_live_readers_via(Via::PgBouncer).await;
}

async fn concurrent_writers_on_three_replicas_leave_no_gaps_for_live_readers_via(via: Via) {
    let (_bouncer, [a, b, c]) = three_replicas_via(via).await;
    let client = reqwest::Client::new();
    let mut stream_reader = SseReader::open(&client, &a.url("/stream/hot")).await;
    let mut feed = SseReader::open(&client, &b.url("/stream?watch=true")).await;
    let mut messages = SseReader::open(&client, &c.url("/messages?watch=true")).await;
    assert_eq!(feed.next_frame().await.as_deref(), Some(": connected"));
    assert_eq!(messages.next_frame().await.as_deref(), Some(": connected"));

    // One chunk per POST, as the Python SDK sends them, round-robined over the replicas by three writers.
    const PER_WRITER: usize = 30;
    let mut writers = Vec::new();
    for (w, base) in [a.base.clone(), b.base.clone(), c.base.clone()].into_iter().enumerate() {
        let client = client.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..PER_WRITER {
                post_ndjson(&client, format!("{base}/stream/hot"), format!("{{\"w\":{w},\"i\":{i}}}\n")).await;
                let body = json!({"conversation_id": "c", "query_id": format!("w{w}"), "messages": [i]});
                let response = client.post(format!("{base}/messages")).json(&body).send().await.unwrap();
                assert_eq!(response.status(), 200);
            }
        }));
    }
    for writer in writers {
        within("the writers", writer).await.unwrap();
    }
    assert_eq!(client.post(c.url("/stream/hot/complete")).json(&json!({})).send().await.unwrap().status(), 200);

    let total = 3 * PER_WRITER;
    let live = stream_reader.take_data(total + 1).await;
    assert_eq!(live.last().map(String::as_str), Some("[DONE]"));
    assert_eq!(live.iter().collect::<HashSet<_>>().len(), total + 1, "no duplicates");
    let mut replay = SseReader::open(&client, &b.url("/stream/hot?from-beginning=true")).await;
    assert_eq!(replay.take_data(total + 1).await, live, "the live reader saw exactly the stored order");
    let from_feed = feed.take_data(total + 1).await;
    assert_eq!(&from_feed[..total], &live[..total], "the global feed on another replica saw the same");

    let sequences: Vec<i64> = messages
        .take_data(total)
        .await
        .iter()
        .map(|d| serde_json::from_str::<Value>(d).unwrap()["sequence"].as_i64().unwrap())
        .collect();
    let page: Value = client.get(a.url("/messages?limit=1000")).send().await.unwrap().json().await.unwrap();
    let stored: Vec<i64> = page["items"].as_array().unwrap().iter().map(|i| i["sequence"].as_i64().unwrap()).collect();
    assert_eq!(sequences, stored, "the message watch saw every stored message, in order");
}

#[tokio::test]
async fn a_reader_reconnecting_after_a_sigkill_gets_every_acknowledged_chunk_exactly_once() {
    let (_, [mut a, b, c]) = three_replicas().await;
    let client = reqwest::Client::new();
    let mut acknowledged = Vec::new();
    for n in 0..20 {
        post_ndjson(&client, a.url("/stream/q"), format!("{{\"n\":{n}}}\n")).await;
        acknowledged.push(format!("{{\"n\":{n}}}"));
    }
    // A long POST is open on A (as the Go executor keeps one) when A dies.
    let (tx, body) = open_body();
    let open_post = tokio::spawn(client.post(a.url("/stream/q")).body(body).send());
    let mut watcher = SseReader::open(&client, &b.url("/stream/q")).await;
    tx.send(Ok(bytes::Bytes::from_static(b"{\"unacked\":1}\n"))).await.unwrap();
    assert_eq!(watcher.next_data().await.unwrap(), "{\"unacked\":1}", "A committed it before dying");
    a.kill().await;
    assert!(within("the open POST to fail", open_post).await.unwrap().is_err(), "the POST was never acknowledged");

    assert_eq!(client.post(b.url("/stream/q/complete")).json(&json!({})).send().await.unwrap().status(), 200);
    let mut reader = SseReader::open(&client, &c.url("/stream/q?from-beginning=true")).await;
    let mut received = Vec::new();
    while let Some(data) = reader.next_data().await {
        received.push(data);
    }
    assert_eq!(received.last().map(String::as_str), Some("[DONE]"), "ends with [DONE]");
    let chunks = &received[..received.len() - 1];
    assert_eq!(&chunks[..20], &acknowledged[..], "every acknowledged chunk, in order");
    assert_eq!(chunks.iter().collect::<HashSet<_>>().len(), chunks.len(), "exactly once");
}

#[tokio::test]
async fn a_reader_gets_every_chunk_after_its_replicas_listen_connection_is_terminated() {
    let (url, [a, b, _c]) = three_replicas().await;
    let client = reqwest::Client::new();
    let mut reader = SseReader::open(&client, &b.url("/stream/q")).await;
    post_ndjson(&client, a.url("/stream/q"), "{\"n\":0}\n".into()).await;
    assert_eq!(reader.next_data().await.unwrap(), "{\"n\":0}");

    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let terminated: i64 =
        sqlx::query_scalar("select count(pg_terminate_backend(pid)) from pg_stat_activity where application_name = $1")
            .bind(format!("ark-broker-listener {}", b.pid()))
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(terminated, 1, "B holds exactly one LISTEN connection");

    for n in 1..=10 {
        post_ndjson(&client, a.url("/stream/q"), format!("{{\"n\":{n}}}\n")).await;
    }
    client.post(a.url("/stream/q/complete")).json(&json!({})).send().await.unwrap();
    let mut expected: Vec<String> = (1..=10).map(|n| format!("{{\"n\":{n}}}")).collect();
    expected.push("[DONE]".into());
    assert_eq!(reader.take_data(11).await, expected);
}

#[tokio::test]
async fn sigterm_with_readers_connected_ends_their_streams_and_exits_within_ten_seconds() {
    let url = fresh_database().await;
    let mut replica = Replica::start(&url).await;
    let client = reqwest::Client::new();
    let mut watch = SseReader::open(&client, &replica.url("/messages?watch=true")).await;
    assert_eq!(watch.next_frame().await.as_deref(), Some(": connected"));
    let mut reader = SseReader::open(&client, &replica.url("/stream/q")).await;
    replica.terminate();
    let exited = tokio::time::timeout(Duration::from_secs(10), replica.wait()).await;
    assert_eq!(exited, Ok(true), "exits cleanly within 10 s; log:\n{}", replica.log());
    assert_eq!(watch.next_frame().await.as_deref(), Some("retry: 1000"));
    assert_eq!(watch.next_frame().await, None);
    assert_eq!(reader.next_frame().await.as_deref(), Some("retry: 1000"));
    assert_eq!(reader.next_frame().await, None);
}
