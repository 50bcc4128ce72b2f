//! A database outage seen from real broker processes: once a replica knows Postgres cannot be reached, a
//! request gets 503 with `Retry-After` at once (not after the pool's timeout), REST and MCP alike, `/health`
//! and `/metrics` still answer, and everything works again when Postgres is back.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{OwnServer, Replica, within};

#[tokio::test]
async fn with_postgres_stopped_requests_fail_fast_and_recover_when_it_is_back() {
    let (server, url) = OwnServer::start().await;
    let a = Replica::start(&url).await;
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
    // MCP too: a task call fails as fast, with the same 503.
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
    assert_eq!((response.status().as_u16(), started.elapsed() < Duration::from_secs(3)), (503, true));
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
