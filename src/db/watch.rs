//! Where a watch of a per-key feed (one query's events, one trace's spans) or of the whole feed starts, and
//! the stream of rows from there: upstream's `from-beginning`, `cursor` (a row's sequence number) or "only
//! what comes next", turned into positions and global cursors once, before the response goes out.

use std::{sync::Arc, time::Duration};

use futures::{StreamExt, stream::BoxStream};
use sqlx::PgPool;

use super::{
    StoreResult,
    fanout::{Fanout, FeedRow},
    feed::GlobalCursor,
    follow::{Page, follow},
    tail::FeedSource,
};

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Only rows stored after the watch began.
    Live,
    /// Everything still kept (`from-beginning=true`).
    Beginning,
    /// Rows after upstream's `cursor` (a row's sequence number).
    After(i64),
}

impl Start {
    /// Upstream's watch parameters: `from-beginning=true` replays everything, else `cursor` resumes after that
    /// row, else only what comes next.
    pub fn of(from_beginning: bool, cursor: Option<i64>) -> Self {
        match (from_beginning, cursor) {
            (true, _) => Start::Beginning,
            (false, Some(sequence)) => Start::After(sequence),
            (false, None) => Start::Live,
        }
    }
}

/// A feed with per-key positions that watches can resume by sequence number.
pub trait WatchSource: FeedSource + Clone {
    /// A key's committed last position (0 if it has none).
    fn last_position(&self, key: &str) -> impl Future<Output = StoreResult<i64>> + Send;

    /// The position of the key's last row at or before sequence `sequence`: one key's sequence numbers rise
    /// with its positions, because a writer draws them while it holds the key's counter row.
    fn position_after_sequence(&self, key: &str, sequence: i64) -> impl Future<Output = StoreResult<i64>> + Send;

    /// The key's rows after position `after`, within the catch-up limits.
    fn key_page(&self, key: &str, after: i64) -> impl Future<Output = StoreResult<Page<Self::Row, i64>>> + Send;

    /// The global cursor right after the row with sequence `sequence` (or the last earlier one still kept):
    /// everything before it in `(tx, sequence)` order was below the horizon when it was sent, so a resume
    /// repeats and skips nothing.
    fn global_cursor_of(&self, sequence: i64) -> impl Future<Output = StoreResult<GlobalCursor>> + Send;
}

/// One key's rows from `start`, forever.
pub async fn follow_key<S: WatchSource>(
    source: S,
    fanout: &Fanout<S::Row>,
    key: String,
    start: Start,
    retry_pause: Duration,
) -> StoreResult<BoxStream<'static, Arc<S::Row>>> {
    let subscription = fanout.subscribe_key(&key);
    let from = match start {
        Start::Live => source.last_position(&key).await?,
        Start::Beginning => 0,
        Start::After(sequence) => source.position_after_sequence(&key, sequence).await?,
    };
    let read = move |after| {
        let (source, key) = (source.clone(), key.clone());
        async move { source.key_page(&key, after).await }
    };
    Ok(follow(subscription, from, retry_pause, read, <S::Row as FeedRow>::position).boxed())
}

/// Every row of the feed from `start`, forever. A live-only watch starts at the horizon and skips rows of
/// transactions that had committed before it began.
pub async fn follow_all<S: WatchSource>(
    source: S,
    fanout: &Fanout<S::Row>,
    pool: &PgPool,
    start: Start,
    retry_pause: Duration,
) -> StoreResult<BoxStream<'static, Arc<S::Row>>> {
    let subscription = fanout.subscribe_global();
    let (from, snapshot) = match start {
        Start::After(sequence) => (source.global_cursor_of(sequence).await?, None),
        Start::Beginning => (GlobalCursor::default(), None),
        Start::Live => {
            let snapshot = super::start_snapshot(pool).await?;
            (snapshot.cursor(), Some(snapshot))
        }
    };
    let read = move |after| {
        let source = source.clone();
        async move { source.global_page(after).await }
    };
    Ok(follow(subscription, from, retry_pause, read, <S::Row as FeedRow>::global)
        .filter(move |row| std::future::ready(snapshot.as_ref().is_none_or(|s| s.is_new(row.global().tx))))
        .boxed())
}
