//! A replica's tail of one feed: the single reader of Postgres behind every local reader of that feed. On
//! each notification it reads the committed transaction's rows once (several queued transactions in one
//! read) and hands them to the readers of their keys; while the feed has global readers it also reads the
//! feed up to the visibility horizon and hands that out. Postgres work per delivered row therefore does not
//! grow with the number of readers.
//!
//! Notifications are hints: after the LISTEN connection comes back every key reader catches up by itself,
//! and the listener's poll makes the tail compare each followed key's committed position with what its
//! readers delivered, so a reader left behind for a whole poll interval catches up too.

use std::collections::{HashMap, HashSet};

use tokio::{sync::mpsc, task::JoinHandle};

use super::{
    StoreResult,
    fanout::{Batch, Fanout, FeedRow},
    feed::GlobalCursor,
    follow::Page,
};

/// Most transactions one read covers.
const MAX_TXS_PER_READ: usize = 256;

/// What the listener tells a tail.
#[derive(Debug, Clone, Copy)]
pub enum TailEvent {
    /// Transaction `tx` committed rows of the feed.
    Committed(i64),
    /// The LISTEN connection (re)connected: notifications may have been lost.
    Resync,
    /// The fallback poll ticked.
    Poll,
}

/// Where a tail reads a feed.
pub trait FeedSource: Send + Sync + 'static {
    /// The feed's rows.
    type Row: FeedRow;

    /// The rows transactions `txs` wrote, ordered by transaction id, then sequence.
    fn rows_of(&self, txs: &[i64]) -> impl Future<Output = StoreResult<Vec<Self::Row>>> + Send;

    /// Rows of the whole feed after `after`, below the visibility horizon, within the catch-up limits.
    fn global_page(
        &self,
        after: GlobalCursor,
    ) -> impl Future<Output = StoreResult<Page<Self::Row, GlobalCursor>>> + Send;

    /// The visibility horizon now.
    fn horizon(&self) -> impl Future<Output = StoreResult<i64>> + Send;

    /// The committed last position of each of `keys` that exists.
    fn key_heads(&self, keys: &[String]) -> impl Future<Output = StoreResult<Vec<(String, i64)>>> + Send;
}

/// Starts the tail of a feed; it runs until the sender is dropped.
pub fn spawn<S: FeedSource>(source: S, fanout: Fanout<S::Row>) -> (mpsc::UnboundedSender<TailEvent>, JoinHandle<()>) {
    let (sender, events) = mpsc::unbounded_channel();
    (sender, tokio::spawn(run(source, fanout, events)))
}

async fn run<S: FeedSource>(source: S, fanout: Fanout<S::Row>, mut events: mpsc::UnboundedReceiver<TailEvent>) {
    let mut tail = Tail { source, fanout, global: None, behind: HashSet::new() };
    while let Some(first) = events.recv().await {
        let (mut txs, mut resync, mut poll) = (Vec::new(), false, false);
        let mut next = Some(first);
        while let Some(event) = next {
            match event {
                TailEvent::Committed(tx) => txs.push(tx),
                TailEvent::Resync => resync = true,
                TailEvent::Poll => poll = true,
            }
            next = if txs.len() < MAX_TXS_PER_READ { events.try_recv().ok() } else { None };
        }
        tail.step(&txs, resync, poll).await;
    }
}

struct Tail<S: FeedSource> {
    source: S,
    fanout: Fanout<S::Row>,
    /// How far the global readers were served; `None` while there are none.
    global: Option<GlobalCursor>,
    /// Keys whose readers were behind Postgres at the last poll.
    behind: HashSet<String>,
}

impl<S: FeedSource> Tail<S> {
    async fn step(&mut self, txs: &[i64], resync: bool, poll: bool) {
        if resync {
            self.fanout.lag_all_keyed();
        }
        if !txs.is_empty() && self.fanout.has_keyed() {
            match self.source.rows_of(txs).await {
                Ok(rows) => self.fanout.dispatch_keyed(rows),
                Err(error) => {
                    tracing::warn!(%error, "reading committed rows failed; readers catch up by themselves");
                    self.fanout.lag_all_keyed();
                }
            }
        }
        if self.fanout.has_global() {
            if let Err(error) = self.advance_global().await {
                tracing::warn!(%error, "reading the global feed failed; the poll retries");
            }
        } else {
            self.global = None;
        }
        if poll
            && self.fanout.has_keyed()
            && let Err(error) = self.check_keys().await
        {
            tracing::warn!(%error, "the fallback poll failed");
        }
    }

    async fn advance_global(&mut self) -> StoreResult<()> {
        let mut cursor = match self.global {
            Some(cursor) => cursor,
            // Readers that start earlier than this catch up by themselves.
            None => *self.global.insert(GlobalCursor::horizon(self.source.horizon().await?)),
        };
        loop {
            let page = self.source.global_page(cursor).await?;
            let next = cursor.max(page.next);
            if next > cursor {
                let rows = page.rows.into_iter().map(std::sync::Arc::new).collect();
                self.fanout.dispatch_global(Batch::new(cursor, next, rows));
            }
            cursor = next;
            self.global = Some(cursor);
            if page.caught_up {
                return Ok(());
            }
        }
    }

    /// Lags the readers of keys that stayed behind Postgres for a whole poll interval.
    async fn check_keys(&mut self) -> StoreResult<()> {
        let delivered: HashMap<String, i64> = self.fanout.delivered_per_key().into_iter().collect();
        let keys: Vec<String> = delivered.keys().cloned().collect();
        let heads = self.source.key_heads(&keys).await?;
        let behind: HashSet<String> = heads
            .into_iter()
            .filter(|(key, head)| delivered.get(key).is_some_and(|position| position < head))
            .map(|(key, _)| key)
            .collect();
        let stuck: Vec<String> = behind.intersection(&self.behind).cloned().collect();
        self.fanout.lag_keys(&stuck);
        self.behind = behind;
        Ok(())
    }
}
