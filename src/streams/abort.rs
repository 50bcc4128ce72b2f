//! Aborted streams (seed 004: "if an incoming stream connection ends without DONE we need to have it as an
//! aborted stream"). A chunk POST whose connection breaks mid-body marks its stream's writer lost; if
//! nothing is written to the stream and it is not completed within the grace period, the stream is marked
//! aborted and its readers get the abort frame, then `[DONE]`. A POST that ends cleanly without `/complete`
//! is not an abort: the Python SDK posts one chunk per request. Every replica runs the sweep, so a stream is
//! marked even when the replica that saw the break is gone; the marking itself happens once.
//!
//! The same sweep finishes completions its writers did not ([`super::completion`]): a request older than
//! the grace gets its marker after what is stored (the writer's replica died or froze), and this replica's
//! open POSTs are checked for requests whose notification was lost.

use crate::telemetry::chain;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{
    ChunkStore,
    completion::{self, OpenWriters},
    completion_store::Overdue,
    ends::StreamEnds,
};

/// Streams marked per pass.
const BATCH: i64 = 100;
/// The longest pause between passes.
const MAX_PERIOD: Duration = Duration::from_secs(1);

/// Writers registered longer than this are forgotten: their replica died without releasing them (a POST open
/// for a whole day is none of Ark's).
const STALE_WRITER: Duration = Duration::from_secs(86_400);
/// How often stale writers are looked for: a day's registrations need no look every second.
const STALE_WRITER_PERIOD: Duration = Duration::from_secs(600);

/// Starts this replica's sweep for streams whose grace period ran out.
pub fn spawn(
    store: ChunkStore,
    writers: OpenWriters,
    ends: StreamEnds,
    grace: Duration,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    let period = (grace / 4).clamp(Duration::from_millis(100), MAX_PERIOD);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut stale_writers = tokio::time::interval(STALE_WRITER_PERIOD);
        stale_writers.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            // Every replica passes every period; most passes find nothing, and one look says so.
            match store.overdue(grace).await {
                Ok(due) => sweep(&store, &ends, grace, due).await,
                Err(error) => tracing::warn!(error = %chain(&error), "cannot look for overdue streams"),
            }
            completion::seal_requested(&store, &writers).await;
            if futures::FutureExt::now_or_never(stale_writers.tick()).is_some()
                && let Err(error) = store.forget_writers_older_than(STALE_WRITER).await
            {
                tracing::warn!(error = %chain(&error), "cannot forget stale chunk POST registrations");
            }
        }
    })
}

/// Marks the streams `due` says are overdue: aborted (a lost writer) or completed (a requested completion).
async fn sweep(store: &ChunkStore, ends: &StreamEnds, grace: Duration, due: Overdue) {
    if due.lost_writers {
        match store.abort_lost(grace, BATCH).await {
            Ok(aborted) => {
                for stream in aborted {
                    tracing::info!(stream.id = %stream, "stream aborted: its writer disconnected and did not come back");
                    ends.ended(&stream);
                }
            }
            Err(error) => tracing::warn!(error = %chain(&error), "cannot mark aborted streams"),
        }
    }
    if due.completions {
        match store.complete_overdue(grace, BATCH).await {
            Ok(completed) => {
                for stream in completed {
                    tracing::warn!(stream.id = %stream, "stream completed without its writers: they did not finish within the grace");
                    ends.ended(&stream);
                }
            }
            Err(error) => tracing::warn!(error = %chain(&error), "cannot finish overdue stream completions"),
        }
    }
}
