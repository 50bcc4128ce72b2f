//! The size gauges' reading (`db::sizes`) against a real PostgreSQL: a small table is counted exactly, a big
//! one is estimated without reading a row of it, which PostgreSQL's own counters show.

use ark_broker::db::sizes::{self, EXACT_UP_TO};
use sqlx::PgPool;

use crate::{chunks_read_by_scans, migrated, one_connection};

async fn chunks_gauge(pool: &PgPool) -> f64 {
    let sizes = sizes::read(&pool.clone().into()).await.unwrap();
    sizes.into_iter().find(|(table, _)| table == "chunks").expect("a chunks gauge").1
}

async fn insert_chunks(pool: &PgPool, from: i64, to: i64) {
    sqlx::query(
        "insert into chunks (stream_id, position, chunk, bytes)
         select 's', g, '{}'::json, 2 from generate_series($1::bigint, $2::bigint) g",
    )
    .bind(from)
    .bind(to)
    .execute(pool)
    .await
    .unwrap();
}

#[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
#[sqlx::test(migrations = false)]
async fn a_small_table_is_counted_exactly_and_a_big_one_estimated_without_reading_it(pool: PgPool) {
    migrated(&pool).await;
    let pool = one_connection(&pool, &[]).await;
    sqlx::query("insert into streams (stream_id) values ('s')").execute(&pool).await.unwrap();
    insert_chunks(&pool, 1, 3).await;
    let before = chunks_read_by_scans(&pool).await;
    assert_eq!(chunks_gauge(&pool).await, 3.0, "a small table is counted");
    assert_eq!(chunks_read_by_scans(&pool).await - before, 3, "by reading its rows, which the counters show");

    let big = 10 * EXACT_UP_TO;
    insert_chunks(&pool, 4, big).await;
    sqlx::query("analyze chunks").execute(&pool).await.unwrap();
    let before = chunks_read_by_scans(&pool).await;
    let gauge = chunks_gauge(&pool).await;
    assert!((gauge - big as f64).abs() <= big as f64 * 0.05, "a big table is estimated: {gauge} for {big} rows");
    assert_eq!(chunks_read_by_scans(&pool).await, before, "without reading a row of it");
}
