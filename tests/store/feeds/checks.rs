//! The contract's checks, each generic over a [`FeedContract`]: the tests `feed_contract!` generates call
//! them with each feed store.

use std::time::{Duration, Instant};

use ark_broker::db::{
    fanout::FeedRow,
    feed::GlobalCursor,
    follow::{BATCH, BATCH_BYTES},
    tail::FeedSource,
};
use sqlx::{Connection, PgConnection, PgPool};

use super::{FeedContract, Row};
use crate::{migrated, wait_for_lock_waiter};

/// How long a read waits for rows held back by other tests' transactions: the horizon is the whole
/// server's, so another test's write in flight (in a database of its own) holds this one's back too.
const PATIENCE: Duration = Duration::from_secs(30);

/// Bytes of body per row where the order check pads them: four rows fill a page's byte budget.
const PADDING: usize = 1 << 20;

/// A row bigger than a page's byte budget, which a page still holds (at least one row is always read).
const OVERSIZE: usize = BATCH_BYTES as usize + 1;

/// A row as the checks compare it: its key, position and global cursor.
type Id = (String, i64, GlobalCursor);

fn id<R: FeedRow>(row: &R) -> Id {
    (row.key().to_owned(), row.position(), row.global())
}

fn keys(rows: &[Id]) -> Vec<&str> {
    rows.iter().map(|(key, _, _)| key.as_str()).collect()
}

pub(super) async fn setup<F: FeedContract>(pool: &PgPool) -> F::Store {
    migrated(pool).await;
    F::store(pool.clone().into())
}

/// The keys of the rows the global feed holds after `writes` (one write each, in this order), in global
/// order: each write's rows, or for a feed that keeps each key's latest change, that change at the place
/// of the key's last write.
fn expected<F: FeedContract>(writes: &[&str]) -> Vec<String> {
    if F::KEYED {
        writes.iter().flat_map(|key| std::iter::repeat_n(key.to_string(), F::ROWS_PER_WRITE)).collect()
    } else {
        let last = |i: usize, key: &str| !writes[i + 1..].contains(&key);
        writes.iter().enumerate().filter(|(i, key)| last(*i, key)).map(|(_, key)| key.to_string()).collect()
    }
}

/// Checks a page of rows read after `after` whose next cursor is `next`: each row after the one before,
/// none beyond `next`, and no row read once the bytes before it filled the budget.
fn check_page<R: FeedRow, C: Ord + Copy + std::fmt::Debug>(rows: &[R], after: C, next: C, cursor: fn(&R) -> C) {
    assert!(next >= after, "a page moves forward: {after:?} then {next:?}");
    let mut previous = after;
    for row in rows {
        assert!(cursor(row) > previous, "rows in order, each once: {:?} after {previous:?}", cursor(row));
        previous = cursor(row);
    }
    assert!(previous <= next, "no row beyond the page's next cursor {next:?}: {previous:?}");
    assert!(rows.len() as i64 <= BATCH, "at most a batch of rows");
    let before_last: usize = rows.iter().rev().skip(1).map(FeedRow::size).sum();
    assert!((before_last as i64) < BATCH_BYTES, "a page stops at the row that fills its byte budget");
}

/// What a global read found.
pub(super) struct Read {
    pub rows: Vec<Id>,
    /// Where the reader stands after them.
    next: GlobalCursor,
    /// How many pages it took.
    pages: usize,
    /// The rows' bytes, as the byte budget counts them.
    bytes: usize,
}

/// Reads the global feed after `after` as a tail does, page after page, each continuing where the last
/// ended, until it has `count` rows and is caught up; a short read is read again while other tests'
/// transactions hold the horizon back.
pub(super) async fn global_rows<F: FeedContract>(store: &F::Store, after: GlobalCursor, count: usize) -> Read {
    let deadline = Instant::now() + PATIENCE;
    let mut read = Read { rows: Vec::new(), next: after, pages: 0, bytes: 0 };
    loop {
        let page = store.global_page(read.next).await.expect("a page of the global feed");
        check_page(&page.rows, read.next, page.next, <Row<F> as FeedRow>::global);
        read.rows.extend(page.rows.iter().map(id));
        read.bytes += page.rows.iter().map(FeedRow::size).sum::<usize>();
        read.next = page.next;
        read.pages += 1;
        if !page.caught_up {
            continue;
        }
        if read.rows.len() >= count {
            break;
        }
        assert!(Instant::now() < deadline, "{} of {count} rows came after {after:?}: {:?}", read.rows.len(), read.rows);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(read.rows.len(), count, "exactly the rows written after {after:?}: {:?}", read.rows);
    read
}

/// Every row of `key` after position `after`, page by page: positions `after + 1, after + 2, …`, whose
/// global cursors rise with them (one key's writers draw positions, ids and sequences in one order).
async fn key_rows<F: FeedContract>(store: &F::Store, key: &str, after: i64) -> Vec<Id> {
    let (mut rows, mut next) = (Vec::<Id>::new(), after);
    loop {
        let page = F::key_page(store, key, next).await.expect("a keyed feed reads a key's pages");
        check_page(&page.rows, next, page.next, <Row<F> as FeedRow>::position);
        for row in &page.rows {
            assert_eq!(row.key(), key, "only {key}'s rows");
            assert_eq!(row.position(), after + rows.len() as i64 + 1, "{key}'s positions without a gap");
            if let Some((_, _, previous)) = rows.last() {
                assert!(row.global() > *previous, "{key}'s sequence rises with its positions: {rows:?}");
            }
            rows.push(id(row));
        }
        next = page.next;
        if page.caught_up {
            return rows;
        }
    }
}

/// The committed last positions `key_heads` gives for `keys`, sorted.
async fn heads_of<S: FeedSource>(store: &S, keys: &[&str]) -> Vec<(String, i64)> {
    let keys: Vec<String> = keys.iter().map(|key| key.to_string()).collect();
    let mut heads = store.key_heads(&keys).await.expect("the heads");
    heads.sort();
    heads
}

/// Holds the next feed write open after it has written its rows, just before it commits: every write
/// inserts its commit receipt last (`db::receipt`), and a trigger makes that insert wait for an advisory
/// lock this holds. The write is then in flight with its transaction id taken, as a writer on another
/// replica is between its statements.
struct Held {
    conn: PgConnection,
    number: i64,
}

impl Held {
    async fn next_write(pool: &PgPool) -> Self {
        sqlx::raw_sql(
            "create sequence if not exists contract_writes;
             create or replace function contract_hold() returns trigger language plpgsql as $$
             begin
               perform pg_advisory_xact_lock_shared(nextval('contract_writes'));
               return new;
             end $$;
             create or replace trigger contract_hold before insert on commit_receipts
               for each row execute function contract_hold();",
        )
        .execute(pool)
        .await
        .expect("the hold's trigger");
        let number: i64 = sqlx::query_scalar(
            "select case when is_called then last_value + 1 else last_value end from contract_writes",
        )
        .fetch_one(pool)
        .await
        .expect("the next write's number");
        let mut conn = PgConnection::connect_with(&pool.connect_options()).await.expect("a connection");
        sqlx::query("select pg_advisory_lock($1)").bind(number).execute(&mut conn).await.expect("the lock");
        Held { conn, number }
    }

    /// Starts `write` and returns once it waits, its rows written.
    async fn write<F: FeedContract>(&self, pool: &PgPool, store: &F::Store, key: &str) -> tokio::task::JoinHandle<()> {
        let (store, key) = (store.clone(), key.to_owned());
        let writing = tokio::spawn(async move { F::write(&store, &key, 0).await });
        wait_for_lock_waiter(pool).await;
        writing
    }

    async fn release(mut self) {
        sqlx::query("select pg_advisory_unlock($1)").bind(self.number).execute(&mut self.conn).await.expect("unlocked");
        self.conn.close().await.expect("closed");
    }
}

/// A write that committed after an older one began is not passed while the older one is open, whose rows
/// may still commit below it; once that commits, both writes' rows come, the older one's first.
pub async fn horizon<F: FeedContract>(pool: PgPool) {
    let store = setup::<F>(&pool).await;
    F::write(&store, "a", 0).await;
    let before = global_rows::<F>(&store, GlobalCursor::default(), expected::<F>(&["a"]).len()).await;

    let held = Held::next_write(&pool).await;
    let older = held.write::<F>(&pool, &store, "b").await;
    F::write(&store, "c", 0).await;
    let page = store.global_page(before.next).await.expect("a page of the global feed");
    let passed: Vec<Id> = page.rows.iter().map(id).collect();
    assert!(passed.is_empty(), "rows of a later commit were passed while an older writer is open: {passed:?}");
    assert!(page.caught_up, "and the reader is caught up up to the horizon");
    assert!(page.next >= before.next);
    if F::KEYED {
        let c = key_rows::<F>(&store, "c", 0).await;
        assert_eq!(c.len(), F::ROWS_PER_WRITE, "a key's reader is not held back by another key's writer");
        // A key created but not written yet (a stream) may have a head of 0.
        let mut heads = heads_of(&store, &["b", "c"]).await;
        heads.retain(|(_, head)| *head > 0);
        assert_eq!(heads, [("c".to_owned(), F::ROWS_PER_WRITE as i64)], "heads are what committed");
    }
    held.release().await;
    older.await.expect("the older write commits");

    let after = global_rows::<F>(&store, page.next, expected::<F>(&["b", "c"]).len()).await;
    assert_eq!(keys(&after.rows), expected::<F>(&["b", "c"]), "the older writer's rows, then the later one's");
    let all = global_rows::<F>(&store, GlobalCursor::default(), before.rows.len() + after.rows.len()).await;
    assert_eq!(all.rows, [before.rows, after.rows].concat(), "the reader that waited missed nothing");
}

/// The global feed is in `(tx, sequence)` order, one write's rows together; each key's pages hold its
/// rows in position order, the same rows the global feed has for it; pages stop at the byte budget, and a
/// row bigger than the budget still comes.
pub async fn order<F: FeedContract>(pool: PgPool) {
    let store = setup::<F>(&pool).await;
    let writes = ["a", "b", "a", "c", "b", "a", "c"];
    for (i, key) in writes.iter().enumerate() {
        F::write(&store, key, if i + 1 < writes.len() { PADDING } else { OVERSIZE }).await;
    }
    let global = global_rows::<F>(&store, GlobalCursor::default(), expected::<F>(&writes).len()).await;
    assert_eq!(keys(&global.rows), expected::<F>(&writes), "in the order the writes committed");
    let bytes = global.bytes as i64;
    assert!(bytes < BATCH_BYTES || global.pages > 1, "{bytes} bytes in one page: the budget was not kept");
    if !F::KEYED {
        return;
    }
    for key in ["a", "b", "c"] {
        let rows = key_rows::<F>(&store, key, 0).await;
        let in_global: Vec<Id> = global.rows.iter().filter(|(k, _, _)| k == key).cloned().collect();
        assert_eq!(rows, in_global, "{key}'s pages hold its rows of the global feed, in the same order");
    }
}

/// `key_heads` gives each existing key's committed last position, the position its pages end at; a write
/// in flight moves no head.
pub async fn heads<F: FeedContract>(pool: PgPool) {
    let store = setup::<F>(&pool).await;
    for key in ["a", "b", "a"] {
        F::write(&store, key, 0).await;
    }
    let heads = heads_of(&store, &["a", "b", "missing"]).await;
    if !F::KEYED {
        assert_eq!(heads, [], "a feed read only globally has no key heads");
        return;
    }
    let rows = F::ROWS_PER_WRITE as i64;
    assert_eq!(heads, [("a".to_owned(), 2 * rows), ("b".to_owned(), rows)], "a key that has no rows has no head");
    for (key, head) in &heads {
        let last = key_rows::<F>(&store, key, 0).await.last().map(|(_, position, _)| *position);
        assert_eq!(last, Some(*head), "{key}'s head is its last row");
    }

    let held = Held::next_write(&pool).await;
    let writing = held.write::<F>(&pool, &store, "a").await;
    assert_eq!(heads_of(&store, &["a"]).await, [("a".to_owned(), 2 * rows)], "a write in flight moves no head");
    assert_eq!(key_rows::<F>(&store, "a", 0).await.len() as i64, 2 * rows, "nor adds rows to the key's pages");
    held.release().await;
    writing.await.expect("the write commits");
    assert_eq!(heads_of(&store, &["a"]).await, [("a".to_owned(), 3 * rows)], "its commit moves it");
}

/// Reading after any row, by its global cursor or by upstream's sequence number, globally or within its
/// key, gives exactly the rows after it.
pub async fn resume<F: FeedContract>(pool: PgPool) {
    let store = setup::<F>(&pool).await;
    let writes = ["a", "b", "a", "c", "b"];
    for key in writes {
        F::write(&store, key, 0).await;
    }
    let all = global_rows::<F>(&store, GlobalCursor::default(), expected::<F>(&writes).len()).await.rows;
    assert_eq!(keys(&all), expected::<F>(&writes));
    for (i, (key, position, global)) in all.iter().enumerate() {
        let rest = global_rows::<F>(&store, *global, all.len() - i - 1).await.rows;
        assert_eq!(rest, all[i + 1..], "after {global:?}: exactly the rest");
        let rest_of_key: Vec<Id> = all[i + 1..].iter().filter(|(k, _, _)| k == key).cloned().collect();
        if F::KEYED {
            assert_eq!(key_rows::<F>(&store, key, *position).await, rest_of_key, "after {key}'s {position}");
        }
        let Some(resume) = F::resume(&store, key, global.sequence).await else { continue };
        let head = all.iter().filter(|(k, _, _)| k == key).map(|(_, p, _)| *p).max();
        let wanted = super::Resume { global: *global, position: *position, last_position: head.unwrap_or(0) };
        assert_eq!(resume, wanted, "upstream's cursor {} resumes right after its row", global.sequence);
    }
}
