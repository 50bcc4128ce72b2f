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

/// Waits until the replicas' modes, in order, are `expected`.
async fn until_modes(client: &reqwest::Client, replicas: &[&Replica], expected: &[&str]) {
    loop {
        let mut modes = Vec::new();
        for replica in replicas {
            modes.push(mode(client, replica).await.unwrap_or_default());
        }
        if modes == expected {
            return;
        }
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

    relay.signal(libc::SIGKILL);
    readers.remove(0);
    // Another replica takes the lock; the other two follow it.
    within("a new relay the others follow", async {
        loop {
            let mut modes = Vec::new();
            for replica in [&b, &c, &d] {
                modes.push(mode(&client, replica).await.unwrap_or_default());
            }
            modes.sort();
            if modes == ["following", "following", "relay"] {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    write(&client, &c, "relayed", 1).await;
    write(&client, &d, "relayed", 2).await;
    for reader in &mut readers {
        let lines = within("the lines after the relay died, on every survivor", reader.take_data(2)).await;
        assert_eq!(lines, ["{\"n\":1}", "{\"n\":2}"], "no gap, no repeat");
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
