//! Durable Streams side by side (issue 49, point 5): the same shapes against the protocol's reference server
//! (`@durable-streams/server` 0.3.7, one Node process, in memory and file-backed; tests/durable-streams/bench)
//! and against the broker's three replicas, in one run: appends/s from concurrent writers (each its own
//! stream, one append in flight), the latency from an append to a live SSE reader on another replica
//! (p50/p99), and the resident memory each held SSE subscriber costs. The broker's appends are durable
//! (committed to PostgreSQL before they are acknowledged); the reference's in memory are not.

use std::{
    path::Path,
    process::Stdio,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::StreamExt;
use serde::Serialize;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use crate::{load::quantile_ms, replicas::memory_mib};

/// The sizes of a run.
pub struct Plan {
    /// Concurrent writers of the appends shape.
    pub writers: usize,
    /// How long the appends shape writes.
    pub append_seconds: u64,
    /// Streams (one writer, one SSE reader each) of the latency shape, and appends per second each.
    pub streams: usize,
    pub rate: u64,
    pub latency_seconds: u64,
    /// SSE subscribers held on one stream for the memory shape.
    pub subscribers: usize,
}

/// An append's body in the appends shape (the size `electric-sql/ds-bench` uses).
const APPEND_BYTES: usize = 256;
/// Subscribers opened before the first memory reading, so what the first ones allocate once is not counted.
const WARM_UP: usize = 20;

/// One server under test: the base URLs to spread requests over, and the processes whose memory counts.
struct Target {
    name: &'static str,
    bases: Vec<String>,
    pids: Vec<u32>,
}

/// What one target measured.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub target: &'static str,
    pub appends_per_s: f64,
    pub append_errors: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub delivered: u64,
    pub lost: u64,
    pub kib_per_subscriber: f64,
}

/// The reference server as a child process (stopped when dropped).
struct Reference {
    child: Child,
    url: String,
}

impl Reference {
    async fn start(data_dir: Option<&Path>) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/durable-streams/bench/reference.mjs");
        let mut command = Command::new("node");
        command.arg(&script).current_dir(script.parent().unwrap());
        if let Some(dir) = data_dir {
            command.arg(dir);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs the reference server (npm ci in tests/durable-streams)");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let url = loop {
            let line = lines.next_line().await.expect("read the reference server").expect("it prints its URL");
            if let Some(url) =
                serde_json::from_str::<serde_json::Value>(&line).ok().and_then(|v| v["url"].as_str().map(str::to_owned))
            {
                break url;
            }
        };
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Reference { child, url }
    }
}

fn total_rss_kib(pids: &[u32]) -> f64 {
    pids.iter().map(|pid| memory_mib(*pid).0 * 1024.0).sum()
}

async fn create(client: &reqwest::Client, base: &str, path: &str, content_type: &str) {
    let created = client.put(format!("{base}/v1/stream/{path}")).header("content-type", content_type).send().await;
    let status = created.expect("create a stream").status();
    assert!(status.is_success(), "PUT {path}: {status}");
}

/// Writers each appending to their own stream, one append in flight, for the shape's time.
async fn appends(client: &reqwest::Client, target: &Target, plan: &Plan) -> (f64, u64) {
    for n in 0..plan.writers {
        create(client, &target.bases[n % target.bases.len()], &format!("bench-append-{n}"), "application/octet-stream")
            .await;
    }
    let (done, errors) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(plan.append_seconds);
    let writers: Vec<_> = (0..plan.writers)
        .map(|n| {
            let (client, bases, done, errors) = (client.clone(), target.bases.clone(), done.clone(), errors.clone());
            tokio::spawn(async move {
                let body = vec![b'x'; APPEND_BYTES];
                let mut k = n;
                while Instant::now() < deadline {
                    k += 1;
                    let url = format!("{}/v1/stream/bench-append-{n}", bases[k % bases.len()]);
                    let sent = client
                        .post(url)
                        .header("content-type", "application/octet-stream")
                        .body(body.clone())
                        .send()
                        .await;
                    let counter = if sent.is_ok_and(|r| r.status().is_success()) { &done } else { &errors };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.expect("a writer");
    }
    (done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64(), errors.load(Ordering::Relaxed))
}

/// The JSON messages of the SSE `data` events `body` streams, as they come.
async fn read_sse(response: reqwest::Response, mut each: impl FnMut(serde_json::Value) -> bool) {
    let mut bytes = response.bytes_stream();
    let (mut pending, mut event) = (Vec::new(), String::new());
    while let Some(Ok(chunk)) = bytes.next().await {
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line).trim_end_matches(['\r', '\n']).to_owned();
            if let Some(name) = line.strip_prefix("event:") {
                event = name.trim().to_owned();
            } else if let Some(data) = line.strip_prefix("data:").filter(|_| event == "data") {
                let messages: Vec<serde_json::Value> = serde_json::from_str(data.trim_start()).unwrap_or_default();
                for message in messages {
                    if !each(message) {
                        return;
                    }
                }
            }
        }
    }
}

/// One writer and one SSE reader (on the next replica) per stream; each append carries when it was sent.
async fn latency(client: &reqwest::Client, target: &Target, plan: &Plan) -> (f64, f64, u64, u64) {
    let n_bases = target.bases.len();
    for n in 0..plan.streams {
        create(client, &target.bases[n % n_bases], &format!("bench-live-{n}"), "application/json").await;
    }
    let per_stream = plan.rate * plan.latency_seconds;
    let epoch = Instant::now();
    let latencies = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut readers = Vec::new();
    for n in 0..plan.streams {
        let url = format!("{}/v1/stream/bench-live-{n}?offset=-1&live=sse", target.bases[(n + 1) % n_bases]);
        let response = client.get(url).send().await.expect("open an SSE reader");
        let latencies = latencies.clone();
        readers.push(tokio::spawn(async move {
            let mut got = 0u64;
            read_sse(response, |message| {
                let sent_us = message["t"].as_u64().unwrap_or(0);
                let now_us = epoch.elapsed().as_micros() as u64;
                latencies.lock().unwrap().push(now_us.saturating_sub(sent_us));
                got += 1;
                got < per_stream
            })
            .await;
            got
        }));
    }
    let writers: Vec<_> = (0..plan.streams)
        .map(|n| {
            let (client, base) = (client.clone(), target.bases[n % n_bases].clone());
            let period = Duration::from_micros(1_000_000 / plan.rate);
            tokio::spawn(async move {
                let mut tick = tokio::time::interval_at(
                    tokio::time::Instant::now() + period.mul_f64(n as f64 / 100.0 % 1.0),
                    period,
                );
                for k in 0..per_stream {
                    tick.tick().await;
                    let body = serde_json::json!({"t": epoch.elapsed().as_micros() as u64, "k": k}).to_string();
                    let url = format!("{base}/v1/stream/bench-live-{n}");
                    let _ = client.post(url).header("content-type", "application/json").body(body).send().await;
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.expect("a writer");
    }
    let mut delivered = 0;
    for reader in readers {
        delivered += tokio::time::timeout(Duration::from_secs(10), reader).await.map_or(0, |got| got.unwrap_or(0));
    }
    let mut sorted = std::mem::take(&mut *latencies.lock().unwrap());
    sorted.sort_unstable();
    let lost = (plan.streams as u64 * per_stream).saturating_sub(delivered);
    (quantile_ms(&sorted, 0.5), quantile_ms(&sorted, 0.99), delivered, lost)
}

/// Resident memory per SSE subscriber held on one stream, spread over the target's servers.
async fn memory(client: &reqwest::Client, target: &Target, plan: &Plan) -> f64 {
    create(client, &target.bases[0], "bench-fanout", "application/json").await;
    let open = |n: usize| {
        let url = format!("{}/v1/stream/bench-fanout?offset=-1&live=sse", target.bases[n % target.bases.len()]);
        client.get(url).send()
    };
    let mut held = Vec::new();
    for n in 0..WARM_UP {
        held.push(open(n).await.expect("a subscriber"));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = total_rss_kib(&target.pids);
    for chunk in (WARM_UP..WARM_UP + plan.subscribers).collect::<Vec<_>>().chunks(64) {
        let opened = futures::future::join_all(chunk.iter().map(|n| open(*n))).await;
        held.extend(opened.into_iter().map(|response| response.expect("a subscriber")));
    }
    // Memory settles after the last connections' first reads.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = total_rss_kib(&target.pids);
    drop(held);
    (after - before) / plan.subscribers as f64
}

async fn measure(target: &Target, plan: &Plan) -> Measured {
    let client = reqwest::Client::builder().pool_max_idle_per_host(plan.subscribers + 64).build().unwrap();
    eprintln!("durable streams: {} — appends", target.name);
    let (appends_per_s, append_errors) = appends(&client, target, plan).await;
    eprintln!("durable streams: {} — append to a live reader", target.name);
    let (p50_ms, p99_ms, delivered, lost) = latency(&client, target, plan).await;
    eprintln!("durable streams: {} — {} subscribers", target.name, plan.subscribers);
    let kib_per_subscriber = memory(&client, target, plan).await;
    Measured { target: target.name, appends_per_s, append_errors, p50_ms, p99_ms, delivered, lost, kib_per_subscriber }
}

/// Runs the shapes against the reference server (in memory, then file-backed in `scratch`) and the
/// broker's replicas at `bases` (processes `pids`).
pub async fn run(plan: &Plan, bases: &[String], pids: &[u32], scratch: &Path) -> Vec<Measured> {
    let mut measured = Vec::new();
    let memory = Reference::start(None).await;
    let target =
        Target { name: "reference (memory)", bases: vec![memory.url.clone()], pids: vec![memory.child.id().unwrap()] };
    measured.push(measure(&target, plan).await);
    drop(memory);
    let dir = scratch.join("ds-reference");
    std::fs::create_dir_all(&dir).expect("the reference's data directory");
    let file = Reference::start(Some(&dir)).await;
    let target =
        Target { name: "reference (file)", bases: vec![file.url.clone()], pids: vec![file.child.id().unwrap()] };
    measured.push(measure(&target, plan).await);
    drop(file);
    let target = Target { name: "ark-broker (3 replicas)", bases: bases.to_vec(), pids: pids.to_vec() };
    measured.push(measure(&target, plan).await);
    measured
}

/// The markdown table, with the broker's ratios to each reference (in memory, and file-backed: durable).
pub fn markdown(plan: &Plan, measured: &[Measured]) -> String {
    let mut md = format!(
        "\n### Durable Streams, side by side\n\n{} writers × {} s of {APPEND_BYTES}-byte appends; {} streams × \
         {}/s to one SSE reader each (on another replica); {} SSE subscribers on one stream.\n\n\
         | server | appends/s | append → live reader p50 / p99 ms | delivered / lost | KiB per subscriber |\n\
         |---|---|---|---|---|\n",
        plan.writers, plan.append_seconds, plan.streams, plan.rate, plan.subscribers
    );
    for m in measured {
        md += &format!(
            "| {} | {:.0} | {:.1} / {:.1} | {} / {} | {:.1} |\n",
            m.target, m.appends_per_s, m.p50_ms, m.p99_ms, m.delivered, m.lost, m.kib_per_subscriber
        );
    }
    // The broker is last; each reference before it gets a line of ratios.
    if let Some((broker, references)) = measured.split_last() {
        for reference in references {
            md += &format!(
                "\nBroker ÷ {}: appends/s ×{:.2}, p50 ×{:.2}, p99 ×{:.2}, memory per subscriber ×{:.2}.\n",
                reference.target,
                broker.appends_per_s / reference.appends_per_s,
                broker.p50_ms / reference.p50_ms,
                broker.p99_ms / reference.p99_ms,
                broker.kib_per_subscriber / reference.kib_per_subscriber,
            );
        }
    }
    md
}
