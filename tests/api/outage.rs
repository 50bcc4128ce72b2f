//! A database outage seen from real broker processes: once a replica knows Postgres cannot be reached, a
//! read gets 503 with `Retry-After` at once (not after the pool's timeout), a write (MCP calls included) once
//! the ride-through window has passed, `/health` and `/metrics` still answer, and everything works again
//! when Postgres is back. A write made while it is away for less than the window waits and succeeds.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{OwnServer, Replica, within};

#[tokio::test]
async fn with_postgres_stopped_requests_fail_fast_and_recover_when_it_is_back() {
    let (server, url) = OwnServer::start().await;
    let a = Replica::start_with(&url, &["--db-ride-through-ms", "1500"]).await;
    let client = reqwest::Client::new();
    assert_eq!(client.get(a.url("/questions")).send().await.unwrap().status(), 200);

    server.stop().await;
    // The replica knows once its LISTEN connection fails to connect again (it logs that); until then a
    // request may still wait for the pool.
    within("the replica to notice", async {
        while !a.log().contains("LISTEN connection failed") {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert_eq!(client.get(a.url("/readyz")).send().await.unwrap().status(), 503);
    for path in ["/questions", "/messages", "/stream", "/queries/ns/q/state"] {
        let started = Instant::now();
        let response = client.get(a.url(path)).send().await.unwrap();
        let took = started.elapsed();
        assert_eq!(response.status(), 503, "{path}");
        assert_eq!(response.headers()["retry-after"], "1", "{path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "SERVICE_UNAVAILABLE");
        // Well under the pool's 5 s acquire timeout, which is what every request waited before.
        assert!(took < Duration::from_secs(3), "{path} took {took:?}; the replica logged:\n{}", a.log());
    }
    // A write waits out the ride-through window for the database to come back, then gets the same 503.
    let started = Instant::now();
    let message =
        serde_json::json!({"conversation_id": "c", "query_id": "q", "messages": [{"role": "user", "content": "hi"}]});
    let response = client.post(a.url("/messages")).json(&message).send().await.unwrap();
    let took = started.elapsed();
    assert_eq!(response.status(), 503);
    assert!(took >= Duration::from_millis(1500) && took < Duration::from_secs(4), "the write took {took:?}");
    // MCP too (every call waits as a write does), with the same 503.
    let started = Instant::now();
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/list", "params": {}});
    let response = client
        .post(&a.mcp_url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&list)
        .send()
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(response.status().as_u16(), 503);
    assert!(took >= Duration::from_millis(1500) && took < Duration::from_secs(4), "the MCP call took {took:?}");
    assert_eq!(response.headers()["retry-after"], "1");
    assert_eq!(client.get(a.url("/health")).send().await.unwrap().status(), 200, "the process still answers");
    // The scrape answers at once from what was recorded, so the outage itself can be watched.
    let started = Instant::now();
    let scrape = client.get(a.url("/metrics")).send().await.unwrap();
    assert_eq!((scrape.status().as_u16(), started.elapsed() < Duration::from_secs(3)), (200, true));
    assert!(scrape.text().await.unwrap().contains("ark_broker_build_info"), "the scrape's text");
    // A failed probe is no error of the broker's: nothing is logged at ERROR for it (tower-http's failure
    // line is off; a 5xx of the broker's own is logged once, with its request).
    assert!(!a.log().contains("tower_http::trace::on_failure"), "{}", a.log());

    server.start_again().await;
    within("the replica to recover", async {
        while client.get(a.url("/questions")).send().await.unwrap().status() != 200 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert_eq!(client.get(a.url("/readyz")).send().await.unwrap().status(), 200);
}

/// `url`'s JSON once the replica reads again: writes go through the pool as soon as Postgres is back, while
/// reads fail fast (503) until the replica's LISTEN connection is back too.
async fn read_once_reads_work(client: &reqwest::Client, url: &str) -> Value {
    within("reads to work again", async {
        loop {
            let response = client.get(url).send().await.unwrap();
            if response.status() == 200 {
                return response.json().await.unwrap();
            }
            assert_eq!(response.status(), 503, "only a fast 503 while the replica hears nothing yet");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

#[tokio::test]
async fn writes_made_while_postgres_is_briefly_away_wait_for_it_and_are_stored_once() {
    let (server, url) = OwnServer::start().await;
    let a = Replica::start(&url).await;
    let client = reqwest::Client::new();
    let post = |n: usize| {
        let message = serde_json::json!({"conversation_id": "c", "query_id": "q", "messages": [{"role": "user", "content": format!("m{n}")}]});
        client.post(a.url("/messages")).json(&message).send()
    };
    assert_eq!(post(0).await.unwrap().status(), 200);

    server.stop().await;
    within("the replica to notice", async {
        while !a.log().contains("LISTEN connection failed") {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    // Writes made now wait (the default window is 15 s) instead of failing.
    let waiting: Vec<_> = (1..=3).map(|n| tokio::spawn(post(n))).collect();
    assert_eq!(client.get(a.url("/messages")).send().await.unwrap().status(), 503, "reads still fail fast");
    assert!(waiting.iter().all(|w| !w.is_finished()), "the writes wait for the database");
    server.start_again().await;
    for write in waiting {
        let response = within("a waiting write to be answered", write).await.unwrap().unwrap();
        assert_eq!(response.status(), 200, "{}", a.log());
    }
    let stored = read_once_reads_work(&client, &a.url("/messages?conversation_id=c")).await;
    let mut contents: Vec<&str> =
        stored["items"].as_array().unwrap().iter().map(|m| m["message"]["content"].as_str().unwrap()).collect();
    contents.sort();
    assert_eq!(contents, ["m0", "m1", "m2", "m3"], "each write stored once");
}

/// The page's answer and decline forms are writes like REST's answer: made while Postgres is briefly away,
/// they wait for it (instead of failing at once with the error page) and are stored.
#[tokio::test]
async fn the_pages_answer_and_decline_made_while_postgres_is_briefly_away_wait_for_it_and_are_stored() {
    let (server, url) = OwnServer::start().await;
    let a = Replica::start(&url).await;
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let mut ids = Vec::new();
    for content in ["Deploy?", "Roll back?"] {
        let question =
            serde_json::json!({"sender": "ark://agents/a", "recipient": "ark://users/dave", "content": content});
        let asked: Value = client.post(a.url("/questions")).json(&question).send().await.unwrap().json().await.unwrap();
        ids.push(asked["id"].as_str().unwrap().to_owned());
    }

    server.stop().await;
    within("the replica to notice", async {
        while !a.log().contains("LISTEN connection failed") {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let answer = client
        .post(a.url(&format!("/ui/questions/{}/answer", ids[0])))
        .form(&[("response", "yes"), ("answeredBy", "dave")])
        .send();
    let decline = client
        .post(a.url(&format!("/ui/questions/{}/decline", ids[1])))
        .form(&[("reason", "not now"), ("answeredBy", "dave")])
        .send();
    let (answer, decline) = (tokio::spawn(answer), tokio::spawn(decline));
    let page = client.get(a.url("/ui")).send().await.unwrap();
    assert_eq!(page.status(), 503, "the page itself still fails fast");
    assert!(!answer.is_finished() && !decline.is_finished(), "the form posts wait for the database");
    server.start_again().await;
    for (what, post) in [("answer", answer), ("decline", decline)] {
        let reply = within("a waiting form post to be answered", post).await.unwrap().unwrap();
        assert_eq!(reply.status(), 303, "the {what} redirects back to the page: {}", a.log());
        let location = reply.headers()["location"].to_str().unwrap();
        assert!(location.contains(if what == "answer" { "answered=" } else { "declined=" }), "{location}");
    }
    let answered = read_once_reads_work(&client, &a.url(&format!("/questions/{}", ids[0]))).await;
    let declined = read_once_reads_work(&client, &a.url(&format!("/questions/{}", ids[1]))).await;
    assert_eq!((answered["status"].as_str(), declined["status"].as_str()), (Some("answered"), Some("declined")));
}
