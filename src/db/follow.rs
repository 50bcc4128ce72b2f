//! Following a feed: the one reader loop behind every live stream. A reader catches up from Postgres by its
//! own cursor until a read comes back short, then takes rows from its fan-out window; when a batch starts
//! after its cursor (it missed rows in between) or it lagged, it catches up from Postgres again. Rows at or
//! before the cursor are skipped, so nothing is lost or repeated. A failed read is retried after a pause.
//!
//! Questions, whose changes are rare, use [`follow_woken`]: a wake-up, then a read by each reader. Watches
//! start through [`super::watch`].

use crate::telemetry::chain;
use std::{sync::Arc, time::Duration};

use futures::Stream;

use super::{
    StoreResult,
    fanout::{Delivery, FeedRow, Subscription},
    feed::GlobalCursor,
    wakeup::Subscription as Wake,
};

/// Rows read per round trip while catching up.
pub const BATCH: i64 = 500;

/// Bytes read per round trip while catching up (at least one row is always read).
pub const BATCH_BYTES: i64 = 4 << 20;

/// What a catch-up read found.
#[derive(Debug)]
pub struct Page<R, C> {
    /// Rows after the cursor, in order.
    pub rows: Vec<R>,
    /// The cursor after them (past the rows, or the horizon reached).
    pub next: C,
    /// Whether this read reached the end of what is there now.
    pub caught_up: bool,
    /// A global feed's: the first transaction of the primary epoch it was read in ([`super::epoch`]).
    pub epoch: Option<i64>,
}

impl<R: FeedRow> Page<R, i64> {
    /// A page of a key's rows read with the [`BATCH`]/[`BATCH_BYTES`] limits after position `after`.
    pub fn of_key(rows: Vec<R>, after: i64) -> Self {
        let bytes: usize = rows.iter().map(FeedRow::size).sum();
        let caught_up = (rows.len() as i64) < BATCH && (bytes as i64) < BATCH_BYTES;
        let next = rows.last().map_or(after, FeedRow::position);
        Page { rows, next, caught_up, epoch: None }
    }
}

impl<R: FeedRow> Page<R, GlobalCursor> {
    /// A page of a global feed read with the catch-up limits after `after`, below `horizon`, in the epoch
    /// that began with transaction `epoch`: when it is short, the reader has everything below the horizon.
    pub fn of_global(rows: Vec<R>, after: GlobalCursor, horizon: i64, epoch: Option<i64>) -> Self {
        let bytes: usize = rows.iter().map(FeedRow::size).sum();
        let caught_up = (rows.len() as i64) < BATCH && (bytes as i64) < BATCH_BYTES;
        let next = match rows.last() {
            Some(last) if !caught_up => last.global(),
            _ => after.max(GlobalCursor::horizon(horizon)),
        };
        Page { rows, next, caught_up, epoch }
    }
}

/// Rows after `cursor`, forever. `read(cursor)` catches up from Postgres; `cursor_of` places a row.
///
/// A global feed's cursor is a transaction id, which a primary promoted after asynchronous replication may
/// hand out again below where the old primary had gone ([`super::epoch`]). So a page read in another epoch
/// than the cursor's is dropped unread, and the cursor is rebased to the new epoch's first transaction
/// (`epoch.rebase`): every row of the new epoch is read, none of the old twice.
pub(super) fn follow<R, C, F, Fut>(
    mut subscription: Subscription<R, C>,
    mut cursor: C,
    retry_pause: Duration,
    mut read: F,
    cursor_of: fn(&R) -> C,
    mut epoch: EpochTrack<C>,
) -> impl Stream<Item = Arc<R>> + Send
where
    R: FeedRow,
    C: Copy + Ord + Send + 'static,
    F: FnMut(C) -> Fut + Send + 'static,
    Fut: Future<Output = StoreResult<Page<R, C>>> + Send,
{
    async_stream::stream! {
        'catch_up: loop {
            loop {
                match read(cursor).await {
                    Ok(page) => {
                        if let Some(rebased) = epoch.crossed(page.epoch, cursor) {
                            cursor = rebased;
                            continue;
                        }
                        for row in page.rows {
                            cursor = cursor.max(cursor_of(&row));
                            yield Arc::new(row);
                        }
                        cursor = cursor.max(page.next);
                        subscription.delivered(cursor);
                        if page.caught_up {
                            break;
                        }
                    }
                    Err(error) => {
                        tracing::warn!(error = %chain(&error), "catching up on a feed failed; retrying");
                        tokio::time::sleep(retry_pause).await;
                    }
                }
            }
            loop {
                let batch = match subscription.next().await {
                    Delivery::Lagged => continue 'catch_up,
                    Delivery::Batch(batch) => batch,
                };
                // A batch of another epoch: the reader rebases by reading Postgres itself.
                if epoch.differs(batch.epoch) {
                    continue 'catch_up;
                }
                if batch.to <= cursor {
                    continue;
                }
                if batch.from > cursor {
                    continue 'catch_up;
                }
                for row in batch.rows.iter() {
                    if cursor_of(row) > cursor {
                        cursor = cursor_of(row);
                        yield row.clone();
                    }
                }
                cursor = cursor.max(batch.to);
                subscription.delivered(cursor);
            }
        }
    }
}

/// Which primary epoch a reader's cursor belongs to, and how to rebase it into a new one.
pub(super) struct EpochTrack<C> {
    /// The first transaction of the cursor's epoch (`None` until a read says).
    known: Option<i64>,
    /// The cursor moved into the epoch beginning with transaction `first`.
    rebase: fn(C, i64) -> C,
    /// Told the new epoch's first transaction at each rebase (a live reader's start filter).
    on_rebase: Option<Arc<std::sync::atomic::AtomicI64>>,
}

impl<C: Copy> EpochTrack<C> {
    /// For feeds whose cursors no epoch changes (per-key positions).
    pub fn none() -> Self {
        EpochTrack { known: None, rebase: |cursor, _| cursor, on_rebase: None }
    }

    /// A cursor of the epoch beginning with `known`, if known, rebased by `rebase`; `on_rebase` learns each
    /// new epoch's first transaction.
    pub fn new(
        known: Option<i64>,
        rebase: fn(C, i64) -> C,
        on_rebase: Option<Arc<std::sync::atomic::AtomicI64>>,
    ) -> Self {
        EpochTrack { known, rebase, on_rebase }
    }

    /// The first transaction of the cursor's epoch, once a read said.
    pub fn known(&self) -> Option<i64> {
        self.known
    }

    /// The cursor rebased, when a page of epoch `read_in` is of another epoch than the cursor's.
    pub fn crossed(&mut self, read_in: Option<i64>, cursor: C) -> Option<C> {
        let now = read_in?;
        let known = self.known.replace(now);
        if known.is_none_or(|known| known == now) {
            return None;
        }
        tracing::warn!(epoch.first_tx = now, "the primary changed; a global reader rebases its cursor");
        if let Some(told) = &self.on_rebase {
            told.store(now, std::sync::atomic::Ordering::SeqCst);
        }
        Some((self.rebase)(cursor, now))
    }

    /// Whether a batch of epoch `epoch` is of another epoch than the cursor's.
    fn differs(&self, epoch: Option<i64>) -> bool {
        matches!((self.known, epoch), (Some(known), Some(epoch)) if known != epoch)
    }
}

/// Rows after `after`, forever, for feeds read per reader: `read(after, limit)` returns up to `limit` rows
/// after `after`, oldest first; between reads the reader waits to be woken.
pub(super) fn follow_woken<T, F, Fut>(
    mut wake: Wake,
    mut after: i64,
    retry_pause: Duration,
    mut read: F,
    sequence: fn(&T) -> i64,
) -> impl Stream<Item = T> + Send
where
    T: Send + 'static,
    F: FnMut(i64, i64) -> Fut + Send + 'static,
    Fut: Future<Output = StoreResult<Vec<T>>> + Send,
{
    async_stream::stream! {
        loop {
            match read(after, BATCH).await {
                Ok(rows) => {
                    let full = rows.len() as i64 >= BATCH;
                    for row in rows {
                        after = sequence(&row);
                        yield row;
                    }
                    if !full {
                        wake.woken().await;
                    }
                }
                Err(error) => {
                    tracing::warn!(error = %chain(&error), "reading a feed failed; retrying");
                    tokio::time::sleep(retry_pause).await;
                }
            }
        }
    }
}
