//! Aborted streams across real processes: a writer killed mid-body on one replica, readers on another; a
//! POST that ends cleanly without `/complete` is not an abort, and neither is a break the writer recovers
//! from within the grace period.

use std::process::Stdio;

use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use crate::support::{Replica, SseReader, fresh_database, within};

const ABORT_FRAME: &str =
    r#"{"error":{"message":"stream aborted: the writer disconnected","type":"stream_aborted","code":"aborted"}}"#;

/// Starts a writer process that sends one chunk to `stream` on `replica` and waits there, mid-body.
async fn broken_writer(replica: &Replica, stream: &str) -> Child {
    let address = replica.base.trim_start_matches("http://");
    let (host, port) = address.rsplit_once(':').unwrap();
    let mut child = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/streams/broken_writer.py"))
        .args([host, port, stream])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3 runs the broken writer");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let said = within("the writer to send its chunk", lines.next_line()).await.unwrap();
    assert_eq!(said.as_deref(), Some("sent"));
    child
}

async fn stream_phase(client: &reqwest::Client, replica: &Replica, stream: &str) -> Value {
    let page: Value = client.get(replica.url("/stream?limit=1000")).send().await.unwrap().json().await.unwrap();
    let items = page["items"].as_array().unwrap();
    json!(
        items.iter().filter(|i| i["data"]["queryId"] == stream).map(|i| i["data"]["chunk"].clone()).collect::<Vec<_>>()
    )
}

#[tokio::test]
async fn a_writer_killed_mid_body_aborts_its_stream_for_readers_on_another_replica() {
    let url = fresh_database().await;
    let grace = ["--stream-abort-grace-seconds", "1"];
    let (a, b) = tokio::join!(Replica::start_with(&url, &grace), Replica::start_with(&url, &grace));
    let client = reqwest::Client::new();

    // A clean POST without /complete first (the Python SDK's way): it must never be marked.
    let clean = client.post(a.url("/stream/clean")).header("content-type", "application/x-ndjson");
    assert_eq!(clean.body("{\"n\":1}\n").send().await.unwrap().status(), 200);
    // A writer that breaks and comes back within the grace period is not marked either.
    let mut recovering = broken_writer(&a, "recovering").await;

    let mut openai = SseReader::open(&client, &b.url("/stream/broken")).await;
    let mut unified = SseReader::open(&client, &b.url("/stream/broken?format=unified")).await;
    let mut writer = broken_writer(&a, "broken").await;
    assert!(openai.next_data().await.unwrap().contains("partial"));
    assert_eq!(serde_json::from_str::<Value>(&unified.next_data().await.unwrap()).unwrap()["event"], "text_delta");

    recovering.kill().await.unwrap();
    // The break is recorded asynchronously; the writer comes back only after it was (no event says so).
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    within("the broken POST to be recorded", async {
        let lost = "select writer_lost_at is not null from streams where stream_id = 'recovering'";
        while !sqlx::query_scalar::<_, bool>(lost).fetch_one(&pool).await.unwrap() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    let back = client.post(a.url("/stream/recovering")).header("content-type", "application/x-ndjson");
    assert_eq!(back.body("{\"n\":2}\n").send().await.unwrap().status(), 200);
    writer.kill().await.unwrap();

    let frame = within("the abort frame", openai.next_data()).await.unwrap();
    assert_eq!(frame, ABORT_FRAME);
    assert_eq!(openai.next_data().await.as_deref(), Some("[DONE]"));
    openai.expect_end().await;
    let frame: Value = serde_json::from_str(&within("the unified abort", unified.next_data()).await.unwrap()).unwrap();
    assert_eq!((frame["event"].as_str(), frame["query"].as_str()), (Some("error"), Some("broken")));
    assert_eq!(
        frame["data"],
        json!({"message":"stream aborted: the writer disconnected","type":"stream_aborted","code":"aborted"})
    );
    assert_eq!(unified.next_data().await.as_deref(), Some("[DONE]"));

    // The raw feed shows it; the clean and the recovered streams were lost no earlier and are not aborted.
    assert_eq!(
        stream_phase(&client, &a, "broken").await.as_array().unwrap().last().unwrap()["error"]["code"],
        "aborted"
    );
    assert_eq!(stream_phase(&client, &b, "clean").await, json!([{"n":1}]));
    assert_eq!(
        stream_phase(&client, &b, "recovering").await,
        json!([{"choices":[{"index":0,"delta":{"content":"partial"}}]},{"n":2}])
    );
    // A reader that connects later gets the stored chunks, the abort frame and [DONE].
    let mut late = SseReader::open(&client, &a.url("/stream/broken?from-beginning=true")).await;
    assert!(late.next_data().await.unwrap().contains("partial"));
    assert_eq!(late.next_data().await.as_deref(), Some(ABORT_FRAME));
    assert_eq!(late.next_data().await.as_deref(), Some("[DONE]"));
}

#[tokio::test]
async fn a_stream_written_again_after_its_abort_no_longer_ends_there() {
    let url = fresh_database().await;
    let a = Replica::start_with(&url, &["--stream-abort-grace-seconds", "1"]).await;
    let client = reqwest::Client::new();
    let mut reader = SseReader::open(&client, &a.url("/stream/resumed")).await;
    let mut writer = broken_writer(&a, "resumed").await;
    assert!(reader.next_data().await.unwrap().contains("partial"));
    writer.kill().await.unwrap();
    assert_eq!(within("the abort frame", reader.next_data()).await.as_deref(), Some(ABORT_FRAME));

    // The restarted executor writes the rest and completes: later readers read past the old abort frame.
    let rest = client.post(a.url("/stream/resumed")).header("content-type", "application/x-ndjson");
    assert_eq!(rest.body("{\"n\":3}\n").send().await.unwrap().status(), 200);
    client.post(a.url("/stream/resumed/complete")).json(&json!({})).send().await.unwrap();
    let mut late = SseReader::open(&client, &a.url("/stream/resumed?from-beginning=true")).await;
    assert_eq!(
        late.take_data(3).await,
        vec![r#"{"choices":[{"index":0,"delta":{"content":"partial"}}]}"#, r#"{"n":3}"#, "[DONE]"]
    );
}

#[tokio::test]
async fn after_an_abort_the_unified_stream_goes_on_with_the_brokers_question_events() {
    let url = fresh_database().await;
    let a = Replica::start_with(&url, &["--stream-abort-grace-seconds", "1"]).await;
    let client = reqwest::Client::new();
    let mut reader = SseReader::open(&client, &a.url("/stream/crashed")).await;
    let mut writer = broken_writer(&a, "crashed").await;
    assert!(reader.next_data().await.unwrap().contains("partial"));
    writer.kill().await.unwrap();
    assert_eq!(within("the abort frame", reader.next_data()).await.as_deref(), Some(ABORT_FRAME));

    // The crashed controller's question is answered later: the unified stream tells it after the abort.
    let question = json!({"sender":"ark://agents/a","recipient":"ark://users/dave","content":"Go?",
                          "query":{"namespace":"ns","name":"crashed"}});
    assert_eq!(client.post(a.url("/questions")).json(&question).send().await.unwrap().status(), 201);
    let mut unified = SseReader::open(&client, &a.url("/stream/crashed?format=unified&from-beginning=true")).await;
    let events: Vec<String> = unified
        .take_data(4)
        .await
        .iter()
        .map(|f| serde_json::from_str::<Value>(f).unwrap()["event"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(events, ["text_delta", "error", "question_raised", "phase_change"]);
    // OpenAI-format readers see nothing after the abort frame, so for them the stream still ends there.
    let mut openai = SseReader::open(&client, &a.url("/stream/crashed?from-beginning=true")).await;
    assert_eq!(openai.take_data(3).await[1..], [ABORT_FRAME.to_owned(), "[DONE]".to_owned()]);
}
