//! The feed contract, written once and run over every feed store: what a replica's tail, a watch and a
//! resume rely on from a store's reads. Each store carries its own copy of the visibility-horizon query
//! and of the catch-up limits (`query!` needs literal SQL), so this suite is what keeps the copies from
//! drifting apart:
//!
//! - **horizon**: rows of a transaction that committed while an older writer is still open are not
//!   passed (the older one may still commit rows below them); once it commits, both come, in order;
//! - **order**: the global feed in `(tx, sequence)` order, each key's rows in position order, and pages
//!   that stop at the byte budget and continue each other exactly;
//! - **heads**: `key_heads` is each key's committed last position, not moved by a write in flight;
//! - **resume**: reading after any row (its global cursor, or upstream's sequence number) gives exactly
//!   the rest, no gaps, no repeats.
//!
//! A feed comes under the contract with a [`FeedContract`] impl (`stores.rs`: how to make its store and
//! write to it through the store's own write path) and one line in the list of [`feed_contract!`] below;
//! [`every_feed_a_tail_reads_is_under_the_contract`] fails while a feed has none. A store whose table has a
//! byte budget is also under the budget's contract (`budget.rs`).

mod budget;
mod checks;
mod stores;

use ark_broker::db::{
    StoreResult,
    feed::{Feed, GlobalCursor},
    follow::Page,
    pool::Pool,
    tail::FeedSource,
    watch::{KeyPages, WatchSource},
};

/// The rows of a feed store.
pub type Row<F> = <<F as FeedContract>::Store as FeedSource>::Row;

/// A feed store under the contract: how the suite makes one and writes to it.
pub trait FeedContract: 'static {
    /// The feed the store is the source of.
    const FEED: Feed;
    /// How the feed holds a key's writes. `true`: each write appends the key's next positions, read per key
    /// (`KeyPages`, [`FeedContract::key_page`]) and compared by the tail with `key_heads`. `false`: the feed
    /// holds each key's latest change only, which moves to the end of the global feed (sessions).
    const KEYED: bool;
    /// Rows one write stores.
    const ROWS_PER_WRITE: usize;
    /// The store.
    type Store: FeedSource + Clone;

    /// The store, on a migrated database.
    fn store(pool: Pool) -> Self::Store;

    /// One write through the store's own write path, committed when this returns: the next
    /// [`FeedContract::ROWS_PER_WRITE`] rows of `key` (or its latest change), each about `padding` bytes
    /// where the feed's rows carry a body.
    fn write(store: &Self::Store, key: &str, padding: usize) -> impl Future<Output = ()> + Send;

    /// `key`'s rows after position `after`: [`keyed`] for a keyed feed.
    fn key_page(
        _store: &Self::Store,
        _key: &str,
        _after: i64,
    ) -> impl Future<Output = Option<Page<Row<Self>, i64>>> + Send {
        async { None }
    }

    /// Where a watch resumed from upstream's `cursor` (the sequence number of a row of `key`) continues:
    /// [`watched`] for a feed whose watches resume by sequence (`WatchSource`).
    fn resume(_store: &Self::Store, _key: &str, _sequence: i64) -> impl Future<Output = Option<Resume>> + Send {
        async { None }
    }
}

/// Where a watch resumed from a sequence number continues, as a [`WatchSource`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resume {
    /// The global watch: right after the row.
    pub global: GlobalCursor,
    /// The key's watch: right after the row's position.
    pub position: i64,
    /// The key's committed last position (where a live-only watch of the key starts).
    pub last_position: i64,
}

/// [`FeedContract::key_page`] of a [`KeyPages`] store.
pub async fn keyed<S: KeyPages>(store: &S, key: &str, after: i64) -> Option<Page<S::Row, i64>> {
    Some(store.key_page(key, after).await.expect("a page of the key"))
}

/// [`FeedContract::resume`] of a [`WatchSource`] store.
pub async fn watched<S: WatchSource>(store: &S, key: &str, sequence: i64) -> Option<Resume> {
    let read = async {
        StoreResult::Ok(Resume {
            global: store.global_cursor_of(sequence).await?,
            position: store.position_after_sequence(key, sequence).await?,
            last_position: store.last_position(key).await?,
        })
    };
    Some(read.await.expect("where the watch resumes"))
}

/// Generates the contract's tests for each `module: fixture` (a [`FeedContract`]) and the list of feeds
/// they cover.
macro_rules! feed_contract {
    ($($module:ident: $fixture:ty,)*) => {
        $(
            mod $module {
                use super::{checks, stores};
                use sqlx::PgPool;

                #[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
                #[sqlx::test(migrations = false)]
                async fn the_global_feed_passes_no_row_while_an_older_writer_may_still_commit_below_it(pool: PgPool) {
                    checks::horizon::<$fixture>(pool).await;
                }

                #[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
                #[sqlx::test(migrations = false)]
                async fn rows_come_in_transaction_then_sequence_order_and_each_key_in_position_order(pool: PgPool) {
                    checks::order::<$fixture>(pool).await;
                }

                #[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
                #[sqlx::test(migrations = false)]
                async fn key_heads_are_the_committed_last_positions(pool: PgPool) {
                    checks::heads::<$fixture>(pool).await;
                }

                #[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
                #[sqlx::test(migrations = false)]
                async fn reading_after_any_row_gives_exactly_the_rest(pool: PgPool) {
                    checks::resume::<$fixture>(pool).await;
                }
            }
        )*

        /// The feeds under the contract.
        const COVERED: &[Feed] = &[$(<$fixture as FeedContract>::FEED),*];
    };
}

// One line per feed store.
feed_contract! {
    messages: stores::Messages,
    chunks: stores::Chunks,
    events: stores::Events,
    sessions: stores::Sessions,
    spans: stores::Spans,
}

/// Feeds no tail reads rows of: their notifications wake readers, who read for themselves. Questions;
/// durable streams, whose readers read a stream by offset, each stream's appends serialised by its row lock.
const NOT_TAILED: [Feed; 2] = [Feed::Questions, Feed::Durable];

#[test]
fn every_feed_a_tail_reads_is_under_the_contract() {
    for feed in Feed::ALL {
        let covered = COVERED.iter().filter(|covered| **covered == feed).count();
        let expected = usize::from(!NOT_TAILED.contains(&feed));
        assert_eq!(covered, expected, "feed {} has {covered} lines in feed_contract!", feed.name());
    }
}
