//! SQL for spans. One export request is one transaction: each trace it touches takes its next positions
//! from the trace's counter row (see [`crate::db::feed`]); every read hides expired spans.

use crate::db::pool::Pool;
use std::collections::HashMap;

use super::model::{NewSpan, SpanRecord, Trace};
use crate::db::{
    self, StoreResult,
    feed::{Feed, GlobalCursor},
    follow::{BATCH, BATCH_BYTES, Page},
    notice::{self, KeyRange},
    raw_json,
    retry::{Attempt, Retries, in_feed_tx},
    tail::FeedSource,
    watch::{KeyPages, WatchSource},
};

/// Spans in Postgres.
#[derive(Debug, Clone)]
pub struct SpanStore {
    pool: Pool,
}

/// A page of traces, newest first.
#[derive(Debug)]
pub struct TracePage {
    /// The traces, each with its (matching) spans.
    pub traces: Vec<Trace>,
    /// How many traces match.
    pub total: i64,
    /// The first sequence of each trace, in page order (the cursor of the next page is the last one's).
    pub firsts: Vec<i64>,
}

/// Builds a [`SpanRecord`] from a row of any query selecting the span columns.
macro_rules! record {
    ($row:expr) => {
        SpanRecord {
            span: raw_json($row.span)?,
            trace_id: $row.trace_id,
            session_id: $row.session_id,
            sequence: $row.sequence_number,
            position: $row.position,
            tx: $row.tx,
            bytes: $row.bytes,
        }
    };
}

impl SpanStore {
    /// A store on `pool`.
    pub fn new(pool: Pool) -> Self {
        SpanStore { pool }
    }

    /// Stores `spans` in order, expiring after `ttl_seconds`; readers on every replica see them once this
    /// returns.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn append(&self, spans: &[NewSpan], ttl_seconds: i64) -> StoreResult<()> {
        if spans.is_empty() {
            return Ok(());
        }
        let column = |f: fn(&NewSpan) -> Option<String>| spans.iter().map(f).collect::<Vec<_>>();
        let trace_ids: Vec<String> = spans.iter().map(|s| s.trace_id.clone()).collect();
        let (span_ids, parents, names) =
            (column(|s| s.span_id.clone()), column(|s| s.parent_span_id.clone()), column(|s| s.name.clone()));
        let (sessions, queries) = (column(|s| s.session_id.clone()), column(|s| s.query_name.clone()));
        let starts: Vec<_> = spans.iter().map(|s| s.start_time).collect();
        let ends: Vec<_> = spans.iter().map(|s| s.end_time).collect();
        let bodies: Vec<_> = spans.iter().map(|s| s.span.clone()).collect();
        in_feed_tx!(&self.pool, Feed::Spans, Retries::claim("trace"), |tx| async {
            let outcome = sqlx::query!(
                r#"with batch as (
                     select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                                          $7::timestamptz[], $8::timestamptz[], $9::jsonb[]) with ordinality
                       as b(trace_id, span_id, parent_span_id, name, session_id, query_name, start_time, end_time,
                            span, ord)
                   ), counts as (
                     select trace_id, count(*) as n from batch group by trace_id
                   ), claimed as (
                     -- In trace order, so two exports of the same traces lock them in the same order.
                     insert into traces as t (trace_id, last_position, last_tx)
                     select trace_id, n, pg_current_xact_id() from counts order by trace_id
                     on conflict (trace_id) do update
                       set last_position = t.last_position + excluded.last_position, last_tx = excluded.last_tx
                       where t.last_tx < excluded.last_tx
                     returning t.trace_id, t.last_position
                   ), inserted as (
                     insert into spans (trace_id, span_id, parent_span_id, name, session_id, query_name, start_time,
                                        end_time, span, expires_at, position, bytes)
                     select b.trace_id, b.span_id, b.parent_span_id, b.name, b.session_id, b.query_name,
                            b.start_time, b.end_time, b.span, now() + make_interval(secs => $10::bigint),
                            c.last_position - k.n + row_number() over (partition by b.trace_id order by b.ord),
                            octet_length(b.span::text)
                     from batch b join claimed c using (trace_id) join counts k using (trace_id)
                     order by b.ord
                     returning 1
                   )
                   select (select count(*) from counts) as "traces!",
                          array(select c.trace_id from claimed c order by c.trace_id) as "trace_ids!",
                          array(select c.last_position - k.n from claimed c join counts k using (trace_id)
                                order by c.trace_id) as "afters!",
                          array(select c.last_position from claimed c order by c.trace_id) as "lasts!""#,
                &trace_ids,
                &span_ids as &[Option<String>],
                &parents as &[Option<String>],
                &names as &[Option<String>],
                &sessions as &[Option<String>],
                &queries as &[Option<String>],
                &starts as &[Option<chrono::DateTime<chrono::Utc>>],
                &ends as &[Option<chrono::DateTime<chrono::Utc>>],
                &bodies,
                ttl_seconds,
            )
            .fetch_one(tx.conn())
            .await?;
            if outcome.trace_ids.len() as i64 != outcome.traces {
                // A writer whose transaction started after ours wrote one of these traces first.
                return Ok(Attempt::Retry);
            }
            for ((trace_id, after), last) in outcome.trace_ids.iter().zip(&outcome.afters).zip(&outcome.lasts) {
                tx.wrote_key(trace_id, *after, *last);
            }
            Ok(Attempt::Commit(()))
        })
    }

    /// Up to `limit` traces (of one session: only its spans) whose first span arrived before sequence
    /// `before`, newest first, with how many traces match in all.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn page(&self, session_id: Option<&str>, before: i64, limit: i64) -> StoreResult<TracePage> {
        let mut tx = self.pool.begin().await?;
        db::plan_per_execution(&mut tx).await?;
        let heads = sqlx::query!(
            r#"with firsts as (
                 select trace_id, min(sequence_number) as first from spans
                 where expires_at > now() and ($1::text is null or session_id = $1)
                 group by trace_id
               )
               select (select count(*) from firsts) as "total!", f.trace_id as "trace_id?", f.first as "first?"
               from (select 1) one
               left join lateral (select * from firsts where first < $2 order by first desc limit $3) f on true
               order by f.first desc"#,
            session_id,
            before,
            limit,
        )
        .fetch_all(&mut *tx)
        .await?;
        let total = heads.first().map_or(0, |row| row.total);
        let (ids, firsts): (Vec<String>, Vec<i64>) =
            heads.into_iter().filter_map(|row| Some((row.trace_id?, row.first?))).unzip();
        let rows = sqlx::query!(
            r#"select trace_id, span::text as "span!" from spans
               where trace_id = any($1) and expires_at > now() and ($2::text is null or session_id = $2)
               order by sequence_number"#,
            &ids,
            session_id,
        )
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let index: HashMap<&str, usize> = ids.iter().enumerate().map(|(n, id)| (id.as_str(), n)).collect();
        let mut spans: Vec<Vec<_>> = ids.iter().map(|_| Vec::new()).collect();
        for row in rows {
            if let Some(&n) = index.get(row.trace_id.as_str()) {
                spans[n].push(raw_json(row.span)?);
            }
        }
        let traces = ids.into_iter().zip(spans).map(|(trace_id, spans)| Trace { trace_id, spans }).collect();
        Ok(TracePage { traces, total, firsts })
    }

    /// One trace's visible spans, in the order they arrived.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn trace(&self, trace_id: &str) -> StoreResult<Vec<Box<serde_json::value::RawValue>>> {
        let rows = sqlx::query_scalar!(
            r#"select span::text as "span!" from spans where trace_id = $1 and expires_at > now()
               order by sequence_number"#,
            trace_id
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(raw_json).collect()
    }

    /// Deletes every span.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delete_all(&self) -> StoreResult<()> {
        sqlx::query!("delete from spans").execute(&self.pool).await?;
        Ok(())
    }

    /// Deletes up to `limit` of the oldest spans beyond `max_bytes` (their `bytes` summed from the newest; the
    /// newest is always kept), reading only the oldest `limit` rows. Returns how many.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delete_over_budget(&self, max_bytes: i64, limit: i64) -> StoreResult<u64> {
        let deleted = sqlx::query!(
            // The table's bytes are its changes added up (migration 0036): the pass keeps their sum as one
            // row and reads the oldest rows alone, as many as it may delete, not the table.
            r#"with counted as (delete from byte_totals where feed = 'spans' returning bytes),
                    total as (select coalesce(sum(bytes), 0)::bigint as bytes from counted),
                    kept as (insert into byte_totals (feed, bytes) select 'spans', bytes from total),
                    oldest as (select sequence_number, bytes, sum(bytes) over (order by sequence_number) as running
                               from spans order by sequence_number limit $2)
               -- An array, so the rows are deleted through the key's index whatever the plan guesses.
               delete from spans where sequence_number = any(array(
                 select o.sequence_number from oldest o, total t
                 where t.bytes - (o.running - o.bytes) > $1
                   and o.sequence_number < (select max(sequence_number) from spans)))"#,
            max_bytes,
            limit,
        )
        .execute(&self.pool)
        .await?;
        Ok(deleted.rows_affected())
    }

    /// Deletes up to `limit` expired spans, then up to `limit` of the oldest beyond `max_rows` (0: no cap);
    /// replicas reaping at once skip each other's rows.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn reap(&self, max_rows: i64, limit: i64) -> StoreResult<usize> {
        let expired = sqlx::query!(
            "delete from spans where sequence_number in (
               select sequence_number from spans where expires_at <= now()
               order by expires_at limit $1 for update skip locked)",
            limit,
        )
        .execute(&self.pool)
        .await?
        .rows_affected();
        if max_rows <= 0 {
            return Ok(expired as usize);
        }
        let over = sqlx::query!(
            "delete from spans where sequence_number in (
               select sequence_number from spans
               where sequence_number <= (select sequence_number from spans order by sequence_number desc
                                         offset $1 limit 1)
               order by sequence_number limit $2 for update skip locked)",
            max_rows,
            limit,
        )
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok((expired + over) as usize)
    }
}

impl FeedSource for SpanStore {
    type Row = SpanRecord;

    async fn rows_of(&self, txs: &[i64]) -> StoreResult<Vec<SpanRecord>> {
        let txs: Vec<String> = txs.iter().map(i64::to_string).collect();
        let rows = sqlx::query!(
            r#"select sequence_number, trace_id, session_id, span::text as "span!", position,
                      tx::text::bigint as "tx!", bytes
               from spans where tx = any($1::text[]::xid8[]) order by tx, sequence_number"#,
            &txs,
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(|row| Ok(record!(row))).collect()
    }

    async fn rows_in(&self, ranges: &[KeyRange]) -> StoreResult<Vec<SpanRecord>> {
        let (keys, afters, lasts) = notice::columns(ranges);
        let rows = sqlx::query!(
            r#"select s.sequence_number, s.trace_id, s.session_id, s.span::text as "span!", s.position,
                      s.tx::text::bigint as "tx!", s.bytes
               from unnest($1::text[], $2::bigint[], $3::bigint[]) with ordinality as r(k, after, last, ord)
               cross join lateral (
                 select * from spans where trace_id = r.k and position > r.after and position <= r.last
                 order by position limit greatest(r.last - r.after, 0)
               ) s
               order by r.ord, s.position"#,
            &keys as &[&str],
            &afters,
            &lasts,
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(|row| Ok(record!(row))).collect()
    }

    async fn global_page(&self, after: GlobalCursor) -> StoreResult<Page<SpanRecord, GlobalCursor>> {
        let rows = sqlx::query!(
            r#"with h as (select pg_snapshot_xmin(pg_current_snapshot()) as horizon,
                          ark_broker_current_epoch() as epoch)
               select h.horizon::text::bigint as "horizon!", h.epoch as "epoch?", s.sequence_number as "sequence_number?",
                      s.trace_id as "trace_id?", s.session_id, s.span::text as "span?",
                      s.position as "position?", s.tx::text::bigint as "tx?", s.bytes as "bytes?"
               from h left join lateral (
                 select *, sum(bytes) over (order by tx, sequence_number) as running from spans
                 where (tx, sequence_number) > ($1::text::xid8, $2) and tx < h.horizon
                 order by tx, sequence_number limit $3
               ) s on s.running - s.bytes < $4
               order by s.tx, s.sequence_number"#,
            after.tx.to_string(),
            after.sequence,
            BATCH,
            BATCH_BYTES,
        )
        .fetch_all(&self.pool)
        .await?;
        let horizon = rows.first().map_or(after.tx, |row| row.horizon);
        let epoch = rows.first().and_then(|row| row.epoch);
        let mut records = Vec::with_capacity(rows.len());
        for row in rows {
            let (Some(sequence), Some(trace_id), Some(span), Some(position), Some(tx), Some(bytes)) =
                (row.sequence_number, row.trace_id, row.span, row.position, row.tx, row.bytes)
            else {
                continue;
            };
            records.push(SpanRecord {
                span: raw_json(span)?,
                trace_id,
                session_id: row.session_id,
                sequence,
                position,
                tx,
                bytes,
            });
        }
        Ok(Page::of_global(records, after, horizon, epoch))
    }

    fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn key_heads(&self, keys: &[String]) -> StoreResult<Vec<(String, i64)>> {
        let rows = sqlx::query!("select trace_id, last_position from traces where trace_id = any($1)", keys)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(|row| (row.trace_id, row.last_position)).collect())
    }
}

impl KeyPages for SpanStore {
    async fn key_page(&self, trace_id: &str, after: i64) -> StoreResult<Page<SpanRecord, i64>> {
        let rows = sqlx::query!(
            r#"select sequence_number, trace_id, session_id, span::text as "span!", position,
                      tx::text::bigint as "tx!", bytes
               from (select *, sum(bytes) over (order by position) as running
                     from spans where trace_id = $1 and position > $2 order by position limit $3) s
               where running - bytes < $4
               order by position"#,
            trace_id,
            after,
            BATCH,
            BATCH_BYTES,
        )
        .fetch_all(&self.pool)
        .await?;
        let records = rows.into_iter().map(|row| Ok(record!(row))).collect::<StoreResult<Vec<_>>>()?;
        Ok(Page::of_key(records, after))
    }
}

impl WatchSource for SpanStore {
    async fn last_position(&self, trace_id: &str) -> StoreResult<i64> {
        Ok(sqlx::query_scalar!(
            r#"select coalesce((select last_position from traces where trace_id = $1), 0) as "n!""#,
            trace_id
        )
        .fetch_one(&self.pool)
        .await?)
    }

    async fn position_after_sequence(&self, trace_id: &str, sequence: i64) -> StoreResult<i64> {
        Ok(sqlx::query_scalar!(
            r#"select coalesce(max(position), 0) as "n!" from spans where trace_id = $1 and sequence_number <= $2"#,
            trace_id,
            sequence,
        )
        .fetch_one(&self.pool)
        .await?)
    }

    async fn global_cursor_of(&self, sequence: i64) -> StoreResult<GlobalCursor> {
        let row = sqlx::query!(
            r#"select tx::text::bigint as "tx!", sequence_number from spans
               where sequence_number <= $1 order by sequence_number desc limit 1"#,
            sequence,
        )
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map_or_else(GlobalCursor::default, |row| GlobalCursor { tx: row.tx, sequence: row.sequence_number }))
    }
}
