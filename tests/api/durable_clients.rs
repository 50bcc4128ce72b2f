//! The official Durable Streams clients against replica processes: the TypeScript client
//! (`@durable-streams/client`) and the Python one (`durable-streams`) follow an Ark Query's chunk stream —
//! the runs list, then each run to its `[DONE]` — through a Service-like balancer while the replicas they
//! read from are killed and replaced; the TypeScript client's idempotent producer, whose answers a proxy
//! cuts, has its retries stored once. The scripts are in tests/durable-streams/clients.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, BufReader, Lines},
    process::{Child, ChildStdout, Command},
};

use crate::{
    durable_streams::stream_requests,
    support::{Replica, balancer::Balancer, cutting_proxy::CuttingProxy, fresh_database, within},
};

fn tool_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// A client script running, its JSON lines read as it prints them.
struct Script {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Script {
    fn start(program: &Path, script: &str, args: &[&str]) -> Self {
        let found = program.is_relative() && program.components().count() == 1 || program.exists();
        assert!(found, "{} is missing: ./scripts/test installs the clients", program.display());
        let mut child = Command::new(program)
            .current_dir(tool_path("tests/durable-streams"))
            .arg(tool_path(&format!("tests/durable-streams/clients/{script}")))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start the client");
        let lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        Script { child, lines }
    }

    /// The next line it prints, as JSON; `None` once it exited.
    async fn next(&mut self) -> Option<Value> {
        let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
            .await
            .expect("the client prints within a minute")
            .expect("read the client's output")?;
        eprintln!("client: {line}");
        Some(serde_json::from_str(&line).unwrap_or_else(|error| panic!("not JSON ({error}): {line}")))
    }

    /// Reads lines until one satisfies `wanted`.
    async fn until(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            let line = self.next().await.unwrap_or_else(|| panic!("the client exited before {what}"));
            if wanted(&line) {
                return line;
            }
        }
    }

    async fn succeeded(mut self) {
        let status = within("the client to exit", self.child.wait()).await.expect("wait for the client");
        assert!(status.success(), "the client failed: {status}");
    }
}

/// Node, from `PATH`.
fn node() -> PathBuf {
    PathBuf::from("node")
}

async fn post_lines(client: &reqwest::Client, replica: &Replica, query: &str, numbers: std::ops::Range<u64>) {
    let body: String = numbers.map(|n| format!("{}\n", json!({"n": n}))).collect();
    let url = replica.url(&format!("/stream/{query}"));
    let posted = client.post(url).header("content-type", "application/x-ndjson").body(body).send().await.unwrap();
    assert_eq!(posted.status(), 200);
}

async fn complete(client: &reqwest::Client, replica: &Replica, query: &str) {
    let url = replica.url(&format!("/stream/{query}/complete"));
    assert_eq!(client.post(url).json(&json!({})).send().await.unwrap().status(), 200);
}

fn numbers(range: std::ops::Range<u64>) -> Value {
    Value::Array(range.map(|n| json!({"n": n})).collect())
}

/// Runs the follower `script` with `program` through a balancer over two replicas while the executor writes
/// through a third: run 1 half written, both replicas behind the balancer killed and replaced (so whatever
/// connection the client held is gone), the rest of run 1, its `[DONE]`, then run 2 as a Query resumed after
/// an approval writes it. The client must read each run whole, once, in order, and closed.
async fn follow_across_a_restart(program: PathBuf, script: &str) {
    let url = fresh_database().await;
    let (a, b, executor) = Replica::three(&url, &[]).await;
    let balancer = Balancer::start(&[&a.base, &b.base]).await;
    let client = reqwest::Client::new();
    let query = "followed";
    post_lines(&client, &executor, query, 0..5).await;
    let mut follower = Script::start(&program, script, &[&balancer.base, query, "2"]);
    follower.until("it read run 1's first five", |line| line["run"] == 1 && line["seen"] == 5).await;

    let mut replicas = vec![a, b];
    for _ in 0..2 {
        let mut old = replicas.remove(0);
        balancer.remove(&old.base).await;
        old.kill().await;
        let new = Replica::start(&url).await;
        balancer.add(&new.base);
        replicas.push(new);
    }

    post_lines(&client, &executor, query, 5..10).await;
    complete(&client, &executor, query).await;
    follower.until("run 1's end", |line| line["run"] == 1 && line.get("closed").is_some()).await;
    post_lines(&client, &executor, query, 10..13).await;
    complete(&client, &executor, query).await;
    let read = follower.until("the runs it read", |line| line.get("runs").is_some()).await;
    follower.succeeded().await;
    let mut served_by_new = 0.0;
    for replica in &replicas {
        served_by_new += stream_requests(replica).await;
    }
    assert!(served_by_new > 0.0, "the client went on reading from the replicas started after the kills");

    let runs = read["runs"].as_array().expect("the runs");
    assert_eq!(runs.len(), 2, "{read}");
    assert_eq!((&runs[0]["run"], &runs[0]["items"], &runs[0]["closed"]), (&json!(1), &numbers(0..10), &json!(true)));
    assert_eq!((&runs[1]["run"], &runs[1]["items"], &runs[1]["closed"]), (&json!(2), &numbers(10..13), &json!(true)));
}

#[tokio::test]
#[ignore = "needs Node with @durable-streams/client (tests/durable-streams): ./scripts/test installs it and runs it"]
async fn the_typescript_client_follows_an_ark_querys_runs_across_replica_restarts() {
    follow_across_a_restart(node(), "follow.mjs").await;
}

#[tokio::test]
#[ignore = "needs the pinned Python client (tests/durable-streams/.venv): ./scripts/test installs it and runs it"]
async fn the_python_client_follows_an_ark_querys_runs_across_replica_restarts() {
    follow_across_a_restart(tool_path("tests/durable-streams/.venv/bin/python"), "follow.py").await;
}

#[tokio::test]
#[ignore = "needs Node with @durable-streams/client (tests/durable-streams): ./scripts/test installs it and runs it"]
async fn an_idempotent_producers_retries_after_cut_connections_are_stored_once() {
    let url = fresh_database().await;
    let replica = Replica::start(&url).await;
    let proxy = CuttingProxy::start(&replica.base, 3).await;
    let mut producer = Script::start(&node(), "produce.mjs", &[&proxy.url("/v1/stream/produced"), "30"]);
    let result = producer.until("its result", |line| line.get("closed").is_some()).await;
    producer.succeeded().await;
    assert_eq!(result["errors"], json!([]), "{result}");
    assert!(proxy.cuts() >= 3, "only {} answers were cut", proxy.cuts());

    let read = reqwest::get(replica.url("/v1/stream/produced?offset=-1")).await.unwrap();
    assert_eq!(read.headers().get("stream-closed").and_then(|v| v.to_str().ok()), Some("true"));
    let next = read.headers().get("stream-next-offset").and_then(|v| v.to_str().ok()).map(str::to_owned);
    assert_eq!(next.as_deref(), result["closed"].as_str(), "the close's offset is the stream's end");
    assert_eq!(read.json::<Value>().await.unwrap(), numbers(0..30), "each message once, in order");
}
