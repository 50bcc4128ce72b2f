//! Connections and memory, against brokers on real ports with small limits: slow headers and idle
//! connections are closed (each by its own timeout) while active SSE readers and chunk POSTs never are;
//! beyond the connection cap probes still answer and the rest gets a quick 503; a JSON body that does not
//! arrive in time gets 408; and new chunk POSTs wait while partly received lines use up the NDJSON budget.

use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    time::Instant,
};

use crate::support::{Replica, SseReader, TestApp, fresh_database, json_of, open_body, within};

/// Opens a raw connection to `base` (`http://host:port`).
async fn connect(base: &str) -> TcpStream {
    TcpStream::connect(base.trim_start_matches("http://")).await.expect("connect")
}

/// Reads until the server closes the connection (end of stream or reset); returns what it sent and when.
/// Fails when the connection is still open after `bound`.
async fn read_until_closed(stream: &mut (impl AsyncRead + Unpin), bound: Duration) -> (String, Instant) {
    let mut received = Vec::new();
    let closed = tokio::time::timeout(bound, async {
        let mut buffer = [0u8; 4096];
        while let Ok(n @ 1..) = stream.read(&mut buffer).await {
            received.extend_from_slice(&buffer[..n]);
        }
    })
    .await;
    let received = String::from_utf8_lossy(&received).into_owned();
    assert!(closed.is_ok(), "the connection is still open after {bound:?}; received {received:?}");
    (received, Instant::now())
}

/// Sends `GET /health` on a kept-alive connection and reads the answer, leaving the connection open.
async fn get_health(stream: &mut TcpStream) {
    stream.write_all(b"GET /health HTTP/1.1\r\nHost: broker\r\n\r\n").await.unwrap();
    let mut response = Vec::new();
    within("the answer to GET /health", async {
        while !response.ends_with(b"\r\n\r\nOK") {
            let mut buffer = [0u8; 1024];
            let n = stream.read(&mut buffer).await.unwrap();
            assert!(n > 0, "closed before answering");
            response.extend_from_slice(&buffer[..n]);
        }
    })
    .await;
    assert!(response.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&response));
}

/// Asserts that `closed` came at least `timeout` after `start` and well before `bound`.
#[track_caller]
fn assert_closed_between(what: &str, closed: Instant, start: Instant, timeout: Duration, bound: Duration) {
    let after = closed - start;
    assert!(after >= timeout && after < bound, "{what} closed after {after:?}, expected {timeout:?}..{bound:?}");
}

/// Polls `condition` (a counter in the broker's state) until it holds.
async fn wait_until(what: &'static str, condition: impl Fn() -> bool) {
    within(what, async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn slow_headers_and_silent_connections_are_closed_after_the_header_timeout() {
    let app = TestApp::spawn_with(|config| {
        config.header_read_timeout_seconds = 1;
        config.idle_timeout_seconds = 30;
    })
    .await;
    let start = Instant::now();
    let mut silent = connect(&app.base).await;
    let slow = connect(&app.base).await;
    let (mut slow_read, mut slow_write) = slow.into_split();
    slow_write.write_all(b"GET /health HTTP/1.1\r\nHost: broker\r\n").await.unwrap();
    // A byte every 100 ms: the deadline runs from the start of the headers, however busy the client looks.
    let trickle = tokio::spawn(async move {
        for byte in b"X-Slow: abc".iter().cycle() {
            if slow_write.write_all(&[*byte]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let header = Duration::from_secs(1);
    let (sent, closed) = read_until_closed(&mut slow_read, Duration::from_secs(10)).await;
    assert_eq!(sent, "", "no response to headers that never ended");
    assert_closed_between("the slow connection", closed, start, header, Duration::from_secs(5));
    let (sent, closed) = read_until_closed(&mut silent, Duration::from_secs(10)).await;
    assert_eq!(sent, "");
    assert_closed_between("the silent connection", closed, start, header, Duration::from_secs(5));
    trickle.abort();
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed_after_the_idle_timeout_not_the_header_timeout() {
    let app = TestApp::spawn_with(|config| {
        config.header_read_timeout_seconds = 1;
        config.idle_timeout_seconds = 3;
    })
    .await;
    let mut stream = connect(&app.base).await;
    let start = Instant::now();
    get_health(&mut stream).await;
    let (more, closed) = read_until_closed(&mut stream, Duration::from_secs(15)).await;
    assert_eq!(more, "");
    assert_closed_between("the idle connection", closed, start, Duration::from_secs(3), Duration::from_secs(6));
}

#[tokio::test]
async fn an_sse_reader_and_a_chunk_post_in_flight_outlive_both_timeouts() {
    let app = TestApp::spawn_with(|config| {
        config.header_read_timeout_seconds = 1;
        config.idle_timeout_seconds = 1;
    })
    .await;
    let mut reader = SseReader::open(&app.client, &app.url("/stream/long-query?from-beginning=true")).await;
    let (lines, body) = open_body();
    let post = tokio::spawn(
        app.client.post(app.url("/stream/long-query")).header("content-type", "application/x-ndjson").body(body).send(),
    );
    lines.send(Ok(Bytes::from_static(b"{\"n\":1}\n"))).await.unwrap();
    assert_eq!(reader.take_data(1).await, [r#"{"n":1}"#]);
    // Nothing moves on either connection (this SSE route sends no heartbeats) for longer than both timeouts;
    // there is no event to await here, the point is the silence.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    lines.send(Ok(Bytes::from_static(b"{\"n\":2}\n"))).await.unwrap();
    assert_eq!(reader.take_data(1).await, [r#"{"n":2}"#], "the reader is still connected");
    drop(lines);
    let reply = within("the chunk POST's reply", post).await.unwrap().expect("the POST is still connected");
    let (status, body) = json_of(reply).await;
    assert_eq!((status, body["chunks_stored"].as_u64()), (200, Some(2)), "{body}");
}

#[tokio::test]
async fn on_shutdown_connections_without_a_request_in_flight_close_at_once() {
    // Default timeouts (15 s for headers, 75 s idle): neither may be what closes them here.
    let app = TestApp::spawn().await;
    let mut slow = connect(&app.base).await;
    slow.write_all(b"GET /health HTTP/1.1\r\nHost: broker\r\n").await.unwrap();
    let (mut silent, mut kept_alive) = (connect(&app.base).await, connect(&app.base).await);
    // Accepted later and served on this test's one thread after the slow connection, so once this is
    // answered the broker has read the slow connection's partial headers (hyper itself closes a connection
    // that has received nothing when told to shut down, but not one in the middle of its headers).
    get_health(&mut kept_alive).await;
    let start = Instant::now();
    let served = tokio::spawn(app.shut_down());
    for stream in [&mut silent, &mut kept_alive, &mut slow] {
        let (sent, _) = read_until_closed(stream, Duration::from_secs(5)).await;
        assert_eq!(sent, "");
    }
    within("serve to return", served).await.unwrap().expect("a clean shutdown");
    assert!(start.elapsed() < Duration::from_secs(5), "the drain took {:?}", start.elapsed());
}

#[tokio::test]
async fn beyond_the_connection_cap_probes_answer_and_the_rest_gets_a_quick_503() {
    let url = fresh_database().await;
    let replica = Replica::start_with(&url, &["--max-connections", "4"]).await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(connect(&replica.base).await);
    }
    // A client of its own per request: connections beyond the cap serve one request each.
    let fresh = || reqwest::Client::new();
    let start = Instant::now();
    for probe in ["/health", "/readyz"] {
        let response = fresh().get(replica.url(probe)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{probe}");
        assert_eq!(response.text().await.unwrap(), "OK");
    }
    let refused = fresh().get(replica.url("/messages")).send().await.unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(refused.headers()["connection"], "close");
    let (_, body) = json_of(refused).await;
    assert_eq!(body["error"]["code"], "SERVICE_UNAVAILABLE", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("connection limit"), "{body}");
    assert!(!body["error"]["requestId"].as_str().unwrap().is_empty(), "{body}");
    assert!(start.elapsed() < Duration::from_secs(1), "answered in {:?}", start.elapsed());

    // The overflow pool (256) full too: a new connection is closed at once, before it sends anything.
    let mut overflow = Vec::new();
    for _ in 0..256 {
        overflow.push(connect(&replica.base).await);
    }
    let mut closed_at_once = connect(&replica.base).await;
    let (sent, _) = read_until_closed(&mut closed_at_once, Duration::from_secs(1)).await;
    assert_eq!(sent, "");

    // Slots come back as connections close (until the broker has seen them close, a new one may still be
    // refused or closed).
    drop((held, overflow));
    within("a full connection again", async {
        while !matches!(fresh().get(replica.url("/messages")).send().await, Ok(reply) if reply.status() == 200) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_json_or_form_body_that_does_not_arrive_in_time_gets_408_and_the_connection_closes() {
    let app = TestApp::spawn_with(|config| config.body_read_timeout_seconds = 1).await;
    let mcp = app.mcp_url.trim_end_matches("/mcp").to_owned();
    let json = "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"conversation";
    let form = "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nresponse=";
    let cases = [
        (app.base.clone(), "POST /messages HTTP/1.1\r\nHost: broker\r\n", json),
        (app.base.clone(), "POST /ui/questions/q-1/answer HTTP/1.1\r\nHost: broker\r\n", form),
        (mcp.clone(), "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\n", json),
    ];
    for (base, head, body) in cases {
        let mut stream = connect(&base).await;
        let start = Instant::now();
        let request = format!("{head}{body}");
        stream.write_all(request.as_bytes()).await.unwrap();
        let (response, closed) = read_until_closed(&mut stream, Duration::from_secs(10)).await;
        assert!(response.starts_with("HTTP/1.1 408"), "{response}");
        assert!(response.to_ascii_lowercase().contains("\r\nconnection: close\r\n"), "{response}");
        assert_closed_between(head, closed, start, Duration::from_secs(1), Duration::from_secs(5));
        let body = response.split("\r\n\r\n").nth(1).unwrap();
        if head.contains("/messages") {
            let body: Value = serde_json::from_str(body).unwrap();
            assert_eq!(body["error"]["code"], "REQUEST_TIMEOUT", "{body}");
        } else if head.contains("/ui/") {
            assert!(body.contains("<!DOCTYPE html>") && body.contains("408"), "the page's errors are HTML: {body}");
        }
    }
}

#[tokio::test]
async fn new_chunk_posts_get_503_while_partial_lines_use_up_the_budget_and_get_in_once_they_end() {
    // A half-line of 60,000 bytes occupies 60,000 up to (with the buffer's growth) just under 120,000: one
    // alone stays under the budget, two always reach it.
    let app = TestApp::spawn_with(|config| config.ndjson_buffer_budget_bytes = 120_000).await;
    let half_line = |tag: char| format!("{{\"{tag}\":\"{}", "a".repeat(60_000 - 6));
    // C: a chunk POST with one line stored, open before the budget fills.
    let (c_lines, c_body) = open_body();
    let c = tokio::spawn(
        app.client.post(app.url("/stream/budget-e")).header("content-type", "application/x-ndjson").body(c_body).send(),
    );
    c_lines.send(Ok(Bytes::from_static(b"{\"c\":1}\n"))).await.unwrap();
    let mut reader = SseReader::open(&app.client, &app.url("/stream/budget-e?from-beginning=true")).await;
    let first = within("C's first line, read back", reader.next_data()).await;
    assert_eq!(first.as_deref(), Some(r#"{"c":1}"#));
    // A: a chunk POST that will finish its line; B: one cut off mid-line (a raw connection, dropped).
    let (a_lines, a_body) = open_body();
    let a = tokio::spawn(
        app.client.post(app.url("/stream/budget-a")).header("content-type", "application/x-ndjson").body(a_body).send(),
    );
    a_lines.send(Ok(Bytes::from(half_line('a')))).await.unwrap();
    let budget = app.state.ndjson_budget.clone();
    wait_until("A's half-line to be held", || budget.held() >= 60_000).await;
    let mut b = connect(&app.base).await;
    let line = half_line('b');
    let head = "POST /stream/budget-b HTTP/1.1\r\nHost: broker\r\nContent-Type: application/x-ndjson\r\n";
    let request = format!("{head}Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{line}\r\n", line.len());
    b.write_all(request.as_bytes()).await.unwrap();
    wait_until("both half-lines to be held", || budget.held() >= 120_000).await;

    let refused = app.post_raw("/stream/budget-c", "{\"c\":1}\n").await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    let (_, body) = json_of(refused).await;
    assert_eq!(body["error"]["code"], "SERVICE_UNAVAILABLE", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("--ndjson-buffer-budget-bytes"), "{body}");

    // C, opened before the budget filled, now grows a partial line past its own allowance: it is ended,
    // saying how many of its lines are stored.
    c_lines.send(Ok(Bytes::from(format!("{{\"c\":\"{}", "c".repeat(200_000))))).await.unwrap();
    let (status, body) = json_of(within("C's reply", c).await.unwrap().unwrap()).await;
    assert_eq!((status, body["chunks_stored"].as_u64()), (503, Some(1)), "{body}");
    drop(c_lines);

    // The open request goes on past the budget and its line is stored whole.
    a_lines.send(Ok(Bytes::from_static(b"\"}\n"))).await.unwrap();
    drop(a_lines);
    let (status, body) = json_of(within("A's reply", a).await.unwrap().unwrap()).await;
    assert_eq!((status, body["chunks_stored"].as_u64()), (200, Some(1)), "{body}");
    drop(b);
    wait_until("every share to be given back", || budget.held() == 0).await;
    let accepted = app.post_raw("/stream/budget-d", "{\"d\":1}\n").await;
    assert_eq!(accepted.status(), 200);
}
