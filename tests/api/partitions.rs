//! Network partitions, with real processes in network namespaces ([`crate::support::netns`]): a replica cut off
//! from PostgreSQL (packets dropped, no reset), PostgreSQL unreachable from every replica for 30 s, and a
//! writer that vanishes in the middle of a chunk POST. Each checks the timing docs/reliability.md
//! promises, and that no acknowledged line or message is lost or duplicated. (A LISTEN connection silently
//! dropped, through a proxy, is `heartbeat.rs`'s.)

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use tokio::{io::AsyncWriteExt, sync::watch};

use crate::support::{
    SseReader,
    netns::{Lab, Link},
    observe::{LogsOnFailure, readyz, until_logged, until_ready_is},
    within,
};

/// A write waits this long for PostgreSQL to come back before it is refused (`--db-ride-through-ms`; 15 s by
/// default, shortened here so the refusal is measured within the tests' patience).
const RIDE_THROUGH: &[&str] = &["--db-ride-through-ms", "3000"];
const RIDE_THROUGH_TIME: Duration = Duration::from_secs(3);

/// What the writers were told was stored, and what they were refused.
#[derive(Debug, Default)]
struct Acks {
    /// Line numbers of the stream acknowledged (200 with them counted in `chunks_stored`).
    lines: Vec<u64>,
    /// Messages acknowledged, by content.
    messages: Vec<String>,
    /// Requests that got no 2xx (503, or no answer).
    refused: usize,
}

/// Writes the stream `stream` through `replica` in 5-line POSTs until `stop`, numbering lines from 0.
async fn write_lines(
    client: reqwest::Client,
    replica: String,
    stream: &str,
    acks: Arc<Mutex<Acks>>,
    stop: watch::Receiver<bool>,
) {
    let mut next = 0u64;
    while !*stop.borrow() {
        let numbers: Vec<u64> = (next..next + 5).collect();
        next += 5;
        let body: String = numbers.iter().map(|n| format!("{}\n", json!({"n": n}))).collect();
        let reply = client.post(format!("{replica}/stream/{stream}")).body(body).send().await;
        match reply {
            Ok(reply) if reply.status() == 200 => {
                let stored = reply.json::<Value>().await.unwrap()["chunks_stored"].as_u64().unwrap() as usize;
                acks.lock().unwrap().lines.extend(&numbers[..stored]);
            }
            _ => acks.lock().unwrap().refused += 1,
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Writes messages `<tag>-<n>` through `replica` until `stop`.
async fn write_messages(
    client: reqwest::Client,
    replica: String,
    tag: &str,
    acks: Arc<Mutex<Acks>>,
    stop: watch::Receiver<bool>,
) {
    let mut n = 0;
    while !*stop.borrow() {
        let content = format!("{tag}-{n}");
        n += 1;
        let body = json!({"conversation_id": format!("conversation-{tag}"), "query_id": "q", "messages": [content]});
        match client.post(format!("{replica}/messages")).json(&body).send().await {
            Ok(reply) if reply.status().is_success() => acks.lock().unwrap().messages.push(content),
            _ => acks.lock().unwrap().refused += 1,
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How a reader's response ended.
#[derive(Debug)]
struct Ended {
    /// Its data payloads.
    data: Vec<String>,
    /// Whether the broker ended it with a `retry:` hint (not a reset, not a client timeout, not `[DONE]`).
    with_retry: bool,
    /// How long after the `since` given to [`read_to_end`].
    after: Duration,
}

/// Reads `reader` to its end.
async fn read_to_end(mut reader: SseReader, since: Instant) -> Ended {
    let (mut data, mut last) = (Vec::new(), String::new());
    while let Some(frame) = reader.next_frame().await {
        if let Some(item) = frame.lines().find_map(|line| line.strip_prefix("data:")) {
            data.push(item.trim_start().to_owned());
        }
        last = frame;
    }
    Ended { data, with_retry: last.starts_with("retry:"), after: since.elapsed() }
}

/// Every `/readyz` of `replicas` until `stop`, every 250 ms: the answers that were not 200.
async fn watch_readiness(client: reqwest::Client, replicas: Vec<String>, stop: watch::Receiver<bool>) -> Vec<String> {
    let mut failures = Vec::new();
    while !*stop.borrow() {
        for replica in &replicas {
            let probe = client.get(format!("{replica}/readyz")).timeout(Duration::from_secs(3)).send().await;
            if !matches!(&probe, Ok(reply) if reply.status() == 200) {
                failures.push(format!("{replica}: {probe:?}"));
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    failures
}

/// The stream's stored line numbers in order (the completion marker left out).
async fn stored_lines(pool: &sqlx::PgPool, stream: &str) -> Vec<u64> {
    let rows: Vec<(Value,)> = sqlx::query_as("select chunk from chunks where stream_id = $1 order by position")
        .bind(stream)
        .fetch_all(pool)
        .await
        .unwrap();
    rows.into_iter().filter_map(|(chunk,)| chunk["n"].as_u64()).collect()
}

/// How many times each acknowledged message is stored, and whether any message is stored twice.
async fn assert_messages_once(pool: &sqlx::PgPool, acks: &Acks) {
    let rows: Vec<(String, i64)> =
        sqlx::query_as("select message #>> '{}', count(*) from messages group by 1").fetch_all(pool).await.unwrap();
    let stored: std::collections::HashMap<String, i64> = rows.into_iter().collect();
    for (content, count) in &stored {
        assert_eq!(*count, 1, "message {content} stored {count} times");
    }
    for content in &acks.messages {
        assert!(stored.contains_key(content), "acknowledged message {content} is lost");
    }
}

#[tokio::test]
#[ignore = "needs root for network namespaces: ./scripts/test runs it (CI runs as root)"]
async fn a_replica_cut_off_from_postgres_fails_fast_moves_its_readers_and_recovers_by_itself() {
    let lab = Lab::start(3).await;
    let (a, b, c) =
        tokio::join!(lab.replica(0, RIDE_THROUGH), lab.replica(1, RIDE_THROUGH), lab.replica(2, RIDE_THROUGH));
    let _logs = LogsOnFailure(vec![&a, &b, &c]);
    let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let (stop, stopped) = watch::channel(false);
    let (lines, on_a, on_b) = (Arc::default(), Arc::default(), Arc::default());
    let writer =
        tokio::spawn(write_lines(client.clone(), b.base.clone(), "story", Arc::clone(&lines), stopped.clone()));
    let messages_a =
        tokio::spawn(write_messages(client.clone(), a.base.clone(), "a", Arc::clone(&on_a), stopped.clone()));
    let messages_b =
        tokio::spawn(write_messages(client.clone(), b.base.clone(), "b", Arc::clone(&on_b), stopped.clone()));
    within("the first lines", async {
        while lines.lock().unwrap().lines.len() < 20 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    // Readers without the requests' 30 s limit: C's lives through the cut and the heal.
    let readers = reqwest::Client::new();
    let reader_a = SseReader::open(&readers, &a.url("/stream/story?from-beginning=true")).await;
    let reader_c = SseReader::open(&readers, &c.url("/stream/story?from-beginning=true")).await;
    let others = tokio::spawn(watch_readiness(client.clone(), vec![b.base.clone(), c.base.clone()], stopped.clone()));

    let cut = Instant::now();
    lab.cut(Link::ReplicaToDatabase(0));
    let write_on_a = async {
        let body = json!({"conversation_id": "during", "query_id": "q", "messages": ["during the cut"]});
        let reply = client.post(a.url("/messages")).json(&body).send().await;
        (reply.map(|reply| reply.status().as_u16()).ok(), cut.elapsed())
    };
    let (not_ready, (write_status, write_took), reader_a_end, listener_lost) =
        within("the cut replica to notice", async {
            tokio::join!(
                until_ready_is(&client, &a, 503, cut),
                write_on_a,
                read_to_end(reader_a, cut),
                until_logged(&a, "LISTEN connection lost", cut),
            )
        })
        .await;
    let reader_ended = reader_a_end.after;
    println!(
        "cut from PostgreSQL: not ready after {not_ready:?}, a write refused after {write_took:?}, its reader ended \
         after {reader_ended:?}, the LISTEN connection's loss seen after {listener_lost:?}"
    );
    assert!(not_ready <= Duration::from_secs(5), "/readyz answered 503 only after {not_ready:?}");
    assert_eq!(write_status, Some(503), "a write on the cut replica: {write_status:?} after {write_took:?}");
    assert!(
        write_took <= Duration::from_secs(10) + RIDE_THROUGH_TIME,
        "the write was refused only after {write_took:?}"
    );
    assert!(reader_ended <= Duration::from_secs(15), "its reader was ended only after {reader_ended:?}");
    assert!(reader_a_end.with_retry, "the broker ended A's reader with a retry hint: {reader_a_end:?}");
    assert!(listener_lost <= Duration::from_secs(10), "the LISTEN connection's loss was seen after {listener_lost:?}");
    let log = a.log();
    let lost = log.lines().find(|line| line.contains("LISTEN connection lost")).unwrap();
    // Keepalive ends the socket (sqlx reports it closed, timed out or the host unreachable), before the
    // heartbeat's deadline would.
    assert!(!lost.contains("heartbeat"), "keepalive, not the heartbeat, noticed the cut: {lost}");
    let written_during_cut = lines.lock().unwrap().lines.len();

    let healed = Instant::now();
    lab.heal(Link::ReplicaToDatabase(0));
    let ready_again = within("the replica to be ready again", until_ready_is(&client, &a, 200, healed)).await;
    println!("cut from PostgreSQL: ready again {ready_again:?} after the heal");
    assert!(ready_again <= Duration::from_secs(10), "ready again only after {ready_again:?}");
    // The healthy replicas went on: the writer on B kept being acknowledged through the cut.
    within("more lines after the heal", async {
        while lines.lock().unwrap().lines.len() < written_during_cut + 20 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    stop.send_replace(true);
    for task in [writer, messages_a, messages_b] {
        task.await.unwrap();
    }
    let complete = client.post(b.url("/stream/story/complete")).json(&json!({})).send().await.unwrap();
    assert_eq!(complete.status(), 200);

    let pool = sqlx::PgPool::connect(&lab.database_url()).await.unwrap();
    let stored = stored_lines(&pool, "story").await;
    let acked = lines.lock().unwrap().lines.clone();
    assert_eq!(stored, acked, "every acknowledged line once, in order (the writer was never refused)");
    // The reader on the healthy side saw everything, in order; a new reader on the mended replica replays it.
    let seen_on_c = within("C's reader to end", read_to_end(reader_c, cut)).await.data;
    let numbers = |items: &[String]| -> Vec<u64> {
        items.iter().filter_map(|item| serde_json::from_str::<Value>(item).ok()?["n"].as_u64()).collect()
    };
    assert_eq!(numbers(&seen_on_c), acked, "C's reader: every line once, in order");
    let seen_on_a = within(
        "a new reader on A",
        read_to_end(SseReader::open(&readers, &a.url("/stream/story?from-beginning=true")).await, cut),
    )
    .await
    .data;
    assert_eq!(numbers(&seen_on_a), acked, "a new reader on the mended replica");
    let (on_a, on_b) = (std::mem::take(&mut *on_a.lock().unwrap()), std::mem::take(&mut *on_b.lock().unwrap()));
    assert!(on_a.refused > 0, "writes on the cut replica were refused");
    assert_eq!(on_b.refused, 0, "writes on B were never refused");
    for acks in [&on_a, &on_b] {
        assert_messages_once(&pool, acks).await;
    }
    let failures = others.await.unwrap();
    assert!(failures.is_empty(), "the other replicas noticed: {failures:?}");
    for replica in [&b, &c] {
        assert!(!replica.log().contains("LISTEN connection lost"), "{}'s listener was disturbed", replica.base);
    }
}

#[tokio::test]
#[ignore = "needs root for network namespaces: ./scripts/test runs it (CI runs as root)"]
async fn postgres_unreachable_from_every_replica_for_30_s_and_everything_recovers_without_a_restart() {
    let lab = Lab::start(3).await;
    let (a, b, c) =
        tokio::join!(lab.replica(0, RIDE_THROUGH), lab.replica(1, RIDE_THROUGH), lab.replica(2, RIDE_THROUGH));
    let replicas = [&a, &b, &c];
    let _logs = LogsOnFailure(replicas.to_vec());
    let pids = replicas.map(|replica| replica.pid());
    let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let written = client.post(a.url("/stream/before")).body("{\"n\":0}\n{\"n\":1}\n").send().await.unwrap();
    assert_eq!(written.status(), 200);
    let mut readers = Vec::new();
    for replica in replicas {
        let url = replica.url("/stream/before?from-beginning=true");
        let mut reader = SseReader::open(&reqwest::Client::new(), &url).await;
        // Read before the cut: a reader's first read of PostgreSQL happens when its body is first polled.
        let before = within("a reader's replay", reader.take_data(2)).await;
        assert_eq!(before, ["{\"n\":0}", "{\"n\":1}"], "{}: the reader replays both lines", replica.base);
        readers.push(reader);
    }

    let cut = Instant::now();
    lab.cut(Link::Postgres);
    let client = &client;
    let noticed = replicas.into_iter().zip(readers).map(|(replica, reader)| async move {
        let write = async {
            let reply = client.post(replica.url("/stream/during")).body("{\"n\":0}\n").send().await;
            (reply.map(|reply| reply.status().as_u16()).ok(), cut.elapsed())
        };
        tokio::join!(until_ready_is(client, replica, 503, cut), write, read_to_end(reader, cut))
    });
    let outcomes = within("every replica to notice", futures::future::join_all(noticed)).await;
    for (replica, (not_ready, (status, took), reader_end)) in replicas.into_iter().zip(outcomes) {
        let (seen, ended) = (&reader_end.data, reader_end.after);
        let name = &replica.base;
        println!(
            "PostgreSQL unreachable: {name} not ready after {not_ready:?}, a write refused after {took:?}, its reader ended after {ended:?}"
        );
        assert!(not_ready <= Duration::from_secs(5), "{name}: /readyz 503 only after {not_ready:?}");
        assert_eq!(status, Some(503), "{name}: a write during the outage");
        assert!(took <= Duration::from_secs(10) + RIDE_THROUGH_TIME, "{name}: the write was refused after {took:?}");
        assert!(ended <= Duration::from_secs(15), "{name}: its reader ended after {ended:?}");
        assert!(seen.is_empty(), "{name}: nothing more reached its reader: {seen:?}");
        assert!(reader_end.with_retry, "{name}: the broker ended its reader with a retry hint: {reader_end:?}");
    }
    tokio::time::sleep_until((cut + Duration::from_secs(30)).into()).await;
    let healed = Instant::now();
    lab.heal(Link::Postgres);
    for replica in replicas {
        let ready = within("ready again", until_ready_is(client, replica, 200, healed)).await;
        println!("PostgreSQL unreachable: {} ready again {ready:?} after the heal", replica.base);
        assert!(ready <= Duration::from_secs(10), "{}: ready again only after {ready:?}", replica.base);
    }
    // Everything works again, on the same processes: writes, live reads across replicas, the end marker.
    assert_eq!(replicas.map(|replica| replica.pid()), pids, "no replica restarted");
    let mut live = SseReader::open(client, &c.url("/stream/after")).await;
    let written = client.post(a.url("/stream/after")).body("{\"n\":0}\n{\"n\":1}\n").send().await.unwrap();
    assert_eq!(written.status(), 200);
    let complete = client.post(b.url("/stream/after/complete")).json(&json!({})).send().await.unwrap();
    assert_eq!(complete.status(), 200);
    assert_eq!(within("the live reader", live.take_data(3)).await, ["{\"n\":0}", "{\"n\":1}", "[DONE]"]);
    let pool = sqlx::PgPool::connect(&lab.database_url()).await.unwrap();
    assert_eq!(stored_lines(&pool, "before").await, [0, 1], "the lines acknowledged before the outage");
}

#[tokio::test]
#[ignore = "needs root for network namespaces: ./scripts/test runs it (CI runs as root)"]
async fn a_writer_that_vanishes_mid_post_gets_its_stream_aborted_and_leaves_nothing_behind() {
    let lab = Lab::start(1).await;
    let args = ["--client-keepalive-seconds", "2", "--stream-abort-grace-seconds", "2"];
    let replica = lab.replica(0, &args).await;
    let _logs = LogsOnFailure(vec![&replica]);
    let client = reqwest::Client::new();
    let pool = sqlx::PgPool::connect(&lab.database_url()).await.unwrap();
    assert_eq!(readyz(&client, &replica).await, Some(200));
    assert_eq!(lab.sockets_to_client(0, replica.pid()), 0);

    let mut post = lab.connect_from_client(replica.base.trim_start_matches("http://")).await;
    assert_eq!(lab.sockets_to_client(0, replica.pid()), 1, "the writer's connection, as the replica sees it");
    let head = "POST /stream/vanished HTTP/1.1\r\nHost: broker\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n";
    post.write_all(head.as_bytes()).await.unwrap();
    for n in 0..3 {
        let line = format!("{}\n", json!({"n": n}));
        post.write_all(format!("{:x}\r\n{line}\r\n", line.len()).as_bytes()).await.unwrap();
    }
    let mut reader = SseReader::open(&client, &replica.url("/stream/vanished?from-beginning=true")).await;
    assert_eq!(within("the lines", reader.take_data(3)).await.len(), 3, "the open POST's lines are stored");

    let cut = Instant::now();
    lab.cut(Link::Client);
    // Keepalive finds the writer gone (2 s silent, then 3 probes 1 s apart), then the grace runs out.
    let Ended { data: rest, after: ended, .. } = within("the stream to be aborted", read_to_end(reader, cut)).await;
    assert_eq!(rest.last().map(String::as_str), Some("[DONE]"), "the reader gets the abort, then [DONE]: {rest:?}");
    assert!(rest.iter().any(|item| item.contains("abort")), "an abort frame: {rest:?}");
    println!("a vanished writer: its stream aborted {ended:?} after the cut");
    assert!(ended <= Duration::from_secs(15), "aborted after {ended:?}");
    let aborted: (Option<chrono::DateTime<chrono::Utc>>,) =
        sqlx::query_as("select aborted_at from streams where stream_id = 'vanished'").fetch_one(&pool).await.unwrap();
    assert!(aborted.0.is_some(), "the stream is marked aborted");
    let writers: (i64,) = sqlx::query_as("select count(*) from stream_writers where stream_id = 'vanished'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(writers.0, 0, "no registration of the vanished POST is left");
    // The replica closed its end of the vanished connection: it holds no socket to the client any more.
    assert_eq!(lab.sockets_to_client(0, replica.pid()), 0, "the replica still holds the vanished writer's socket");
    drop(post);
}
