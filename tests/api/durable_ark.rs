//! Ark's chunk streams read as Durable Streams (`/v1/stream/ark/{stream}` and `…/runs/{n}`) on three
//! replica processes: each run a JSON-mode stream closed at its `[DONE]`, written through one replica and
//! read live and resumed on the others; the runs list grows when a resumed Query writes again; writes are
//! refused.

use serde_json::{Value, json};

use crate::{
    end_of_query::{BodyEnd, end_of_query, query_lines, three_replicas},
    support::{Replica, SseReader},
};

/// The offset of `position` in run `run`.
fn offset(run: i64, position: i64) -> String {
    format!("{run:016}_{position:016}")
}

fn header<'a>(response: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    response.headers().get(name).and_then(|v| v.to_str().ok())
}

/// A catch-up read of `path` (under `/v1/stream/`) from `from`: status, `Stream-Next-Offset`,
/// `Stream-Closed`, and the JSON body.
async fn catch_up(replica: &Replica, path: &str, from: &str) -> (u16, String, bool, Value) {
    let response = reqwest::get(replica.url(&format!("/v1/stream/{path}?offset={from}"))).await.unwrap();
    let status = response.status().as_u16();
    let next = header(&response, "stream-next-offset").unwrap_or_default().to_owned();
    let closed = header(&response, "stream-closed") == Some("true");
    if status == 200 {
        assert_eq!(header(&response, "content-type"), Some("application/json"));
    }
    (status, next, closed, response.json().await.unwrap_or(Value::Null))
}

fn parsed(lines: &[String]) -> Value {
    Value::Array(lines.iter().map(|line| serde_json::from_str(line).unwrap()).collect())
}

/// The next protocol SSE event of `reader`: its type and its data, comments skipped.
async fn next_event(reader: &mut SseReader) -> Option<(String, Value)> {
    loop {
        let frame = reader.next_frame().await?;
        if frame.starts_with(':') {
            continue;
        }
        let mut kind = String::new();
        let mut data = Vec::new();
        for line in frame.lines() {
            if let Some(event) = line.strip_prefix("event: ") {
                kind = event.to_owned();
            } else if let Some(text) = line.strip_prefix("data:") {
                data.push(text.strip_prefix(' ').unwrap_or(text));
            }
        }
        return Some((kind, serde_json::from_str(&data.join("\n")).expect("JSON in a protocol event")));
    }
}

#[tokio::test]
async fn each_run_of_an_ark_stream_is_a_durable_stream_closed_at_its_done_and_the_list_grows_with_them() {
    let [a, b, c] = three_replicas().await;
    let stream = "ds-resumed";
    assert_eq!(catch_up(&c, "ark/ds-resumed", "-1").await.0, 404, "no stream yet");

    let first = query_lines(1, 3);
    let (status, _) = end_of_query(&a, &b, stream, &first, BodyEnd::Closed).await;
    assert_eq!(status, 200);
    // Run 1 ends at its `[DONE]`, stored after the three chunks (position 4).
    let (status, next, closed, body) = catch_up(&c, "ark/ds-resumed/runs/1", "-1").await;
    assert_eq!((status, next.as_str(), closed), (200, offset(1, 4).as_str(), true));
    assert_eq!(body, parsed(&first));
    // Resumed after its first chunk, exactly the rest.
    let (_, _, _, rest) = catch_up(&b, "ark/ds-resumed/runs/1", &offset(1, 1)).await;
    assert_eq!(rest, parsed(&first[1..]));
    let (status, list_next, closed, list) = catch_up(&c, "ark/ds-resumed", "-1").await;
    assert_eq!((status, list_next.as_str(), closed), (200, offset(0, 1).as_str(), false));
    assert_eq!(list, json!([{"run": 1, "path": "ark/ds-resumed/runs/1"}]));
    // A live read of the list from its start has the runs begun at once, as a client that skips the catch-up
    // reads it.
    let at_once = reqwest::get(a.url("/v1/stream/ark/ds-resumed?offset=-1&live=long-poll")).await.unwrap();
    assert_eq!((at_once.status().as_u16(), header(&at_once, "stream-next-offset")), (200, Some(list_next.as_str())));
    assert_eq!(at_once.json::<Value>().await.unwrap(), list);
    let head = reqwest::Client::new().head(c.url("/v1/stream/ark/ds-resumed/runs/2")).send().await.unwrap();
    assert_eq!(head.status(), 404, "no second run yet");

    // A reader of the list waits on c while the resumed Query writes its second run through a.
    let list_url = c.url(&format!("/v1/stream/ark/ds-resumed?offset={list_next}&live=long-poll"));
    let waiting = tokio::spawn(async move { reqwest::get(list_url).await.unwrap() });
    let second = query_lines(2, 2);
    let (status, body) = end_of_query(&a, &b, stream, &second, BodyEnd::Closed).await;
    assert_eq!((status, body), (200, json!({"status": "completed", "query": stream})));
    let woken = waiting.await.unwrap();
    assert_eq!(woken.status(), 200);
    assert_eq!(header(&woken, "stream-next-offset"), Some(offset(0, 2).as_str()));
    assert_eq!(woken.json::<Value>().await.unwrap(), json!([{"run": 2, "path": "ark/ds-resumed/runs/2"}]));

    // Run 2 holds the second run only, closed at the second `[DONE]`; run 1 is as it was.
    let mut reader =
        SseReader::open(&reqwest::Client::new(), &b.url("/v1/stream/ark/ds-resumed/runs/2?offset=-1&live=sse")).await;
    let mut seen = Vec::new();
    let last_control = loop {
        match next_event(&mut reader).await.expect("the run's events") {
            (kind, data) if kind == "data" => seen.extend(data.as_array().unwrap().iter().cloned()),
            (kind, control) if kind == "control" && control["streamClosed"] == true => break control,
            (kind, _) => assert_eq!(kind, "control"),
        }
    };
    assert_eq!(Value::Array(seen), parsed(&second));
    assert_eq!(last_control["streamNextOffset"], offset(2, 7), "{last_control}");
    reader.expect_end().await;
    let (_, next, closed, body) = catch_up(&a, "ark/ds-resumed/runs/1", "-1").await;
    assert_eq!((next, closed, body), (offset(1, 4), true, parsed(&first)));
    assert_eq!(catch_up(&a, "ark/ds-resumed/runs/2", &offset(1, 4)).await.0, 400, "another run's offset");
}

#[tokio::test]
async fn a_live_reader_of_an_open_run_gets_chunks_from_other_replicas_then_the_closure() {
    let [a, b, c] = three_replicas().await;
    let client = reqwest::Client::new();
    let post = |replica: &Replica, body: &'static str| {
        client.post(replica.url("/stream/live-run")).header("content-type", "application/x-ndjson").body(body).send()
    };
    assert_eq!(post(&a, "{\"n\":1}\n{\"n\":2}\n").await.unwrap().status(), 200);
    let url = c.url("/v1/stream/ark/live-run/runs/1?offset=-1&live=sse");
    let mut reader = SseReader::open(&client, &url).await;
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let (kind, data) = next_event(&mut reader).await.expect("an event");
        if kind == "data" {
            seen.extend(data.as_array().unwrap().iter().cloned());
        } else {
            assert_eq!(data.get("streamClosed"), None, "open while no `[DONE]`: {data}");
        }
    }
    let (kind, control) = next_event(&mut reader).await.expect("the catch-up's control");
    assert_eq!((kind.as_str(), &control["streamNextOffset"]), ("control", &json!(offset(1, 2))));
    assert_eq!(control["upToDate"], true, "{control}");
    assert_eq!(post(&b, "{\"n\":3}\n").await.unwrap().status(), 200);
    let (kind, data) = next_event(&mut reader).await.expect("the live chunk");
    assert_eq!((kind.as_str(), data), ("data", json!([{"n": 3}])));
    let (kind, control) = next_event(&mut reader).await.expect("its control");
    assert_eq!((kind.as_str(), &control["streamNextOffset"]), ("control", &json!(offset(1, 3))));
    let completed = client.post(a.url("/stream/live-run/complete")).json(&json!({})).send().await.unwrap();
    assert_eq!(completed.status(), 200);
    let (kind, control) = next_event(&mut reader).await.expect("the closure");
    assert_eq!(kind, "control");
    assert_eq!((&control["streamClosed"], &control["streamNextOffset"]), (&json!(true), &json!(offset(1, 4))));
    reader.expect_end().await;

    // A long-poll at the closed run's end answers at once, closed.
    let done = client.get(b.url(&format!("/v1/stream/ark/live-run/runs/1?offset={}&live=long-poll", offset(1, 4))));
    let done = done.send().await.unwrap();
    assert_eq!((done.status().as_u16(), header(&done, "stream-closed")), (204, Some("true")));
}

#[tokio::test]
async fn writes_to_an_ark_stream_through_the_protocol_are_refused_with_405() {
    let [a, _, _] = three_replicas().await;
    let client = reqwest::Client::new();
    let posted = client.post(a.url("/stream/read-only")).body("{\"n\":1}\n").send().await.unwrap();
    assert_eq!(posted.status(), 200);
    for method in [reqwest::Method::PUT, reqwest::Method::POST, reqwest::Method::DELETE] {
        for path in ["ark/read-only", "ark/read-only/runs/1"] {
            let response = client
                .request(method.clone(), a.url(&format!("/v1/stream/{path}")))
                .header("content-type", "application/json")
                .body("[]")
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 405, "{method} {path}");
            let allow = header(&response, "allow").unwrap_or_default().to_owned();
            assert!(allow.contains("GET") && allow.contains("HEAD"), "{allow}");
            let body: Value = response.json().await.unwrap();
            assert!(body["error"]["code"].is_string(), "the documented error body: {body}");
        }
    }
    let (_, _, closed, body) = catch_up(&a, "ark/read-only/runs/1", "-1").await;
    assert_eq!((closed, body), (false, json!([{"n": 1}])), "nothing changed");
}

/// A unified frame without its `timestamp` (when the broker stored the chunk); any other frame as it is.
fn without_time(frame: &str) -> String {
    let Some(Ok(Value::Object(mut event))) = frame.strip_prefix("data: ").map(serde_json::from_str::<Value>) else {
        return frame.to_owned();
    };
    event.remove("timestamp");
    format!("data: {}", Value::Object(event))
}

/// What Ark's own clients read of `name`: the replay from the beginning in both formats (every frame, comments,
/// retries and storage times aside, to the response's end), the `GET /stream` page's items of it (sequence numbers and times
/// aside), the Query's state, and the headers of the replay. The name is replaced by `Q`.
async fn ark_view(replica: &Replica, name: &str) -> Value {
    let client = reqwest::Client::new();
    let mut view = serde_json::Map::new();
    for format in ["", "&format=unified"] {
        let url = replica.url(&format!("/stream/{name}?from-beginning=true{format}"));
        let mut reader = SseReader::open(&client, &url).await;
        let mut frames = Vec::new();
        while let Some(frame) = reader.next_frame().await {
            if !frame.starts_with(':') && !frame.starts_with("retry:") {
                frames.push(without_time(&frame.replace(name, "Q")));
            }
        }
        let mut headers: Vec<String> = reader
            .headers
            .iter()
            .filter(|(key, _)| *key != "date" && *key != "x-request-id")
            .map(|(key, value)| format!("{key}: {}", value.to_str().unwrap()))
            .collect();
        headers.sort();
        view.insert(format!("replay{format}"), json!({"frames": frames, "headers": headers}));
    }
    let page: Value = client.get(replica.url("/stream?limit=1000")).send().await.unwrap().json().await.unwrap();
    let items: Vec<Value> = page["items"]
        .as_array()
        .unwrap_or_else(|| panic!("a page of items: {page}"))
        .iter()
        .filter(|item| item.to_string().contains(name))
        .map(|item| {
            let mut item = item.clone();
            for volatile in ["sequenceNumber", "timestamp", "createdAt"] {
                item.as_object_mut().unwrap().remove(volatile);
            }
            serde_json::from_str(&item.to_string().replace(name, "Q")).unwrap()
        })
        .collect();
    assert!(!items.is_empty(), "{name} in the page: {page}");
    view.insert("page".into(), Value::Array(items));
    let state = client.get(replica.url(&format!("/queries/default/{name}/state"))).send().await.unwrap();
    view.insert("state".into(), serde_json::from_str(&state.text().await.unwrap().replace(name, "Q")).unwrap());
    Value::Object(view)
}

/// Issue 49 point 6: reading a Query's stream through the protocol changes nothing Ark's own clients see.
/// Twin Queries are written alike, two runs each (the second after `/complete`, as a resumed Query writes);
/// one of them is also read through `/v1/stream/ark/…` meanwhile, live and caught up, on every replica. What
/// upstream's reads give of the two is the same but for the name.
#[tokio::test]
async fn reading_a_querys_stream_through_the_protocol_changes_nothing_ark_clients_see() {
    let [a, b, c] = three_replicas().await;
    let client = reqwest::Client::new();
    for (run, lines) in [(1, query_lines(1, 3)), (2, query_lines(2, 2))] {
        for (twin, read) in [("twin-plain", false), ("twin-read", true)] {
            let (first, rest) = lines.split_first().unwrap();
            let posted = client.post(a.url(&format!("/stream/{twin}"))).body(format!("{first}\n")).send().await;
            assert_eq!(posted.unwrap().status(), 200);
            let live = if read {
                let url = c.url(&format!("/v1/stream/ark/{twin}/runs/{run}?offset=-1&live=sse"));
                Some(SseReader::open(&client, &url).await)
            } else {
                None
            };
            // The rest in a POST of its own, answered before `/complete` on another replica.
            let body: String = rest.iter().map(|line| format!("{line}\n")).collect();
            let posted = client.post(a.url(&format!("/stream/{twin}"))).body(body).send().await.unwrap();
            assert_eq!(posted.status(), 200);
            let completed = client.post(b.url(&format!("/stream/{twin}/complete"))).json(&json!({})).send().await;
            assert_eq!(completed.unwrap().status(), 200);
            if let Some(mut live) = live {
                let (mut seen, mut events) = (Vec::new(), Vec::new());
                loop {
                    let event = next_event(&mut live).await.expect("the run's events");
                    events.push(event.clone());
                    match event {
                        (kind, data) if kind == "data" => seen.extend(data.as_array().unwrap().iter().cloned()),
                        (_, control) if control["streamClosed"] == true => break,
                        _ => {}
                    }
                }
                assert_eq!(Value::Array(seen), parsed(&lines), "run {run} read live: {events:?}");
                for replica in [&a, &b, &c] {
                    let (status, _, closed, body) = catch_up(replica, &format!("ark/{twin}/runs/{run}"), "-1").await;
                    assert_eq!((status, closed, body), (200, true, parsed(&lines)));
                    let head = client.head(replica.url(&format!("/v1/stream/ark/{twin}"))).send().await.unwrap();
                    assert_eq!(head.status(), 200);
                }
            }
        }
    }
    let (plain, read) = tokio::join!(ark_view(&a, "twin-plain"), ark_view(&b, "twin-read"));
    assert_eq!(read, plain, "Ark's view of a stream also read through the protocol");
    let replay = plain["replay"]["frames"].as_array().unwrap();
    assert_eq!(replay.iter().filter(|frame| frame.as_str() == Some("data: [DONE]")).count(), 1, "{replay:?}");
    assert!(replay.len() >= 6, "both runs replayed: {replay:?}");
    for header in plain["replay"]["headers"].as_array().unwrap() {
        assert!(!header.as_str().unwrap().starts_with("stream-"), "a protocol header on an Ark read: {header}");
    }
}
