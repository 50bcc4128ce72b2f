//! Dropping a partition whole, in one transaction in two steps. First the partition is held against writes
//! (EXCLUSIVE: readers go on; only a restore writes into a partition this old), and the caller looks at what
//! it holds and carries out what must stay, on [`Dropping::conn`]: nothing written after that look can be
//! lost. Then [`Dropping::finish`] takes the parent's lock for the few milliseconds the DDL takes (readers and
//! writers of the table wait that long) and drops it. For the oldest bucket, the next one is detached and
//! attached again from minus infinity in the same transaction, so no key is ever without a bucket.
//!
//! Either lock not free in time ends the attempt with [`Dropped::NotNow`], the carry undone with it: the
//! reaper's next pass tries again. The first waits 2 s (autovacuum on the partition is cancelled for it after
//! PostgreSQL's `deadlock_timeout`, 1 s), the parent's only half a second, as everyone queues behind it.

use sqlx::{AssertSqlSafe, PgConnection, Postgres, Transaction};

use super::{Bucket, Buckets, is_lock_timeout, list, literal};
use crate::db::{Pool, StoreResult};

/// How long the drop waits for the partition's lock.
const HOLD_LOCK_TIMEOUT: &str = "2s";
/// How long it waits for the parent's lock.
const PARENT_LOCK_TIMEOUT: &str = "500ms";
/// Partitions estimated to hold more rows than this are not counted (their estimate is reported).
const COUNT_UP_TO: f32 = 1_000_000.0;

/// What an attempt to drop a partition did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// It is gone, with this many rows (counted, or PostgreSQL's estimate for a large one).
    Rows(i64),
    /// Not now: a lock was not free in time, or it is no longer the oldest.
    NotNow,
}

/// A drop under way: a transaction holding the partition against writes.
#[derive(Debug)]
pub struct Dropping {
    tx: Transaction<'static, Postgres>,
    parent: &'static str,
    partition: String,
    /// For a bucket: the next one, attached again from minus infinity.
    next: Option<Bucket>,
    /// For a bucket: the bucket itself, whose bound `partition_horizons` records once it is gone.
    first: Option<Bucket>,
}

impl Buckets {
    /// Starts dropping the oldest bucket, if another follows it; `None` if they are not free in time.
    pub async fn start_drop(&self, pool: &Pool) -> StoreResult<Option<Dropping>> {
        let mut tx = pool.begin().await?;
        let buckets = list(&mut tx, self.parent).await?;
        let [first, next, ..] = buckets.as_slice() else { return Ok(None) };
        let lock = format!(
            "set local lock_timeout = '{HOLD_LOCK_TIMEOUT}'; lock table only {}, {} in exclusive mode;",
            first.name, next.name
        );
        if !locked(&mut tx, lock).await? {
            return Ok(None);
        }
        let partition = first.name.clone();
        Ok(Some(Dropping { tx, parent: self.parent, partition, next: Some(next.clone()), first: Some(first.clone()) }))
    }
}

/// Starts dropping `partition`, a partition of `parent` that is no bucket (chunks' lane of before the
/// partitioning); `None` if it is not free in time.
pub async fn drop_partition(pool: &Pool, parent: &'static str, partition: &str) -> StoreResult<Option<Dropping>> {
    let mut tx = pool.begin().await?;
    let lock =
        format!("set local lock_timeout = '{HOLD_LOCK_TIMEOUT}'; lock table only {partition} in exclusive mode;");
    if !locked(&mut tx, lock).await? {
        return Ok(None);
    }
    Ok(Some(Dropping { tx, parent, partition: partition.to_owned(), next: None, first: None }))
}

impl Dropping {
    /// The transaction, to look at the partition and carry out what must stay.
    pub fn conn(&mut self) -> &mut PgConnection {
        &mut self.tx
    }

    /// The oldest bucket being dropped (for a bucket's drop).
    pub fn bucket(&self) -> Option<&Bucket> {
        self.first.as_ref()
    }

    /// Drops the partition; returns its rows.
    pub async fn finish(mut self) -> StoreResult<Dropped> {
        let (parent, partition) = (self.parent, self.partition.clone());
        let estimate: Option<f32> = sqlx::query_scalar!("select reltuples from pg_class where relname = $1", partition)
            .fetch_optional(&mut *self.tx)
            .await?;
        let rows = match estimate {
            Some(estimate) if estimate > COUNT_UP_TO => estimate as i64,
            _ => {
                let count = format!("select count(*) from {partition}");
                sqlx::query_scalar::<_, i64>(AssertSqlSafe(count)).fetch_one(&mut *self.tx).await?
            }
        };
        let lock = format!(
            "set local lock_timeout = '{PARENT_LOCK_TIMEOUT}'; lock table only {parent} in access exclusive mode;"
        );
        if !locked(&mut self.tx, lock).await? {
            return Ok(Dropped::NotNow);
        }
        let mut ddl = format!("alter table {parent} detach partition {partition}; drop table {partition};");
        if let Some(next) = &self.next {
            ddl += &format!(
                "alter table {parent} detach partition {name};
                 alter table {parent} attach partition {name} for values from (minvalue) to ({upper});",
                name = next.name,
                upper = literal(next.upper),
            );
        }
        match sqlx::raw_sql(AssertSqlSafe(ddl)).execute(&mut *self.tx).await {
            Ok(_) => {}
            Err(error) if is_lock_timeout(&error) => return Ok(Dropped::NotNow),
            Err(error) => return Err(error.into()),
        }
        if let Some(bucket) = &self.first {
            sqlx::query!("delete from partition_buckets where partition = $1", bucket.name)
                .execute(&mut *self.tx)
                .await?;
            sqlx::query!(
                "insert into partition_horizons (parent, dropped_before) values ($1, $2)
                 on conflict (parent) do update set dropped_before = excluded.dropped_before",
                parent,
                bucket.upper,
            )
            .execute(&mut *self.tx)
            .await?;
        }
        self.tx.commit().await?;
        Ok(Dropped::Rows(rows))
    }
}

/// Runs `lock` (a `set local lock_timeout` and a `lock table`) on `conn`: false if the lock was not free in
/// time (the transaction is then failed: the caller drops it, which rolls it back).
async fn locked(conn: &mut PgConnection, lock: String) -> StoreResult<bool> {
    match sqlx::raw_sql(AssertSqlSafe(lock)).execute(conn).await {
        Ok(_) => Ok(true),
        Err(error) if is_lock_timeout(&error) => Ok(false),
        Err(error) => Err(error.into()),
    }
}
