//! Test support: the throwaway PostgreSQL, brokers in-process and as processes, and an SSE client.

pub mod ark_api;
pub mod balancer;
pub mod browser;
pub mod cluster;
pub mod cutting_proxy;
pub mod failover;
pub mod fake_blocks;
pub mod fake_channels;
pub mod fake_kube;
pub mod fake_socket;
pub mod fake_token_review;
pub mod github;
pub mod hold;
pub mod kube_apiserver;
pub mod kube_deployment;
pub mod mcp;
pub mod netns;
pub mod observe;
pub mod open_post;
pub mod pg_proxy;
pub mod pgbouncer;
pub mod query_crd;
pub mod replica;
pub mod rotating_proxy;
pub mod slack;
pub mod sse;
pub mod test_app;

pub use cluster::{OwnServer, fresh_database};
pub use replica::Replica;
pub use sse::SseReader;
pub use test_app::TestApp;

use std::time::Duration;

/// Installs the process's rustls crypto provider (ring, as the broker does), which reqwest's clients need
/// since the broker's reqwest has no provider of its own. Every entry point of the support (a database, a
/// replica, an in-process broker) calls it first, so build a test's `reqwest::Client` after one of those.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A chunked request body the test writes line by line while the request is open (as Ark's Go executor
/// keeps one chunk POST open for a whole query). Dropping the sender ends the body cleanly.
pub fn open_body() -> (tokio::sync::mpsc::Sender<Result<bytes::Bytes, std::convert::Infallible>>, reqwest::Body) {
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let body = async_stream::stream! {
        while let Some(item) = rx.recv().await {
            yield item;
        }
    };
    (tx, reqwest::Body::wrap_stream(body))
}

/// A response's status and JSON body.
pub async fn json_of(response: reqwest::Response) -> (u16, serde_json::Value) {
    let status = response.status().as_u16();
    (status, response.json().await.expect("a JSON body"))
}

/// Waits until every delivery of the question at `url` has left `pending`, and returns them.
pub async fn settled(client: &reqwest::Client, url: &str) -> Vec<serde_json::Value> {
    within("the deliveries to settle", async {
        loop {
            let question: serde_json::Value = client.get(url).send().await.unwrap().json().await.unwrap();
            let deliveries = question["deliveries"].as_array().cloned().unwrap_or_default();
            if !deliveries.is_empty() && deliveries.iter().all(|d| d["status"] != "pending") {
                return deliveries;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

/// Upper bound for anything a test awaits; a hang fails the test instead of stalling the suite.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Awaits `future`, failing the test with `what` if it takes longer than [`PATIENCE`].
#[track_caller]
pub fn within<F: std::future::Future>(what: &'static str, future: F) -> impl std::future::Future<Output = F::Output> {
    let caller = std::panic::Location::caller();
    async move {
        match tokio::time::timeout(PATIENCE, future).await {
            Ok(output) => output,
            Err(_) => panic!("timed out after {PATIENCE:?} waiting for {what} (at {caller})"),
        }
    }
}

/// A file named `<prefix><random>` in the temp dir holding `content`. The file is removed when the returned
/// guard drops, also when the test panics: keep it for as long as anything (a broker) reads the file.
pub fn temp_file(prefix: &str, content: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::Builder::new().prefix(prefix).tempfile().expect("create a temporary file");
    std::io::Write::write_all(&mut file, content.as_bytes()).expect("write a temporary file");
    file
}
