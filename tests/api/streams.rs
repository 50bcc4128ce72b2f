//! Chunk streams, black-box: NDJSON ingest, completion, SSE readers, the raw feed.

use bytes::Bytes;
use serde_json::json;

use crate::support::{SseReader, TestApp, json_of, open_body, within};

#[tokio::test]
async fn posted_chunks_replay_from_the_beginning_then_done_ends_the_response() {
    let app = TestApp::spawn().await;
    let (status, reply) = json_of(app.post_raw("/stream/q1", "{\"n\":1}\n{\"n\":2}\n").await).await;
    assert_eq!(status, 200);
    assert_eq!(reply["status"], "stream_processed");
    assert_eq!(reply["query"], "q1");
    assert_eq!(reply["chunks_received"], 2);
    let (status, reply) = json_of(app.post_json("/stream/q1/complete", &json!({})).await).await;
    assert_eq!((status, reply), (200, json!({"status": "completed", "query": "q1"})));

    let mut reader = SseReader::open(&app.client, &app.url("/stream/q1?from-beginning=true")).await;
    assert_eq!(reader.headers["cache-control"], "no-cache");
    assert_eq!(reader.headers["x-accel-buffering"], "no", "balancers must not buffer the stream");
    assert_eq!(reader.next_frame().await.as_deref(), Some("data: {\"n\":1}"), "no preamble, exact framing");
    assert_eq!(reader.next_frame().await.as_deref(), Some("data: {\"n\":2}"));
    assert_eq!(reader.next_frame().await.as_deref(), Some("data: [DONE]"));
    assert_eq!(reader.next_frame().await, None, "the response ends after [DONE]");
}

#[tokio::test]
async fn chunks_reach_readers_while_the_post_is_still_open() {
    let app = TestApp::spawn().await;
    let mut reader = SseReader::open(&app.client, &app.url("/stream/live")).await;
    let (tx, body) = open_body();
    let post = tokio::spawn({
        let client = app.client.clone();
        let url = app.url("/stream/live");
        async move { client.post(url).header("content-type", "application/x-ndjson").body(body).send().await }
    });
    for n in 0..3 {
        tx.send(Ok(Bytes::from(format!("{{\"n\":{n}}}\n")))).await.unwrap();
        assert_eq!(
            reader.next_data().await.unwrap(),
            format!("{{\"n\":{n}}}"),
            "chunk {n} arrives before the POST ends"
        );
    }
    assert!(!post.is_finished(), "the POST is still open");
    // The Go executor splits lines across writes; the last line has no newline.
    tx.send(Ok(Bytes::from_static(b"{\"n\":"))).await.unwrap();
    tx.send(Ok(Bytes::from_static(b"3}"))).await.unwrap();
    drop(tx);
    let response = within("the POST reply", post).await.unwrap().unwrap();
    let (status, reply) = json_of(response).await;
    assert_eq!(status, 200);
    assert_eq!(reply["chunks_received"], 4, "a last line without a newline is stored");
    assert_eq!(reader.next_data().await.unwrap(), "{\"n\":3}");
}

#[tokio::test]
async fn several_posts_accumulate_in_order_and_bad_lines_are_counted() {
    let app = TestApp::spawn().await;
    let (_, first) = json_of(app.post_raw("/stream/s", "{\"n\":1}\nnot json\n{\"n\":2}\n").await).await;
    assert_eq!(first["chunks_received"], 2);
    assert_eq!(first["invalid_lines"], 1);
    let (_, second) = json_of(app.post_raw("/stream/s", "{\"n\":3}\n\n{\"trunc\":\n{\"n\":4}").await).await;
    assert_eq!(second["chunks_received"], 2);
    assert_eq!(second["invalid_lines"], 1);
    assert_eq!(app.post_json("/stream/s/complete", &json!({})).await.status(), 200);
    let mut reader = SseReader::open(&app.client, &app.url("/stream/s?from-beginning=true")).await;
    let data = reader.take_data(5).await;
    assert_eq!(data, ["{\"n\":1}", "{\"n\":2}", "{\"n\":3}", "{\"n\":4}", "[DONE]"]);
}

#[tokio::test]
async fn complete_reports_completed_then_already_completed_and_404_for_unknown_streams() {
    let app = TestApp::spawn().await;
    let (status, reply) = json_of(app.post_json("/stream/never/complete", &json!({})).await).await;
    assert_eq!(status, 404);
    assert_eq!(reply["error"]["code"], "NOT_FOUND");
    assert_eq!(reply["error"]["message"], "Stream not found");
    app.post_raw("/stream/q", "{}\n").await;
    let (_, reply) = json_of(app.post_json("/stream/q/complete", &json!({})).await).await;
    assert_eq!(reply, json!({"status": "completed", "query": "q"}));
    let (status, reply) = json_of(app.post_json("/stream/q/complete", &json!({})).await).await;
    assert_eq!((status, reply), (200, json!({"status": "already_completed", "query": "q"})));
    let markers: i64 = sqlx::query_scalar("select count(*) from chunks where stream_id = 'q' and is_done")
        .fetch_one(&app.pool())
        .await
        .unwrap();
    assert_eq!(markers, 1, "only one completion marker is stored");
}

#[tokio::test]
async fn a_reader_without_from_beginning_sees_only_new_chunks() {
    let app = TestApp::spawn().await;
    app.post_raw("/stream/q", "{\"old\":true}\n").await;
    let mut reader = SseReader::open(&app.client, &app.url("/stream/q")).await;
    app.post_raw("/stream/q", "{\"new\":true}\n").await;
    app.post_json("/stream/q/complete", &json!({})).await;
    assert_eq!(reader.take_data(2).await, ["{\"new\":true}", "[DONE]"]);
    reader.expect_end().await;
}

#[tokio::test]
async fn wait_for_query_times_out_with_upstreams_frames() {
    let app = TestApp::spawn().await;
    // 0 is clamped to the 1 s minimum.
    let mut reader = SseReader::open(&app.client, &app.url("/stream/silent?wait-for-query=0")).await;
    assert_eq!(
        reader.next_frame().await.as_deref(),
        Some(
            r#"data: {"error":{"message":"Request timeout waiting for streaming query response","type":"timeout_error","code":"timeout"}}"#
        )
    );
    assert_eq!(reader.next_frame().await.as_deref(), Some("data: [DONE]"));
    assert_eq!(reader.next_frame().await, None);
}

/// Upstream's frame (`STREAM_IDLE_TIMEOUT_MS`, its handlers.ts at 40274024) when a reader heard nothing for long.
const IDLE_FRAME: &str =
    r#"data: {"error":{"message":"Streaming query response timed out","type":"timeout_error","code":"timeout"}}"#;

#[tokio::test]
async fn a_reader_that_hears_no_live_chunk_for_the_idle_timeout_gets_upstreams_frame_and_done() {
    let app = TestApp::spawn_with(|config| config.stream_idle_timeout_ms = 600).await;
    app.post_raw("/stream/idle", "{\"n\":1}\n").await;
    // One reader replays the stored chunk first, one reads only new ones: both end the same way.
    let mut replaying = SseReader::open(&app.client, &app.url("/stream/idle?from-beginning=true")).await;
    let mut live = SseReader::open(&app.client, &app.url("/stream/idle")).await;
    assert_eq!(replaying.next_data().await.as_deref(), Some("{\"n\":1}"));
    // Live chunks, each within the timeout of the last, keep the reader: 5 × 200 ms outlast 600 ms.
    for n in 2..=6 {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        app.post_raw("/stream/idle", format!("{{\"n\":{n}}}\n")).await;
        assert_eq!(live.next_data().await, Some(format!("{{\"n\":{n}}}")));
    }
    for reader in [&mut live, &mut replaying] {
        let mut frames = Vec::new();
        while let Some(frame) = reader.next_frame().await {
            if !frame.starts_with(':') {
                frames.push(frame);
            }
        }
        let tail: Vec<&str> = frames.iter().map(String::as_str).skip_while(|f| *f != IDLE_FRAME).collect();
        assert_eq!(tail, [IDLE_FRAME, "data: [DONE]"], "the idle frame, [DONE], the end: {frames:?}");
    }
    // The stream itself goes on: a new reader reads every chunk, and the writer can still complete it.
    let (status, _) = json_of(app.post_raw("/stream/idle/complete", "{}").await).await;
    assert_eq!(status, 200);
    let mut again = SseReader::open(&app.client, &app.url("/stream/idle?from-beginning=true")).await;
    assert_eq!(again.take_data(7).await.last().map(String::as_str), Some("[DONE]"));
}

#[tokio::test]
async fn a_live_chunk_disarms_wait_for_query() {
    let app = TestApp::spawn().await;
    let mut reader = SseReader::open(&app.client, &app.url("/stream/q?wait-for-query=1")).await;
    app.post_raw("/stream/q", "{\"n\":1}\n").await;
    assert_eq!(reader.next_data().await.unwrap(), "{\"n\":1}");
    // Well past the timeout, the stream still delivers instead of timing out.
    let mut probe = SseReader::open(&app.client, &app.url("/stream/other?wait-for-query=1")).await;
    probe.take_data(2).await;
    app.post_raw("/stream/q", "{\"n\":2}\n").await;
    assert_eq!(reader.next_data().await.unwrap(), "{\"n\":2}");
}

#[tokio::test]
async fn an_error_chunk_is_sent_then_done_ends_the_stream() {
    let app = TestApp::spawn().await;
    let error = r#"{"error":{"message":"model failed","type":"server_error","code":"500"},"ark":{"query":"q"}}"#;
    app.post_raw("/stream/q", format!("{{\"n\":1}}\n{error}\n{{\"after\":1}}\n")).await;
    let mut reader = SseReader::open(&app.client, &app.url("/stream/q?from-beginning=true")).await;
    assert_eq!(reader.take_data(3).await, ["{\"n\":1}", error, "[DONE]"]);
    assert_eq!(reader.next_frame().await, None);
}

#[tokio::test]
async fn the_raw_feed_pages_items_with_markers_and_watch_streams_chunk_fields() {
    let app = TestApp::spawn().await;
    app.post_raw("/stream/a", "{\"x\":1}\n").await;
    app.post_raw("/stream/b", "{\"y\":2}\n").await;
    app.post_json("/stream/a/complete", &json!({})).await;
    let (status, page) = json_of(app.get("/stream?limit=2").await).await;
    assert_eq!(status, 200);
    assert_eq!(page["total"], 3);
    assert_eq!(page["hasMore"], true);
    let items = page["items"].as_array().unwrap();
    assert_eq!(items[0]["data"], json!({"queryId": "a", "chunk": {"x": 1}}));
    assert!(items[0]["sequenceNumber"].is_number() && items[0]["timestamp"].is_string());
    let (_, rest) = json_of(app.get(&format!("/stream?cursor={}", page["nextCursor"])).await).await;
    assert_eq!(rest["items"][0]["data"], json!({"queryId": "a", "chunk": "[DONE]", "complete": true}));
    assert_eq!(rest["hasMore"], false);

    let mut watch = SseReader::open(&app.client, &app.url("/stream?watch=true")).await;
    assert_eq!(watch.next_frame().await.as_deref(), Some(": connected"));
    app.post_raw("/stream/c", "{\"z\":3}\n").await;
    app.post_json("/stream/c/complete", &json!({})).await;
    assert_eq!(watch.take_data(2).await, ["{\"z\":3}", "\"[DONE]\""]);
}

#[tokio::test]
async fn delete_stream_purges_every_chunk() {
    let app = TestApp::spawn().await;
    app.post_raw("/stream/a", "{\"x\":1}\n").await;
    let (status, reply) = json_of(app.delete("/stream").await).await;
    assert_eq!((status, reply), (200, json!({"status": "success", "message": "Stream data purged"})));
    let (_, page) = json_of(app.get("/stream").await).await;
    assert_eq!(page["total"], 0);
    let (status, _) = json_of(app.post_json("/stream/a/complete", &json!({})).await).await;
    assert_eq!(status, 404, "a purged stream was never written");
}

#[tokio::test]
async fn over_long_lines_are_skipped_without_losing_the_others() {
    let app = TestApp::spawn_with(|config| config.max_chunk_bytes = 64).await;
    let long = format!("{{\"big\":\"{}\"}}", "x".repeat(10_000));
    let (_, reply) = json_of(app.post_raw("/stream/q", format!("{{\"n\":1}}\n{long}\n{{\"n\":2}}\n")).await).await;
    assert_eq!(reply["chunks_received"], 2);
    assert_eq!(reply["invalid_lines"], 1);
}

#[tokio::test]
async fn stream_ids_too_long_for_an_index_are_rejected() {
    let app = TestApp::spawn().await;
    let id = "x".repeat(8192);
    let (status, reply) = json_of(app.post_raw(&format!("/stream/{id}"), "{}\n").await).await;
    assert_eq!(status, 400);
    assert_eq!(reply["error"]["code"], "VALIDATION_ERROR");
    let (status, _) =
        json_of(app.post_json("/messages", &json!({"conversation_id": id, "query_id": "q", "messages": []})).await)
            .await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn a_chunk_whose_notification_never_came_reaches_a_live_reader_by_the_poll() {
    let app = TestApp::spawn_with(|config| config.poll_interval_ms = 100).await;
    assert_eq!(app.post_raw("/stream/quiet", "{\"n\":1}\n").await.status(), 200);
    let mut reader = SseReader::open(&app.client, &app.url("/stream/quiet")).await;

    // Written the way the broker writes, minus the NOTIFY: only the fallback poll can find it.
    sqlx::query(
        "with claimed as (
           update streams set last_position = last_position + 1, last_tx = pg_current_xact_id()
           where stream_id = 'quiet' returning last_position
         )
         insert into chunks (stream_id, position, chunk, bytes) select 'quiet', last_position, '{\"n\":2}', 7 from claimed",
    )
    .execute(&app.pool())
    .await
    .expect("a chunk written without NOTIFY");

    let frame = within("the poll to deliver the silent chunk", reader.next_data()).await;
    assert_eq!(frame.as_deref(), Some("{\"n\":2}"));
}

#[tokio::test]
async fn with_request_timeout_ms_a_post_still_arriving_after_it_gets_408_with_what_it_stored() {
    let app = TestApp::spawn_with(|config| config.request_timeout_ms = 700).await;
    let mut reader = SseReader::open(&app.client, &app.url("/stream/slow")).await;
    let (tx, body) = open_body();
    let post = tokio::spawn({
        let client = app.client.clone();
        let url = app.url("/stream/slow");
        async move { client.post(url).header("content-type", "application/x-ndjson").body(body).send().await }
    });
    for n in 1..=2 {
        tx.send(Ok(Bytes::from(format!("{{\"n\":{n}}}\n")))).await.unwrap();
        assert_eq!(reader.next_data().await, Some(format!("{{\"n\":{n}}}")));
    }
    // The writer keeps the body open and sends nothing more: the broker ends it at the timeout.
    let response = within("the 408", post).await.unwrap().unwrap();
    let (status, reply) = json_of(response).await;
    assert_eq!(status, 408, "{reply}");
    assert_eq!((reply["error"]["code"].as_str(), reply["chunks_stored"].as_u64()), (Some("REQUEST_TIMEOUT"), Some(2)));
    assert!(reply["error"]["message"].as_str().unwrap().contains("REQUEST_TIMEOUT_MS (700 ms)"), "{reply}");
    drop(tx);
    // A whole JSON body is bounded by it too (the shorter of it and --body-read-timeout-seconds).
    let (tx, body) = open_body();
    tx.send(Ok(Bytes::from_static(b"{\"sender\":"))).await.unwrap();
    let response = app.client.post(app.url("/questions")).header("content-type", "application/json").body(body);
    let (status, reply) = json_of(within("the JSON body's 408", response.send()).await.unwrap()).await;
    assert_eq!((status, reply["error"]["code"].as_str()), (408, Some("REQUEST_TIMEOUT")), "{reply}");
}

/// ark-api's OpenAI-compatible `POST /openai/v1/chat/completions` with `stream: true` reads
/// `GET /stream/{q}?from-beginning=true&wait-for-query=<the Query's timeout>` and passes a non-200 answer on
/// to its caller only as `{"error":{"message","type"}}` (else it says "503 Service Unavailable" instead).
#[tokio::test]
async fn ark_apis_openai_read_streams_and_a_refused_read_says_message_and_type() {
    let app = TestApp::spawn().await;
    app.post_raw("/stream/openai-query-1", "{\"n\":1}\n").await;
    assert_eq!(app.post_json("/stream/openai-query-1/complete", &json!({})).await.status(), 200);
    let url = app.url("/stream/openai-query-1?from-beginning=true&wait-for-query=300");
    let mut reader = SseReader::open(&app.client, &url).await;
    assert_eq!(reader.take_data(2).await, ["{\"n\":1}", "[DONE]"]);
    let (status, body) = json_of(app.get("/stream/openai-query-1?wait-for-query=soon").await).await;
    assert_eq!(status, 400);
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.starts_with("wait-for-query")), "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    let (status, body) = json_of(app.get("/sessions/nobody").await).await;
    assert_eq!((status, body["error"]["type"].as_str()), (404, Some("not_found_error")));
}
