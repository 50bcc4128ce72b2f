//! Every query's end arrives: Ark's Go executor writes its last chunks (the one carrying
//! `ark.completedQuery`) into its one open chunked `POST /stream/{id}`, closes the body and calls
//! `POST /stream/{id}/complete` at once on a new connection, without waiting for the POST's reply. Written here
//! on raw sockets, as tight as a client can make it (the `/complete` connection is open before the last line
//! is sent), on three replica processes: `[DONE]` must come after every line, whichever replica gets what.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::support::{Replica, SseReader, fresh_database, within};

/// How the executor's POST is left when `/complete` is sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum BodyEnd {
    /// Closed first (the terminating chunk sent), as Ark's Go executor does.
    Closed,
    /// Still open: the writer closes it only after `/complete` answered.
    Open,
}

/// One query's end as the executor writes it: `lines` into a chunked POST to `writer`, the last line and
/// `/complete` to `completer` back to back. Returns `/complete`'s status and body.
pub(crate) async fn end_of_query(
    writer: &Replica,
    completer: &Replica,
    stream: &str,
    lines: &[String],
    end: BodyEnd,
) -> (u16, Value) {
    let mut post = connect(writer).await;
    let head = format!(
        "POST /stream/{stream} HTTP/1.1\r\nHost: broker\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    post.write_all(head.as_bytes()).await.unwrap();
    let (last, first) = lines.split_last().expect("at least one line");
    for line in first {
        post.write_all(&chunk(line)).await.unwrap();
    }
    // The connection for /complete is open before the last line goes out: nothing delays it after.
    let mut complete = connect(completer).await;
    let request = format!(
        "POST /stream/{stream}/complete HTTP/1.1\r\nHost: broker\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    );
    let mut last_bytes = chunk(last);
    if end == BodyEnd::Closed {
        last_bytes.extend_from_slice(b"0\r\n\r\n");
    }
    post.write_all(&last_bytes).await.unwrap();
    complete.write_all(request.as_bytes()).await.unwrap();
    let reply = within("the /complete reply", read_response(&mut complete)).await;
    if end == BodyEnd::Open {
        post.write_all(b"0\r\n\r\n").await.unwrap();
    }
    let post_reply = within("the chunk POST's reply", read_response(&mut post)).await;
    assert_eq!(post_reply.0, 200, "the chunk POST: {post_reply:?}");
    reply
}

async fn connect(replica: &Replica) -> TcpStream {
    let address = replica.url("").trim_start_matches("http://").trim_end_matches('/').to_owned();
    let stream = TcpStream::connect(address).await.unwrap();
    stream.set_nodelay(true).unwrap();
    stream
}

fn chunk(line: &str) -> Vec<u8> {
    let payload = format!("{line}\n");
    let mut bytes = format!("{:x}\r\n", payload.len()).into_bytes();
    bytes.extend_from_slice(payload.as_bytes());
    bytes.extend_from_slice(b"\r\n");
    bytes
}

/// Reads one HTTP/1.1 response with a `Content-Length` body (the broker's JSON replies).
async fn read_response(stream: &mut TcpStream) -> (u16, Value) {
    let mut buffer = Vec::new();
    loop {
        let mut piece = [0u8; 4096];
        let n = stream.read(&mut piece).await.unwrap();
        assert!(n > 0, "the connection closed before a whole response: {:?}", String::from_utf8_lossy(&buffer));
        buffer.extend_from_slice(&piece[..n]);
        let text = String::from_utf8_lossy(&buffer).into_owned();
        let Some(head_end) = text.find("\r\n\r\n") else { continue };
        let head = &text[..head_end];
        let length: usize = head
            .lines()
            .find_map(|line| {
                line.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())
            })
            .expect("a Content-Length");
        if buffer.len() >= head_end + 4 + length {
            let status = head.split(' ').nth(1).unwrap().parse().unwrap();
            let body = serde_json::from_slice(&buffer[head_end + 4..head_end + 4 + length]).unwrap();
            return (status, body);
        }
    }
}

/// The lines of one query: some content, then the final chunk with the whole Query, as the executor sends.
pub(crate) fn query_lines(run: usize, count: usize) -> Vec<String> {
    let mut lines: Vec<String> = (0..count.saturating_sub(1))
        .map(|n| json!({"choices": [{"index": 0, "delta": {"content": format!("part {n} of run {run}")}}]}).to_string())
        .collect();
    let padding = "x".repeat(2000);
    lines.push(
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "ark": {"query": format!("q{run}"), "completedQuery": {"metadata": {"name": format!("q{run}")},
                       "status": {"phase": "done", "response": {"content": padding}}}}})
        .to_string(),
    );
    lines
}

/// Reads the stream from the beginning on `reader` and checks it is exactly `lines`, then `[DONE]`.
pub(crate) async fn assert_ends_after(reader: &Replica, stream: &str, lines: &[String], case: &str) {
    let client = reqwest::Client::new();
    let mut sse = SseReader::open(&client, &reader.url(&format!("/stream/{stream}?from-beginning=true"))).await;
    let mut read = Vec::new();
    while let Some(data) = sse.next_data().await {
        let done = data == "[DONE]";
        read.push(data);
        if done {
            break;
        }
    }
    let mut expected = lines.to_vec();
    expected.push("[DONE]".into());
    assert_eq!(read.len(), expected.len(), "{case}: {} frames read, {} expected", read.len(), expected.len());
    assert!(
        read == expected,
        "{case}: [DONE] or a line out of place: {:?}",
        read.iter().map(|f| &f[..f.len().min(60)]).collect::<Vec<_>>()
    );
}

pub(crate) async fn three_replicas() -> [Replica; 3] {
    let url = fresh_database().await;
    let (a, b, c) = tokio::join!(Replica::start(&url), Replica::start(&url), Replica::start(&url));
    [a, b, c]
}

#[tokio::test]
async fn the_executors_end_of_query_lands_in_order_across_replicas_fifty_times() {
    let replicas = three_replicas().await;
    for run in 0..50 {
        let (writer, completer, reader) = (&replicas[run % 3], &replicas[(run + 1) % 3], &replicas[(run + 2) % 3]);
        let stream = format!("across-{run}");
        let lines = query_lines(run, 1 + run % 6);
        let (status, body) = end_of_query(writer, completer, &stream, &lines, BodyEnd::Closed).await;
        assert_eq!((status, body), (200, json!({"status": "completed", "query": stream})), "run {run}");
        assert_ends_after(reader, &stream, &lines, &format!("run {run}")).await;
    }
}

#[tokio::test]
async fn the_end_of_query_lands_in_order_when_the_writer_and_complete_share_a_replica() {
    let [a, b, _c] = three_replicas().await;
    for run in 0..20 {
        let stream = format!("same-{run}");
        let lines = query_lines(run, 2 + run % 4);
        let (status, _) = end_of_query(&a, &a, &stream, &lines, BodyEnd::Closed).await;
        assert_eq!(status, 200, "run {run}");
        assert_ends_after(&b, &stream, &lines, &format!("run {run}")).await;
    }
}

#[tokio::test]
async fn a_complete_right_behind_a_querys_first_and_only_line_answers_200_and_lands_after_it() {
    let [a, b, c] = three_replicas().await;
    for run in 0..20 {
        let stream = format!("first-{run}");
        // A short answer, or the HITL pause: one frame, then complete.
        let lines = vec![
            json!({"type": "tool_approval_request", "taskId": format!("t{run}"), "toolCalls": [], "agentName": "a"})
                .to_string(),
        ];
        let completer = if run % 2 == 0 { &a } else { &b };
        let (status, body) = end_of_query(&a, completer, &stream, &lines, BodyEnd::Closed).await;
        assert_eq!((status, body), (200, json!({"status": "completed", "query": stream})), "run {run}");
        assert_ends_after(&c, &stream, &lines, &format!("run {run}")).await;
    }
}

#[tokio::test]
async fn a_complete_while_the_post_is_still_open_lands_after_what_it_received() {
    let [a, b, c] = three_replicas().await;
    for run in 0..10 {
        let stream = format!("open-{run}");
        let lines = query_lines(run, 3);
        let completer = if run % 2 == 0 { &a } else { &b };
        let (status, _) = end_of_query(&a, completer, &stream, &lines, BodyEnd::Open).await;
        assert_eq!(status, 200, "run {run}");
        assert_ends_after(&c, &stream, &lines, &format!("run {run}")).await;
    }
}

#[tokio::test]
async fn a_complete_with_no_stream_and_no_open_post_is_still_404_on_any_replica() {
    let [a, b, _c] = three_replicas().await;
    let client = reqwest::Client::new();
    for replica in [&a, &b] {
        let response = client.post(replica.url("/stream/nothing-here/complete")).json(&json!({})).send().await.unwrap();
        assert_eq!(response.status(), 404);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["message"], "Stream not found");
    }
}

#[tokio::test]
async fn a_frozen_writer_replica_holds_the_end_back_no_longer_than_the_abort_grace() {
    let url = fresh_database().await;
    let args = ["--stream-abort-grace-seconds", "2"];
    let (a, b) = tokio::join!(Replica::start_with(&url, &args), Replica::start_with(&url, &args));
    let mut post = connect(&a).await;
    post.write_all(
        b"POST /stream/frozen HTTP/1.1\r\nHost: broker\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .await
    .unwrap();
    post.write_all(&chunk(r#"{"n":1}"#)).await.unwrap();
    let client = reqwest::Client::new();
    let mut reader = SseReader::open(&client, &b.url("/stream/frozen?from-beginning=true")).await;
    assert_eq!(reader.next_data().await.as_deref(), Some(r#"{"n":1}"#));

    a.freeze();
    let response = within("the /complete reply", client.post(b.url("/stream/frozen/complete")).json(&json!({})).send())
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "accepted: the end lands without the frozen writer");
    let started = tokio::time::Instant::now();
    assert_eq!(reader.next_data().await.as_deref(), Some("[DONE]"));
    assert!(started.elapsed() < Duration::from_secs(10), "the end took {:?}", started.elapsed());
    a.thaw();
}

#[tokio::test]
async fn of_several_completes_racing_an_open_post_exactly_one_says_it_completed_the_stream() {
    let [a, b, c] = three_replicas().await;
    for run in 0..5 {
        let stream = format!("racing-{run}");
        let mut post = connect(&a).await;
        let head = format!(
            "POST /stream/{stream} HTTP/1.1\r\nHost: broker\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
        );
        post.write_all(head.as_bytes()).await.unwrap();
        post.write_all(&chunk(r#"{"n":1}"#)).await.unwrap();
        let client = reqwest::Client::new();
        let calls = [&a, &b, &c].map(|replica| {
            let request = client.post(replica.url(&format!("/stream/{stream}/complete"))).json(&json!({}));
            tokio::spawn(async move { request.send().await.unwrap().json::<Value>().await.unwrap() })
        });
        let mut statuses = Vec::new();
        for call in calls {
            statuses.push(within("a /complete reply", call).await.unwrap()["status"].as_str().unwrap().to_owned());
        }
        statuses.sort();
        assert_eq!(statuses, ["already_completed", "already_completed", "completed"], "run {run}");
        post.write_all(b"0\r\n\r\n").await.unwrap();
        assert_eq!(within("the chunk POST's reply", read_response(&mut post)).await.0, 200);
        assert_ends_after(&b, &stream, &[r#"{"n":1}"#.to_owned()], &format!("run {run}")).await;
    }
}

#[tokio::test]
async fn a_draining_writer_replica_still_holds_the_end_back_until_its_posts_have_finished() {
    let [a, b, c] = three_replicas().await;
    let head = |stream: &str| {
        format!(
            "POST /stream/{stream} HTTP/1.1\r\nHost: broker\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
    };
    let mut posts = Vec::new();
    for run in 0..10 {
        let stream = format!("draining-{run}");
        let lines = query_lines(run, 3);
        let mut post = connect(&a).await;
        post.write_all(head(&stream).as_bytes()).await.unwrap();
        for line in &lines[..2] {
            post.write_all(&chunk(line)).await.unwrap();
        }
        posts.push((stream, lines, post));
    }
    let client = reqwest::Client::new();
    let last = &posts.last().unwrap().0;
    let mut reader = SseReader::open(&client, &c.url(&format!("/stream/{last}?from-beginning=true"))).await;
    assert_eq!(reader.take_data(2).await.len(), 2, "the first lines are stored before the drain");

    // A rolling restart reaches A: it drains, and its open POSTs go on; each executor then ends its query.
    a.terminate();
    for (stream, lines, post) in &mut posts {
        let mut complete = connect(&b).await;
        let mut bytes = chunk(&lines[2]);
        bytes.extend_from_slice(b"0\r\n\r\n");
        post.write_all(&bytes).await.unwrap();
        let request = format!(
            "POST /stream/{stream}/complete HTTP/1.1\r\nHost: broker\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
        );
        complete.write_all(request.as_bytes()).await.unwrap();
        assert_eq!(within("the /complete reply", read_response(&mut complete)).await.0, 200, "{stream}");
    }
    for (stream, lines, post) in &mut posts {
        assert_eq!(within("the chunk POST's reply", read_response(post)).await.0, 200, "{stream}");
        assert_ends_after(&c, stream, lines, stream).await;
    }
}
