//! Tables kept in time buckets: a range-partitioned table whose partitions ("buckets") are added ahead of
//! time and dropped whole, oldest first, so retention costs work in proportion to what goes, not to what is
//! kept (docs/retention.md). `partition_buckets` lists each bucket by its upper bound; the oldest takes every
//! key below its bound (its lower bound is minus infinity), so a row of any age finds a bucket.
//!
//! Every bucket is made with two checks: its parent's list value (`chunks_live_lane`, copied from the
//! parent) and its upper bound (`<bucket>_bound`). Together they imply any range the bucket is attached
//! with that ends at that bound, so attaching it again from minus infinity ([`drop`]) needs no scan.

mod drop;
mod layout;

pub use drop::{Dropped, Dropping, drop_partition};

use chrono::{DateTime, TimeDelta, Utc};
use sqlx::{AssertSqlSafe, PgConnection};

use super::{Pool, StoreResult};

/// How long a transaction that adds a bucket waits for its lock (it blocks no reader or writer).
const ADD_LOCK_TIMEOUT: &str = "5s";

/// One table kept in buckets.
#[derive(Debug, Clone, Copy)]
pub struct Buckets {
    /// The range-partitioned table the buckets are partitions of.
    pub parent: &'static str,
    /// The start of every bucket's name; the rest is its upper bound (`chunks_until_20261202t030000`).
    pub prefix: &'static str,
    /// The partition key.
    pub key: &'static str,
    /// The transaction advisory lock that serialises the replicas adding buckets.
    pub lock: i64,
}

/// One bucket: the rows whose key is below `upper` (and not below the bucket before it's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    /// The partition's name.
    pub name: String,
    /// Its upper bound.
    pub upper: DateTime<Utc>,
}

impl Buckets {
    /// The buckets, oldest first.
    pub async fn list(&self, pool: &Pool) -> StoreResult<Vec<Bucket>> {
        list(&mut *pool.inner().acquire().await?, self.parent).await
    }

    /// Adds buckets until the newest reaches past `until` (PostgreSQL's clock). A new bucket ends on the next
    /// multiple of `width` since the epoch after the newest's end (one shorter than `width` when that end is
    /// not on one: the first bucket's, or one made with another width), and after a long time without a
    /// broker one bucket closes the gap up to now. Returns how many were added. Any replica may call this at
    /// any time: the replicas take turns.
    pub async fn add_until(&self, pool: &Pool, width: TimeDelta, until: DateTime<Utc>) -> StoreResult<usize> {
        let mut added = 0;
        loop {
            let mut tx = pool.begin().await?;
            sqlx::query!("select pg_advisory_xact_lock($1)", self.lock).execute(&mut *tx).await?;
            let newest = list(&mut tx, self.parent).await?.pop().map(|bucket| bucket.upper);
            let Some(newest) = newest.filter(|newest| *newest <= until) else {
                tx.rollback().await?;
                return Ok(added);
            };
            let now = sqlx::query_scalar!(r#"select now() as "now!""#).fetch_one(&mut *tx).await?;
            let upper = next_upper(newest, width, now);
            sqlx::raw_sql(AssertSqlSafe(format!("set local lock_timeout = '{ADD_LOCK_TIMEOUT}'")))
                .execute(&mut *tx)
                .await?;
            self.attach_new(&mut tx, &literal(newest), upper).await?;
            tx.commit().await?;
            added += 1;
        }
    }

    /// Makes an empty bucket of keys from `lower` (a literal, or `minvalue`) to `upper` and attaches it.
    async fn attach_new(&self, conn: &mut PgConnection, lower: &str, upper: DateTime<Utc>) -> StoreResult<()> {
        let name = self.name(upper);
        let ddl = format!(
            "create table {name} (like {parent} including defaults including constraints);
             alter table {name} add constraint {name}_bound check ({key} < {upper});
             alter table {parent} attach partition {name} for values from ({lower}) to ({upper});",
            parent = self.parent,
            key = self.key,
            upper = literal(upper),
        );
        sqlx::raw_sql(AssertSqlSafe(ddl)).execute(&mut *conn).await?;
        sqlx::query!(
            "insert into partition_buckets (parent, partition, upper_bound) values ($1, $2, $3)",
            self.parent,
            name,
            upper,
        )
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// The name of the bucket ending at `upper`.
    fn name(&self, upper: DateTime<Utc>) -> String {
        format!("{}{}", self.prefix, upper.format("%Y%m%dt%H%M%S"))
    }
}

/// The buckets of `parent`, oldest first.
async fn list(conn: &mut PgConnection, parent: &str) -> StoreResult<Vec<Bucket>> {
    let rows = sqlx::query!(
        "select partition, upper_bound from partition_buckets where parent = $1 order by upper_bound",
        parent
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|row| Bucket { name: row.partition, upper: row.upper_bound }).collect())
}

/// `at` as an SQL literal.
fn literal(at: DateTime<Utc>) -> String {
    format!("'{}'", at.to_rfc3339())
}

/// `at` down to a multiple of `width` since the epoch.
fn floor(at: DateTime<Utc>, width: TimeDelta) -> DateTime<Utc> {
    let step = width.num_seconds().max(1);
    DateTime::from_timestamp(at.timestamp().div_euclid(step) * step, 0).unwrap_or(at)
}

/// The upper bound of the bucket after one ending at `newest`: the next multiple of `width` after it, or,
/// when `newest` is in the past, the next after `now` (one bucket closes a gap left while no broker ran).
fn next_upper(newest: DateTime<Utc>, width: TimeDelta, now: DateTime<Utc>) -> DateTime<Utc> {
    floor(newest.max(now), width) + TimeDelta::seconds(width.num_seconds().max(1))
}

/// Whether `error` is PostgreSQL's "lock not available" (`lock_timeout` passed).
fn is_lock_timeout(error: &sqlx::Error) -> bool {
    error.as_database_error().and_then(|e| e.code()).is_some_and(|code| code == "55P03")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn a_new_bucket_ends_on_the_next_multiple_of_its_width() {
        let hour = TimeDelta::hours(1);
        let now = at("2026-12-02T01:20:00Z");
        assert_eq!(next_upper(at("2026-12-02T03:00:00Z"), hour, now), at("2026-12-02T04:00:00Z"));
        assert_eq!(next_upper(at("2026-12-02T03:50:00Z"), hour, now), at("2026-12-02T04:00:00Z"), "never wider");
        let two = TimeDelta::hours(2);
        assert_eq!(next_upper(at("2026-12-02T03:00:00Z"), two, now), at("2026-12-02T04:00:00Z"));
    }

    #[test]
    fn after_a_gap_one_bucket_reaches_past_now() {
        let hour = TimeDelta::hours(1);
        let now = at("2026-12-09T10:20:00Z");
        assert_eq!(next_upper(at("2026-12-02T03:00:00Z"), hour, now), at("2026-12-09T11:00:00Z"));
    }
}
