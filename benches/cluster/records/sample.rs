//! The record phases' measuring: closed loops of clients, and their rows beside the raw baseline's.

use std::{future::Future, pin::Pin, sync::Arc, time::Duration};

use tokio::time::Instant;

use crate::{
    load::{causes, quantile_ms},
    report::Row,
};

/// What a closed loop of clients did.
#[derive(Debug, Default)]
pub struct Sample {
    pub rows: u64,
    /// One per completed operation, sorted, µs.
    pub latencies_us: Vec<u64>,
    pub errors: Vec<String>,
    pub elapsed: Duration,
}

impl Sample {
    pub fn rows_per_s(&self) -> f64 {
        self.rows as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// An operation's outcome: the rows it handled, or `None` when its client has nothing more to do.
pub type OpFuture = Pin<Box<dyn Future<Output = Result<Option<u64>, String>> + Send>>;

/// Runs `clients` loops of `op(client, iteration)` for `duration`, or until each client's op says it is done.
pub async fn closed_loop(
    clients: usize,
    duration: Duration,
    op: impl Fn(usize, u64) -> OpFuture + Send + Sync + 'static,
) -> Sample {
    let op = Arc::new(op);
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = (0..clients)
        .map(|client| {
            let op = op.clone();
            tokio::spawn(async move {
                let mut sample = Sample::default();
                let mut iteration = 0;
                while Instant::now() < deadline {
                    let begun = Instant::now();
                    match op(client, iteration).await {
                        Ok(None) => break,
                        Ok(Some(rows)) => {
                            sample.rows += rows;
                            sample.latencies_us.push(begun.elapsed().as_micros() as u64);
                        }
                        Err(error) => sample.errors.push(error),
                    }
                    iteration += 1;
                }
                sample
            })
        })
        .collect();
    let mut total = Sample::default();
    for task in tasks {
        let sample = task.await.expect("a client loop");
        total.rows += sample.rows;
        total.latencies_us.extend(sample.latencies_us);
        total.errors.extend(sample.errors);
    }
    total.elapsed = started.elapsed();
    total.latencies_us.sort_unstable();
    total
}

/// A row: the broker's sample beside the raw one.
pub fn row(phase: &str, broker: &Sample, raw: &Sample, note: String) -> Row {
    let (rate, raw_rate) = (broker.rows_per_s(), raw.rows_per_s());
    Row {
        phase: phase.to_owned(),
        metric: "rows_per_s".to_owned(),
        value: rate,
        baseline: Some(raw_rate),
        ratio: Some(rate / raw_rate.max(1e-9)),
        achieved_per_s: Some(rate),
        p50_ms: Some(quantile_ms(&broker.latencies_us, 0.5)),
        p99_ms: Some(quantile_ms(&broker.latencies_us, 0.99)),
        max_ms: Some(quantile_ms(&broker.latencies_us, 1.0)),
        baseline_p50_ms: Some(quantile_ms(&raw.latencies_us, 0.5)),
        baseline_p99_ms: Some(quantile_ms(&raw.latencies_us, 0.99)),
        errors: Some((broker.errors.len() + raw.errors.len()) as u64),
        error_samples: broker.errors.iter().chain(&raw.errors).take(3).cloned().collect(),
        note: Some(note),
        ..Row::default()
    }
}

/// A plain row for a seeding step (rows/s, no baseline).
pub fn seed_row(phase: &str, sample: &Sample, note: String) -> Row {
    Row {
        phase: phase.to_owned(),
        metric: "rows_per_s".to_owned(),
        value: sample.rows_per_s(),
        achieved_per_s: Some(sample.rows_per_s()),
        p50_ms: Some(quantile_ms(&sample.latencies_us, 0.5)),
        p99_ms: Some(quantile_ms(&sample.latencies_us, 0.99)),
        max_ms: Some(quantile_ms(&sample.latencies_us, 1.0)),
        errors: Some(sample.errors.len() as u64),
        error_samples: sample.errors.iter().take(3).cloned().collect(),
        note: Some(note),
        ..Row::default()
    }
}

/// Sends `request` and expects `status`; the body is returned.
pub async fn expect(request: reqwest::RequestBuilder, status: u16) -> Result<bytes::Bytes, String> {
    let response = request.send().await.map_err(|e| causes(&e))?;
    let got = response.status().as_u16();
    let body = response.bytes().await.map_err(|e| causes(&e))?;
    if got != status {
        return Err(format!("{got}: {}", String::from_utf8_lossy(&body[..body.len().min(200)])));
    }
    Ok(body)
}
