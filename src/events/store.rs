//! SQL for execution events. An event takes the next position of its query from the query's counter row
//! (see [`crate::db::feed`]) and changes its session in the same transaction; every read hides expired rows.

use super::model::{EventRecord, NewEvent};
use crate::db::pool::Pool;
use crate::{
    config::Ttls,
    db::{
        self, StoreResult,
        feed::{Feed, GlobalCursor},
        follow::{BATCH, BATCH_BYTES, Page},
        notice::{self, KeyRange},
        raw_json,
        retry::{Attempt, Retries, in_feed_tx},
        tail::FeedSource,
        watch::{KeyPages, WatchSource},
    },
    sessions::store as session_store,
};

/// Execution events in Postgres.
#[derive(Debug, Clone)]
pub struct EventStore {
    pool: Pool,
}

/// Builds an [`EventRecord`] from a row of any query selecting the event columns.
macro_rules! record {
    ($row:expr) => {
        EventRecord {
            event: raw_json($row.event)?,
            query_id: $row.query_id,
            session_id: $row.session_id,
            sequence: $row.sequence_number,
            position: $row.position,
            tx: $row.tx,
            bytes: $row.bytes,
        }
    };
}

impl EventStore {
    /// A store on `pool`.
    pub fn new(pool: Pool) -> Self {
        EventStore { pool }
    }

    /// Stores `event` (expiring after its TTL, or the default of `ttls`) and applies it to its session, in
    /// one transaction; readers on every replica see both once this returns.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn append(&self, event: &NewEvent, ttls: Ttls) -> StoreResult<()> {
        let ttl = event.ttl_seconds.unwrap_or(ttls.event_seconds);
        let session_event = event.session_event();
        in_feed_tx!(&self.pool, Feed::Events, Retries::claim("query's events"), |tx| async {
            let stored = sqlx::query!(
                r#"with claimed as (
                     insert into event_queries as c (query_id, last_position, last_tx)
                     values ($1, 1, pg_current_xact_id())
                     on conflict (query_id) do update
                       set last_position = c.last_position + 1, last_tx = excluded.last_tx
                       where c.last_tx < excluded.last_tx
                     returning c.last_position as position
                   )
                   insert into events (query_id, query_name, query_namespace, session_id, reason, event_type,
                                       occurred_at, duration_ms, event, expires_at, position, bytes)
                   select $1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, now() + make_interval(secs => $10::bigint),
                          position, octet_length($9::jsonb::text)
                   from claimed
                   returning sequence_number, position"#,
                event.query_id,
                event.query_name,
                event.query_namespace,
                event.session_id,
                event.reason,
                event.event_type,
                event.occurred_at,
                event.duration_ms,
                event.event,
                ttl,
            )
            .fetch_optional(tx.conn())
            .await?;
            let Some(stored) = stored else {
                // A writer whose transaction started after ours wrote this query's events first.
                return Ok(Attempt::Retry);
            };
            let sequence = stored.sequence_number;
            tx.wrote_key(&event.query_id, stored.position - 1, stored.position);
            // Its arrival order is the event's sequence number, as upstream's (the phase watermark).
            if let Some(session_event) = &session_event
                && session_store::apply_event(tx.conn(), session_event, Some(sequence), ttls.session_seconds).await?
            {
                tx.also_wrote(Feed::Sessions);
            }
            Ok(Attempt::Commit(()))
        })
    }

    /// Up to `limit` visible events after sequence `after` (of one session, or of one query), oldest first.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn list(
        &self,
        session_id: Option<&str>,
        query_id: Option<&str>,
        after: i64,
        limit: i64,
    ) -> StoreResult<Vec<EventRecord>> {
        let mut tx = self.pool.begin().await?;
        db::plan_per_execution(&mut tx).await?;
        let rows = sqlx::query!(
            r#"select sequence_number, query_id, session_id, event::text as "event!", position,
                      tx::text::bigint as "tx!", bytes
               from events
               where ($1::text is null or session_id = $1) and ($2::text is null or query_id = $2)
                 and sequence_number > $3 and expires_at > now()
               order by sequence_number
               limit $4"#,
            session_id,
            query_id,
            after,
            limit,
        )
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        rows.into_iter().map(|row| Ok(record!(row))).collect()
    }

    /// The whole feed's events after `after`, below the visibility horizon, within the catch-up limits.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn global_page(&self, after: GlobalCursor) -> StoreResult<Page<EventRecord, GlobalCursor>> {
        let rows = sqlx::query!(
            r#"with h as (select pg_snapshot_xmin(pg_current_snapshot()) as horizon,
                          ark_broker_current_epoch() as epoch)
               select h.horizon::text::bigint as "horizon!", h.epoch as "epoch?", e.sequence_number as "sequence_number?",
                      e.query_id as "query_id?", e.session_id, e.event::text as "event?",
                      e.position as "position?", e.tx::text::bigint as "tx?", e.bytes as "bytes?"
               from h left join lateral (
                 select *, sum(bytes) over (order by tx, sequence_number) as running from events
                 where (tx, sequence_number) > ($1::text::xid8, $2) and tx < h.horizon
                 order by tx, sequence_number limit $3
               ) e on e.running - e.bytes < $4
               order by e.tx, e.sequence_number"#,
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
            let (Some(sequence), Some(query_id), Some(event), Some(position), Some(tx), Some(bytes)) =
                (row.sequence_number, row.query_id, row.event, row.position, row.tx, row.bytes)
            else {
                continue;
            };
            records.push(EventRecord {
                event: raw_json(event)?,
                query_id,
                session_id: row.session_id,
                sequence,
                position,
                tx,
                bytes,
            });
        }
        Ok(Page::of_global(records, after, horizon, epoch))
    }

    /// Deletes every event.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delete_all(&self) -> StoreResult<()> {
        sqlx::query!("delete from events").execute(&self.pool).await?;
        Ok(())
    }

    /// Deletes one query's events (the controller's finalizer).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delete_query(&self, query_id: &str) -> StoreResult<()> {
        sqlx::query!("delete from events where query_id = $1", query_id).execute(&self.pool).await?;
        Ok(())
    }

    /// Deletes up to `limit` of the oldest events beyond `max_bytes` (their `bytes` summed from the newest; the
    /// newest is always kept), reading only the oldest `limit` rows. Returns how many.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delete_over_budget(&self, max_bytes: i64, limit: i64) -> StoreResult<u64> {
        let deleted = sqlx::query!(
            // The table's bytes are its changes added up (migration 0036): the pass keeps their sum as one
            // row and reads the oldest rows alone, as many as it may delete, not the table.
            r#"with counted as (delete from byte_totals where feed = 'events' returning bytes),
                    total as (select coalesce(sum(bytes), 0)::bigint as bytes from counted),
                    kept as (insert into byte_totals (feed, bytes) select 'events', bytes from total),
                    oldest as (select sequence_number, bytes, sum(bytes) over (order by sequence_number) as running
                               from events order by sequence_number limit $2)
               -- An array, so the rows are deleted through the key's index whatever the plan guesses.
               delete from events where sequence_number = any(array(
                 select o.sequence_number from oldest o, total t
                 where t.bytes - (o.running - o.bytes) > $1
                   and o.sequence_number < (select max(sequence_number) from events)))"#,
            max_bytes,
            limit,
        )
        .execute(&self.pool)
        .await?;
        Ok(deleted.rows_affected())
    }

    /// Deletes up to `limit` expired events, then up to `limit` of the oldest beyond `max_rows` (0: no cap);
    /// replicas reaping at once skip each other's rows.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn reap(&self, max_rows: i64, limit: i64) -> StoreResult<usize> {
        let expired = sqlx::query!(
            "delete from events where sequence_number in (
               select sequence_number from events where expires_at <= now()
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
            "delete from events where sequence_number in (
               select sequence_number from events
               where sequence_number <= (select sequence_number from events order by sequence_number desc
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

impl FeedSource for EventStore {
    type Row = EventRecord;

    async fn rows_of(&self, txs: &[i64]) -> StoreResult<Vec<EventRecord>> {
        let txs: Vec<String> = txs.iter().map(i64::to_string).collect();
        let rows = sqlx::query!(
            r#"select sequence_number, query_id, session_id, event::text as "event!", position,
                      tx::text::bigint as "tx!", bytes
               from events where tx = any($1::text[]::xid8[]) order by tx, sequence_number"#,
            &txs,
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(|row| Ok(record!(row))).collect()
    }

    async fn rows_in(&self, ranges: &[KeyRange]) -> StoreResult<Vec<EventRecord>> {
        let (keys, afters, lasts) = notice::columns(ranges);
        let rows = sqlx::query!(
            r#"select e.sequence_number, e.query_id, e.session_id, e.event::text as "event!", e.position,
                      e.tx::text::bigint as "tx!", e.bytes
               from unnest($1::text[], $2::bigint[], $3::bigint[]) with ordinality as r(k, after, last, ord)
               cross join lateral (
                 select * from events where query_id = r.k and position > r.after and position <= r.last
                 order by position limit greatest(r.last - r.after, 0)
               ) e
               order by r.ord, e.position"#,
            &keys as &[&str],
            &afters,
            &lasts,
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(|row| Ok(record!(row))).collect()
    }

    async fn global_page(&self, after: GlobalCursor) -> StoreResult<Page<EventRecord, GlobalCursor>> {
        EventStore::global_page(self, after).await
    }

    fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn key_heads(&self, keys: &[String]) -> StoreResult<Vec<(String, i64)>> {
        let rows = sqlx::query!("select query_id, last_position from event_queries where query_id = any($1)", keys)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(|row| (row.query_id, row.last_position)).collect())
    }
}

impl KeyPages for EventStore {
    /// One query's visible events after position `after`, within the catch-up limits.
    async fn key_page(&self, query_id: &str, after: i64) -> StoreResult<Page<EventRecord, i64>> {
        let rows = sqlx::query!(
            r#"select sequence_number, query_id, session_id, event::text as "event!", position,
                      tx::text::bigint as "tx!", bytes, expires_at > now() as "visible!"
               from (select *, sum(bytes) over (order by position) as running
                     from events where query_id = $1 and position > $2 order by position limit $3) e
               where running - bytes < $4
               order by position"#,
            query_id,
            after,
            BATCH,
            BATCH_BYTES,
        )
        .fetch_all(&self.pool)
        .await?;
        let visible: Vec<bool> = rows.iter().map(|row| row.visible).collect();
        let records = rows.into_iter().map(|row| Ok(record!(row))).collect::<StoreResult<Vec<_>>>()?;
        // Expired rows still move the cursor, so the page is judged on everything read, then they go.
        let mut page = Page::of_key(records, after);
        let mut visible = visible.into_iter();
        page.rows.retain(|_| visible.next().unwrap_or(true));
        Ok(page)
    }
}

impl WatchSource for EventStore {
    /// A query's committed last position (0 if it has none): a live-only watch starts after it.
    async fn last_position(&self, query_id: &str) -> StoreResult<i64> {
        Ok(sqlx::query_scalar!(
            r#"select coalesce((select last_position from event_queries where query_id = $1), 0) as "n!""#,
            query_id
        )
        .fetch_one(&self.pool)
        .await?)
    }

    /// Where a watch of one query resumed from upstream's `cursor` (an event's sequence) continues: one
    /// query's sequence numbers rise with its positions (drawn while its counter row is held).
    async fn position_after_sequence(&self, query_id: &str, sequence: i64) -> StoreResult<i64> {
        Ok(sqlx::query_scalar!(
            r#"select coalesce(max(position), 0) as "n!" from events where query_id = $1 and sequence_number <= $2"#,
            query_id,
            sequence,
        )
        .fetch_one(&self.pool)
        .await?)
    }

    /// Where a global watch resumed from upstream's `cursor` continues: right after that event in global
    /// order (see [`WatchSource::global_cursor_of`] for why this is exact).
    async fn global_cursor_of(&self, sequence: i64) -> StoreResult<GlobalCursor> {
        let row = sqlx::query!(
            r#"select tx::text::bigint as "tx!", sequence_number from events
               where sequence_number <= $1 order by sequence_number desc limit 1"#,
            sequence,
        )
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map_or_else(GlobalCursor::default, |row| GlobalCursor { tx: row.tx, sequence: row.sequence_number }))
    }
}
