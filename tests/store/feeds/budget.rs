//! The byte budget's contract (upstream's `MESSAGE_MAX_BYTES`, `EVENT_MAX_BYTES`, `TRACE_MAX_BYTES`), run over
//! every store whose table has one. Each store carries its own copy of the budget's delete (`query!` needs
//! literal SQL), so this is what keeps the copies alike: beyond the budget the oldest rows go, counted from
//! the newest; `limit` bounds each pass; the newest row always stays; rows deleted with plain SQL leave the
//! count; and a pass reads the oldest rows it may delete, not the table (issue 47: its cost follows what it
//! deletes).

use ark_broker::db::feed::{Feed, GlobalCursor};
use sqlx::{AssertSqlSafe, PgPool};

use super::{FeedContract, checks};

/// A feed store whose table has a byte budget: its copy of the budget's delete.
pub trait BudgetContract: FeedContract {
    /// The table the budget is over.
    const TABLE: &'static str;
    /// Deletes up to `limit` of the oldest rows beyond `max_bytes`; how many.
    fn delete_over_budget(store: &Self::Store, max_bytes: i64, limit: i64) -> impl Future<Output = u64> + Send;
}

/// Bytes of body per row: the budgets below are counted in these, a row's other bytes far fewer.
const PADDING: usize = 4000;

/// Writes five times, then deletes over shrinking budgets, checking what is left each time.
pub async fn check<F: BudgetContract>(pool: PgPool) {
    let store = checks::setup::<F>(&pool).await;
    let writes = ["a", "b", "c", "d", "e"];
    for key in writes {
        F::write(&store, key, PADDING).await;
    }
    let count = writes.len() * F::ROWS_PER_WRITE;
    let all = checks::global_rows::<F>(&store, GlobalCursor::default(), count).await.rows;
    let left = |n: usize| checks::global_rows::<F>(&store, GlobalCursor::default(), n);

    assert_eq!(F::delete_over_budget(&store, i64::MAX, 1000).await, 0, "nothing beyond a budget that holds all");
    // Three and a half rows' worth: the three newest stay.
    let budget = (3 * PADDING + PADDING / 2) as i64;
    assert_eq!(F::delete_over_budget(&store, budget, 1).await, 1, "at most `limit` rows a pass");
    assert_eq!(left(count - 1).await.rows, all[1..], "the oldest went first");
    assert_eq!(F::delete_over_budget(&store, budget, 1000).await as usize, count - 4);
    assert_eq!(left(3).await.rows, all[count - 3..], "the newest rows within the budget stay");
    // No room at all: everything but the newest.
    assert_eq!(F::delete_over_budget(&store, 0, 1000).await, 2);
    assert_eq!(left(1).await.rows, all[count - 1..]);
    assert_eq!(F::delete_over_budget(&store, 0, 1000).await, 0, "the newest row is always kept");

    // Rows deleted with plain SQL leave the count: of three writes after, two and a half writes' worth of budget
    // keeps all but the oldest row.
    sqlx::raw_sql(AssertSqlSafe(format!("delete from {}", F::TABLE))).execute(&pool).await.expect("deleted");
    for key in ["f", "g", "h"] {
        F::write(&store, key, PADDING).await;
    }
    let budget = (3 * F::ROWS_PER_WRITE * PADDING - PADDING / 2) as i64;
    assert_eq!(F::delete_over_budget(&store, budget, 1000).await, 1, "counted from what the table holds");

    // A pass over a budget that holds everything reads no more rows than it may delete, however many there are.
    for n in 0..100 {
        F::write(&store, &format!("more-{n}"), 10).await;
    }
    // A table of a hundred small rows is cheaper to scan whole than through its key, and PostgreSQL plans it
    // so; the setting asks for the plan a table of the size where a budget matters gets.
    let reader = crate::one_connection(&pool, &[("enable_seqscan", "off")]).await;
    let on_one = F::store(reader.clone().into());
    let before = rows_read(&reader, F::TABLE).await;
    assert_eq!(F::delete_over_budget(&on_one, i64::MAX, 2).await, 0);
    let read = rows_read(&reader, F::TABLE).await - before;
    assert!(read <= 4, "{read} rows read for a pass that may delete 2 of {} rows", 100 * F::ROWS_PER_WRITE);
}

/// Rows of `table` read so far (by scans and through indexes), with the connection's own reads flushed to
/// PostgreSQL's counters first.
async fn rows_read(pool: &PgPool, table: &str) -> i64 {
    sqlx::query("select pg_stat_force_next_flush()").execute(pool).await.expect("a flush of the counters");
    sqlx::query_scalar(
        "select coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) from pg_stat_user_tables where relname = $1",
    )
    .bind(table)
    .fetch_one(pool)
    .await
    .expect("the counters")
}

/// Generates the budget's test for each `module: fixture` (a [`BudgetContract`]), and the list of feeds
/// they cover.
macro_rules! budget_contract {
    ($($module:ident: $fixture:ty,)*) => {
        $(
            mod $module {
                use sqlx::PgPool;

                #[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
                #[sqlx::test(migrations = false)]
                async fn beyond_the_byte_budget_the_oldest_rows_go_and_the_newest_always_stays(pool: PgPool) {
                    super::check::<$fixture>(pool).await;
                }
            }
        )*

        /// The feeds under the budget's contract.
        const COVERED: &[Feed] = &[$(<$fixture as FeedContract>::FEED),*];
    };
}

// One line per store with a byte budget.
budget_contract! {
    messages: crate::feeds::stores::Messages,
    events: crate::feeds::stores::Events,
    spans: crate::feeds::stores::Spans,
}

#[test]
fn every_table_with_a_byte_budget_is_under_the_contract() {
    // Upstream's three budgets: MESSAGE_MAX_BYTES, EVENT_MAX_BYTES, TRACE_MAX_BYTES.
    assert_eq!(COVERED, [Feed::Messages, Feed::Events, Feed::Spans]);
}
