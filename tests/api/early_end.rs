//! The newest Go executor's pattern (one chunk POST per Query, never reopened after it ends, `/complete`
//! always) through every path that ends an open POST before its body does, across two replicas: what the
//! executor is told, what is stored, and what a live reader and a replay on the other replica see. The path
//! "the database does not take a write within the ride-through" has its own test with a crashed PostgreSQL
//! (`exact_ingest::a_postgres_crash_under_a_long_post_past_the_ride_through_…`), which follows the same pattern.

use serde_json::Value;

use crate::support::{Replica, SseReader, fresh_database, open_post::OpenPost, within};

/// Ark 0.1.70's streaming executor for one Query: it writes every chunk into one POST and, once that POST is
/// answered or fails, writes nothing more for the Query; then it calls `/complete`.
struct Executor(OpenPost);

impl Executor {
    fn open(client: &reqwest::Client, url: String) -> Self {
        Executor(OpenPost::start(client, url, None))
    }

    fn write(&self, bytes: impl Into<bytes::Bytes>) {
        self.0.write(bytes);
    }

    fn chunk(&self, n: usize) {
        self.0.send(chunk(n));
    }

    /// The POST's answer: its status and JSON body, or `None` when the request itself failed.
    async fn answer(self) -> Option<(u16, Value)> {
        let reply = within("the chunk POST's answer", self.0.reply).await.unwrap().ok()?;
        let status = reply.status().as_u16();
        Some((status, reply.json().await.unwrap()))
    }
}

fn chunk(n: usize) -> String {
    format!("{{\"id\":\"chatcmpl-1\",\"choices\":[{{\"delta\":{{\"content\":\"word {n} \"}}}}]}}")
}

/// The last chunk of an answer: the one that carries the finished Query.
const COMPLETED: &str = r#"{"id":"chatcmpl-1","choices":[],"ark":{"completedQuery":{"name":"q"}}}"#;

/// After its POST ended, however it ended, the executor calls `/complete` once; the broker ends the stream.
async fn complete(client: &reqwest::Client, replica: &Replica, stream: &str) {
    let reply = client.post(replica.url(&format!("/stream/{stream}/complete"))).send().await.unwrap();
    assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
}

/// A live reader opened before the POST and a replay from the beginning both see exactly `stored`, then
/// `[DONE]`, then the end.
async fn readers_see(
    client: &reqwest::Client,
    mut live: SseReader,
    replica: &Replica,
    stream: &str,
    stored: &[String],
) {
    let mut expected = stored.to_vec();
    expected.push("[DONE]".into());
    assert_eq!(live.take_data(expected.len()).await, expected, "the live reader");
    live.expect_end().await;
    let mut replay = SseReader::open(client, &replica.url(&format!("/stream/{stream}?from-beginning=true"))).await;
    assert_eq!(replay.take_data(expected.len()).await, expected, "a replay from the beginning");
    replay.expect_end().await;
}

fn chunks(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(chunk).collect()
}

/// A live reader of `stream` on `replica`, opened before anything is written to it.
async fn live_reader(client: &reqwest::Client, replica: &Replica, stream: &str) -> SseReader {
    SseReader::open(client, &replica.url(&format!("/stream/{stream}"))).await
}

#[tokio::test]
async fn a_replica_shutting_down_ends_the_post_near_its_timeout_and_readers_get_what_was_stored_then_done() {
    let url = fresh_database().await;
    let (mut a, b) =
        tokio::join!(Replica::start_with(&url, &["--shutdown-timeout-seconds", "3"]), Replica::start(&url));
    let client = reqwest::Client::new();
    let live = live_reader(&client, &b, "q-drain").await;
    let executor = Executor::open(&client, a.url("/stream/q-drain"));
    (0..3).for_each(|n| executor.chunk(n));
    let mut watch = SseReader::open(&client, &b.url("/stream/q-drain?from-beginning=true")).await;
    assert_eq!(watch.take_data(3).await, chunks(0..3), "the first chunks are stored");
    executor.write("{\"id\":\"chatcmpl-1\",\"choi");

    a.terminate();
    let (status, body) = executor.answer().await.expect("an answer");
    assert_eq!((status, body["chunks_stored"].as_u64()), (503, Some(3)), "{body}");
    assert!(a.wait().await, "the replica exits cleanly");
    complete(&client, &b, "q-drain").await;
    readers_see(&client, live, &b, "q-drain", &chunks(0..3)).await;
}

#[tokio::test]
async fn a_partial_line_past_its_allowance_with_the_budget_used_up_ends_the_post_and_readers_get_what_was_stored() {
    let url = fresh_database().await;
    // A budget below one request's own allowance: the executor's own long half-line uses it up.
    let args = ["--ndjson-buffer-budget-bytes", "100000"];
    let (a, b) = tokio::join!(Replica::start_with(&url, &args), Replica::start(&url));
    let client = reqwest::Client::new();
    let live = live_reader(&client, &b, "q-budget").await;
    let executor = Executor::open(&client, a.url("/stream/q-budget"));
    (0..3).for_each(|n| executor.chunk(n));
    executor.write(format!("{{\"content\":\"{}", "x".repeat(200_000)));

    let (status, body) = executor.answer().await.expect("an answer");
    assert_eq!((status, body["chunks_stored"].as_u64()), (503, Some(3)), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("--ndjson-buffer-budget-bytes"), "{body}");
    complete(&client, &b, "q-budget").await;
    readers_see(&client, live, &b, "q-budget", &chunks(0..3)).await;
}

#[tokio::test]
async fn request_timeout_ms_ends_a_post_still_open_after_it_and_readers_get_what_was_stored() {
    let url = fresh_database().await;
    let (a, b) =
        tokio::join!(Replica::start_with_env(&url, &[], &[("REQUEST_TIMEOUT_MS", "700")]), Replica::start(&url));
    let client = reqwest::Client::new();
    let live = live_reader(&client, &b, "q-timeout").await;
    let executor = Executor::open(&client, a.url("/stream/q-timeout"));
    (0..2).for_each(|n| executor.chunk(n));
    // The LLM thinks for longer than the operator's REQUEST_TIMEOUT_MS.

    let (status, body) = executor.answer().await.expect("an answer");
    assert_eq!((status, body["chunks_stored"].as_u64()), (408, Some(2)), "{body}");
    complete(&client, &b, "q-timeout").await;
    readers_see(&client, live, &b, "q-timeout", &chunks(0..2)).await;
}

#[tokio::test]
async fn a_connection_that_fails_mid_body_keeps_what_was_stored_and_complete_ends_the_stream() {
    let url = fresh_database().await;
    let (a, b) = tokio::join!(Replica::start(&url), Replica::start(&url));
    let client = reqwest::Client::new();
    let live = live_reader(&client, &b, "q-cut").await;
    let executor = Executor::open(&client, a.url("/stream/q-cut"));
    (0..2).for_each(|n| executor.chunk(n));
    let mut watch = SseReader::open(&client, &b.url("/stream/q-cut?from-beginning=true")).await;
    assert_eq!(watch.take_data(2).await, chunks(0..2), "the first chunks are stored");
    executor.write("{\"id\":\"chatcmpl-1\",\"cho");
    executor.0.lines.unbounded_send(Err(std::io::Error::other("the executor's connection breaks"))).unwrap();

    assert!(executor.answer().await.is_none(), "the executor sees its request fail");
    complete(&client, &b, "q-cut").await;
    readers_see(&client, live, &b, "q-cut", &chunks(0..2)).await;
}

#[tokio::test]
async fn a_line_longer_than_max_chunk_bytes_is_skipped_and_the_post_goes_on_to_its_last_chunk() {
    let url = fresh_database().await;
    let (a, b) = tokio::join!(Replica::start_with(&url, &["--max-chunk-bytes", "1000"]), Replica::start(&url));
    let client = reqwest::Client::new();
    let live = live_reader(&client, &b, "q-long").await;
    let executor = Executor::open(&client, a.url("/stream/q-long"));
    (0..2).for_each(|n| executor.chunk(n));
    executor.write(format!("{{\"content\":\"{}\"}}\n", "x".repeat(5_000)));
    (2..4).for_each(|n| executor.chunk(n));
    executor.write(format!("{COMPLETED}\n"));
    executor.0.lines.close_channel();

    let (status, body) = executor.answer().await.expect("an answer");
    assert_eq!(
        (status, body["chunks_stored"].as_u64(), body["invalid_lines"].as_u64()),
        (200, Some(5), Some(1)),
        "{body}"
    );
    complete(&client, &b, "q-long").await;
    let mut stored = chunks(0..4);
    stored.push(COMPLETED.into());
    readers_see(&client, live, &b, "q-long", &stored).await;
}
