//! A replica's tail of one feed: the single reader of Postgres behind every local reader of that feed. On
//! each notification it reads, once (several queued notifications in one read), the rows of the keys its
//! readers follow — by the positions the notification names ([`super::notice`]), or every row of the
//! transaction when it names none — and hands them to the readers of their keys; while the feed has global
//! readers it also reads the feed up to the visibility horizon and hands that out. Postgres work per
//! delivered row therefore grows neither with the number of readers nor with the number of replicas: a
//! replica none of whose readers follows a key a transaction wrote reads nothing of it.
//!
//! Notifications are hints: after the LISTEN connection comes back every key reader catches up by itself,
//! and the listener's poll makes the tail compare each followed key's committed position with what its
//! readers delivered, so a reader left behind for a whole poll interval catches up too.

use super::pool::Pool;
use crate::telemetry::chain;
use std::{collections::HashMap, time::Instant};

use tokio::{sync::mpsc, task::JoinHandle};

use super::{
    StoreResult,
    fanout::{Batch, Fanout, FeedRow},
    feed::{Feed, GlobalCursor},
    follow::{EpochTrack, Page},
    notice::{self, KeyRange},
};
use crate::telemetry::metrics;

/// Most transactions one read covers.
const MAX_TXS_PER_READ: usize = 256;

/// What the listener tells a tail.
#[derive(Debug, Clone)]
pub enum TailEvent {
    /// Transaction `tx` committed rows of the feed: of `keys` when the notification names them.
    Committed {
        /// The writer's transaction id.
        tx: i64,
        /// Every key of the feed it wrote, with the positions, when the notification says.
        keys: Option<Vec<KeyRange>>,
    },
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

    /// The rows at `ranges`' positions (disjoint, sorted by key), each key's in position order.
    fn rows_in(&self, ranges: &[KeyRange]) -> impl Future<Output = StoreResult<Vec<Self::Row>>> + Send;

    /// Rows of the whole feed after `after`, below the visibility horizon, within the catch-up limits.
    fn global_page(
        &self,
        after: GlobalCursor,
    ) -> impl Future<Output = StoreResult<Page<Self::Row, GlobalCursor>>> + Send;

    /// The database the feed is in.
    fn pool(&self) -> &Pool;

    /// The visibility horizon now.
    fn horizon(&self) -> impl Future<Output = StoreResult<i64>> + Send {
        super::horizon(self.pool())
    }

    /// The committed last position of each of `keys` that exists.
    fn key_heads(&self, keys: &[String]) -> impl Future<Output = StoreResult<Vec<(String, i64)>>> + Send;
}

/// Starts the tail of a feed; it runs until the sender is dropped.
pub fn spawn<S: FeedSource>(
    feed: Feed,
    source: S,
    fanout: Fanout<S::Row>,
) -> (mpsc::UnboundedSender<TailEvent>, JoinHandle<()>) {
    let (sender, events) = mpsc::unbounded_channel();
    (sender, tokio::spawn(run(feed, source, fanout, events)))
}

async fn run<S: FeedSource>(
    feed: Feed,
    source: S,
    fanout: Fanout<S::Row>,
    mut events: mpsc::UnboundedReceiver<TailEvent>,
) {
    let mut tail = Tail { source, fanout, global: None, epoch: global_epoch(), heads: HashMap::new() };
    while let Some(first) = events.recv().await {
        let notified = Instant::now();
        let (mut txs, mut resync, mut poll) = (Vec::new(), false, false);
        // Every key the transactions wrote, as long as each notification named its keys.
        let mut named = Some(Vec::new());
        let mut next = Some(first);
        while let Some(event) = next {
            match event {
                TailEvent::Committed { tx, keys } => {
                    txs.push(tx);
                    named = named.zip(keys).map(|(mut all, keys)| {
                        all.extend(keys);
                        all
                    });
                }
                TailEvent::Resync => resync = true,
                TailEvent::Poll => poll = true,
            }
            next = if txs.len() < MAX_TXS_PER_READ { events.try_recv().ok() } else { None };
        }
        let committed = match named {
            Some(keys) => Committed::Keys(notice::merge(keys)),
            None => Committed::Transactions(&txs),
        };
        tail.step(committed, resync, poll).await;
        if !txs.is_empty() {
            metrics::delivered(feed.name(), notified.elapsed());
        }
    }
}

/// The epoch of a tail that has not read yet: the first page says which.
fn global_epoch() -> EpochTrack<GlobalCursor> {
    EpochTrack::new(None, GlobalCursor::rebased, None)
}

/// What one wake's notifications committed.
enum Committed<'a> {
    /// Exactly these keys' positions (merged, sorted by key).
    Keys(Vec<KeyRange>),
    /// Whatever these transactions wrote (a notification named no keys).
    Transactions(&'a [i64]),
}

struct Tail<S: FeedSource> {
    source: S,
    fanout: Fanout<S::Row>,
    /// How far the global readers were served; `None` while there are none.
    global: Option<GlobalCursor>,
    /// The primary epoch `global` is of ([`super::epoch`]).
    epoch: EpochTrack<GlobalCursor>,
    /// Each followed key's committed last position, as read at the last poll.
    heads: HashMap<String, i64>,
}

impl<S: FeedSource> Tail<S> {
    async fn step(&mut self, committed: Committed<'_>, resync: bool, poll: bool) {
        if resync {
            self.fanout.lag_all_keyed();
        }
        if self.fanout.has_keyed() {
            // One read per wake: the followed keys' positions, or every row of transactions that named none.
            let read = match committed {
                Committed::Keys(mut keys) => {
                    self.fanout.retain_followed(&mut keys, |range| &range.key);
                    if keys.is_empty() { None } else { Some(self.source.rows_in(&keys).await) }
                }
                Committed::Transactions([]) => None,
                Committed::Transactions(txs) => Some(self.source.rows_of(txs).await),
            };
            match read {
                None => {}
                Some(Ok(rows)) => self.fanout.dispatch_keyed(rows),
                Some(Err(error)) => {
                    tracing::warn!(error = %chain(&error), "reading committed rows failed; readers catch up by themselves");
                    self.fanout.lag_all_keyed();
                }
            }
        }
        if self.fanout.has_global() {
            if let Err(error) = self.advance_global().await {
                tracing::warn!(error = %chain(&error), "reading the global feed failed; the poll retries");
            }
        } else {
            self.global = None;
            self.epoch = global_epoch();
        }
        if poll
            && self.fanout.has_keyed()
            && let Err(error) = self.check_keys().await
        {
            tracing::warn!(error = %chain(&error), "the fallback poll failed");
        }
    }

    async fn advance_global(&mut self) -> StoreResult<()> {
        let mut cursor = match self.global {
            Some(cursor) => cursor,
            None => {
                // The tail starts following at today's horizon. Readers that started earlier (their cursor
                // is lower) must hear that, even if nothing more is ever written: an empty batch from here
                // sends them to catch up from Postgres, which has what committed before this point.
                let start = GlobalCursor::horizon(self.source.horizon().await?);
                self.fanout.dispatch_global(Batch::new(start, start, Vec::new()));
                *self.global.insert(start)
            }
        };
        loop {
            let page = self.source.global_page(cursor).await?;
            // A new primary may hand out transaction ids below the cursor again: a page of a new epoch is
            // dropped and the tail reads the epoch from its first transaction (its readers, handed batches
            // of another epoch than theirs, catch up from Postgres and rebase likewise).
            if let Some(rebased) = self.epoch.crossed(page.epoch, cursor) {
                cursor = rebased;
                continue;
            }
            let next = cursor.max(page.next);
            if next > cursor {
                let rows = page.rows.into_iter().map(std::sync::Arc::new).collect();
                self.fanout.dispatch_global(Batch::new(cursor, next, rows).in_epoch(self.epoch.known()));
            }
            cursor = next;
            self.global = Some(cursor);
            if page.caught_up {
                return Ok(());
            }
        }
    }

    /// Lags the readers of keys that have still not delivered what was committed at the last poll.
    ///
    /// Compared with the heads read a poll interval ago, not now: under steady writes a reader is almost
    /// always a few rows behind the newest commit, and that is no reason to make it read Postgres.
    async fn check_keys(&mut self) -> StoreResult<()> {
        let delivered: HashMap<String, i64> = self.fanout.delivered_per_key().into_iter().collect();
        let keys: Vec<String> = delivered.keys().cloned().collect();
        let heads: HashMap<String, i64> = self.source.key_heads(&keys).await?.into_iter().collect();
        let stuck: Vec<String> = delivered
            .iter()
            .filter(|(key, position)| self.heads.get(*key).is_some_and(|head| *position < head))
            .map(|(key, _)| key.clone())
            .collect();
        self.fanout.lag_keys(&stuck);
        self.heads = heads;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::{collections::VecDeque, sync::Mutex};

    use futures::FutureExt;

    use super::*;
    use crate::db::fanout::Delivery;

    struct Row;

    impl FeedRow for Row {
        fn key(&self) -> &str {
            "k"
        }
        fn position(&self) -> i64 {
            0
        }
        fn global(&self) -> GlobalCursor {
            GlobalCursor::default()
        }
        fn size(&self) -> usize {
            0
        }
    }

    /// Answers each `key_heads` with the next of the heads it was given, and records what `rows_in` was asked.
    #[derive(Default)]
    struct Heads(Mutex<VecDeque<i64>>, Mutex<Vec<Vec<KeyRange>>>);

    impl FeedSource for Heads {
        type Row = Row;

        async fn rows_of(&self, _: &[i64]) -> StoreResult<Vec<Row>> {
            Ok(Vec::new())
        }

        async fn rows_in(&self, ranges: &[KeyRange]) -> StoreResult<Vec<Row>> {
            self.1.lock().unwrap().push(ranges.to_vec());
            Ok(Vec::new())
        }

        async fn global_page(&self, after: GlobalCursor) -> StoreResult<Page<Row, GlobalCursor>> {
            Ok(Page { rows: Vec::new(), next: after, caught_up: true, epoch: None })
        }

        fn pool(&self) -> &Pool {
            unreachable!("the fake answers the horizon itself")
        }

        async fn horizon(&self) -> StoreResult<i64> {
            Ok(5)
        }

        async fn key_heads(&self, keys: &[String]) -> StoreResult<Vec<(String, i64)>> {
            let head = self.0.lock().unwrap().pop_front().expect("a head for every poll");
            Ok(keys.iter().map(|key| (key.clone(), head)).collect())
        }
    }

    fn lagged(subscription: &mut crate::db::fanout::Subscription<Row, i64>) -> bool {
        matches!(subscription.next().now_or_never(), Some(Delivery::Lagged))
    }

    #[tokio::test]
    async fn a_tail_that_starts_following_the_feed_tells_earlier_global_readers_to_catch_up() {
        let fanout = Fanout::default();
        let mut reader = fanout.subscribe_global();
        // The reader started at horizon 3; a transaction committed, and the horizon is 5 when the tail begins.
        let heads = Heads::default();
        let mut tail = Tail { source: heads, fanout, global: None, epoch: global_epoch(), heads: HashMap::new() };
        tail.step(Committed::Transactions(&[4]), false, false).await;
        match reader.next().now_or_never() {
            Some(Delivery::Batch(batch)) => {
                assert_eq!((batch.from, batch.to), (GlobalCursor::horizon(5), GlobalCursor::horizon(5)));
                assert!(batch.rows.is_empty(), "only where the tail starts, so a reader below it catches up");
            }
            other => panic!("the reader must hear where the tail starts, got {:?}", other.map(|_| ())),
        }
    }

    #[tokio::test]
    async fn the_poll_lags_a_reader_only_when_it_misses_what_was_committed_a_poll_ago() {
        let fanout = Fanout::default();
        let mut reader = fanout.subscribe_key("k");
        let heads = Heads(Mutex::new(VecDeque::from([10, 20, 30, 40])), Mutex::default());
        let mut tail = Tail { source: heads, fanout, global: None, epoch: global_epoch(), heads: HashMap::new() };

        reader.delivered(5);
        tail.check_keys().await.unwrap();
        assert!(!lagged(&mut reader), "the first poll only learns the heads");

        // Steady writes: always behind the newest commit, never behind the last poll's.
        reader.delivered(12);
        tail.check_keys().await.unwrap();
        assert!(!lagged(&mut reader), "12 ≥ 10 committed at the last poll: on its way, not stuck");

        reader.delivered(19);
        tail.check_keys().await.unwrap();
        assert!(lagged(&mut reader), "20 was committed a whole poll ago and 19 is all it has: catch up");

        reader.delivered(40);
        tail.check_keys().await.unwrap();
        assert!(!lagged(&mut reader));
    }

    #[tokio::test]
    async fn a_replica_reads_only_the_keys_its_readers_follow() {
        let fanout = Fanout::default();
        let _reader = fanout.subscribe_key("k");
        let mut tail =
            Tail { source: Heads::default(), fanout, global: None, epoch: global_epoch(), heads: HashMap::new() };
        let range = |key: &str, after, last| KeyRange { key: key.to_owned(), after, last };

        tail.step(Committed::Keys(vec![range("k", 0, 2), range("other", 0, 5)]), false, false).await;
        tail.step(Committed::Keys(vec![range("other", 5, 6)]), false, false).await;
        assert_eq!(
            *tail.source.1.lock().unwrap(),
            vec![vec![range("k", 0, 2)]],
            "only k's positions, and nothing for a transaction that wrote no key followed here"
        );
    }
}
