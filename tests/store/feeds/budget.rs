//! The byte budget's contract (upstream's `MESSAGE_MAX_BYTES`, `EVENT_MAX_BYTES`, `TRACE_MAX_BYTES`), run over
//! every store whose table has one. Each store carries its own copy of the budget's delete (`query!` needs
//! literal SQL), so this is what keeps the copies alike: beyond the budget the oldest rows go, counted from
//! the newest; `limit` bounds each pass; the newest row always stays.

use ark_broker::db::feed::{Feed, GlobalCursor};
use sqlx::PgPool;

use super::{FeedContract, checks};

/// A feed store whose table has a byte budget: its copy of the budget's delete.
pub trait BudgetContract: FeedContract {
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
