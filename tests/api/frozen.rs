//! A frozen writer harms only itself: a replica SIGSTOPped while it holds an open write transaction does not
//! stop ingest or per-key readers on the other replicas, and Postgres ends its transaction and releases its
//! locks well within 10 s. The chunk flush holds no transaction open between statements at all: one frozen
//! in it leaves a flush that commits whole by itself.

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::{Connection, PgConnection};

use crate::support::{
    OwnServer, Replica, SseReader,
    hold::{install_hold, release_hold, wait_until_held},
    observe::LogsOnFailure,
    within,
};

const PROMPT: Duration = Duration::from_secs(1);

#[tokio::test]
async fn a_replica_frozen_inside_its_write_transaction_stops_neither_ingest_nor_readers_elsewhere() {
    // A server of its own: the frozen transaction holds back the visibility horizon of the whole server.
    let (_server, url) = OwnServer::start().await;
    let (a, b, c) = tokio::join!(Replica::start(&url), Replica::start(&url), Replica::start(&url));
    let _logs = LogsOnFailure(vec![&a, &b, &c]);
    let mut hold = install_hold(&url).await;
    let client = reqwest::Client::new();
    let mut stream_reader = SseReader::open(&client, &c.url("/stream/free")).await;
    let mut conversation = SseReader::open(&client, &c.url("/messages?watch=true&conversation_id=d")).await;
    assert_eq!(conversation.next_frame().await.as_deref(), Some(": connected"));

    // A's message write draws the position of conversation "held" and waits at the hook; then A freezes with
    // its transaction open.
    let held = client
        .post(a.url("/messages"))
        .json(&json!({"conversation_id": "held", "query_id": "q", "messages": [{"hold": 1}]}));
    let _held = tokio::spawn(held.send());
    wait_until_held(&mut hold).await;
    a.freeze();
    release_hold(&mut hold).await;

    for n in 0..5 {
        let post = client
            .post(b.url("/stream/free"))
            .header("content-type", "application/x-ndjson")
            .body(format!("{{\"n\":{n}}}\n"))
            .send();
        let reply = tokio::time::timeout(PROMPT, post).await.expect("a chunk POST on B is acknowledged within 1 s");
        assert_eq!(reply.unwrap().status(), 200);
        let delivered = tokio::time::timeout(PROMPT, stream_reader.next_data()).await;
        assert_eq!(delivered.expect("the reader on C gets it within 1 s").as_deref(), Some(&*format!("{{\"n\":{n}}}")));

        let body = json!({"conversation_id": "d", "query_id": "q", "messages": [n]});
        let post = client.post(c.url("/messages")).json(&body).send();
        let reply = tokio::time::timeout(PROMPT, post).await.expect("a message POST is acknowledged within 1 s");
        assert_eq!(reply.unwrap().status(), 200);
        let delivered = tokio::time::timeout(PROMPT, conversation.next_data()).await.expect("delivered within 1 s");
        let item: Value = serde_json::from_str(&delivered.unwrap()).unwrap();
        assert_eq!(item["message"], n);
    }

    // Postgres ends the frozen session (idle in transaction) and releases the conversation it held.
    let mut admin = PgConnection::connect(&url).await.unwrap();
    let released = tokio::time::timeout(Duration::from_secs(10), no_session_idle_in_transaction(&mut admin)).await;
    assert!(released.is_ok(), "the frozen transaction must be ended within 10 s");
    let body = json!({"conversation_id": "held", "query_id": "q", "messages": [{"after": 1}]});
    let reply = within(
        "a POST to the conversation the frozen replica held",
        client.post(b.url("/messages")).json(&body).send(),
    )
    .await
    .unwrap();
    assert_eq!(reply.status(), 200);
    let page: Value = client.get(c.url("/messages?conversation_id=held")).send().await.unwrap().json().await.unwrap();
    let stored: Vec<&Value> = page["items"].as_array().unwrap().iter().map(|item| &item["message"]).collect();
    assert_eq!(
        stored,
        [&json!({"after": 1})],
        "the frozen replica's uncommitted message was rolled back, not half-stored"
    );
    a.thaw();
}

#[tokio::test]
async fn a_replica_frozen_in_its_chunk_flush_leaves_the_flush_committed_whole_and_its_stream_free() {
    let (_server, url) = OwnServer::start().await;
    let (a, b) = tokio::join!(Replica::start(&url), Replica::start(&url));
    let mut hold = install_hold(&url).await;
    let client = reqwest::Client::new();

    // A's flush statement waits at the hook for stream "held"; A freezes; the statement goes on without it.
    let held = client.post(a.url("/stream/held")).header("content-type", "application/x-ndjson").body("{\"hold\":1}\n");
    let held = tokio::spawn(held.send());
    wait_until_held(&mut hold).await;
    a.freeze();
    release_hold(&mut hold).await;

    // The flush committed by itself: the stream is free for B at once, and holds the frozen replica's line
    // whole, then B's. (Whether some other transaction of A's was cut by the freeze is left alone: its
    // background work freezes wherever it was.)
    let post =
        client.post(b.url("/stream/held")).header("content-type", "application/x-ndjson").body("{\"after\":1}\n");
    let reply = tokio::time::timeout(PROMPT, post.send()).await.expect("B's POST is acknowledged within 1 s");
    assert_eq!(reply.unwrap().status(), 200);
    let stored = SseReader::open(&client, &b.url("/stream/held?from-beginning=true")).await.take_data(2).await;
    assert_eq!(stored, ["{\"hold\":1}", "{\"after\":1}"]);

    // Thawed, A answers its POST: the line it was asked to store is stored.
    a.thaw();
    let reply = within("the frozen replica's reply", held).await.unwrap().unwrap();
    assert_eq!(reply.status(), 200);
}

/// Returns once no session of the database is idle in a transaction.
async fn no_session_idle_in_transaction(admin: &mut PgConnection) {
    loop {
        let open: i64 = sqlx::query_scalar(
            "select count(*) from pg_stat_activity where datname = current_database() and state like 'idle in transaction%'",
        )
        .fetch_one(&mut *admin)
        .await
        .unwrap();
        if open == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
