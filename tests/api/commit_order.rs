//! Commit order is not sequence order: deterministic interleavings that a reader advancing by sequence would
//! get wrong. A trigger installed by the test holds a real broker's write transaction open (after it drew its
//! positions and sequence numbers) until the test lets it go, while other replicas write and commit.

use serde_json::{Value, json};
use sqlx::{Connection, PgConnection};

use crate::support::{
    Replica, SseReader, fresh_database,
    hold::{install_hold, release_hold, wait_until_held},
    within,
};

fn post_ndjson(client: &reqwest::Client, url: String, body: &str) -> impl Future<Output = reqwest::Response> + 'static {
    let request = client.post(url).header("content-type", "application/x-ndjson").body(body.to_owned());
    async move { request.send().await.unwrap() }
}

async fn three_replicas(url: &str) -> [Replica; 3] {
    let (a, b, c) = tokio::join!(Replica::start(url), Replica::start(url), Replica::start(url));
    [a, b, c]
}

#[tokio::test]
async fn a_chunk_held_open_after_drawing_its_position_is_delivered_before_later_ones_on_every_reader() {
    let url = fresh_database().await;
    let [a, b, c] = three_replicas(&url).await;
    let mut hold = install_hold(&url).await;
    let client = reqwest::Client::new();
    let mut held_stream = SseReader::open(&client, &c.url("/stream/s1")).await;
    let mut free_stream = SseReader::open(&client, &c.url("/stream/s2")).await;
    let mut feed = SseReader::open(&client, &c.url("/stream?watch=true")).await;
    assert_eq!(feed.next_frame().await.as_deref(), Some(": connected"));

    // A draws s1's first position (and an earlier sequence number and transaction id) and stays open.
    let held_post = tokio::spawn(post_ndjson(&client, a.url("/stream/s1"), "{\"hold\":1}\n"));
    wait_until_held(&mut hold).await;
    // B writes s1 after it, and s2; the s2 chunk commits while A's transaction is still open.
    let later_post = tokio::spawn(post_ndjson(&client, b.url("/stream/s1"), "{\"s1\":2}\n"));
    assert_eq!(post_ndjson(&client, b.url("/stream/s2"), "{\"s2\":1}\n").await.status(), 200);
    assert_eq!(free_stream.next_data().await.unwrap(), "{\"s2\":1}", "a reader of another stream is not held up");
    assert!(!later_post.is_finished(), "B must not commit s1 past A's open position");

    release_hold(&mut hold).await;
    assert_eq!(within("the held POST", held_post).await.unwrap().status(), 200);
    assert_eq!(within("the later POST", later_post).await.unwrap().status(), 200);

    assert_eq!(held_stream.take_data(2).await, ["{\"hold\":1}", "{\"s1\":2}"], "the stream reader, in order");
    let global = feed.take_data(3).await;
    assert_eq!(global[0], "{\"hold\":1}", "the global feed delivers the held chunk first: {global:?}");
    assert!(global.contains(&"{\"s2\":1}".to_owned()) && global[2] == "{\"s1\":2}", "{global:?}");
    let replay = SseReader::open(&client, &b.url("/stream/s1?from-beginning=true")).await.take_data(2).await;
    assert_eq!(replay, ["{\"hold\":1}", "{\"s1\":2}"], "stored in the same order");
}

#[tokio::test]
async fn a_message_held_open_is_delivered_in_order_and_a_lower_sequence_with_a_higher_id_is_not_skipped() {
    let url = fresh_database().await;
    let [a, b, c] = three_replicas(&url).await;
    let mut hold = install_hold(&url).await;
    let client = reqwest::Client::new();
    let mut conversation = SseReader::open(&client, &c.url("/messages?watch=true&conversation_id=c")).await;
    let mut global = SseReader::open(&client, &c.url("/messages?watch=true")).await;
    let mut other = SseReader::open(&client, &c.url("/messages?watch=true&conversation_id=d")).await;
    for reader in [&mut conversation, &mut global, &mut other] {
        assert_eq!(reader.next_frame().await.as_deref(), Some(": connected"));
    }
    let append = |base: String, conversation: &str, message: Value| {
        let body = json!({"conversation_id": conversation, "query_id": "q", "messages": [message]});
        let client = client.clone();
        tokio::spawn(async move { client.post(format!("{base}/messages")).json(&body).send().await.unwrap() })
    };

    let held = append(a.base.clone(), "c", json!({"hold": 1}));
    wait_until_held(&mut hold).await;
    let later = append(b.base.clone(), "c", json!("second"));
    assert_eq!(append(b.base.clone(), "d", json!("elsewhere")).await.unwrap().status(), 200);
    let elsewhere: Value = serde_json::from_str(&other.next_data().await.unwrap()).unwrap();
    assert_eq!(elsewhere["message"], "elsewhere", "another conversation's reader is not held up");
    assert!(!later.is_finished(), "B must not commit c past A's open position");

    release_hold(&mut hold).await;
    assert_eq!(within("the held append", held).await.unwrap().status(), 200);
    assert_eq!(within("the later append", later).await.unwrap().status(), 200);
    let messages = |frames: Vec<String>| -> Vec<Value> {
        frames.iter().map(|f| serde_json::from_str::<Value>(f).unwrap()["message"].clone()).collect()
    };
    assert_eq!(messages(conversation.take_data(2).await), [json!({"hold": 1}), json!("second")]);
    let seen = messages(global.take_data(3).await);
    assert_eq!(seen[0], json!({"hold": 1}), "{seen:?}");
    let position = |wanted: &Value| seen.iter().position(|m| m == wanted).unwrap();
    assert!(position(&json!({"hold": 1})) < position(&json!("second")), "per-conversation order: {seen:?}");

    // A writer that got its transaction id first but draws its sequence number last: the lower number (B's)
    // has the higher id. A reader that resumes by sequence would skip B's message.
    let mut early = PgConnection::connect(&url).await.unwrap();
    let mut early_tx = early.begin().await.unwrap();
    sqlx::query("select pg_current_xact_id()").execute(&mut *early_tx).await.unwrap();
    assert_eq!(append(b.base.clone(), "e", json!("lower number, higher id")).await.unwrap().status(), 200);
    sqlx::query(
        "insert into conversations (conversation_id, last_position, last_tx) values ('f', 1, pg_current_xact_id())",
    )
    .execute(&mut *early_tx)
    .await
    .unwrap();
    let early_sequence: i64 = sqlx::query_scalar(
        "insert into messages (conversation_id, query_id, message, position, bytes)
         values ('f', 'q', '\"higher number, lower id\"', 1, 25) returning sequence_number",
    )
    .fetch_one(&mut *early_tx)
    .await
    .unwrap();
    sqlx::query("select pg_notify('ark_broker', 'messages:' || pg_current_xact_id()::text)")
        .execute(&mut *early_tx)
        .await
        .unwrap();
    early_tx.commit().await.unwrap();
    assert_eq!(
        messages(global.take_data(2).await),
        [json!("higher number, lower id"), json!("lower number, higher id")],
        "the live global reader delivers in transaction order and skips neither"
    );
    let mut resumed = SseReader::open(&client, &a.url(&format!("/messages?watch=true&cursor={early_sequence}"))).await;
    assert_eq!(
        messages(resumed.take_data(1).await),
        [json!("lower number, higher id")],
        "resuming after the higher number still delivers the lower one that came after it"
    );
}

#[tokio::test]
async fn a_live_global_watch_skips_what_committed_before_it_while_an_older_transaction_holds_the_horizon() {
    let url = fresh_database().await;
    let a = Replica::start(&url).await;
    let client = reqwest::Client::new();
    // An unrelated transaction stays open: the horizon stays below everything written after it.
    let mut open = PgConnection::connect(&url).await.unwrap();
    let mut open_tx = open.begin().await.unwrap();
    sqlx::query("select pg_current_xact_id()").execute(&mut *open_tx).await.unwrap();

    assert_eq!(post_ndjson(&client, a.url("/stream/before"), "{\"before\":1}\n").await.status(), 200);
    let before = json!({"conversation_id": "w", "query_id": "q", "messages": ["before"]});
    assert_eq!(client.post(a.url("/messages")).json(&before).send().await.unwrap().status(), 200);
    let mut chunks = SseReader::open(&client, &a.url("/stream?watch=true")).await;
    let mut messages_feed = SseReader::open(&client, &a.url("/messages?watch=true")).await;
    assert_eq!(post_ndjson(&client, a.url("/stream/after"), "{\"after\":1}\n").await.status(), 200);
    let after = json!({"conversation_id": "w", "query_id": "q", "messages": ["after"]});
    assert_eq!(client.post(a.url("/messages")).json(&after).send().await.unwrap().status(), 200);
    open_tx.rollback().await.unwrap();

    assert_eq!(chunks.take_data(1).await, ["{\"after\":1}"], "the chunk from before the watch is not replayed");
    let delivered: Value = serde_json::from_str(&messages_feed.take_data(1).await[0]).unwrap();
    assert_eq!(delivered["message"], "after", "nor the message");
}
