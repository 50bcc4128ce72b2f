//! SQL for sessions. An event (or a message) changes its session inside the writer's transaction: the
//! session's row is locked, its queries read, upstream's rules applied ([`super::rules`]) and the result
//! written back, so concurrent writers on any replica apply one after another and every replica reads the
//! same sessions. Reads go through the `session_entries` view (a session and its queries in one snapshot)
//! and hide sessions past their expiry, which each event and message of the session moves forward.

use crate::db::pool::Pool;
use chrono::{DateTime, Utc};
use sqlx::types::Json;

use super::{
    model::{SessionChange, SessionEntry, SessionFilter, StatusCounts},
    state::{ConversationSummary, Participant, QueryState, SessionState, Status},
};
use crate::db::{
    StoreError, StoreResult,
    feed::GlobalCursor,
    follow::{BATCH, Page},
    notice::KeyRange,
    tail::FeedSource,
};

/// Sessions in Postgres.
#[derive(Debug, Clone)]
pub struct SessionStore {
    pool: Pool,
}

/// Builds a [`SessionState`] from a row of any query selecting the `sessions` columns (typed, the JSON ones as
/// `Json<…>`); `$queries` is the session's queries. Defined before `writes`, which uses it too.
macro_rules! state {
    ($row:expr, $queries:expr) => {
        SessionState {
            session_id: $row.session_id,
            name: $row.name,
            queries: $queries,
            status: $row.status,
            error_count: $row.error_count as usize,
            participants: $row.participants.0,
            conversations: $row.conversations.0,
            created_at: $row.created_at,
            last_activity: $row.last_activity,
        }
    };
}

mod writes;

pub use writes::{apply_event, apply_message};

/// A `session_entries` row, read as one JSON value (`to_jsonb(row)`), so every read converts it one way.
#[derive(Debug, serde::Deserialize)]
struct EntryRow {
    session_id: String,
    sequence: i64,
    /// The last writer's transaction id (as a number).
    tx: i64,
    name: String,
    status: Status,
    error_count: usize,
    participants: Vec<Participant>,
    conversations: Vec<ConversationSummary>,
    created_at: DateTime<Utc>,
    last_activity: DateTime<Utc>,
    queries: Vec<QueryState>,
}

impl EntryRow {
    fn parse(value: serde_json::Value) -> StoreResult<Self> {
        serde_json::from_value(value).map_err(decode_error)
    }

    fn into_entry(self) -> SessionEntry {
        SessionEntry::from(&SessionState {
            session_id: self.session_id,
            name: self.name,
            queries: self.queries,
            status: self.status,
            error_count: self.error_count,
            participants: self.participants,
            conversations: self.conversations,
            created_at: self.created_at,
            last_activity: self.last_activity,
        })
    }
}

fn decode_error(error: serde_json::Error) -> StoreError {
    StoreError::Database(sqlx::Error::Decode(Box::new(error)))
}

impl SessionStore {
    /// A store on `pool`.
    pub fn new(pool: Pool) -> Self {
        SessionStore { pool }
    }

    /// Deletes up to `limit` expired sessions (their queries with them); replicas reaping at once skip each
    /// other's rows.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delete_expired(&self, limit: i64) -> StoreResult<u64> {
        let deleted = sqlx::query!(
            "delete from sessions where session_id in (
               select session_id from sessions where expires_at <= now()
               order by expires_at limit $1 for update skip locked)",
            limit,
        )
        .execute(&self.pool)
        .await?;
        Ok(deleted.rows_affected())
    }

    /// One session.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn get(&self, session_id: &str) -> StoreResult<Option<SessionEntry>> {
        let row = sqlx::query_scalar!(
            r#"select to_jsonb(s) || jsonb_build_object('tx', s.tx::text::bigint) as "entry!"
               from session_entries s where session_id = $1 and expires_at > now()"#,
            session_id
        )
        .fetch_optional(&self.pool)
        .await?;
        row.map(|value| EntryRow::parse(value).map(EntryRow::into_entry)).transpose()
    }

    /// Every session, in the order they were created.
    ///
    /// Not through `session_entries`: its per-session queries aggregate and a `jsonb` per row cost 4–5 s of
    /// SQL at 100k sessions. Here the queries are aggregated in one pass (as `json`, which is written as
    /// text, not built and then printed as `jsonb` is), and each row decodes straight into its types. The
    /// queries' object is the view's, field for field (a test compares this with `get`).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn all(&self) -> StoreResult<Vec<SessionEntry>> {
        let rows = sqlx::query!(
            r#"select s.session_id, s.name, s.status as "status: Status", s.error_count,
                      s.participants as "participants: Json<Vec<Participant>>",
                      s.conversations as "conversations: Json<Vec<ConversationSummary>>",
                      s.created_at, s.last_activity,
                      coalesce(q.queries, '[]'::json) as "queries!: Json<Vec<QueryState>>"
               from sessions s
               left join (select q.session_id, json_agg(json_build_object(
                            'name', q.query_name, 'namespace', q.namespace, 'conversation_id', q.conversation_id,
                            'agent', q.agent, 'team', q.team, 'tool', q.tool, 'target_type', q.target_type,
                            'phase', q.phase, 'error', q.error, 'created_at', q.created_at,
                            'completed_at', q.completed_at, 'last_activity', q.last_activity) order by q.ordinal)
                            as queries
                          from session_queries q group by q.session_id) q on q.session_id = s.session_id
               where s.expires_at > now() order by s.sequence"#
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|row| SessionEntry::from(&state!(row, row.queries.0))).collect())
    }

    /// A page of the sessions matching `filter`, sorted, from offset `offset`; with how many match in total
    /// and per status.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn page(
        &self,
        filter: &SessionFilter,
        offset: i64,
        limit: i64,
    ) -> StoreResult<(Vec<SessionEntry>, i64, StatusCounts)> {
        // Filters, counts and sorts the sessions' own columns; only the page's rows go through the
        // `session_entries` view, whose queries aggregate would otherwise run for every matching session.
        // Not materialised: the counts and the page each scan the table, and the page can then walk an index
        // (at 100k sessions 103 ms → 21 ms for a page in creation order). The sort is written twice: the top
        // rows are picked in it, and `rank` carries it past the join with the view to the final order.
        // The sort's `case when $6` folds only in a plan made for the values: planned per execution.
        let mut tx = self.pool.begin().await?;
        crate::db::plan_per_execution(&mut tx).await?;
        let rows = sqlx::query!(
            r#"with matching as not materialized (
                 select s.session_id, s.sequence, s.name, s.status, s.last_activity, s.conversation_count
                 from sessions s
                 where expires_at > now()
                   and ($1::text is null or status = $1)
                   and ($2::timestamptz is null or last_activity >= $2)
                   and ($3::timestamptz is null or last_activity <= $3)
                   and ($4::text is null or strpos(lower(session_id), $4) > 0 or strpos(lower(name), $4) > 0
                        or exists (select 1 from session_queries q where q.session_id = s.session_id
                                   and (strpos(lower(coalesce(q.agent, '')), $4) > 0
                                        or strpos(lower(coalesce(q.team, '')), $4) > 0
                                        or strpos(lower(coalesce(q.tool, '')), $4) > 0)))
               ), counts as (
                 select count(*) as total, count(*) filter (where status = 'active') as active,
                        count(*) filter (where status = 'idle') as idle,
                        count(*) filter (where status = 'error') as error
                 from matching
               ), sorted as (
                 select m.*, case when $5 = 'date' then extract(epoch from last_activity)
                                  when $5 = 'conversations' then conversation_count end as number_key,
                        case when $5 = 'name' then lower(name) end as text_key
                 from matching m
               ), page as (
                 select session_id, row_number() over (
                          order by case when $6 then number_key end desc, case when not $6 then number_key end,
                                   case when $6 then text_key end desc, case when not $6 then text_key end,
                                   sequence) as rank
                 from (select * from sorted
                       order by case when $6 then number_key end desc, case when not $6 then number_key end,
                                case when $6 then text_key end desc, case when not $6 then text_key end,
                                sequence
                       offset $7 limit $8) top
               )
               select c.total as "total!", c.active as "active!", c.idle as "idle!", c.error as "error!",
                      to_jsonb(e) || jsonb_build_object('tx', e.tx::text::bigint) as "entry?"
               from counts c left join (page p join session_entries e on e.session_id = p.session_id) on true
               order by p.rank"#,
            filter.status as _,
            filter.date_from,
            filter.date_to,
            filter.search,
            filter.sort,
            filter.descending,
            offset,
            limit,
        )
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let Some(first) = rows.first() else { return Ok((Vec::new(), 0, StatusCounts::default())) };
        let (total, counts) =
            (first.total, StatusCounts { active: first.active, idle: first.idle, error: first.error });
        let entries = rows
            .into_iter()
            .filter_map(|row| row.entry)
            .map(|value| EntryRow::parse(value).map(EntryRow::into_entry))
            .collect::<StoreResult<_>>()?;
        Ok((entries, total, counts))
    }

    /// Deletes every session (and, with them, their queries).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delete_all(&self) -> StoreResult<()> {
        sqlx::query!("delete from sessions").execute(&self.pool).await?;
        Ok(())
    }

    /// Changed sessions after `after` in `(tx, sequence)` order, below the visibility horizon.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn changes_after(&self, after: GlobalCursor) -> StoreResult<Page<SessionChange, GlobalCursor>> {
        let rows = sqlx::query!(
            r#"with h as (select pg_snapshot_xmin(pg_current_snapshot()) as horizon,
                          ark_broker_current_epoch() as epoch)
               select h.horizon::text::bigint as "horizon!", h.epoch as "epoch?",
                      to_jsonb(s) || jsonb_build_object('tx', s.tx::text::bigint) as "entry?"
               from h left join lateral (
                 select * from session_entries
                 where (tx, sequence) > ($1::text::xid8, $2) and tx < h.horizon and expires_at > now()
                 order by tx, sequence limit $3
               ) s on true
               order by s.tx, s.sequence"#,
            after.tx.to_string(),
            after.sequence,
            BATCH,
        )
        .fetch_all(&self.pool)
        .await?;
        let horizon = rows.first().map_or(after.tx, |row| row.horizon);
        let epoch = rows.first().and_then(|row| row.epoch);
        let mut changes = Vec::new();
        for value in rows.into_iter().filter_map(|row| row.entry) {
            let row = EntryRow::parse(value)?;
            let (sequence, tx) = (row.sequence, row.tx);
            changes.push(SessionChange::new(&row.into_entry(), sequence, tx));
        }
        Ok(Page::of_global(changes, after, horizon, epoch))
    }
}

impl FeedSource for SessionStore {
    type Row = SessionChange;

    /// Sessions have no per-key readers, so the tail never asks for a transaction's rows.
    async fn rows_of(&self, _txs: &[i64]) -> StoreResult<Vec<SessionChange>> {
        Ok(Vec::new())
    }

    /// Nor for keys' positions.
    async fn rows_in(&self, _ranges: &[KeyRange]) -> StoreResult<Vec<SessionChange>> {
        Ok(Vec::new())
    }

    async fn global_page(&self, after: GlobalCursor) -> StoreResult<Page<SessionChange, GlobalCursor>> {
        self.changes_after(after).await
    }

    fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn key_heads(&self, _keys: &[String]) -> StoreResult<Vec<(String, i64)>> {
        Ok(Vec::new())
    }
}
