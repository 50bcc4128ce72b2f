//! How many rows the tables behind upstream's size gauges hold (messages, chunks, spans, events, sessions,
//! session queries), read at each scrape of `/metrics`. A table of up to [`EXACT_UP_TO`] rows is counted
//! exactly, by a count that stops there, so no scrape scans more; a larger one reports the planner's estimate:
//! the rows per page `ANALYZE` (or autovacuum) last measured times the pages the table has now, which follows
//! growth between analyses as the planner does (`pg_class.reltuples` alone would lag behind), and the
//! statistics collector's live-row count where the table was never analysed. `count(*)` of a million rows per
//! scrape, per replica, would be a sequential scan every 15–30 s for a number a dashboard rounds anyway.

use super::StoreResult;
use super::pool::Pool;

/// Tables this large or smaller are counted exactly; each count stops one row past it.
pub const EXACT_UP_TO: i64 = 10_000;

/// `(table, rows)` for each table, in upstream's gauge order.
pub async fn read(pool: &Pool) -> StoreResult<Vec<(String, f64)>> {
    let rows = sqlx::query!(
        r#"select t.kind as "kind!", t.capped as "capped!",
                  (select case when c.reltuples >= 0 and c.relpages > 0
                               then c.reltuples / c.relpages
                                    * (pg_relation_size(c.oid) / current_setting('block_size')::float8)
                               else s.n_live_tup::float8 end
                   from pg_class c left join pg_stat_user_tables s on s.relid = c.oid
                   where c.oid = t.rel) as estimate
           from (values
               (1, 'messages', (select count(*) from (select from messages limit $1) m), 'messages'::regclass),
               (2, 'chunks', (select count(*) from (select from chunks limit $1) m), 'chunks'::regclass),
               (3, 'spans', (select count(*) from (select from spans limit $1) m), 'spans'::regclass),
               (4, 'events', (select count(*) from (select from events limit $1) m), 'events'::regclass),
               (5, 'sessions', (select count(*) from (select from sessions limit $1) m), 'sessions'::regclass),
               (6, 'session_queries', (select count(*) from (select from session_queries limit $1) m),
                'session_queries'::regclass)
           ) as t(position, kind, capped, rel)
           order by t.position"#,
        EXACT_UP_TO + 1,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let rows = if row.capped <= EXACT_UP_TO {
                row.capped as f64
            } else {
                // Never below what was just counted: an estimate from a table that grew since it was analysed.
                row.estimate.unwrap_or(0.0).max(row.capped as f64).round()
            };
            (row.kind, rows)
        })
        .collect())
}
