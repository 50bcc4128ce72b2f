//! Live global watchers across an asynchronous failover that loses the old primary's last commits: each
//! watcher (every message, every chunk; one on each replica) saw rows of transactions the new primary never
//! got, whose transaction ids it then hands out again. A watcher's horizon is a transaction id, so without the
//! epoch rebase it would sit above the new primary's first rows and skip them; it must get every row the new
//! primary holds that it had not seen, each once, in order.

use std::time::Duration;

use serde_json::json;

use crate::support::{
    Replica, SseReader,
    failover::{PrimaryStandby, Replication},
    within,
};

/// Rows of each feed written after the cut: more than PostgreSQL logs a sequence ahead (32), so the lost
/// transaction ids and numbers go past any the standby knows of.
const LOST: usize = 40;
/// Rows of each feed written before the cut (kept), and after the failover (new).
const KEPT: usize = 3;
const NEW: usize = 5;
/// How long a watcher may take to deliver a row after it is stored.
const DELIVERY: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_global_watchers_get_every_row_of_the_new_primary_once_after_a_failover_that_lost_commits() {
    let mut lab = PrimaryStandby::start_with_replication_link(Replication::Async).await;
    let replicas: [Replica; 3] = Replica::three(&lab.url(), &[]).await.into();
    let client = reqwest::Client::new();
    let bases = replicas.each_ref().map(|r| r.base.as_str());
    let texts = |kind: &str, n: usize| (0..n).map(|i| format!("{kind}-{i}")).collect::<Vec<_>>();

    // Live watchers of every message and every chunk, one of each on each replica, open before anything.
    let mut watchers = Vec::new();
    for base in bases {
        for feed in ["/messages?watch=true", "/stream?watch=true"] {
            let mut reader = SseReader::open(&client, &format!("{base}{feed}")).await;
            assert_eq!(reader.next_frame().await.as_deref(), Some(": connected"), "{base}{feed}");
            watchers.push((format!("{base}{feed}"), reader));
        }
    }
    let write = |n: usize, text: String| {
        let (client, base) = (client.clone(), bases[n % 3].to_owned());
        async move { write_both(&client, &base, &text).await }
    };
    for (i, text) in texts("kept", KEPT).into_iter().enumerate() {
        write(i, text).await;
    }
    lab.cut_replication().await;
    for (i, text) in texts("lost", LOST).into_iter().enumerate() {
        write(i, text).await;
    }
    // Every watcher has seen what the new primary will lack.
    let before = [texts("kept", KEPT), texts("lost", LOST)].concat();
    for (what, reader) in &mut watchers {
        let got = take(reader, before.len()).await;
        assert_eq!(got, before, "{what} before the failover");
    }

    let steps = lab.failover().await;
    for (i, text) in texts("new", NEW).into_iter().enumerate() {
        write(i, text).await;
    }
    let mut problems = Vec::new();
    for (what, reader) in &mut watchers {
        let got = take(reader, NEW).await;
        if got != texts("new", NEW) {
            problems.push(format!("{what}: got {got:?} after the failover"));
        }
    }
    // Nothing more, in particular nothing twice: one more row each, and it is the next thing they send.
    write(0, "last".to_owned()).await;
    for (what, reader) in &mut watchers {
        let got = take(reader, 1).await;
        if got != ["last"] {
            problems.push(format!("{what}: after the new rows, got {got:?} before `last`"));
        }
    }
    eprintln!("[asynchronous failover, {LOST} rows of each feed lost] failover {steps}");
    assert!(problems.is_empty(), "{} watchers went wrong:\n  {}", problems.len(), problems.join("\n  "));
}

/// Appends `text` as a message of conversation `c` and as a chunk of stream `s` (each its own transaction).
async fn write_both(client: &reqwest::Client, base: &str, text: &str) {
    let body = json!({"conversation_id": "c", "query_id": "q", "messages": [text]});
    let response = within("a POST /messages", client.post(format!("{base}/messages")).json(&body).send()).await;
    assert_eq!(response.expect("POST /messages").status(), 200, "POST /messages {text}");
    let chunk = format!("{}\n", json!({ "text": text }));
    let post = client.post(format!("{base}/stream/s")).header("content-type", "application/x-ndjson").body(chunk);
    let response = within("a POST /stream/s", post.send()).await.expect("POST /stream/s");
    assert_eq!(response.status(), 200, "POST /stream/s {text}");
}

/// The texts of the next `n` rows a watcher sends (a message's `message`, a chunk's `text`), or those it sent
/// within [`DELIVERY`] of each other.
async fn take(reader: &mut SseReader, n: usize) -> Vec<String> {
    let mut texts = Vec::new();
    while texts.len() < n {
        let Ok(Some(data)) = tokio::time::timeout(DELIVERY, reader.next_data()).await else { break };
        let row: serde_json::Value = serde_json::from_str(&data).expect("a JSON row");
        let text = row["message"].as_str().or(row["text"].as_str()).unwrap_or_default();
        texts.push(text.to_owned());
    }
    texts
}
