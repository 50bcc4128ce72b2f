//! The soak's chunk streams: a fixed number of slots, each writing one stream after another (so streams
//! begin and end all the time), and the readers of each stream, judged as they end.
//!
//! Stream `n` is written on replica `n`, read from its start on replica `n + 1`, and visited on replica
//! `n + 2` by one of three visitors, in turn: a reader that joins part-way with `from-beginning=true` (owed
//! every chunk), one that joins part-way live (owed every chunk from where it joined, without a gap), and one
//! that is there from the start and leaves part-way (what it got must be a gap-free prefix). The part is
//! between a quarter and three quarters of the stream's life, varied by `n`.

use std::{sync::Arc, time::Duration};

use futures::{StreamExt, TryStreamExt};
use serde::Deserialize;
use tokio::{sync::Semaphore, time::Instant};

use super::load::{self, Pacing, causes};
use super::{Context, count, records};

/// How long readers may take to reach `[DONE]` after their stream's writer finished.
const DRAIN_GRACE: Duration = Duration::from_secs(20);
/// Connections being set up at once (the bench's `load` bounds them the same way, for the same reason).
const OPEN_CONCURRENCY: usize = 64;

/// Who a stream's visitor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Visitor {
    /// Joins part-way with `from-beginning=true`.
    LateReplay,
    /// Joins part-way, live.
    LateLive,
    /// Reads from the start and leaves part-way.
    Leaver,
}

/// Runs every slot until `deadline` (a stream is begun only if it can end before it).
pub(super) async fn run(context: Arc<Context>, deadline: Instant) {
    let connecting = Arc::new(Semaphore::new(OPEN_CONCURRENCY));
    let start = Instant::now();
    let slots = context.workload.streams;
    let tasks: Vec<_> = (0..slots)
        .map(|slot| {
            let (context, connecting) = (context.clone(), connecting.clone());
            tokio::spawn(async move {
                // Slots start staggered over one life, so streams end evenly rather than all at once.
                let life = context.workload.life;
                tokio::time::sleep_until(start + life.mul_f64(slot as f64 / slots as f64)).await;
                let mut round = 0;
                while Instant::now() + life <= deadline {
                    stream(&context, round * slots + slot, &connecting).await;
                    round += 1;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a stream slot");
    }
}

/// Writes, reads and judges stream `n`.
async fn stream(context: &Context, n: usize, connecting: &Arc<Semaphore>) {
    let workload = &context.workload;
    let id = format!("soak-{}-{n}", workload.tag);
    let url = |replica: usize| format!("{}/stream/{id}", context.replica(replica));
    let visitor = [Visitor::LateReplay, Visitor::LateLive, Visitor::Leaver][n % 3];
    let part = workload.life.mul_f64(0.25 + 0.5 * ((n * 7919) % 100) as f64 / 100.0);
    let mut records = records::begin(context, n, &id).await;

    // The readers there from the start are answered before anything is written: their start is fixed.
    let Some(steady) = open(context, &url(n + 1), false).await else { return };
    let leaver = match visitor {
        Visitor::Leaver => Some(open(context, &url(n + 2), false).await),
        _ => None,
    };
    let first_tick = Instant::now();
    let reading_deadline = first_tick + workload.life + DRAIN_GRACE;
    let steady = tokio::spawn(read(steady, reading_deadline, None));
    let visiting = match leaver {
        Some(None) => None,
        Some(Some(response)) => {
            Some(tokio::spawn(async move { Some(read(response, reading_deadline, Some(first_tick + part)).await) }))
        }
        None => {
            let (client, tally, visitor_url) = (context.client.clone(), context.tally.clone(), url(n + 2));
            Some(tokio::spawn(async move {
                // Pacing, not waiting for an event: the visitor arrives part-way through the writing.
                tokio::time::sleep_until(first_tick + part).await;
                match open_with(&client, &visitor_url, visitor == Visitor::LateReplay).await {
                    Ok(response) => Some(read(response, reading_deadline, None).await),
                    // A visitor that could not open is an error, not a reader owed anything.
                    Err(error) => {
                        count(&tally, |t| t.error(error));
                        None
                    }
                }
            }))
        }
    };
    let period = Duration::from_secs_f64(1.0 / f64::from(workload.rate.max(1)));
    let pacing = Pacing { first_tick, period, duration: workload.life };
    let written = load::write(context.client.clone(), url(n), pacing, connecting.clone()).await;
    if let Some(error) = &written.error {
        context.error(error.clone());
    }
    records::end(context, n, &mut records).await;

    let steady = steady.await.expect("a reader");
    judge(
        context,
        &steady,
        Expect { from_start: true, owed: Some(written.acknowledged), completed: written.completed },
    );
    if let Some(seen) = match visiting {
        Some(visiting) => visiting.await.expect("a reader"),
        None => None,
    } {
        let expect = match visitor {
            Visitor::LateReplay => {
                Expect { from_start: true, owed: Some(written.acknowledged), completed: written.completed }
            }
            // Owed everything from where it joined only if it joined before the writer was acknowledged; one
            // that joined after the completion is owed nothing (it starts after `[DONE]`).
            Visitor::LateLive => Expect {
                from_start: false,
                owed: written.acked_at.is_some_and(|acked| seen.opened_at < acked).then_some(written.acknowledged),
                completed: written.completed,
            },
            Visitor::Leaver => Expect { from_start: true, owed: None, completed: false },
        };
        judge(context, &seen, expect);
        count(&context.tally, |t| match visitor {
            Visitor::Leaver => t.left_early += 1,
            _ => t.joined_late += 1,
        });
    }
    count(&context.tally, |t| {
        t.streams += 1;
        t.acknowledged += written.acknowledged;
    });
    records::verify(context, n, &records).await;
}

/// What a reader is owed.
struct Expect {
    /// From position 0 (a reader there from the start, or replaying); else from where it joined.
    from_start: bool,
    /// Every position below this (and `[DONE]`); `None` for a reader that left, or that came too late to be
    /// owed anything.
    owed: Option<u64>,
    /// The completion was acknowledged, so a missing `[DONE]` is a loss.
    completed: bool,
}

/// What one reader got.
#[derive(Debug)]
struct Seen {
    /// Positions in the order they came.
    positions: Vec<u64>,
    done: bool,
    /// When the response's headers came (its start was fixed by then).
    opened_at: Instant,
}

/// Opens a reader, counting it; a failure is counted as an error.
async fn open(context: &Context, url: &str, replay: bool) -> Option<reqwest::Response> {
    match open_with(&context.client, url, replay).await {
        Ok(response) => Some(response),
        Err(error) => {
            context.error(error);
            None
        }
    }
}

async fn open_with(client: &reqwest::Client, url: &str, replay: bool) -> Result<reqwest::Response, String> {
    let url = if replay { format!("{url}?from-beginning=true") } else { url.to_owned() };
    let response = client.get(&url).send().await.map_err(|e| format!("GET {url}: {}", causes(&e)))?;
    match response.status().as_u16() {
        200 => Ok(response),
        status => Err(format!("GET {url}: HTTP {status}")),
    }
}

#[derive(Deserialize)]
struct Marked {
    bench: Mark,
}

#[derive(Deserialize)]
struct Mark {
    seq: u64,
}

/// Reads until `[DONE]`, the end of the body, `deadline`, or `leave_at` (then the connection is dropped).
async fn read(response: reqwest::Response, deadline: Instant, leave_at: Option<Instant>) -> Seen {
    let mut seen = Seen { positions: Vec::new(), done: false, opened_at: Instant::now() };
    let until = leave_at.map_or(deadline, |leave| leave.min(deadline));
    let mut body = response.bytes_stream().map_err(|e| causes(&e));
    let mut buffer: Vec<u8> = Vec::new();
    while let Ok(Some(Ok(piece))) = tokio::time::timeout_at(until, body.next()).await {
        buffer.extend_from_slice(&piece);
        while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
            let frame: Vec<u8> = buffer.drain(..end + 2).collect();
            let Some(data) = frame[..end].strip_prefix(b"data: ") else { continue };
            if data == b"[DONE]" {
                seen.done = true;
                return seen;
            }
            if let Ok(marked) = serde_json::from_slice::<Marked>(data) {
                seen.positions.push(marked.bench.seq);
            }
        }
    }
    seen
}

/// Counts what `seen` got wrong against what it was owed.
fn judge(context: &Context, seen: &Seen, expect: Expect) {
    let mut got = std::collections::BTreeSet::new();
    let (mut duplicates, mut out_of_order, mut highest) = (0, 0, None);
    for &position in &seen.positions {
        if !got.insert(position) {
            duplicates += 1;
            continue;
        }
        if highest.is_some_and(|h| position < h) {
            out_of_order += 1;
        }
        highest = highest.max(Some(position));
    }
    let first = if expect.from_start { Some(0) } else { got.first().copied() };
    let missing = |from: u64, below: u64| (from..below).filter(|p| !got.contains(p)).count() as u64;
    let gaps = match (first, highest) {
        (Some(first), Some(highest)) => missing(first, highest),
        _ => 0,
    };
    let mut lost = match expect.owed {
        // A live joiner that got nothing was owed nothing it can be shown to have missed.
        Some(owed) => first.map_or(0, |first| missing(first, owed)),
        None => 0,
    };
    let missing_done = expect.owed.is_some() && !seen.done;
    if missing_done && expect.completed {
        lost += 1;
    }
    count(&context.tally, |t| {
        t.readers += 1;
        t.gaps += gaps;
        t.duplicates += duplicates;
        t.out_of_order += out_of_order;
        t.lost += lost;
        t.missing_done += u64::from(missing_done);
    });
}
