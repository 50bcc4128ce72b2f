//! The first start of a new layout: the migration made one bucket of every key up to an hour or two ahead
//! (it does not know the broker's bucket width); this lays it out at the broker's width, once. Buckets for
//! the past (rows restored or imported with past keys then spread over buckets by age, and go when their own
//! bucket does), the first bucket narrowed to the keys since the layout began (and, when it is the only
//! bucket, to just after now), and buckets from there to where it ended.

use chrono::{DateTime, TimeDelta, Utc};
use sqlx::AssertSqlSafe;

use super::{Buckets, floor, is_lock_timeout, list, literal};
use crate::db::{Pool, StoreResult};

/// How long the layout waits for the parent's lock (everyone queues behind it meanwhile).
const LAYOUT_LOCK_TIMEOUT: &str = "500ms";
/// The most buckets made for the past at once.
const MAX_PAST: usize = 64;
/// Buckets of the width made ahead of now; the rest of the first bucket's range is one bucket.
const AHEAD: usize = 4;

impl Buckets {
    /// Lays the first bucket out at `width`, with buckets for the past down to `from`, unless that was
    /// done (or given up). That is looked at under the parent's lock, so the caller calls this only while
    /// the layout is not recorded as made (`ChunkStore::add_buckets`). The first bucket must hold no row
    /// with a key below `first_key`: PostgreSQL checks (a scan of that bucket, which holds a few seconds of
    /// writes); if one is older, the layout is left as it is and that is recorded. Returns how many buckets it made; 0 also when the parent's lock was not free
    /// in time (the next call tries again).
    pub async fn lay_out(
        &self,
        pool: &Pool,
        width: TimeDelta,
        from: DateTime<Utc>,
        first_key: DateTime<Utc>,
    ) -> StoreResult<usize> {
        let mut tx = pool.begin().await?;
        let lock = format!(
            "set local lock_timeout = '{LAYOUT_LOCK_TIMEOUT}'; lock table only {} in access exclusive mode;",
            self.parent
        );
        match sqlx::raw_sql(AssertSqlSafe(lock)).execute(&mut *tx).await {
            Ok(_) => {}
            Err(error) if is_lock_timeout(&error) => return Ok(0),
            Err(error) => return Err(error.into()),
        }
        if self.laid_out(&mut tx).await? {
            return Ok(0);
        }
        let buckets = list(&mut tx, self.parent).await?;
        let Some(first) = buckets.first() else { return Ok(0) };
        let now = sqlx::query_scalar!(r#"select now() as "now!""#).fetch_one(&mut *tx).await?;
        let step = TimeDelta::seconds(width.num_seconds().max(1));
        // The past: below the first key, down to `from`, the newest first; none if the layout began that long ago.
        let lower = first_key.min(first.upper);
        let mut past = Vec::new();
        let mut bound = lower;
        while bound > from && past.len() < MAX_PAST {
            past.push(bound);
            bound = if floor(bound, step) < bound { floor(bound, step) } else { bound - step };
        }
        // The first bucket's new bounds: from the first key (minus infinity without a past), to just after now
        // when no bucket follows it.
        let upper = match buckets.len() {
            1 => (floor(now + TimeDelta::minutes(1), step) + step).min(first.upper),
            _ => first.upper,
        };
        let name = self.name(upper);
        let (key, parent, old) = (self.key, self.parent, &first.name);
        let from_check = match past.is_empty() {
            true => String::new(),
            false => format!("add constraint {name}_from check ({key} >= {}),", literal(lower)),
        };
        let rename = if name == *old { String::new() } else { format!("alter table {old} rename to {name};") };
        let lower_bound = if past.is_empty() { "minvalue".to_owned() } else { literal(lower) };
        let drop_from =
            if past.is_empty() { String::new() } else { format!("alter table {name} drop constraint {name}_from;") };
        // The new bounds as checks (PostgreSQL proves them over the bucket's rows), so the attach needs no scan.
        let ddl = format!(
            "alter table {parent} detach partition {old};
             alter table {old} {from_check} add constraint {name}_to check ({key} < {upper_at}), drop constraint {old}_bound;
             {rename}
             alter table {name} rename constraint {name}_to to {name}_bound;
             alter table {parent} attach partition {name} for values from ({lower_bound}) to ({upper_at});
             {drop_from}",
            upper_at = literal(upper),
        );
        match sqlx::raw_sql(AssertSqlSafe(ddl)).execute(&mut *tx).await {
            Ok(_) => {}
            Err(error) if is_check_violation(&error) => {
                drop(tx);
                tracing::warn!(bucket = %old, "rows older than the layout in its first bucket: left as it is");
                let mut tx = pool.begin().await?;
                mark_past(&mut tx, parent, DateTime::UNIX_EPOCH).await?;
                tx.commit().await?;
                return Ok(0);
            }
            Err(error) => return Err(error.into()),
        }
        sqlx::query!(
            "update partition_buckets set partition = $2, upper_bound = $3 where partition = $1",
            old,
            name,
            upper
        )
        .execute(&mut *tx)
        .await?;
        // Each past bucket ends where the one after it begins; the last reaches from minus infinity.
        for (at, upper) in past.iter().enumerate() {
            let lower = past.get(at + 1).map_or("minvalue".to_owned(), |lower| literal(*lower));
            self.attach_new(&mut tx, &lower, *upper).await?;
        }
        // The future, up to where the first bucket ended: `ahead` buckets of the width, then one to its end.
        let mut ahead = 0;
        let mut bound = upper;
        while bound < first.upper {
            let next = if ahead < AHEAD { (floor(bound, step) + step).min(first.upper) } else { first.upper };
            self.attach_new(&mut tx, &literal(bound), next).await?;
            (bound, ahead) = (next, ahead + 1);
        }
        mark_past(&mut tx, parent, from).await?;
        tx.commit().await?;
        Ok(past.len() + ahead)
    }

    /// Whether the layout was made (or given up).
    async fn laid_out(&self, conn: &mut sqlx::PgConnection) -> StoreResult<bool> {
        let done = sqlx::query_scalar!(
            r#"select past_from is not null as "done!" from partition_horizons where parent = $1"#,
            self.parent
        )
        .fetch_optional(conn)
        .await?;
        Ok(done.unwrap_or(true))
    }
}

/// Records that the buckets for the past were made (down to `from`), or will not be.
async fn mark_past(conn: &mut sqlx::PgConnection, parent: &str, from: DateTime<Utc>) -> StoreResult<()> {
    sqlx::query!("update partition_horizons set past_from = $2 where parent = $1", parent, from).execute(conn).await?;
    Ok(())
}

/// Whether `error` is PostgreSQL's "check constraint violated".
fn is_check_violation(error: &sqlx::Error) -> bool {
    error.as_database_error().and_then(|e| e.code()).is_some_and(|code| code == "23514")
}
