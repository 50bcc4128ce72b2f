//! The LISTEN relay: once enough replicas are live, one of them LISTENs and the others follow it over HTTP.
//! Readers on every replica still hear every commit (the fallback poll is turned off, so a line that arrives
//! came through a notification), a replica that listened itself switches to following once the count is
//! reached, and when the relay dies another replica takes over while the readers open on the survivors go on
//! without a gap or a repeat. The relay's stream takes only the token it wrote into PostgreSQL.

use std::time::Duration;

use serde_json::json;

use crate::support::{Replica, SseReader, fresh_database, observe::LogsOnFailure, within};

/// Replicas follow a relay from this many live ones in these tests.
const FROM: &str = "3";
/// No fallback poll: only notifications (direct or relayed) wake a reader.
const NO_POLL: &str = "600000";

async fn start(url: &str) -> Replica {
    Replica::start_with(url, &["--listen-relay-from", FROM, "--poll-interval-ms", NO_POLL]).await
}

/// The mode a replica's `/metrics` says it hears commits in.
async fn mode(client: &reqwest::Client, replica: &Replica) -> Option<String> {
    let metrics = client.get(replica.url("/metrics")).send().await.ok()?.text().await.ok()?;
    metrics.lines().find_map(|line| {
        let rest = line.strip_prefix("ark_broker_listen_mode{mode=\"")?;
        let (mode, value) = rest.split_once("\"} ")?;
        (value.trim() == "1").then(|| mode.to_owned())
    })
}

/// The replicas' modes, in order (empty for one that did not answer).
async fn modes(client: &reqwest::Client, replicas: &[&Replica]) -> Vec<String> {
    let mut modes = Vec::new();
    for replica in replicas {
        modes.push(mode(client, replica).await.unwrap_or_default());
    }
    modes
}

/// Waits until the replicas' modes, in order, are `expected`.
async fn until_modes(client: &reqwest::Client, replicas: &[&Replica], expected: &[&str]) {
    while modes(client, replicas).await != expected {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn write(client: &reqwest::Client, replica: &Replica, stream: &str, n: u64) {
    let response = client.post(replica.url(&format!("/stream/{stream}"))).body(format!("{}\n", json!({"n": n}))).send();
    assert_eq!(response.await.unwrap().status(), 200);
}

#[tokio::test]
async fn replicas_follow_one_relay_once_enough_are_live_and_another_takes_over_when_it_dies() {
    let url = fresh_database().await;
    let client = reqwest::Client::new();
    let relay = start(&url).await;
    let b = start(&url).await;
    let logs = LogsOnFailure(vec![&relay, &b]);
    // Two live replicas, fewer than three: the first holds the relay lock, the second listens itself.
    within("one relay and one listening", until_modes(&client, &[&relay, &b], &["relay", "listening"])).await;
    drop(logs);
    let (c, d) = tokio::join!(start(&url), start(&url));
    let _logs = LogsOnFailure(vec![&relay, &b, &c, &d]);
    within(
        "the others to follow the relay",
        until_modes(&client, &[&relay, &b, &c, &d], &["relay", "following", "following", "following"]),
    )
    .await;

    let mut readers = Vec::new();
    for replica in [&relay, &b, &c, &d] {
        readers.push(SseReader::open(&client, &replica.url("/stream/relayed")).await);
    }
    write(&client, &b, "relayed", 0).await;
    for reader in &mut readers {
        assert_eq!(within("the first line on every replica", reader.take_data(1)).await, ["{\"n\":0}"]);
    }

    // The relay's stream: not without its token, nor with another.
    let stream = |token: Option<&str>| {
        let request = client.get(relay.url("/internal/listen-relay"));
        match token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
        .send()
    };
    for token in [None, Some("not-the-token")] {
        let refused = stream(token).await.unwrap();
        assert_eq!(refused.status(), 401, "{token:?}");
        let body: serde_json::Value = refused.json().await.unwrap();
        assert_eq!(body["error"]["code"], "UNAUTHORIZED", "{body}");
    }
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let (token,): (String,) = sqlx::query_as("select token from listen_relay").fetch_one(&pool).await.unwrap();
    let followed = stream(Some(&token)).await.unwrap();
    assert_eq!(followed.status(), 200, "the token the relay advertised");
    drop(followed);

    // The relay's own LISTEN session ends (its process lives): its followers' streams end with it, and every
    // reader still hears what commits meanwhile.
    let (ended,): (i64,) = sqlx::query_as(
        "select count(*) filter (where pg_terminate_backend(pid)) from pg_stat_activity where application_name = $1",
    )
    .bind(format!("ark-broker-listener {}", relay.pid()))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(ended, 1);
    write(&client, &c, "relayed", 1).await;
    for reader in &mut readers {
        assert_eq!(within("the line after the relay's session ended", reader.take_data(1)).await, ["{\"n\":1}"]);
    }
    within(
        "the replicas to settle again",
        until_modes_sorted(&client, &[&relay, &b, &c, &d], &["following", "following", "following", "relay"]),
    )
    .await;

    // Whichever relays now (the first again, or one that took the lock meanwhile) dies.
    let replicas = [&relay, &b, &c, &d];
    let mut dead = None;
    for (i, replica) in replicas.iter().enumerate() {
        if mode(&client, replica).await.as_deref() == Some("relay") {
            dead = Some(i);
        }
    }
    let dead = dead.expect("a relay");
    replicas[dead].signal(libc::SIGKILL);
    readers.remove(dead);
    let survivors: Vec<&Replica> = replicas.iter().enumerate().filter(|(i, _)| *i != dead).map(|(_, r)| *r).collect();
    // Written while the relay is gone and before another takes over.
    write(&client, survivors[0], "relayed", 2).await;
    // Another replica takes the lock; the other two follow it.
    within(
        "a new relay the others follow",
        until_modes_sorted(&client, &survivors, &["following", "following", "relay"]),
    )
    .await;
    write(&client, survivors[1], "relayed", 3).await;
    write(&client, survivors[2], "relayed", 4).await;
    for reader in &mut readers {
        let lines = within("the lines after the relay died, on every survivor", reader.take_data(3)).await;
        assert_eq!(lines, ["{\"n\":2}", "{\"n\":3}", "{\"n\":4}"], "no gap, no repeat");
    }
}

/// Waits until the replicas' modes, sorted, are `expected`.
async fn until_modes_sorted(client: &reqwest::Client, replicas: &[&Replica], expected: &[&str]) {
    loop {
        let mut now = modes(client, replicas).await;
        now.sort();
        if now == expected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_followers_of_a_frozen_relay_listen_themselves_within_the_connection_deadline() {
    let url = fresh_database().await;
    let client = reqwest::Client::new();
    let relay = start(&url).await;
    within("the first replica to be the relay", until_modes(&client, &[&relay], &["relay"])).await;
    let (b, c) = tokio::join!(start(&url), start(&url));
    let _logs = LogsOnFailure(vec![&relay, &b, &c]);
    within("B and C to follow", until_modes(&client, &[&b, &c], &["following", "following"])).await;
    let mut reader = SseReader::open(&client, &c.url("/stream/frozen")).await;
    write(&client, &b, "frozen", 0).await;
    assert_eq!(within("the first line on C", reader.take_data(1)).await, ["{\"n\":0}"]);

    // A frozen relay keeps its connections and its locks: only its silence tells.
    relay.freeze();
    let frozen = std::time::Instant::now();
    write(&client, &b, "frozen", 1).await;
    assert_eq!(within("the line on C with the relay frozen", reader.take_data(1)).await, ["{\"n\":1}"]);
    let heard = frozen.elapsed();
    println!("a frozen relay: its followers heard a commit again after {heard:?}");
    // The silence deadline is the database network timeout (4 s by default), then a resync.
    assert!(heard < Duration::from_secs(7), "heard after {heard:?}");
    within("B and C to listen themselves", until_modes(&client, &[&b, &c], &["listening", "listening"])).await;
    // Trying the frozen relay again (every 2 s, each try waiting out the deadline) delays nothing meanwhile.
    for n in 2..5 {
        let written = std::time::Instant::now();
        write(&client, &b, "frozen", n).await;
        assert_eq!(within("each next line on C", reader.take_data(1)).await, [format!("{{\"n\":{n}}}")]);
        assert!(written.elapsed() < Duration::from_secs(1), "line {n} took {:?}", written.elapsed());
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    relay.thaw();
}

#[tokio::test]
async fn a_draining_relay_hands_the_relay_over_while_it_finishes_its_posts() {
    let url = fresh_database().await;
    let client = reqwest::Client::new();
    let mut relay = start(&url).await;
    within("the first replica to be the relay", until_modes(&client, &[&relay], &["relay"])).await;
    let (b, c) = tokio::join!(start(&url), start(&url));
    within("B and C to follow", until_modes(&client, &[&b, &c], &["following", "following"])).await;
    let mut reader = SseReader::open(&client, &b.url("/stream/handed-over")).await;

    // A chunk POST the relay is still reading keeps it draining.
    let (lines, body) = crate::support::open_body();
    let post = tokio::spawn({
        let request = client.post(relay.url("/stream/handed-over")).body(body);
        async move { request.send().await.unwrap() }
    });
    lines.send(Ok(bytes::Bytes::from(format!("{}\n", json!({"n": 0}))))).await.unwrap();
    assert_eq!(within("the first line on B", reader.take_data(1)).await, ["{\"n\":0}"]);
    relay.terminate();
    within("the draining relay to say it stepped down", async {
        while !relay.log().contains("no longer the LISTEN relay") {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    within(
        "another replica to relay while the first drains",
        until_modes_sorted(&client, &[&b, &c], &["following", "relay"]),
    )
    .await;
    assert!(!relay.log().contains("\"stopped\""), "the first relay still drains");
    // Lines from the draining replica's open POST and from C still reach B.
    lines.send(Ok(bytes::Bytes::from(format!("{}\n", json!({"n": 1}))))).await.unwrap();
    assert_eq!(within("the next line on B", reader.take_data(1)).await, ["{\"n\":1}"]);
    drop(lines);
    assert_eq!(within("the POST to be answered", post).await.unwrap().status(), 200);
    assert!(relay.wait().await, "the first relay exits cleanly once its POST is answered");
    write(&client, &c, "handed-over", 2).await;
    assert_eq!(within("a line written on C", reader.take_data(1)).await, ["{\"n\":2}"]);
}
