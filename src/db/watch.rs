//! Where every watch starts: one key of a feed (a stream's chunks, one query's events, one trace's spans), the
//! whole of a feed, or the questions' changes; and the stream of rows from there. Upstream's
//! `from-beginning`, `cursor` (a row's sequence number) or "only what comes next" are turned into positions
//! and global cursors once, before the response goes out.

use std::{
    sync::{
        Arc,
        atomic::{AtomicI64, Ordering},
    },
    time::Duration,
};

use futures::{Stream, StreamExt, stream::BoxStream};

use super::{
    StoreResult,
    fanout::FeedRow,
    feed::GlobalCursor,
    follow::{EpochTrack, Page, follow, follow_woken},
    live::LiveFeed,
    tail::FeedSource,
    wakeup::Subscription,
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

/// Where a watch of the whole feed starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GlobalStart {
    /// Only rows of transactions that commit after the watch began.
    Live,
    /// Everything still kept.
    Beginning,
    /// Rows after this cursor.
    After(GlobalCursor),
}

impl Start {
    /// Where a watch of the whole feed starts: a sequence number becomes the cursor right after its row.
    pub async fn global<S: WatchSource>(self, feed: &LiveFeed<S>) -> StoreResult<GlobalStart> {
        Ok(match self {
            Start::Live => GlobalStart::Live,
            Start::Beginning => GlobalStart::Beginning,
            Start::After(sequence) => GlobalStart::After(feed.global_cursor_of(sequence).await?),
        })
    }
}

/// A feed whose rows are read per key, by position.
pub trait KeyPages: FeedSource + Clone {
    /// The key's rows after position `after`, within the catch-up limits.
    fn key_page(&self, key: &str, after: i64) -> impl Future<Output = StoreResult<Page<Self::Row, i64>>> + Send;
}

/// A feed with per-key positions that watches can resume by sequence number.
pub trait WatchSource: KeyPages {
    /// A key's committed last position (0 if it has none).
    fn last_position(&self, key: &str) -> impl Future<Output = StoreResult<i64>> + Send;

    /// The position of the key's last row at or before sequence `sequence`: one key's sequence numbers rise
    /// with its positions, because a writer draws them while it holds the key's counter row.
    fn position_after_sequence(&self, key: &str, sequence: i64) -> impl Future<Output = StoreResult<i64>> + Send;

    /// The global cursor right after the row with sequence `sequence` (or the last earlier one still kept):
    /// everything before it in `(tx, sequence)` order was below the horizon when it was sent, so a resume
    /// repeats and skips nothing.
    fn global_cursor_of(&self, sequence: i64) -> impl Future<Output = StoreResult<GlobalCursor>> + Send;
}

/// One key's rows from `start`, forever.
pub async fn follow_key<S: WatchSource>(
    feed: &LiveFeed<S>,
    key: String,
    start: Start,
    retry_pause: Duration,
) -> StoreResult<BoxStream<'static, Arc<S::Row>>> {
    let after = match start {
        Start::Live => feed.last_position(&key).await?,
        Start::Beginning => 0,
        Start::After(sequence) => feed.position_after_sequence(&key, sequence).await?,
    };
    Ok(key_after(feed, key, after, retry_pause))
}

/// One key's rows after position `after`, forever.
pub fn key_after<S: KeyPages>(
    feed: &LiveFeed<S>,
    key: String,
    after: i64,
    retry_pause: Duration,
) -> BoxStream<'static, Arc<S::Row>> {
    let subscription = feed.fanout.subscribe_key(&key);
    let source = feed.store.clone();
    let read = move |after| {
        let (source, key) = (source.clone(), key.clone());
        async move { source.key_page(&key, after).await }
    };
    follow(subscription, after, retry_pause, read, <S::Row as FeedRow>::position, EpochTrack::none()).boxed()
}

/// Every row of the feed from `start`, forever. A live-only watch starts at the horizon and skips rows of
/// transactions that had committed before it began.
pub async fn follow_all<S: FeedSource + Clone>(
    feed: &LiveFeed<S>,
    start: GlobalStart,
    retry_pause: Duration,
) -> StoreResult<BoxStream<'static, Arc<S::Row>>> {
    let subscription = feed.fanout.subscribe_global();
    let source = feed.store.clone();
    let (from, snapshot) = match start {
        GlobalStart::After(cursor) => (cursor, None),
        GlobalStart::Beginning => (GlobalCursor::default(), None),
        GlobalStart::Live => {
            let snapshot = super::start_snapshot(source.pool()).await?;
            (snapshot.cursor(), Some(snapshot))
        }
    };
    let read = move |after| {
        let source = source.clone();
        async move { source.global_page(after).await }
    };
    // Every row of an epoch begun after the reader started is new to it, whatever its start snapshot says.
    let new_epoch_from = Arc::new(AtomicI64::new(i64::MAX));
    let known = snapshot.as_ref().and_then(|s| s.epoch);
    let epoch = EpochTrack::new(known, GlobalCursor::rebased, Some(new_epoch_from.clone()));
    Ok(follow(subscription, from, retry_pause, read, <S::Row as FeedRow>::global, epoch)
        .filter(move |row| {
            let tx = row.global().tx;
            let new = tx >= new_epoch_from.load(Ordering::SeqCst) || snapshot.as_ref().is_none_or(|s| s.is_new(tx));
            std::future::ready(new)
        })
        .boxed())
}

/// The questions' changes after version `after`, forever: woken by `wakeup` (subscribed before `after` was
/// read), each reader reads its own with `read(after, limit)`, oldest first; `version` places a change.
pub fn question_changes<T, F, Fut>(
    wakeup: Subscription,
    after: i64,
    retry_pause: Duration,
    read: F,
    version: fn(&T) -> i64,
) -> impl Stream<Item = T> + Send
where
    T: Send + 'static,
    F: FnMut(i64, i64) -> Fut + Send + 'static,
    Fut: Future<Output = StoreResult<Vec<T>>> + Send,
{
    follow_woken(wakeup, after, retry_pause, read, version)
}
