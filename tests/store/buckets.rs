//! Chunks kept in time buckets (docs/retention.md): a finished stream's chunks go with their bucket, whole,
//! while an open stream's rows are carried out first and read on at the same positions; rows written with
//! plain SQL at any age land in the bucket of their age; the drop gives way to a write made into the bucket
//! after its rows were looked at; and a table of before becomes the partitioned one online, while a
//! writer of the previous version keeps writing.

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicI64, Ordering},
};

use ark_broker::{
    db::{buckets::Dropped, migrate_on, migrate_until, tail::FeedSource, watch::KeyPages},
    streams::{
        model::Line,
        retention::{BUCKETS, StreamKeep},
        store::{Append, ChunkStore},
    },
};
use sqlx::{AssertSqlSafe, PgPool};

/// An hour's retention in buckets of ten minutes.
const KEEP: StreamKeep = StreamKeep { seconds: 3600, bucket_seconds: 600, offset_seconds: 0 };

/// The last migration before the partitioning.
const BEFORE_BUCKETS: i64 = 31;

/// `KEEP` as if it were `seconds` later.
fn later(seconds: i64) -> StreamKeep {
    StreamKeep { offset_seconds: seconds, ..KEEP }
}

async fn store_on(pool: &PgPool) -> ChunkStore {
    migrate_on(pool.acquire().await.expect("a connection").detach()).await.expect("the migrations apply");
    let store = ChunkStore::new(pool.clone().into(), 1);
    store.add_buckets(KEEP).await.expect("the buckets");
    store
}

async fn write(store: &ChunkStore, stream: &str, lines: usize) {
    store.create_streams(&[stream]).await.expect("the stream");
    let chunks = (0..lines).map(|n| Line { text: format!(r#"{{"n":{n}}}"#), event: None }).collect();
    let written = store.append(&[&Append { stream_id: stream.into(), chunks }]).await.expect("flushed");
    assert_eq!(written, [stream]);
}

async fn finish(pool: &PgPool, stream: &str, seconds_ago: i64) {
    sqlx::query("update streams set completed_at = now() - make_interval(secs => $2) where stream_id = $1")
        .bind(stream)
        .bind(seconds_ago as f64)
        .execute(pool)
        .await
        .unwrap();
}

/// (position, sequence, tx, created_at) of every row of `stream`, read as readers do.
async fn read(store: &ChunkStore, stream: &str) -> Vec<(i64, i64, i64, String)> {
    let page = store.key_page(stream, 0).await.expect("a page");
    page.rows.iter().map(|r| (r.position, r.sequence, r.tx, r.created_at.to_rfc3339())).collect()
}

async fn lanes(pool: &PgPool, stream: &str) -> Vec<(i16, i64)> {
    sqlx::query_as("select lane, count(*) from chunks where stream_id = $1 group by lane order by lane")
        .bind(stream)
        .fetch_all(pool)
        .await
        .unwrap()
}

/// Seconds from now until the bucket holding `stream`'s first row is past `KEEP`'s retention and grace,
/// and a few more (the next bucket is due ten minutes later).
async fn seconds_until_due(pool: &PgPool, stream: &str) -> i64 {
    sqlx::query_scalar(
        "select (extract(epoch from b.upper_bound - now()))::bigint + 3600 + 300 + 5
         from chunks c join partition_buckets b on b.partition = c.tableoid::regclass::text
         where c.stream_id = $1 order by c.position limit 1",
    )
    .bind(stream)
    .fetch_one(pool)
    .await
    .unwrap()
}

async fn scalar(pool: &PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

#[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
#[sqlx::test(migrations = false)]
async fn the_buckets_reach_from_the_past_retention_to_ahead_of_now_without_a_gap(pool: PgPool) {
    store_on(&pool).await;
    let bounds: Vec<(String, bool)> = sqlx::query_as(
        "select pg_get_expr(c.relpartbound, c.oid), b.upper_bound > now() - interval '3900 seconds'
         from partition_buckets b join pg_class c on c.relname = b.partition order by b.upper_bound",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(bounds[0].0.contains("FROM (MINVALUE)"), "the oldest takes every age: {bounds:?}");
    assert!(bounds[0].1, "and ends within the retention and the grace of now");
    let past = scalar(&pool, "select count(*) from partition_buckets where upper_bound <= now()").await;
    assert!(past >= 6, "buckets for the past hour, ten minutes each: {bounds:?}");
    let ahead =
        scalar(&pool, "select count(*) from partition_buckets where upper_bound > now() + interval '30 minutes'").await;
    assert!(ahead >= 1, "and buckets ready ahead: {bounds:?}");
    // Each bucket begins where the one before it ends.
    let uppers: Vec<String> = sqlx::query_scalar(
        "select to_char(upper_bound at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS') from partition_buckets order by upper_bound",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    for (bound, upper) in bounds.iter().skip(1).zip(&uppers) {
        assert!(bound.0.contains(&format!("FROM ('{upper}")), "{bound:?} begins at {upper}");
    }
    assert_eq!(
        scalar(&pool, "select count(*) from pg_inherits where inhparent = 'chunks_live'::regclass").await,
        bounds.len() as i64,
        "partition_buckets lists every bucket"
    );
}

#[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
#[sqlx::test(migrations = false)]
async fn a_finished_streams_chunks_go_with_their_bucket_and_an_open_streams_are_carried_and_read_in_place(
    pool: PgPool,
) {
    let store = store_on(&pool).await;
    write(&store, "done", 3).await;
    write(&store, "open", 3).await;
    finish(&pool, "done", 0).await;
    let before = read(&store, "open").await;
    assert_eq!(store.reap_finished(KEEP, 1000).await.unwrap(), 0, "nothing is due yet");
    assert_eq!(read(&store, "done").await.len(), 3);

    // The bucket of now is due once the retention and the grace have passed its end.
    let due = later(seconds_until_due(&pool, "open").await);
    let dropped = store.reap_finished(due, 1000).await.unwrap();
    assert_eq!(dropped, 3 + 1, "the finished stream's three chunks went with their bucket, then its own row");
    assert_eq!(lanes(&pool, "done").await, []);
    assert_eq!(lanes(&pool, "open").await, [(1, 3)], "the open stream's rows were carried out first");
    assert_eq!(read(&store, "open").await, before, "same positions, sequences, transactions and times");
    write(&store, "open", 1).await;
    let after: Vec<i64> = read(&store, "open").await.iter().map(|r| r.0).collect();
    assert_eq!(after, [1, 2, 3, 4], "and the stream goes on where it was");
    // The next bucket now takes every age: a row older than any bucket is taken.
    sqlx::query(
        "insert into chunks (stream_id, position, chunk, bytes, created_at) values ('old', 1, '{}', 2, '2000-01-01')",
    )
    .execute(&pool)
    .await
    .expect("a row of any age is taken");

    assert_eq!(scalar(&pool, "select count(*) from streams where stream_id = 'done'").await, 0);
    // A carried stream's rows go row by row once it is finished and past retention.
    finish(&pool, "open", 0).await;
    assert_eq!(store.reap_finished(due, 1000).await.unwrap(), 3, "its three carried rows");
    assert_eq!(lanes(&pool, "open").await, [(0, 1)], "the row written later waits for its bucket");
}

#[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
#[sqlx::test(migrations = false)]
async fn rows_written_with_plain_sql_land_in_the_bucket_of_their_age_and_go_with_it(pool: PgPool) {
    let store = store_on(&pool).await;
    // A restore: streams finished two hours ago, five minutes ago, one still open, one from 2000.
    sqlx::query(
        "insert into streams (stream_id, created_at, completed_at, last_position) values
           ('due', now() - interval '2 hours 5 minutes', now() - interval '2 hours', 100),
           ('recent', now() - interval '10 minutes', now() - interval '5 minutes', 100),
           ('open', now() - interval '2 hours 5 minutes', null, 100),
           ('ancient', '2000-01-01', '2000-01-01', 1)",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "insert into chunks (stream_id, position, chunk, bytes, created_at)
         select s.stream_id, g, '{\"n\":1}'::json, 7, s.created_at + g * interval '3 seconds'
         from streams s cross join generate_series(1, 100) g where s.stream_id <> 'ancient'
         union all select 'ancient', 1, '{}'::json, 2, '2000-01-01'",
    )
    .execute(&pool)
    .await
    .expect("rows of any age are taken");
    let open = read(&store, "open").await;
    assert_eq!(open.len(), 100);

    // The oldest bucket ends within a bucket of now less the retention and grace: a bucket on, it is due.
    let rows = store.reap_finished(later(600), 1000).await.unwrap();
    assert_eq!(rows, 101 + 2, "the chunks of the stream due two hours ago and of the one of 2000, whole, and the two");
    assert_eq!(lanes(&pool, "due").await, []);
    assert_eq!(lanes(&pool, "ancient").await, []);
    assert_eq!(lanes(&pool, "recent").await, [(0, 100)], "kept: finished within the retention");
    assert_eq!(lanes(&pool, "open").await, [(1, 100)], "kept, carried: still open");
    assert_eq!(read(&store, "open").await, open);
}

#[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
#[sqlx::test(migrations = false)]
async fn a_drop_holds_its_bucket_against_writes_but_not_reads_until_it_is_gone(pool: PgPool) {
    let store = store_on(&pool).await;
    sqlx::query(
        "insert into chunks (stream_id, position, chunk, bytes, created_at) values ('old', 1, '{}', 2, '2000-01-01')",
    )
    .execute(&pool)
    .await
    .unwrap();
    let pool_ref: ark_broker::db::Pool = pool.clone().into();
    let dropping = BUCKETS.start_drop(&pool_ref).await.unwrap().expect("the oldest buckets are free");
    let oldest = dropping.bucket().cloned().unwrap();
    let mut other = pool.acquire().await.unwrap();
    sqlx::query("set lock_timeout = '200ms'").execute(&mut *other).await.unwrap();
    let read: i64 = sqlx::query_scalar(AssertSqlSafe(format!("select count(*) from {}", oldest.name)))
        .fetch_one(&mut *other)
        .await
        .expect("readers go on");
    assert_eq!(read, 1);
    let write = sqlx::query(
        "insert into chunks (stream_id, position, chunk, bytes, created_at) values ('old', 2, '{}', 2, '2000-01-02')",
    )
    .execute(&mut *other)
    .await;
    let code =
        write.expect_err("a write into the bucket waits").into_database_error().unwrap().code().unwrap().into_owned();
    assert_eq!(code, "55P03", "it waited for the drop's lock");
    let fresh = sqlx::query("insert into chunks (stream_id, position, chunk, bytes) values ('new', 1, '{}', 2)")
        .execute(&mut *other)
        .await;
    assert!(fresh.is_ok(), "a write of now goes to its own bucket meanwhile: {fresh:?}");
    assert_eq!(dropping.finish().await.unwrap(), Dropped::Rows(1));
    assert_eq!(lanes(&pool, "old").await, []);
    sqlx::query(
        "insert into chunks (stream_id, position, chunk, bytes, created_at) values ('old', 2, '{}', 2, '2000-01-02')",
    )
    .execute(&pool)
    .await
    .expect("once it is gone the next bucket takes every age");
    drop(store);
}

#[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
#[sqlx::test(migrations = false)]
async fn a_prefilled_table_becomes_partitioned_online_while_a_writer_of_the_previous_version_writes(pool: PgPool) {
    migrate_until(pool.acquire().await.unwrap().detach(), BEFORE_BUCKETS).await.expect("the schema of before");
    sqlx::query(
        "insert into streams (stream_id, created_at, completed_at, last_position)
         select 's' || g, now() - interval '3 hours',
                case when g % 3 = 0 then now() - interval '2 hours' when g % 3 = 1 then now() end, 200
         from generate_series(1, 300) g",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "insert into chunks (stream_id, position, chunk, bytes, created_at)
         select 's' || s, p, '{\"n\":1}', 7, now() - interval '3 hours' + p * interval '1 second'
         from generate_series(1, 300) s cross join generate_series(1, 200) p",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("insert into streams (stream_id) values ('writer')").execute(&pool).await.unwrap();

    // The previous version's writes and reads, as it makes them (prepared, autocommit), all along.
    let (stop, written, failed) =
        (Arc::new(AtomicBool::new(false)), Arc::new(AtomicI64::new(0)), Arc::new(AtomicI64::new(0)));
    let writer = tokio::spawn({
        let (pool, stop, written, failed) = (pool.clone(), stop.clone(), written.clone(), failed.clone());
        async move {
            while !stop.load(Ordering::Relaxed) {
                let position = written.load(Ordering::Relaxed) + 1;
                let wrote = sqlx::query(
                    "insert into chunks (stream_id, position, chunk, bytes, event_type) values ('writer', $1, '{}', 2, null)",
                )
                .bind(position)
                .execute(&pool)
                .await;
                let read = sqlx::query_scalar::<_, i64>(
                    "select count(*) from chunks where stream_id = 'writer' and position > $1",
                )
                .bind(position - 1)
                .fetch_one(&pool)
                .await;
                match (wrote, read) {
                    (Ok(_), Ok(1)) => {
                        written.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    });
    while written.load(Ordering::Relaxed) < 20 {
        tokio::task::yield_now().await;
    }
    migrate_on(pool.acquire().await.unwrap().detach()).await.expect("the partitioning applies");
    let at_switch = written.load(Ordering::Relaxed);
    while written.load(Ordering::Relaxed) < at_switch + 20 {
        tokio::task::yield_now().await;
    }
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();
    assert_eq!(failed.load(Ordering::Relaxed), 0, "no write or read of the previous version failed");
    let written = written.load(Ordering::Relaxed);
    assert_eq!(
        scalar(&pool, "select count(*) from chunks where stream_id = 'writer'").await,
        written,
        "every write kept"
    );
    assert!(scalar(&pool, "select count(*) from chunks where stream_id = 'writer' and lane = 0").await >= 20);
    assert_eq!(scalar(&pool, "select count(*) from chunks where lane = 2 and stream_id <> 'writer'").await, 60_000);

    // The new version: the rows of before go row by row while they are due, then the table whole.
    let store = ChunkStore::new(pool.clone().into(), 1);
    store.add_buckets(KEEP).await.unwrap();
    let open = read(&store, "s2").await;
    let mut reaped = 0;
    loop {
        let n = store.reap_finished(KEEP, 1000).await.unwrap();
        reaped += n;
        if n == 0 {
            break;
        }
    }
    assert_eq!(reaped, 100 * 200 + 100, "the chunks of the 100 streams finished two hours ago, and the streams");
    assert_eq!(scalar(&pool, "select count(*) from chunks where lane = 2 and stream_id <> 'writer'").await, 40_000);
    let after_grace = later(3600 + 300 + 60);
    store.reap_finished(after_grace, 1000).await.unwrap();
    assert_eq!(
        scalar(&pool, "select count(*) from pg_class where relname = 'chunks_before'").await,
        0,
        "dropped whole"
    );
    assert_eq!(lanes(&pool, "s2").await, [(1, 200)], "the open stream's rows carried first");
    assert_eq!(read(&store, "s2").await, open);
    assert_eq!(lanes(&pool, "s1").await, [], "those finished at the upgrade are due by then");
}

#[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
#[sqlx::test(migrations = false)]
async fn a_bucket_analysed_empty_is_read_through_its_index_once_it_fills(pool: PgPool) {
    store_on(&pool).await;
    // What a `vacuumdb --analyze` leaves: every bucket recorded as empty, the one being filled included.
    sqlx::raw_sql("vacuum analyze chunks").execute(&pool).await.expect("vacuum");
    // The request pool's way: each statement planned once, on its first run, and kept.
    let reader = crate::one_connection(&pool, &[("plan_cache_mode", "force_generic_plan")]).await;
    let store = ChunkStore::new(reader.clone().into(), 1);
    let ranges: Vec<_> = (1..=20).map(|s| crate::range(&format!("stream-{s}"), 100, 101)).collect();
    assert!(store.rows_in(&ranges).await.expect("the rows").is_empty());
    assert!(store.key_page("stream-1", 0).await.expect("a page").rows.is_empty());
    // Then the bucket fills, and nothing tells the cached plans.
    sqlx::raw_sql(
        "insert into streams (stream_id, last_position) select 'stream-' || s, 150 from generate_series(1, 400) s;
         insert into chunks (stream_id, position, chunk, bytes)
         select 'stream-' || s, p, '{}'::json, 2 from generate_series(1, 400) s, generate_series(1, 150) p",
    )
    .execute(&pool)
    .await
    .expect("the chunks");
    let before = crate::chunks_read_by_scans(&reader).await;
    let rows = store.rows_in(&ranges).await.expect("the rows");
    assert_eq!(rows.len(), 20, "one row of each stream named");
    assert!(rows.iter().all(|row| row.position == 101));
    assert_eq!(store.key_page("stream-7", 140).await.expect("a page").rows.len(), 10);
    assert!(store.written_after("stream-7", 149, false).await.expect("a look"));
    assert_eq!(crate::chunks_read_by_scans(&reader).await, before, "no chunk read by a sequential scan");
}
