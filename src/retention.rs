//! The reaper, so no table grows forever: deletes messages, events, sessions and spans whose TTL has passed (and the
//! oldest events and spans beyond their caps, and messages, events and spans beyond their byte budgets), finished streams and their chunks after the stream retention, the questions
//! watch log after its window, done (or day-old undone) Query status patches, day-old idempotency keys and inbound
//! channel delivery ids, and commit receipts past any settlement; and expires pending questions past their expiry. Every replica runs it, but a pass is made by
//! whichever replica takes the turn (an advisory try-lock); each statement deletes at most a batch (`skip locked`), so
//! no pass holds many locks or a long transaction.

use crate::db::pool::Pool;
use std::{future::Future, sync::Arc, time::Duration};

use futures::{FutureExt, future::BoxFuture};
use tokio_util::sync::CancellationToken;

use crate::{
    config::Config,
    db::{StoreResult, turn},
    streams::retention::StreamKeep,
    telemetry::{chain, metrics},
};

/// How long done Query status patches and seen inbound delivery ids are kept (for a look after the fact).
pub const DONE_KEEP_SECONDS: i64 = 86_400;

/// What the reaper keeps, and how much one statement deletes.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// How long a completed or aborted stream is kept, in buckets of how much time.
    pub streams: StreamKeep,
    /// Most events kept (0: no cap).
    pub max_events: i64,
    /// Most spans kept (0: no cap).
    pub max_spans: i64,
    /// Most bytes of messages, events and spans kept (0: no budget; `config::budgets`).
    pub max_bytes: MaxBytes,
    /// How long watch-log rows are kept (a watch from before that gets 410 and relists).
    pub question_log_seconds: i64,
    /// How long each step of a question's decision is kept.
    pub question_history_seconds: i64,
    /// Rows handled per statement (`--reap-batch-size`), so one pass never holds many locks or a long
    /// transaction.
    pub batch: i64,
}

impl Retention {
    /// The retention `config` asks for.
    pub fn of(config: &Config) -> Self {
        Retention {
            streams: StreamKeep {
                seconds: config.stream_retention_seconds as i64,
                bucket_seconds: stream_bucket_seconds(config) as i64,
                offset_seconds: 0,
            },
            max_events: config.max_events as i64,
            max_spans: config.max_spans as i64,
            max_bytes: MaxBytes {
                messages: config.budgets.message_max_bytes as i64,
                events: config.budgets.event_max_bytes as i64,
                spans: config.budgets.trace_max_bytes as i64,
            },
            question_log_seconds: config.question_log_seconds as i64,
            question_history_seconds: config.question_history_seconds as i64,
            batch: config.reap_batch_size as i64,
        }
    }
}

/// The stream bucket width `config` asks for: `--stream-bucket-seconds`, or a twelfth of the retention
/// (at least a minute); never more than the retention, so the buckets a drop holds against writes are always
/// past (`db::buckets`).
pub fn stream_bucket_seconds(config: &Config) -> u64 {
    let seconds = match config.stream_bucket_seconds {
        0 => (config.stream_retention_seconds / 12).max(60),
        seconds => seconds,
    };
    seconds.min(config.stream_retention_seconds)
}

/// Byte budgets per table (0: none).
#[derive(Debug, Clone, Copy, Default)]
pub struct MaxBytes {
    /// Of messages.
    pub messages: i64,
    /// Of events.
    pub events: i64,
    /// Of spans.
    pub spans: i64,
}

type Reap = Arc<dyn Fn(Retention) -> BoxFuture<'static, StoreResult<usize>> + Send + Sync>;

/// One kind of row the reaper deletes (or expires): registered with the table's store when the replica
/// starts (`state::registry`), exported at zero from then on.
#[derive(Clone)]
pub struct Duty {
    /// The `kind` label of the reaper's deletions.
    pub kind: &'static str,
    /// What a failure log line names.
    what: &'static str,
    /// Deletes at most `retention.batch` rows; returns how many.
    reap: Reap,
}

impl std::fmt::Debug for Duty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Duty").field("kind", &self.kind).finish_non_exhaustive()
    }
}

impl Duty {
    /// A duty of `store`'s: `reap(store, retention)` deletes one batch.
    pub fn new<S, F, Fut>(kind: &'static str, what: &'static str, store: S, reap: F) -> Self
    where
        S: Clone + Send + Sync + 'static,
        F: Fn(S, Retention) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = StoreResult<usize>> + Send + 'static,
    {
        metrics::reaped(kind, 0);
        Duty { kind, what, reap: Arc::new(move |retention| reap(store.clone(), retention).boxed()) }
    }
}

/// The duties of every table, in the order a pass takes them: the order `state::registry` registers them
/// in, which is also their `kind` labels' (docs/operating.md lists them; a test holds the two together).
pub type Duties = Arc<[Duty]>;

/// What the reaper works on.
#[derive(Debug, Clone)]
pub struct Reaper {
    /// For the reaper's turn.
    pool: Pool,
    /// What is kept.
    pub retention: Retention,
    /// Each kind of row it deletes.
    duties: Duties,
}

/// What one pass did: rows deleted (or questions expired) per kind, in the duties' order.
pub type PassReport = Vec<(&'static str, usize)>;

impl Reaper {
    /// A reaper of `duties`, keeping what `retention` says.
    pub fn new(pool: Pool, retention: Retention, duties: Duties) -> Self {
        Reaper { pool, retention, duties }
    }

    /// Runs a pass every `interval` until `cancel` fires.
    pub async fn run(self, interval: Duration, cancel: CancellationToken) {
        // The first pass after one interval: a replica starting up has other work first.
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => {
                    self.pass_if_our_turn().await;
                }
            }
        }
    }

    /// Makes a pass unless another replica is making one; `None` then.
    pub async fn pass_if_our_turn(&self) -> Option<PassReport> {
        let turn = match turn::try_take(&self.pool, turn::REAPER).await {
            Ok(Some(turn)) => turn,
            Ok(None) => return None,
            Err(error) => {
                tracing::warn!(error = %chain(&error), "cannot take the reaper's turn");
                return None;
            }
        };
        let report = self.pass().await;
        turn.end().await;
        Some(report)
    }

    /// One pass over everything, in rounds: a batch of each kind not yet drained, until every kind is (has
    /// handled fewer than a full batch, or failed). So a kind with a long backlog (half a million expired
    /// events after a restore) does not hold the others back for the whole of its drain — a chunk bucket's
    /// drop takes milliseconds. Each batch is counted as it is done, so the metric follows a long pass.
    pub async fn pass(&self) -> PassReport {
        let mut report: PassReport = self.duties.iter().map(|duty| (duty.kind, 0)).collect();
        let mut open: Vec<usize> = (0..self.duties.len()).collect();
        while !open.is_empty() {
            let mut still_open = Vec::with_capacity(open.len());
            for i in open {
                let duty = &self.duties[i];
                match (duty.reap)(self.retention).await {
                    Ok(n) => {
                        report[i].1 += n;
                        metrics::reaped(duty.kind, n);
                        if n >= self.retention.batch as usize {
                            still_open.push(i);
                        }
                    }
                    Err(error) => tracing::warn!(error = %chain(&error), "reaping {} failed", duty.what),
                }
            }
            open = still_open;
        }
        if report.iter().any(|(_, n)| *n > 0) {
            let summary: Vec<String> = report.iter().filter(|(_, n)| *n > 0).map(|(k, n)| format!("{k}={n}")).collect();
            tracing::info!(deleted = %summary.join(" "), "reaped");
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn bucket_of(args: &[&str]) -> u64 {
        stream_bucket_seconds(&Config::parse_from([&["ark-broker"], args].concat()))
    }

    #[test]
    fn a_bucket_is_a_twelfth_of_the_retention_at_least_a_minute_and_never_longer_than_the_retention() {
        assert_eq!(bucket_of(&[]), 7200, "2 h at the default 24 h");
        assert_eq!(bucket_of(&["--stream-retention-seconds", "3600"]), 300);
        assert_eq!(bucket_of(&["--stream-retention-seconds", "600"]), 60, "at least a minute");
        assert_eq!(bucket_of(&["--stream-retention-seconds", "60", "--stream-bucket-seconds", "3600"]), 60);
        assert_eq!(bucket_of(&["--stream-bucket-seconds", "900"]), 900, "as asked");
    }
}
