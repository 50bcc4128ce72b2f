//! Exact ingest: a chunk POST's stored lines are always a prefix of what it sent and its reply says how many,
//! even when PostgreSQL crashes under it; and a request retried with an `Idempotency-Key` has exactly one
//! effect whichever replica the retries reach, even when they run at the same time.

use serde_json::{Value, json};
use sqlx::{Connection, PgConnection};

use crate::support::{
    OwnServer, Replica, SseReader, fresh_database,
    hold::{install_hold, wait_until_held},
    open_post::OpenPost,
    within,
};

/// Every stored chunk of `stream`, in position order.
async fn stored_chunks(url: &str, stream: &str) -> Vec<String> {
    let mut connection = PgConnection::connect(url).await.unwrap();
    sqlx::query_scalar("select chunk::text from chunks where stream_id = $1 and not is_done order by position")
        .bind(stream)
        .fetch_all(&mut connection)
        .await
        .unwrap()
}

fn line(i: usize) -> String {
    format!("{{\"i\":{i}}}")
}

fn ndjson(lines: std::ops::Range<usize>) -> String {
    lines.map(|i| line(i) + "\n").collect()
}

#[tokio::test]
async fn a_postgres_crash_under_a_long_post_is_ridden_through_and_every_line_is_stored_once_in_order() {
    let (server, url) = OwnServer::start().await;
    let (a, b) = tokio::join!(Replica::start(&url), Replica::start(&url));
    let mut hold = install_hold(&url).await;
    let client = reqwest::Client::new();
    let mut reader = SseReader::open(&client, &b.url("/stream/long")).await;

    let post = OpenPost::start(&client, a.url("/stream/long"), None);
    for i in 0..20 {
        post.send(line(i));
    }
    let mut expected: Vec<String> = (0..20).map(line).collect();
    assert_eq!(reader.take_data(20).await, expected, "the reader on B sees the first lines live");
    // The next line's flush stops inside its transaction; PostgreSQL crashes with it open. The writer holds
    // the line and writes it again once PostgreSQL is back (the hold went with the test's session).
    let held = "{\"i\":20,\"hold\":1}".to_owned();
    post.send(held.clone());
    wait_until_held(&mut hold).await;
    for i in 21..30 {
        post.send(line(i));
    }
    server.crash_restart().await;
    let OpenPost { lines, reply } = post;
    drop(lines);

    let reply = within("the reply of the POST", reply).await.unwrap().expect("a reply");
    assert_eq!(reply.status(), 200, "the POST rode the crash through");
    let body: Value = reply.json().await.unwrap();
    assert_eq!(body["chunks_stored"], 30, "{body}");
    expected.push(held);
    expected.extend((21..30).map(line));
    assert_eq!(stored_chunks(&url, "long").await, expected, "every line stored once, in order");
    let completed = client.post(b.url("/stream/long/complete")).send().await.unwrap();
    assert_eq!(completed.status(), 200);
    let mut rest = Vec::new();
    while let Some(data) = reader.next_data().await {
        rest.push(data);
        if rest.last().is_some_and(|d| d == "[DONE]") {
            break;
        }
    }
    if rest.last().is_none_or(|d| d != "[DONE]") {
        // A restart that took over five seconds: B ended its readers (with a retry hint). One coming back
        // replays the stream from its beginning.
        reader = SseReader::open(&client, &b.url("/stream/long?from-beginning=true")).await;
        rest = reader.take_data(31).await;
        assert_eq!(rest[..30], expected[..], "a reader coming back replays every line once");
    } else {
        assert_eq!(rest[..rest.len() - 1], expected[20..], "the reader on B saw each line once, in order");
    }
}

#[tokio::test]
async fn a_postgres_crash_under_a_long_post_past_the_ride_through_leaves_a_stored_prefix_the_reply_and_readers_agree_on()
 {
    // A server of its own, restarted by the test; no ride-through, so the crash outlasts it.
    let (server, url) = OwnServer::start().await;
    let start = || Replica::start_with(&url, &["--db-ride-through-ms", "0"]);
    let (a, b) = tokio::join!(start(), start());
    let mut hold = install_hold(&url).await;
    let client = reqwest::Client::new();
    let mut reader = SseReader::open(&client, &b.url("/stream/long")).await;

    let post = OpenPost::start(&client, a.url("/stream/long"), None);
    for i in 0..20 {
        post.send(line(i));
    }
    let expected: Vec<String> = (0..20).map(line).collect();
    assert_eq!(reader.take_data(20).await, expected, "the reader on B sees the first lines live");
    // The next line's flush stops inside its transaction; PostgreSQL crashes with it open.
    post.send("{\"i\":20,\"hold\":1}".into());
    wait_until_held(&mut hold).await;
    for i in 21..30 {
        post.send(line(i));
    }
    server.crash_restart().await;

    let reply = within("the reply of the interrupted POST", post.reply).await.unwrap().expect("a reply");
    assert_eq!(reply.status(), 503, "the POST could not store every line");
    let body: Value = reply.json().await.unwrap();
    assert_eq!(body["error"]["code"], "SERVICE_UNAVAILABLE", "{body}");
    assert_eq!(body["chunks_stored"], 20, "the reply says how many lines are stored: {body}");
    assert_eq!(stored_chunks(&url, "long").await, expected, "exactly the first 20 lines are stored");

    // Nothing beyond the prefix reached the reader on B: the next thing it sees is the completion.
    let completed = within("completing after the restart", async {
        loop {
            let reply = client.post(b.url("/stream/long/complete")).send().await.unwrap();
            if reply.status() != 503 {
                return reply;
            }
        }
    })
    .await;
    assert_eq!(completed.status(), 200);
    let mut next = reader.next_data().await;
    if next.is_none() {
        // A restart that took over five seconds: B ended its readers (with a retry hint), as it does whenever
        // PostgreSQL is lost that long. A reader coming back replays the same prefix.
        reader = SseReader::open(&client, &b.url("/stream/long?from-beginning=true")).await;
        assert_eq!(reader.take_data(20).await, expected, "a reader coming back replays the stored prefix");
        next = reader.next_data().await;
    }
    assert_eq!(next.as_deref(), Some("[DONE]"), "the reader saw exactly the stored prefix");
}

#[tokio::test]
async fn concurrent_retries_of_a_message_post_on_two_replicas_append_once_and_get_the_first_reply() {
    let url = fresh_database().await;
    let (a, b) = tokio::join!(Replica::start(&url), Replica::start(&url));
    let client = reqwest::Client::new();
    let body = json!({"conversation_id": "c", "query_id": "q", "messages": [{"role": "user", "content": "hi"}, 2]});
    let posts = (0..8).map(|n| {
        let replica = if n % 2 == 0 { &a } else { &b };
        client.post(replica.url("/messages")).header("idempotency-key", "retry-1").json(&body).send()
    });
    for reply in within("the concurrent POSTs", futures::future::join_all(posts)).await {
        let reply = reply.unwrap();
        assert_eq!(reply.status(), 200);
        assert_eq!(reply.text().await.unwrap(), "", "every retry gets the first reply: 200, empty");
    }
    let page: Value = client.get(b.url("/messages?conversation_id=c")).send().await.unwrap().json().await.unwrap();
    assert_eq!(page["items"].as_array().unwrap().len(), 2, "appended once: {page}");
    // The same request with its keys written in another order is a retry too (the key compares canonical JSON).
    let reordered = r#"{"messages": [{"content": "hi", "role": "user"}, 2], "query_id": "q", "conversation_id": "c"}"#;
    let retried = client
        .post(b.url("/messages"))
        .header("idempotency-key", "retry-1")
        .header("content-type", "application/json")
        .body(reordered)
        .send()
        .await
        .unwrap();
    assert_eq!(retried.status(), 200, "a retry, not a reused key");

    let other = json!({"conversation_id": "c", "query_id": "q", "messages": ["different"]});
    let reused =
        client.post(a.url("/messages")).header("idempotency-key", "retry-1").json(&other).send().await.unwrap();
    assert_eq!(reused.status(), 422, "the key was used for another body");
    let error: Value = reused.json().await.unwrap();
    assert_eq!(error["error"]["code"], "IDEMPOTENCY_KEY_REUSED");
    let fresh = client.post(a.url("/messages")).header("idempotency-key", "retry-2").json(&other).send().await.unwrap();
    assert_eq!(fresh.status(), 200, "another key is another request");
    let bad = client.post(a.url("/messages")).header("idempotency-key", "x".repeat(256)).json(&other).send().await;
    assert_eq!(bad.unwrap().status(), 400, "a key over 255 characters is refused");
    let page: Value = client.get(a.url("/messages?conversation_id=c")).send().await.unwrap().json().await.unwrap();
    assert_eq!(page["items"].as_array().unwrap().len(), 3, "{page}");
}

#[tokio::test]
async fn concurrent_keyed_chunk_posts_on_two_replicas_store_each_line_once_and_answer_alike() {
    let url = fresh_database().await;
    let (a, b) = tokio::join!(Replica::start(&url), Replica::start(&url));
    let client = reqwest::Client::new();
    let body = ndjson(0..300);
    let post = |replica: &Replica| {
        client
            .post(replica.url("/stream/keyed"))
            .header("content-type", "application/x-ndjson")
            .header("idempotency-key", "chunks-1")
            .body(body.clone())
            .send()
    };
    let (first, second) = within("both POSTs", async { tokio::join!(post(&a), post(&b)) }).await;
    let (first, second) = (first.unwrap(), second.unwrap());
    assert_eq!((first.status().as_u16(), second.status().as_u16()), (200, 200));
    let (first, second): (Value, Value) = (first.json().await.unwrap(), second.json().await.unwrap());
    assert_eq!(first, second, "both get the reply that was stored first");
    assert_eq!(first["chunks_stored"], 300, "{first}");
    let expected: Vec<String> = (0..300).map(line).collect();
    assert_eq!(stored_chunks(&url, "keyed").await, expected, "each line stored once, in order");

    let again = post(&b).await.unwrap();
    assert_eq!(again.status(), 200);
    assert_eq!(again.json::<Value>().await.unwrap(), first, "a later retry gets the first reply");
    let elsewhere = client
        .post(a.url("/stream/other"))
        .header("idempotency-key", "chunks-1")
        .body(ndjson(0..1))
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status(), 422, "the key belongs to stream 'keyed'");
    assert_eq!(stored_chunks(&url, "keyed").await.len(), 300, "retries stored nothing more");
}

#[tokio::test]
async fn a_keyed_retry_after_a_cut_request_stores_only_the_lines_beyond_what_was_stored() {
    let url = fresh_database().await;
    let (a, b) = tokio::join!(Replica::start(&url), Replica::start(&url));
    let client = reqwest::Client::new();
    let mut reader = SseReader::open(&client, &b.url("/stream/cut")).await;

    // The first attempt sends 40 lines, which are stored, then its connection breaks.
    let first = OpenPost::start(&client, a.url("/stream/cut"), Some("cut-1"));
    for i in 0..40 {
        first.send(line(i));
    }
    reader.take_data(40).await;
    first.lines.unbounded_send(Err(std::io::Error::other("the client's connection broke"))).unwrap();
    assert!(within("the cut POST", first.reply).await.unwrap().is_err(), "the first attempt got no reply");

    // The retry sends the whole body again, to the other replica.
    let retry = client
        .post(b.url("/stream/cut"))
        .header("content-type", "application/x-ndjson")
        .header("idempotency-key", "cut-1")
        .body(ndjson(0..100))
        .send()
        .await
        .unwrap();
    assert_eq!(retry.status(), 200);
    let reply: Value = retry.json().await.unwrap();
    assert_eq!((reply["chunks_received"].clone(), reply["chunks_stored"].clone()), (json!(100), json!(100)));
    let expected: Vec<String> = (0..100).map(line).collect();
    assert_eq!(stored_chunks(&url, "cut").await, expected, "lines 0–39 once, then 40–99");
    assert_eq!(reader.take_data(60).await, expected[40..], "the live reader saw each line once");
}
