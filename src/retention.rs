//! The reaper: deletes messages, events and spans whose TTL has passed (and the oldest events and spans
//! beyond their caps), expires pending questions past their expiry, prunes
//! the questions watch log and forgets day-old idempotency keys, so tables do not grow forever. Every
//! replica runs it; `skip locked` and conditional updates keep them out of each other's way.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::{
    events::store::EventStore,
    idempotency::{self, store::KeyStore},
    messages::store::MessageStore,
    questions::store::QuestionStore,
    traces::store::SpanStore,
};

/// Rows handled per statement, so one pass never holds many locks or a long transaction.
const BATCH: i64 = 1000;

/// What the reaper works on.
#[derive(Debug, Clone)]
pub struct Reaper {
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
    /// Spans.
    pub spans: SpanStore,
    /// Most spans kept (0: no cap).
    pub max_spans: i64,
    /// How long watch-log rows are kept (a watch from before that gets 410 and relists).
    pub question_log_seconds: i64,
}

impl Reaper {
    /// Runs a pass every `interval` until `cancel` fires.
    pub async fn run(self, interval: Duration, cancel: CancellationToken) {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => self.pass().await,
            }
        }
    }

    /// One pass over everything.
    pub async fn pass(&self) {
        let reaped = drain("deleting expired messages", || async {
            self.messages.delete_expired(BATCH).await.map(|n| n as usize)
        })
        .await;
        let events = drain("deleting expired events", || self.events.reap(self.max_events, BATCH)).await;
        let spans = drain("deleting expired spans", || self.spans.reap(self.max_spans, BATCH)).await;
        let expired = drain("expiring questions", || self.questions.expire_due(BATCH)).await;
        let forgotten = drain("forgetting idempotency keys", || async {
            self.keys.delete_expired(idempotency::KEEP_SECONDS, BATCH).await.map(|n| n as usize)
        })
        .await;
        let pruned = match self.questions.prune_events(self.question_log_seconds).await {
            Ok(n) => n,
            Err(error) => {
                tracing::warn!(%error, "pruning the question watch log failed");
                0
            }
        };
        if reaped + events + spans + expired + forgotten > 0 || pruned > 0 {
            tracing::info!(
                messages.deleted = reaped,
                events.deleted = events,
                spans.deleted = spans,
                questions.expired = expired,
                idempotency_keys.deleted = forgotten,
                question_events.pruned = pruned,
                "reaped"
            );
        }
    }
}

/// Repeats `batch` until it handles fewer than a full batch; returns the total.
async fn drain<F, Fut>(what: &str, batch: F) -> usize
where
    F: Fn() -> Fut,
    Fut: Future<Output = crate::db::StoreResult<usize>>,
{
    let mut total = 0;
    loop {
        match batch().await {
            Ok(n) => {
                total += n;
                if n < BATCH as usize {
                    return total;
                }
            }
            Err(error) => {
                tracing::warn!(%error, "{what} failed");
                return total;
            }
        }
    }
}
