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
}

impl<R: FeedRow> Page<R, i64> {
    /// A page of a key's rows read with the [`BATCH`]/[`BATCH_BYTES`] limits after position `after`.
    pub fn of_key(rows: Vec<R>, after: i64) -> Self {
        let bytes: usize = rows.iter().map(FeedRow::size).sum();
        let caught_up = (rows.len() as i64) < BATCH && (bytes as i64) < BATCH_BYTES;
        let next = rows.last().map_or(after, FeedRow::position);
        Page { rows, next, caught_up }
    }
}

impl<R: FeedRow> Page<R, GlobalCursor> {
    /// A page of a global feed read with the catch-up limits after `after`, below `horizon`: when it is
    /// short, the reader has everything below the horizon.
    pub fn of_global(rows: Vec<R>, after: GlobalCursor, horizon: i64) -> Self {
        let bytes: usize = rows.iter().map(FeedRow::size).sum();
        let caught_up = (rows.len() as i64) < BATCH && (bytes as i64) < BATCH_BYTES;
        let next = match rows.last() {
            Some(last) if !caught_up => last.global(),
            _ => after.max(GlobalCursor::horizon(horizon)),
        };
        Page { rows, next, caught_up }
    }
}

/// Rows after `cursor`, forever. `read(cursor)` catches up from Postgres; `cursor_of` places a row.
pub(super) fn follow<R, C, F, Fut>(
    mut subscription: Subscription<R, C>,
    mut cursor: C,
    retry_pause: Duration,
    mut read: F,
    cursor_of: fn(&R) -> C,
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
