//! How long finished streams are kept, at a cost that follows what goes, not what is kept: chunks live in
//! time buckets of `created_at` ([`crate::db::buckets`]), and a bucket goes whole once every stream with rows
//! in it is past the retention (docs/retention.md). A stream still open then (or finished too recently) has
//! its rows in that bucket carried to lane 1 first, once the bucket is half a bucket past due, so a stream
//! open for days pins nothing; lane 1, and lane 2 (the rows of before the partitioning), are deleted row by
//! row, as every chunk was before. A stream's own row goes once none of its chunks is left.

use chrono::{DateTime, TimeDelta, Utc};
use sqlx::PgConnection;
use tokio_util::sync::CancellationToken;

use super::ChunkStore;
use crate::db::{
    StoreResult,
    buckets::{self, Buckets, Dropped},
};

/// Chunks' buckets.
pub const BUCKETS: Buckets =
    Buckets { parent: "chunks_live", prefix: "chunks_until_", key: "created_at", lock: 0x61_72_6b_20 };

/// Buckets kept ready ahead of now, so writes never wait for one (and a previous version of the broker,
/// which adds none, can write for this many buckets' time).
pub const BUCKETS_AHEAD: i32 = 4;

/// What is kept of streams.
#[derive(Debug, Clone, Copy)]
pub struct StreamKeep {
    /// How long a completed or aborted stream is kept.
    pub seconds: i64,
    /// How much time one bucket holds.
    pub bucket_seconds: i64,
    /// Decisions are made as if now were this much later (tests age the reaper instead of the rows); 0.
    pub offset_seconds: i64,
}

impl StreamKeep {
    fn retention(&self) -> TimeDelta {
        TimeDelta::seconds(self.seconds)
    }

    fn bucket(&self) -> TimeDelta {
        TimeDelta::seconds(self.bucket_seconds)
    }

    /// How long past due a bucket waits for its late streams to finish before their rows are carried out.
    fn grace(&self) -> TimeDelta {
        self.bucket() / 2
    }
}

impl ChunkStore {
    /// Adds the buckets that should be ready by now (every replica, at start-up and then often); returns
    /// how many were added.
    pub async fn add_buckets(&self, keep: StreamKeep) -> StoreResult<usize> {
        let now = self.now(keep).await?;
        let mut added = 0;
        let layout = sqlx::query_scalar!(
            r#"select before_since as "since!" from partition_horizons
               where parent = 'chunks_live' and past_from is null and before_since is not null"#
        )
        .fetch_optional(self.pool())
        .await?;
        if let Some(since) = layout {
            // Rows written since the layout began, by this version or the previous one (whose transactions
            // may have begun a little before).
            let first_key = since - TimeDelta::minutes(5);
            let from = now - keep.retention() - keep.grace();
            let laid = BUCKETS.lay_out(self.pool(), keep.bucket(), from, first_key).await;
            added += said("laying the chunk buckets out", laid);
        }
        let until = now + keep.bucket() * BUCKETS_AHEAD;
        Ok(added + BUCKETS.add_until(self.pool(), keep.bucket(), until).await?)
    }

    /// How long the oldest bucket is past the time it should have gone by (0 while none is): what the
    /// retention alert watches.
    pub async fn retention_overdue(&self, keep: StreamKeep) -> StoreResult<TimeDelta> {
        let now = self.now(keep).await?;
        let oldest = BUCKETS.list(self.pool()).await?.into_iter().next();
        let due = oldest.map(|bucket| bucket.upper + keep.retention() + keep.grace());
        Ok(due.map_or(TimeDelta::zero(), |due| (now - due).max(TimeDelta::zero())))
    }

    /// One reaper step: drops every bucket that is due, deletes up to `limit` rows of lanes 1 and 2 whose
    /// streams are past retention, drops lane 2 once it may go, and deletes up to `limit` streams with no
    /// chunk left; returns how many rows went. Each part goes on when another fails (and says so).
    pub async fn reap_finished(&self, keep: StreamKeep, limit: i64) -> StoreResult<usize> {
        let dropped = said("dropping due chunk buckets", self.drop_due_buckets(keep).await);
        let rows = said("deleting carried chunks", self.reap_lane_rows(keep, limit).await);
        let before = said("dropping the chunks of before the partitioning", self.drop_lane_before(keep).await);
        let streams = self.reap_streams(keep, limit).await?;
        Ok(dropped + rows + before + streams)
    }

    /// Drops the oldest buckets while they are due; returns the rows that went.
    async fn drop_due_buckets(&self, keep: StreamKeep) -> StoreResult<usize> {
        let mut rows = 0;
        loop {
            let now = self.now(keep).await?;
            let oldest = BUCKETS.list(self.pool()).await?.into_iter().next();
            if oldest.is_none_or(|oldest| oldest.upper + keep.retention() > now) {
                return Ok(rows);
            }
            // Held against writes from here: what the look sees is what goes.
            let Some(mut dropping) = BUCKETS.start_drop(self.pool()).await? else { return Ok(rows) };
            let Some(bucket) = dropping.bucket().cloned() else { return Ok(rows) };
            if bucket.upper + keep.retention() > now {
                return Ok(rows);
            }
            let undue = undue_streams(dropping.conn(), Lane::Live(bucket.upper), keep).await?;
            if !undue.is_empty() && bucket.upper + keep.retention() + keep.grace() > now {
                return Ok(rows);
            }
            carry(dropping.conn(), Lane::Live(bucket.upper), &undue).await?;
            match dropping.finish().await? {
                Dropped::Rows(n) => rows += n as usize,
                Dropped::NotNow => return Ok(rows),
            }
        }
    }

    /// Deletes up to `limit` rows of lanes 1 and 2 whose streams are past retention.
    async fn reap_lane_rows(&self, keep: StreamKeep, limit: i64) -> StoreResult<usize> {
        let any = sqlx::query_scalar!(r#"select exists (select 1 from chunks where lane <> 0) as "any!""#)
            .fetch_one(self.pool())
            .await?;
        if !any {
            return Ok(0);
        }
        // From the finished streams to their chunks through the stream's index: a join let the planner scan
        // every chunk for the few streams that are due.
        let deleted = sqlx::query!(
            "delete from chunks where lane <> 0 and sequence_number in (
               select c.sequence_number
               from (select stream_id from streams
                     where coalesce(completed_at, aborted_at)
                           < now() + make_interval(secs => $1::bigint) - make_interval(secs => $2::bigint)) s
               cross join lateral (select sequence_number from chunks where lane <> 0 and stream_id = s.stream_id
                                   limit $3 for update skip locked) c
               limit $3)",
            keep.offset_seconds,
            keep.seconds,
            limit,
        )
        .execute(self.pool())
        .await?
        .rows_affected();
        Ok(deleted as usize)
    }

    /// Deletes up to `limit` streams past retention none of whose chunks is left. Only streams that finished
    /// before the last dropped bucket's bound (or before the partitioning) are looked at: the others still
    /// have rows in a bucket. They are locked first and looked at after, in a statement of its own: a write
    /// that committed before the lock is seen, and one after it waits (a stream row deleted while its chunks
    /// remain would let the id start again at position 1 beside them).
    async fn reap_streams(&self, keep: StreamKeep, limit: i64) -> StoreResult<usize> {
        let mut tx = self.pool().begin().await?;
        let candidates = sqlx::query_scalar!(
            "select s.stream_id from streams s
             where coalesce(s.completed_at, s.aborted_at)
                     < now() + make_interval(secs => $1::bigint) - make_interval(secs => $2::bigint)
               and coalesce(s.completed_at, s.aborted_at)
                     < (select coalesce(greatest(dropped_before, before_since), '-infinity')
                        from partition_horizons where parent = 'chunks_live')
             limit $3 for update skip locked",
            keep.offset_seconds,
            keep.seconds,
            limit,
        )
        .fetch_all(&mut *tx)
        .await?;
        if candidates.is_empty() {
            return Ok(0);
        }
        let deleted = sqlx::query!(
            "delete from streams s where s.stream_id = any($1)
               and not exists (select 1 from chunks c where c.stream_id = s.stream_id)",
            &candidates,
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(deleted as usize)
    }

    /// Drops lane 2 (the table of before the partitioning) once it is empty, or once every stream that
    /// could still be written in it is past retention and a grace (its undue streams' rows carried to lane
    /// 1 first); returns the rows that went.
    async fn drop_lane_before(&self, keep: StreamKeep) -> StoreResult<usize> {
        let Some(since) = sqlx::query_scalar!(
            r#"select h.before_since as "since!" from partition_horizons h
               where h.parent = 'chunks_live' and h.before_since is not null
                 and to_regclass('chunks_before') is not null"#
        )
        .fetch_optional(self.pool())
        .await?
        else {
            return Ok(0);
        };
        let now = self.now(keep).await?;
        let empty = !sqlx::query_scalar!(r#"select exists (select 1 from chunks where lane = 2) as "any!""#)
            .fetch_one(self.pool())
            .await?;
        if !empty && since + keep.retention() + keep.grace() > now {
            return Ok(0);
        }
        let Some(mut dropping) = buckets::drop_partition(self.pool(), "chunks", "chunks_before").await? else {
            return Ok(0);
        };
        let undue = undue_streams(dropping.conn(), Lane::Before, keep).await?;
        carry(dropping.conn(), Lane::Before, &undue).await?;
        match dropping.finish().await? {
            Dropped::Rows(rows) => Ok(rows as usize),
            Dropped::NotNow => Ok(0),
        }
    }

    /// Analyses the buckets recorded as (nearly) empty that now hold rows: a plan cached while a bucket was
    /// recorded empty (a `VACUUM ANALYZE` of the buckets ahead) seq-scans it, and every keyed read then reads
    /// all its rows. The new statistics make PostgreSQL plan again with its size (once: a bucket recorded
    /// with some rows already gets index scans). A bucket never analysed is planned by its size already.
    pub async fn analyze_grown_buckets(&self) -> StoreResult<usize> {
        let grown = sqlx::query_scalar!(
            r#"select c.relname::text as "name!" from partition_buckets b join pg_class c on c.relname = b.partition
               where b.parent = 'chunks_live' and c.reltuples >= 0 and c.relpages < 8
                 and pg_relation_size(c.oid) / current_setting('block_size')::int >= 32"#
        )
        .fetch_all(self.pool())
        .await?;
        for name in &grown {
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("analyze {name}"))).execute(self.pool()).await?;
        }
        Ok(grown.len())
    }

    /// PostgreSQL's now, moved on by the offset.
    async fn now(&self, keep: StreamKeep) -> StoreResult<DateTime<Utc>> {
        Ok(sqlx::query_scalar!(r#"select now() + make_interval(secs => $1::bigint) as "now!""#, keep.offset_seconds)
            .fetch_one(self.pool())
            .await?)
    }
}

/// Where rows are carried out of: the oldest bucket (every key below its bound), or lane 2.
#[derive(Debug, Clone, Copy)]
enum Lane {
    Live(DateTime<Utc>),
    Before,
}

impl Lane {
    /// The lane, and the bound its rows' `created_at` are below.
    fn bounds(self) -> (i16, DateTime<Utc>) {
        match self {
            Lane::Live(upper) => (0, upper),
            // The end of year 9999: above any `created_at` a restore writes.
            Lane::Before => (2, DateTime::from_timestamp(253_402_300_799, 0).unwrap_or(DateTime::<Utc>::MAX_UTC)),
        }
    }
}

/// Streams with rows in `lane` that must stay: open, or finished within the retention.
async fn undue_streams(conn: &mut PgConnection, lane: Lane, keep: StreamKeep) -> StoreResult<Vec<String>> {
    let (lane, below) = lane.bounds();
    // The lane's streams one index probe each (a loose scan), not one entry per chunk.
    Ok(sqlx::query_scalar!(
        r#"with recursive ids(id) as (
             (select stream_id from chunks where lane = $4 and created_at < $1 order by stream_id limit 1)
             union all
             select (select c.stream_id from chunks c
                     where c.lane = $4 and c.created_at < $1 and c.stream_id > ids.id
                     order by c.stream_id limit 1)
             from ids where ids.id is not null)
           select s.stream_id as "stream_id!" from ids join streams s on s.stream_id = ids.id
           where coalesce(s.completed_at, s.aborted_at) is null
              or coalesce(s.completed_at, s.aborted_at)
                   >= now() + make_interval(secs => $2::bigint) - make_interval(secs => $3::bigint)"#,
        below,
        keep.offset_seconds,
        keep.seconds,
        lane,
    )
    .fetch_all(conn)
    .await?)
}

/// Carries the rows of `streams` out of `lane` into lane 1, a few hundred streams a statement: they keep
/// every column, so readers notice nothing.
async fn carry(conn: &mut PgConnection, lane: Lane, streams: &[String]) -> StoreResult<()> {
    let (lane, below) = lane.bounds();
    for some in streams.chunks(500) {
        sqlx::query!(
            "update chunks set lane = 1 where lane = $1 and created_at < $2 and stream_id = any($3)",
            lane,
            below,
            some,
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// `result`'s count, or 0 after saying what failed.
fn said(what: &str, result: StoreResult<usize>) -> usize {
    result.unwrap_or_else(|error| {
        tracing::warn!(error = %crate::telemetry::chain(&error), "{what} failed");
        0
    })
}

/// How often a replica looks for buckets grown past what their statistics say.
const STATISTICS_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Adds buckets ahead now (a replica does before it serves), then every so often until `cancel` fires, on
/// every replica whether or not it reaps: writes must always find their bucket.
pub async fn keep_buckets_ready(
    store: ChunkStore,
    keep: StreamKeep,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    add_buckets_or_say(&store, keep).await;
    let every = std::time::Duration::from_secs((keep.bucket_seconds as u64 / 4).clamp(1, 60));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut look = tokio::time::interval(STATISTICS_EVERY);
        look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => add_buckets_or_say(&store, keep).await,
                _ = look.tick() => {
                    if let Err(error) = store.analyze_grown_buckets().await {
                        tracing::warn!(error = %crate::telemetry::chain(&error), "cannot analyze chunk buckets");
                    }
                }
            }
        }
    })
}

async fn add_buckets_or_say(store: &ChunkStore, keep: StreamKeep) {
    match store.add_buckets(keep).await {
        Ok(0) => {}
        Ok(added) => tracing::info!(added, "chunk buckets added"),
        Err(error) => tracing::warn!(error = %crate::telemetry::chain(&error), "cannot add chunk buckets"),
    }
}
