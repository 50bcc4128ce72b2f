//! Memory per waiter on one replica: a fresh replica holds 1,000 of one kind open — SSE stream readers,
//! question watchers (`GET /questions?watch=true`), or blocking MCP `ask_question` calls of either protocol
//! era (2025-06-18 for the eras up to 2025-11-25, and 2026-07-28) — and the growth of its resident memory
//! (`VmRSS`), from a warmed-up start to all of them held, divided by how many it holds is what each costs. A
//! fresh replica per kind, so memory one kind freed does not hide the next one's cost.

use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{
    replicas::{Replica, memory_mib, sample},
    report::Row,
};

/// Waiters opened first and kept before the first reading, so what the first of a kind allocates once (its
/// route, pools, buffers) is not counted per waiter.
const WARM_UP: usize = 20;
/// Waiters being opened at the same time (the listen backlog is 128).
const OPENING: usize = 64;
/// Longest wait for every waiter to be held.
const HELD_WITHIN: Duration = Duration::from_secs(60);

/// What waits.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    StreamReader,
    Watcher,
    /// A blocking `ask_question` of the eras up to 2025-11-25 (here 2025-06-18).
    McpWaiter,
    /// A blocking `ask_question` of 2026-07-28 (per-request `_meta`, no tasks extension declared).
    McpWaiter2026,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::StreamReader, Kind::Watcher, Kind::McpWaiter, Kind::McpWaiter2026];

    /// The phase id of its row.
    pub fn phase(self) -> &'static str {
        match self {
            Kind::StreamReader => "memory-stream-reader",
            Kind::Watcher => "memory-watcher",
            Kind::McpWaiter => "memory-mcp-waiter",
            Kind::McpWaiter2026 => "memory-mcp-waiter-2026",
        }
    }

    /// Whether its reply comes only with the answer (it is held once its question is pending).
    fn is_mcp(self) -> bool {
        matches!(self, Kind::McpWaiter | Kind::McpWaiter2026)
    }

    /// The request that opens waiter `n` on `replica`.
    fn request(self, client: &reqwest::Client, replica: &Replica, n: usize) -> reqwest::RequestBuilder {
        match self {
            Kind::StreamReader => client.get(format!("{}/stream/bench-memory-{n}", replica.base)),
            Kind::Watcher => client.get(format!("{}/questions?watch=true", replica.base)),
            Kind::McpWaiter => {
                let arguments = json!({"recipient": "ark://users/bench-memory", "content": format!("waiter {n}")});
                let body = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                  "params": {"name": "ask_question", "arguments": arguments}});
                client
                    .post(&replica.mcp_url)
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-protocol-version", "2025-06-18")
                    .json(&body)
            }
            Kind::McpWaiter2026 => {
                // What the newest SDKs send: the era's `_meta` on the request, and its headers mirroring it.
                let arguments = json!({"recipient": "ark://users/bench-memory", "content": format!("waiter {n}")});
                let meta = json!({
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": {"name": "ark-broker-bench", "version": "1"},
                    "io.modelcontextprotocol/clientCapabilities": {},
                });
                let body = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                  "params": {"name": "ask_question", "arguments": arguments, "_meta": meta}});
                client
                    .post(&replica.mcp_url)
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-protocol-version", "2026-07-28")
                    .header("mcp-method", "tools/call")
                    .header("mcp-name", "ask_question")
                    .json(&body)
            }
        }
    }
}

/// Opens waiters `range` of `kind`, each held (its response kept unread) until `release`; returns once the
/// replica holds them all, with what went wrong for those it does not.
async fn open(
    kind: Kind,
    client: &reqwest::Client,
    replica: &Replica,
    range: std::ops::Range<usize>,
    release: &CancellationToken,
) -> Vec<String> {
    let (held_tx, mut held_rx) = mpsc::unbounded_channel();
    let opening = std::sync::Arc::new(tokio::sync::Semaphore::new(OPENING));
    let wanted = range.len();
    for n in range {
        let (request, held, release, opening) =
            (kind.request(client, replica, n), held_tx.clone(), release.clone(), opening.clone());
        tokio::spawn(async move {
            let permit = opening.acquire_owned().await.expect("open");
            if kind.is_mcp() {
                // Its reply comes only with the answer: it is held once its question is pending ([`held`]),
                // and the caller opens these a batch at a time.
                drop(permit);
                let _ = held.send(Ok(()));
                return tokio::select! {
                    reply = request.send() => reply.map(|_| ()).map_err(|e| e.to_string()),
                    () = release.cancelled() => Ok(()),
                };
            }
            let response = request.send().await;
            drop(permit);
            let response = match response {
                Ok(response) if response.status().is_success() => response,
                Ok(response) => {
                    let _ = held.send(Err(format!("{}: HTTP {}", kind.phase(), response.status())));
                    return Ok(());
                }
                Err(error) => {
                    let _ = held.send(Err(format!("{}: {error}", kind.phase())));
                    return Ok(());
                }
            };
            let _ = held.send(Ok(()));
            release.cancelled().await;
            drop(response);
            Ok::<(), String>(())
        });
    }
    let mut errors = Vec::new();
    let gathered = tokio::time::timeout(HELD_WITHIN, async {
        for _ in 0..wanted {
            if let Some(Err(error)) = held_rx.recv().await {
                errors.push(error);
            }
        }
    })
    .await;
    if gathered.is_err() {
        errors.push(format!("{}: not every waiter was held within {HELD_WITHIN:?}", kind.phase()));
    }
    errors
}

/// Pending questions on `replica` (its exact gauge), for MCP waiters: their replies come only with the answer.
async fn pending(client: &reqwest::Client, replica: &Replica) -> usize {
    let scrape = replica.metrics(client).await;
    sample(&scrape, "ark_broker_questions{status=\"pending\"}").map_or(0, |n| n as usize)
}

/// Waits until `replica` holds `count` MCP waiters (their questions are pending).
async fn mcp_waiters_held(client: &reqwest::Client, replica: &Replica, count: usize) -> Result<(), String> {
    let started = std::time::Instant::now();
    while pending(client, replica).await < count {
        if started.elapsed() > HELD_WITHIN {
            return Err(format!("only {} MCP waiters held", pending(client, replica).await));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Waits until `replica` holds `count` waiters of `kind` (readers and watchers are held once their
/// response's headers are here; an MCP waiter once its question is pending).
async fn held(kind: Kind, client: &reqwest::Client, replica: &Replica, count: usize) -> Option<String> {
    match kind {
        Kind::McpWaiter | Kind::McpWaiter2026 => mcp_waiters_held(client, replica, count).await.err(),
        Kind::StreamReader | Kind::Watcher => None,
    }
}

/// Holds `count` waiters of `kind` on a fresh replica of `database_url`; the row says KiB per waiter.
pub async fn measure(database_url: &str, kind: Kind, count: usize) -> Row {
    eprintln!("phase {}: {count} held on one replica", kind.phase());
    let replica = Replica::start(database_url).await;
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().expect("client");
    let release = CancellationToken::new();
    let mut errors = open(kind, &client, &replica, 0..WARM_UP, &release).await;
    errors.extend(held(kind, &client, &replica, WARM_UP).await);
    let (before, _) = memory_mib(replica.pid());
    for start in (WARM_UP..WARM_UP + count).step_by(OPENING) {
        let end = (start + OPENING).min(WARM_UP + count);
        errors.extend(open(kind, &client, &replica, start..end, &release).await);
        errors.extend(held(kind, &client, &replica, end).await);
    }
    let (after, peak) = memory_mib(replica.pid());
    release.cancel();
    replica.stop().await;
    let kib = (after - before) * 1024.0 / count as f64;
    Row {
        phase: kind.phase().to_owned(),
        metric: "kib_per_waiter".to_owned(),
        value: kib,
        rss_mb: Some(peak),
        rss_now_mb: Some(after),
        errors: Some(errors.len() as u64),
        error_samples: errors.into_iter().take(3).collect(),
        note: Some(format!("{count} held on one replica: VmRSS {before:.1} → {after:.1} MiB")),
        ..Row::default()
    }
}
