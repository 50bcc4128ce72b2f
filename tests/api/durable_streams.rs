//! The Durable Streams protocol under `/v1/stream` as its own conformance suite holds it
//! (`@durable-streams/server-conformance-tests`, pinned in tests/durable-streams), across three replicas with
//! every request sent to the next one: a long-poll or SSE reader on one replica wakes on an append to another,
//! and a subscription made through one is woken, delivered and acknowledged through the others.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{Replica, fresh_database, rotating_proxy::RotatingProxy};

/// The replicas' long-poll wait: the suite waits one out in several tests, so a short one keeps the run short.
const LONG_POLL_MS: &str = "1000";

fn tool_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Requests a replica served under `/v1/stream`, from its `/metrics`.
pub async fn stream_requests(replica: &Replica) -> f64 {
    let metrics = reqwest::get(replica.url("/metrics")).await.unwrap().text().await.unwrap();
    metrics
        .lines()
        .filter(|line| line.starts_with("ark_broker_http_requests_total{") && line.contains(r#"route="/v1/stream"#))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
#[ignore = "needs Node with the Durable Streams suite (tests/durable-streams): ./scripts/test installs it and runs it"]
async fn the_durable_streams_conformance_suite_passes_across_three_replicas_each_request_on_the_next() {
    let suite = tool_path("tests/durable-streams");
    assert!(
        suite.join("node_modules/@durable-streams/server-conformance-tests").exists(),
        "this test needs the pinned suite; ./scripts/test installs it (npm ci in tests/durable-streams)"
    );
    let url = fresh_database().await;
    // The suite's webhook receiver listens on 127.0.0.1.
    let flags = ["--durable-long-poll-ms", LONG_POLL_MS, "--durable-webhook-loopback"];
    let (a, b, c) = Replica::three(&url, &flags).await;
    let proxy = RotatingProxy::start(&[a.base.as_str(), b.base.as_str(), c.base.as_str()]).await;
    let results = tempfile::tempdir().expect("a directory for the suite's report");
    let report = results.path().join("report.json");
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(600),
        tokio::process::Command::new(suite.join("node_modules/.bin/vitest"))
            .current_dir(&suite)
            .args(["run", "--reporter=json", "--outputFile"])
            .arg(&report)
            .env("DS_BASE_URL", &proxy.base)
            .env("DS_LONG_POLL_MS", LONG_POLL_MS)
            // The opt-in group too (the runner's default): the reserved subscription APIs.
            .env("DS_SUBSCRIPTIONS", "true")
            .output(),
    )
    .await
    .expect("the suite finishes within 10 minutes")
    .expect("run vitest");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report: Value = serde_json::from_slice(&std::fs::read(&report).expect("vitest wrote its report"))
        .unwrap_or_else(|error| panic!("a JSON report ({error}):\n{stderr}"));
    let failed: Vec<&Value> = report["testResults"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|file| file["assertionResults"].as_array().into_iter().flatten())
        .filter(|test| test["status"] == "failed")
        .collect();
    let names: Vec<String> = failed
        .iter()
        .map(|test| format!("{}: {}", test["fullName"], test["failureMessages"][0].as_str().unwrap_or_default()))
        .collect();
    assert!(output.status.success() && failed.is_empty(), "{} failed:\n{}\n{stderr}", failed.len(), names.join("\n"));
    // What the suite holds at its pinned version, so a test it stops running cannot pass by going missing:
    // every group but the reserved subscription APIs, which the runner leaves off unless DS_SUBSCRIPTIONS.
    assert_eq!(report["numPassedTests"], 338, "every case, none skipped: {report:#}");
    assert_eq!(report["numTotalTests"], 338, "{report:#}");
    for replica in [&a, &b, &c] {
        let served = stream_requests(replica).await;
        assert!(served >= 200.0, "{} served {served} Durable Streams requests", replica.base);
    }
}
