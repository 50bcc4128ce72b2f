//! Following a feed: the one reader loop behind every live stream. It reads rows with
//! `sequence > last_delivered` a batch at a time, yields them in order, and between batches waits for the
//! hub to wake it (NOTIFY, the listener's resync, or its poll). A failed read is retried after a pause; it
//! never skips rows.

use std::time::Duration;

use futures::Stream;

use super::{StoreResult, hub::Subscription};

/// Rows read per round trip while catching up.
pub const BATCH: i64 = 500;

/// Rows after `after`, forever. `read(after, limit)` returns up to `limit` rows after `after`, oldest first;
/// `sequence` says where a row is in the feed.
pub fn follow<T, F, Fut>(
    mut subscription: Subscription,
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
                        subscription.woken().await;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "reading a feed failed; retrying");
                    tokio::time::sleep(retry_pause).await;
                }
            }
        }
    }
}
