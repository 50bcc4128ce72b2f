//! The load generator and checker for chunk streams across replicas, shared by the `cluster` bench and the
//! `bench_smoke` integration test. Both include this file with `#[path]` (so its child, `load/check.rs`, is
//! found the same way from both), and it depends on nothing else in the bench.
//!
//! A [`Shape`] is S streams × K readers per stream × R chunks/s per stream. For each stream, K SSE readers
//! (`GET /stream/{id}`) are opened on replicas other than the stream's writer replica, and only once every
//! reader has its response headers (so its start position is fixed) does one long chunked NDJSON
//! `POST /stream/{id}` per stream write at R chunks/s for the phase's duration. Each line carries its
//! position in the stream and its send time (unix µs). At the end the body is finished (the reply's
//! `chunks_received` is what the broker acknowledged), `POST /stream/{id}/complete` is sent, and readers end
//! at `data: [DONE]`. The checker then counts, per reader: gaps, duplicates, out-of-order deliveries,
//! acknowledged chunks never delivered, and a missing `[DONE]` after an acknowledged completion.
//!
//! Pacing: one tokio interval per stream with [`MissedTickBehavior::Burst`], so a writer that was held up
//! catches up and the phase's requested total is kept. Streams start staggered over one period so the load
//! is even, or all at the same instant (`in_phase`: every writer ticks together, as when a team Query starts
//! many agents at once — bursts). A line is stamped when it is made, so client-side delays before that are
//! not counted as latency.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use bytes::Bytes;
use futures::StreamExt;
use serde::Deserialize;
use tokio::{
    sync::Semaphore,
    time::{Instant, MissedTickBehavior},
};

#[path = "load/check.rs"]
mod check;

pub use check::Check;
use check::read;

/// How long readers may take to reach `[DONE]` after the writers finished, before they count as cut off.
const DRAIN_GRACE: Duration = Duration::from_secs(20);
/// Connections being set up at the same time (readers opening, writers connecting). The broker's listen
/// backlog is 128; a thousand simultaneous connects overflow it, and the kernel's SYN cookies then reset
/// some of them, which is a connect storm, not the steady streaming this measures.
const OPEN_CONCURRENCY: usize = 64;

/// One load shape.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Streams (S), each with one writer.
    pub streams: usize,
    /// SSE readers per stream (K), on replicas other than the writer's.
    pub readers: usize,
    /// Chunks per second per stream (R).
    pub rate: u32,
    /// Writers round-robin over all replicas; otherwise all on the first.
    pub spread: bool,
    /// Every writer ticks at the same instant (bursts); otherwise they are staggered over one period.
    pub in_phase: bool,
    /// How long each writer writes.
    pub duration: Duration,
}

impl Shape {
    /// The chunks per second the whole shape asks for.
    pub fn requested_per_s(&self) -> f64 {
        self.streams as f64 * f64::from(self.rate)
    }

    /// `S×K×R one writer|spread, staggered|in phase`.
    pub fn label(&self) -> String {
        let writers = if self.spread { "spread" } else { "one writer" };
        let pacing = if self.in_phase { "in phase" } else { "staggered" };
        format!("{}×{}×{} {writers}, {pacing}", self.streams, self.readers, self.rate)
    }
}

/// The result of one run of a shape.
#[derive(Debug)]
pub struct Outcome {
    /// Chunks per second asked for.
    pub requested_per_s: f64,
    /// Lines the writers sent.
    pub sent: u64,
    /// Chunks the broker acknowledged (`chunks_received` of the replies).
    pub acknowledged: u64,
    /// Chunk events the readers received.
    pub delivered: u64,
    /// The longest time from a stream's first write to its acknowledgement: the ingest rate's window, so the
    /// slowest answer to a POST whose writing time ended sets it.
    pub write_window: Duration,
    /// How long after its writing time ended each POST was answered, sorted, in µs.
    pub answers_after_end_us: Vec<u64>,
    /// The longest time from a stream's first write to the last chunk a reader of it got.
    pub delivery_window: Duration,
    /// Receive − send time of every delivered chunk, sorted, in µs.
    pub latencies_us: Vec<u64>,
    /// The checker's findings.
    pub check: Check,
    /// Readers opened.
    pub readers: usize,
    /// Failed requests and broken responses, with what went wrong.
    pub errors: Vec<String>,
}

impl Outcome {
    /// Acknowledged chunks per second over the write window.
    pub fn achieved_per_s(&self) -> f64 {
        per_second(self.acknowledged, self.write_window)
    }

    /// Delivered events per second over the delivery window.
    pub fn delivered_per_s(&self) -> f64 {
        per_second(self.delivered, self.delivery_window)
    }

    /// The `q` quantile (0–1) of delivery latency in ms; 0 without samples.
    pub fn latency_ms(&self, q: f64) -> f64 {
        quantile_ms(&self.latencies_us, q)
    }
}

/// The `q` quantile (0–1) of sorted µs samples, in ms; 0 without samples.
pub fn quantile_ms(sorted_us: &[u64], q: f64) -> f64 {
    if sorted_us.is_empty() {
        return 0.0;
    }
    let index = ((sorted_us.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
    sorted_us[index] as f64 / 1000.0
}

fn per_second(count: u64, window: Duration) -> f64 {
    if window.is_zero() { 0.0 } else { count as f64 / window.as_secs_f64() }
}

/// An error with its chain of causes (reqwest's own message rarely says what happened).
pub(crate) fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Now as unix µs.
pub fn unix_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// Runs `shape` against `replicas` (base URLs, `http://host:port`); stream ids are `bench-{tag}-{n}`.
pub async fn run(client: &reqwest::Client, replicas: &[String], shape: &Shape, tag: &str) -> Outcome {
    assert!(replicas.len() >= 2, "readers need a replica other than the writer's");
    let writer_of = |stream: usize| if shape.spread { stream % replicas.len() } else { 0 };
    let stream_id = |stream: usize| format!("bench-{tag}-{stream}");
    let mut errors = Vec::new();

    // Readers first, and all of them answered, before anything is written.
    let wanted: Vec<(usize, String)> = (0..shape.streams)
        .flat_map(|stream| {
            let writer = writer_of(stream);
            (0..shape.readers).map(move |k| (stream, (writer + 1 + k % (replicas.len() - 1)) % replicas.len()))
        })
        .map(|(stream, replica)| (stream, format!("{}/stream/{}", replicas[replica], stream_id(stream))))
        .collect();
    let opened: Vec<(usize, Result<reqwest::Response, String>)> = futures::stream::iter(wanted)
        .map(|(stream, url)| async move { (stream, open_reader(client, &url).await) })
        .buffer_unordered(OPEN_CONCURRENCY)
        .collect()
        .await;
    let started = Instant::now();
    let deadline = started + shape.duration + DRAIN_GRACE;
    let mut readers = Vec::new();
    for (stream, response) in opened {
        match response {
            Ok(response) => readers.push((stream, tokio::spawn(read(response, deadline)))),
            Err(error) => errors.push(error),
        }
    }

    let period = Duration::from_secs_f64(1.0 / f64::from(shape.rate.max(1)));
    let first_tick = |stream: usize| match shape.in_phase {
        true => started,
        false => started + period.mul_f64(stream as f64 / shape.streams as f64),
    };
    let connecting = Arc::new(Semaphore::new(OPEN_CONCURRENCY));
    let writers: Vec<_> = (0..shape.streams)
        .map(|stream| {
            let url = format!("{}/stream/{}", replicas[writer_of(stream)], stream_id(stream));
            let pacing = Pacing { first_tick: first_tick(stream), period, duration: shape.duration };
            tokio::spawn(write(client.clone(), url, pacing, connecting.clone()))
        })
        .collect();

    let mut written = Vec::with_capacity(writers.len());
    for writer in writers {
        let report = writer.await.expect("writer task");
        if let Some(error) = &report.error {
            errors.push(error.clone());
        }
        written.push(report);
    }
    let write_window = (0..shape.streams)
        .filter_map(|stream| Some(written[stream].acked_at? - first_tick(stream)))
        .max()
        .unwrap_or_default();
    let mut answers_after_end_us: Vec<u64> = (0..shape.streams)
        .filter_map(|stream| written[stream].acked_at?.checked_duration_since(first_tick(stream) + shape.duration))
        .map(|late| late.as_micros() as u64)
        .collect();
    answers_after_end_us.sort_unstable();

    let mut check = Check::default();
    let mut latencies_us = Vec::new();
    let mut delivered = 0;
    let mut delivery_window = Duration::ZERO;
    let reader_count = readers.len();
    for (stream, reader) in readers {
        let mut report = reader.await.expect("reader task");
        if let Some(error) = report.error.take() {
            errors.push(error);
        }
        report.judge(written[stream].acknowledged, written[stream].completed, &mut check);
        delivered += report.latencies_us.len() as u64;
        if let Some(last) = report.last_at {
            delivery_window = delivery_window.max(last.saturating_duration_since(first_tick(stream)));
        }
        latencies_us.append(&mut report.latencies_us);
    }
    latencies_us.sort_unstable();
    Outcome {
        requested_per_s: shape.requested_per_s(),
        sent: written.iter().map(|w| w.sent).sum(),
        acknowledged: written.iter().map(|w| w.acknowledged).sum(),
        delivered,
        write_window,
        answers_after_end_us,
        delivery_window,
        latencies_us,
        check,
        readers: reader_count,
        errors,
    }
}

async fn open_reader(client: &reqwest::Client, url: &str) -> Result<reqwest::Response, String> {
    let response = client.get(url).send().await.map_err(|e| format!("GET {url}: {}", causes(&e)))?;
    match response.status().as_u16() {
        200 => Ok(response),
        status => Err(format!("GET {url}: HTTP {status}")),
    }
}

/// What one writer did.
#[derive(Debug, Default)]
pub struct Written {
    /// Lines sent.
    pub sent: u64,
    /// Chunks the broker acknowledged (`chunks_received`).
    pub acknowledged: u64,
    /// When the acknowledgement came.
    pub acked_at: Option<Instant>,
    /// `POST /stream/{id}/complete` succeeded, so `[DONE]` is owed to every reader.
    pub completed: bool,
    /// What went wrong, if anything.
    pub error: Option<String>,
}

#[derive(Deserialize)]
struct Processed {
    chunks_received: u64,
}

/// When one writer writes.
pub struct Pacing {
    /// The first line's time.
    pub first_tick: Instant,
    /// Time between lines.
    pub period: Duration,
    /// How long it writes.
    pub duration: Duration,
}

/// Writes one stream (`url` is `…/stream/{id}`) as `pacing` says in one chunked POST, then completes it.
/// `connecting` bounds the connections being set up at once; a permit is held until the body is first polled.
pub async fn write(client: reqwest::Client, url: String, pacing: Pacing, connecting: Arc<Semaphore>) -> Written {
    let sent = Arc::new(AtomicU64::new(0));
    let counter = sent.clone();
    let stream_name = url.rsplit('/').next().unwrap_or_default().to_owned();
    let Pacing { first_tick, period, duration } = pacing;
    let end = first_tick + duration;
    let permit = connecting.acquire_owned().await.expect("the semaphore stays open");
    let lines = async_stream::stream! {
        // The body is first polled once the connection is up: the next writer may connect.
        drop(permit);
        let mut ticks = tokio::time::interval_at(first_tick, period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Burst);
        let mut position = 0u64;
        loop {
            ticks.tick().await;
            if Instant::now() >= end {
                break;
            }
            let line = chunk_line(&stream_name, position, unix_micros());
            position += 1;
            counter.store(position, Ordering::Relaxed);
            yield Ok::<Bytes, std::io::Error>(line);
        }
    };
    let mut written = Written::default();
    let reply = client
        .post(&url)
        .header("content-type", "application/x-ndjson")
        .body(reqwest::Body::wrap_stream(lines))
        .send()
        .await;
    written.sent = sent.load(Ordering::Relaxed);
    let reply = match reply {
        Ok(reply) if reply.status().is_success() => reply.json::<Processed>().await,
        Ok(reply) => {
            written.error = Some(format!("POST {url}: HTTP {}", reply.status()));
            return written;
        }
        Err(error) => Err(error),
    };
    match reply {
        Ok(processed) => {
            written.acknowledged = processed.chunks_received;
            written.acked_at = Some(Instant::now());
        }
        Err(error) => {
            written.error = Some(format!("POST {url} after {} lines: {}", written.sent, causes(&error)));
            return written;
        }
    }
    match client.post(format!("{url}/complete")).send().await {
        Ok(reply) if reply.status().is_success() => written.completed = true,
        Ok(reply) => written.error = Some(format!("POST {url}/complete: HTTP {}", reply.status())),
        Err(error) => written.error = Some(format!("POST {url}/complete: {}", causes(&error))),
    }
    written
}

/// One NDJSON line: an OpenAI `chat.completion.chunk` (~360 bytes) with the bench's mark appended.
fn chunk_line(stream: &str, position: u64, sent_us: u64) -> Bytes {
    Bytes::from(format!(
        concat!(
            r#"{{"id":"chatcmpl-{}","object":"chat.completion.chunk","created":1718000000,"#,
            r#""model":"gpt-4o-2024-08-06","system_fingerprint":"fp_abc123def4","choices":[{{"index":0,"#,
            r#""delta":{{"role":"assistant","content":" the quick brown fox jumps over the lazy dog"}},"#,
            r#""logprobs":null,"finish_reason":null}}],"bench":{{"seq":{},"sent_us":{}}}}}"#,
            "\n"
        ),
        stream, position, sent_us
    ))
}
