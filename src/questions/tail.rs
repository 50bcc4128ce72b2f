//! This replica's tail of the questions feed: on each notification it reads which questions the committed
//! transactions changed and wakes their waiters (MCP calls waiting for an answer) and the watchers, which
//! then read what they need. Question changes are rare, so per-reader reads cost nothing that matters here.

use crate::telemetry::chain;
use std::time::Instant;

use tokio::{sync::mpsc, task::JoinHandle};

use super::store::QuestionStore;
use crate::{
    db::{
        StoreResult,
        feed::Feed,
        tail::TailEvent,
        wakeup::{Wakeup, Wakeups},
    },
    telemetry::metrics,
};

/// Starts the tail; it runs until the sender is dropped.
pub fn spawn(store: QuestionStore, wakeups: Wakeups) -> (mpsc::UnboundedSender<TailEvent>, JoinHandle<()>) {
    let (sender, mut events) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let mut tail = QuestionTail { store, wakeups, version: 0 };
        while let Some(first) = events.recv().await {
            let notified = Instant::now();
            let mut txs = Vec::new();
            let mut resync = false;
            for event in std::iter::once(first).chain(std::iter::from_fn(|| events.try_recv().ok())) {
                match event {
                    TailEvent::Committed { tx, .. } => txs.push(tx),
                    TailEvent::Resync | TailEvent::Poll => resync = true,
                }
            }
            if let Err(error) = tail.step(&txs, resync).await {
                tracing::warn!(error = %chain(&error), "following question changes failed; waking every reader");
                tail.wakeups.wake_all();
            }
            if !txs.is_empty() {
                metrics::delivered(Feed::Questions.name(), notified.elapsed());
            }
        }
    });
    (sender, task)
}

struct QuestionTail {
    store: QuestionStore,
    wakeups: Wakeups,
    /// The newest resourceVersion this replica has woken its readers for.
    version: i64,
}

impl QuestionTail {
    async fn step(&mut self, txs: &[i64], resync: bool) -> StoreResult<()> {
        if !txs.is_empty() {
            for (question_id, version) in self.store.changed_by(txs).await? {
                self.wakeups.wake(&Wakeup::Question(question_id));
                self.version = self.version.max(version);
            }
            self.wakeups.wake(&Wakeup::Questions);
        }
        // The fallback: when the feed moved past what was woken for (or notifications may have been lost),
        // every reader re-reads.
        if resync && !self.wakeups.is_empty() {
            let current = self.store.current_version().await?;
            if current > self.version {
                self.version = current;
                self.wakeups.wake_all();
            }
        }
        Ok(())
    }
}
