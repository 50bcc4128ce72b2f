//! How many rows the tables behind upstream's size gauges hold (messages, chunks, spans, events, sessions,
//! session queries), read at each scrape of `/metrics`. Each table's size is first estimated as the planner
//! does: the rows per page `ANALYZE` (or autovacuum) last measured times the pages the table has now, which
//! follows growth between analyses (`pg_class.reltuples` alone would lag behind), or the statistics
//! collector's live-row count where the table was never analysed. Only a table estimated small is counted
//! exactly, by a count that stops one row past [`EXACT_UP_TO`]; a larger one reports the estimate without
//! reading a row. `count(*)` of a million rows per scrape, per replica, would be a sequential scan every
//! 15–30 s for a number a dashboard rounds anyway, and even a capped count of a big table reads
//! [`EXACT_UP_TO`] rows per scrape per replica: with many replicas, more than the writes themselves.

use super::StoreResult;
use super::pool::Pool;

/// Tables this large or smaller are counted exactly; each count stops one row past it.
pub const EXACT_UP_TO: i64 = 10_000;

/// Tables estimated this large or smaller are counted: the estimate may be off by a factor, so a table
/// estimated somewhat above [`EXACT_UP_TO`] may still be small enough to count exactly.
const ESTIMATED_SMALL_UP_TO: i64 = 4 * EXACT_UP_TO;

/// `(table, rows)` for each table, in upstream's gauge order.
pub async fn read(pool: &Pool) -> StoreResult<Vec<(String, f64)>> {
    let rows = sqlx::query!(
        r#"select t.kind as "kind!", e.estimate,
                  -- A subquery in a branch not taken is not run: a big table is not read at all.
                  case when coalesce(e.estimate, 0) <= $2 then
                    case t.position
                      when 1 then (select count(*) from (select from messages limit $1) m)
                      when 2 then (select count(*) from (select from chunks limit $1) m)
                      when 3 then (select count(*) from (select from spans limit $1) m)
                      when 4 then (select count(*) from (select from events limit $1) m)
                      when 5 then (select count(*) from (select from sessions limit $1) m)
                      when 6 then (select count(*) from (select from session_queries limit $1) m)
                    end
                  end as capped
           from (values (1, 'messages', 'messages'::regclass), (2, 'chunks', 'chunks'::regclass),
                        (3, 'spans', 'spans'::regclass), (4, 'events', 'events'::regclass),
                        (5, 'sessions', 'sessions'::regclass), (6, 'session_queries', 'session_queries'::regclass)
                ) as t(position, kind, rel)
           -- A partitioned table (chunks) is the sum of its leaves; a plain one is its own only leaf.
           cross join lateral (
             select sum(case when c.reltuples >= 0 and c.relpages > 0
                             then c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::float8)
                             else s.n_live_tup::float8 end) as estimate
             from pg_partition_tree(t.rel) p
             join pg_class c on c.oid = p.relid
             left join pg_stat_user_tables s on s.relid = c.oid
             where p.isleaf
           ) e
           order by t.position"#,
        EXACT_UP_TO + 1,
        (ESTIMATED_SMALL_UP_TO) as f64,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let estimate = row.estimate.unwrap_or(0.0);
            let rows = match row.capped {
                Some(counted) if counted <= EXACT_UP_TO => counted as f64,
                // Never below what was just counted: an estimate from a table that grew since it was analysed.
                Some(counted) => estimate.max(counted as f64).round(),
                None => estimate.round(),
            };
            (row.kind, rows)
        })
        .collect())
}
