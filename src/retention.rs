//! The reaper, so no table grows forever: deletes messages, events, sessions and spans whose TTL has passed (and the
//! oldest events and spans beyond their caps), finished streams and their chunks after the stream retention, the questions
//! watch log after its window, done (or day-old undone) Query status patches, day-old idempotency keys and inbound
//! channel delivery ids; and expires pending questions past their expiry. Every replica runs it, but a pass is made by
//! whichever replica takes the turn (an advisory try-lock); each statement deletes at most a batch (`skip locked`), so
//! no pass holds many locks or a long transaction.

use crate::telemetry::chain;
use std::time::Duration;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::{
    channels::store::DeliveryStore,
    db::{StoreResult, turn},
    events::store::EventStore,
    idempotency::{self, store::KeyStore},
    messages::store::MessageStore,
    query_status::store::PatchStore,
    questions::store::QuestionStore,
    sessions::SessionStore,
    streams::store::ChunkStore,
    telemetry::metrics,
    traces::store::SpanStore,
};

/// How long done Query status patches and seen inbound delivery ids are kept (for a look after the fact).
const DONE_KEEP_SECONDS: i64 = 86_400;

/// What the reaper works on.
#[derive(Debug, Clone)]
pub struct Reaper {
    /// For the reaper's turn.
    pub pool: PgPool,
    /// Conversation memory.
    pub messages: MessageStore,
    /// Questions.
    pub questions: QuestionStore,
    /// Idempotency keys (kept [`idempotency::KEEP_SECONDS`]).
    pub keys: KeyStore,
    /// Execution events.
    pub events: EventStore,
    /// Most events kept (0: no cap).
    pub max_events: i64,
    /// Sessions (expired ones go with their queries).
    pub sessions: SessionStore,
    /// Spans.
    pub spans: SpanStore,
    /// Most spans kept (0: no cap).
    pub max_spans: i64,
    /// How long watch-log rows are kept (a watch from before that gets 410 and relists).
    pub question_log_seconds: i64,
    /// Chunk streams.
    pub chunks: ChunkStore,
    /// How long a completed or aborted stream is kept.
    pub stream_retention_seconds: i64,
    /// The Query status outbox.
    pub patches: PatchStore,
    /// The channel outbox and the inbound delivery ids.
    pub deliveries: DeliveryStore,
    /// Rows handled per statement (`--reap-batch-size`), so one pass never holds many locks or a long
    /// transaction.
    pub batch: i64,
}

/// What a pass reports on, in its order: the `kind` labels of the reaper's deletions (each exported at zero
/// from start-up).
pub const KINDS: [&str; 10] = [
    "messages",
    "events",
    "sessions",
    "spans",
    "questions_expired",
    "idempotency_keys",
    "question_events",
    "streams",
    "status_patches",
    "inbound_deliveries",
];

/// What one pass did: rows deleted (or questions expired) per kind, in a fixed order ([`KINDS`]).
pub type PassReport = Vec<(&'static str, usize)>;

impl Reaper {
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

    /// One pass over everything.
    pub async fn pass(&self) -> PassReport {
        let batch = self.batch;
        let report = vec![
            (
                "messages",
                drain(batch, "messages", || async { Ok(self.messages.delete_expired(batch).await? as usize) }).await,
            ),
            ("events", drain(batch, "events", || self.events.reap(self.max_events, batch)).await),
            (
                "sessions",
                drain(batch, "sessions", || async { Ok(self.sessions.delete_expired(batch).await? as usize) }).await,
            ),
            ("spans", drain(batch, "spans", || self.spans.reap(self.max_spans, batch)).await),
            ("questions_expired", drain(batch, "expiring questions", || self.questions.expire_due(batch)).await),
            (
                "idempotency_keys",
                drain(batch, "idempotency keys", || async {
                    Ok(self.keys.delete_expired(idempotency::KEEP_SECONDS, batch).await? as usize)
                })
                .await,
            ),
            (
                "question_events",
                drain(batch, "the question watch log", || {
                    self.questions.prune_events(self.question_log_seconds, batch)
                })
                .await,
            ),
            (
                "streams",
                drain(batch, "finished streams", || self.chunks.reap_finished(self.stream_retention_seconds, batch))
                    .await,
            ),
            (
                "status_patches",
                drain(batch, "done or stale status patches", || {
                    self.patches.delete_done_or_stale(DONE_KEEP_SECONDS, batch)
                })
                .await,
            ),
            (
                "inbound_deliveries",
                drain(batch, "inbound delivery ids", || self.deliveries.forget_inbound(DONE_KEEP_SECONDS, batch)).await,
            ),
        ];
        debug_assert!(report.iter().map(|(kind, _)| *kind).eq(KINDS), "a pass reports on every kind, in order");
        for (kind, rows) in &report {
            metrics::reaped(kind, *rows);
        }
        if report.iter().any(|(_, n)| *n > 0) {
            let summary: Vec<String> = report.iter().filter(|(_, n)| *n > 0).map(|(k, n)| format!("{k}={n}")).collect();
            tracing::info!(deleted = %summary.join(" "), "reaped");
        }
        report
    }
}

/// Repeats `delete` (of at most `batch` rows) until it handles fewer than a full batch; returns the total.
async fn drain<F, Fut>(batch: i64, what: &str, delete: F) -> usize
where
    F: Fn() -> Fut,
    Fut: Future<Output = StoreResult<usize>>,
{
    let mut total = 0;
    loop {
        match delete().await {
            Ok(n) => {
                total += n;
                if n < batch as usize {
                    return total;
                }
            }
            Err(error) => {
                tracing::warn!(error = %chain(&error), "reaping {what} failed");
                return total;
            }
        }
    }
}
