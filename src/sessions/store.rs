//! SQL for sessions. An event (or a message) changes its session inside the writer's transaction: the
//! session's row is locked, its queries read, upstream's rules applied ([`super::rules`]) and the result
//! written back, so concurrent writers on any replica apply one after another and every replica reads the
//! same sessions. Reads go through the `session_entries` view (a session and its queries in one snapshot).

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use sqlx::{PgConnection, PgPool, types::Json};

use super::{
    model::{SessionChange, SessionEntry, SessionFilter, StatusCounts},
    rules::{ConversationSummary, Participant, QueryState, SessionEvent, SessionState, Status, name_of},
};
use crate::db::{
    self, StoreError, StoreResult,
    feed::GlobalCursor,
    follow::{BATCH, Page},
    tail::FeedSource,
};

/// Sessions in Postgres.
#[derive(Debug, Clone)]
pub struct SessionStore {
    pool: PgPool,
}

/// Builds a [`SessionState`] from a row of any query selecting the `session_entries` (or `sessions`)
/// columns; `$queries` is the session's queries.
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

/// Timestamps are kept to the millisecond, as upstream's ISO strings are.
fn to_millis(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(TimeDelta::milliseconds(1)).unwrap_or(at)
}

/// Applies an event to its session within the event's transaction (creating the session if needed).
pub async fn apply_event(conn: &mut PgConnection, event: &SessionEvent) -> StoreResult<()> {
    // Locks the session's row (inserting it if new) and reads the time after the lock was granted, so one
    // session's changes get increasing times whichever replica writes them.
    let row = sqlx::query!(
        r#"insert into sessions as s (session_id, name, status, error_count, conversation_count, participants,
                                      conversations, created_at, last_activity)
           values ($1, $2, 'idle', 0, 0, '[]', '[]', now(), now())
           on conflict (session_id) do update set session_id = excluded.session_id
           returning (xmax = 0) as "inserted!", clock_timestamp() as "now!", session_id, name,
                     status as "status: Status", error_count,
                     participants as "participants: Json<Vec<Participant>>",
                     conversations as "conversations: Json<Vec<ConversationSummary>>", created_at, last_activity"#,
        event.session_id,
        name_of(&event.session_id),
    )
    .fetch_one(&mut *conn)
    .await?;
    let now = to_millis(row.now);
    let mut session = if row.inserted {
        SessionState::new(&event.session_id, now)
    } else {
        let queries = queries_of(conn, &row.session_id).await?;
        state!(row, queries)
    };
    let index = session.apply_event(event, now);
    save(conn, &session, index).await
}

/// Applies a message of query `query_name` to the session that query was last seen in, within the
/// message's transaction; returns whether a session changed.
pub async fn apply_message(conn: &mut PgConnection, query_name: &str, conversation_id: &str) -> StoreResult<bool> {
    let session_id = sqlx::query_scalar!(
        "select session_id from session_queries where query_name = $1 order by created_at desc, ordinal desc limit 1",
        query_name
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(session_id) = session_id else { return Ok(false) };
    let row = sqlx::query!(
        r#"update sessions set tx = pg_current_xact_id() where session_id = $1
           returning clock_timestamp() as "now!", session_id, name, status as "status: Status", error_count,
                     participants as "participants: Json<Vec<Participant>>",
                     conversations as "conversations: Json<Vec<ConversationSummary>>", created_at, last_activity"#,
        session_id
    )
    .fetch_optional(&mut *conn)
    .await?;
    // Deleted meanwhile.
    let Some(row) = row else { return Ok(false) };
    let now = to_millis(row.now);
    let queries = queries_of(conn, &row.session_id).await?;
    let mut session = state!(row, queries);
    match session.apply_message(query_name, conversation_id, now) {
        Some(index) => save(conn, &session, index).await.map(|()| true),
        None => Ok(false),
    }
}

async fn queries_of(conn: &mut PgConnection, session_id: &str) -> StoreResult<Vec<QueryState>> {
    let rows = sqlx::query!(
        r#"select query_name, namespace, conversation_id, agent, team, tool, target_type,
                  phase as "phase: super::rules::Phase", error, created_at, completed_at, last_activity
           from session_queries where session_id = $1 order by ordinal"#,
        session_id
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| QueryState {
            name: row.query_name,
            namespace: row.namespace,
            conversation_id: row.conversation_id,
            agent: row.agent,
            team: row.team,
            tool: row.tool,
            target_type: row.target_type,
            phase: row.phase,
            error: row.error,
            created_at: row.created_at,
            completed_at: row.completed_at,
            last_activity: row.last_activity,
        })
        .collect())
}

/// Writes the session's derived fields and its query `index` back, and marks the row as changed by this
/// transaction (for the sessions watch).
async fn save(conn: &mut PgConnection, session: &SessionState, index: usize) -> StoreResult<()> {
    let query = &session.queries[index];
    sqlx::query!(
        r#"with q as (
             insert into session_queries (session_id, query_name, namespace, conversation_id, agent, team, tool,
                                          target_type, phase, error, created_at, completed_at, last_activity)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
             on conflict (session_id, query_name) do update
               set namespace = excluded.namespace, conversation_id = excluded.conversation_id,
                   agent = excluded.agent, team = excluded.team, tool = excluded.tool,
                   target_type = excluded.target_type, phase = excluded.phase, error = excluded.error,
                   completed_at = excluded.completed_at, last_activity = excluded.last_activity
           )
           update sessions
             set status = $14, error_count = $15, conversation_count = $16, participants = $17, conversations = $18,
                 created_at = $19, last_activity = $20, tx = pg_current_xact_id()
           where session_id = $1"#,
        session.session_id,
        query.name,
        query.namespace,
        query.conversation_id,
        query.agent,
        query.team,
        query.tool,
        query.target_type,
        query.phase as _,
        query.error,
        query.created_at,
        query.completed_at,
        query.last_activity,
        session.status as _,
        session.error_count as i32,
        session.conversation_count() as i32,
        Json(&session.participants) as _,
        Json(&session.conversations) as _,
        session.created_at,
        session.last_activity,
    )
    .execute(conn)
    .await?;
    Ok(())
}

impl SessionStore {
    /// A store on `pool`.
    pub fn new(pool: PgPool) -> Self {
        SessionStore { pool }
    }

    /// Applies an event outside any other write (`POST /sessions`).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn apply(&self, event: &SessionEvent) -> StoreResult<()> {
        let mut tx = db::feed::FeedTx::begin(&self.pool, db::feed::Feed::Sessions).await?;
        apply_event(tx.conn(), event).await?;
        tx.wrote();
        tx.commit().await
    }

    /// One session.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn get(&self, session_id: &str) -> StoreResult<Option<SessionEntry>> {
        let row = sqlx::query_scalar!(
            r#"select to_jsonb(s) || jsonb_build_object('tx', s.tx::text::bigint) as "entry!"
               from session_entries s where session_id = $1"#,
            session_id
        )
        .fetch_optional(&self.pool)
        .await?;
        row.map(|value| EntryRow::parse(value).map(EntryRow::into_entry)).transpose()
    }

    /// Every session, in the order they were created.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn all(&self) -> StoreResult<Vec<SessionEntry>> {
        let rows = sqlx::query_scalar!(
            r#"select to_jsonb(s) || jsonb_build_object('tx', s.tx::text::bigint) as "entry!"
               from session_entries s order by sequence"#
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(|value| EntryRow::parse(value).map(EntryRow::into_entry)).collect()
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
        let rows = sqlx::query!(
            r#"with matching as (
                 select * from session_entries s
                 where ($1::text is null or status = $1)
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
               ), ranked as (
                 select *, row_number() over (order by
                          case when $5 = 'date' and $6 then last_activity end desc,
                          case when $5 = 'date' and not $6 then last_activity end,
                          case when $5 = 'name' and $6 then lower(name) end desc,
                          case when $5 = 'name' and not $6 then lower(name) end,
                          case when $5 = 'conversations' and $6 then conversation_count end desc,
                          case when $5 = 'conversations' and not $6 then conversation_count end,
                          sequence) as rank
                 from matching
               )
               select c.total as "total!", c.active as "active!", c.idle as "idle!", c.error as "error!",
                      to_jsonb(r) - 'rank' || jsonb_build_object('tx', r.tx::text::bigint) as "entry?"
               from counts c left join ranked r on r.rank > $7 and r.rank - $7 <= $8
               order by r.rank"#,
            filter.status as _,
            filter.date_from,
            filter.date_to,
            filter.search,
            filter.sort,
            filter.descending,
            offset,
            limit,
        )
        .fetch_all(&self.pool)
        .await?;
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
            r#"with h as (select pg_snapshot_xmin(pg_current_snapshot()) as horizon)
               select h.horizon::text::bigint as "horizon!",
                      to_jsonb(s) || jsonb_build_object('tx', s.tx::text::bigint) as "entry?"
               from h left join lateral (
                 select * from session_entries
                 where (tx, sequence) > ($1::text::xid8, $2) and tx < h.horizon
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
        let mut changes = Vec::new();
        for value in rows.into_iter().filter_map(|row| row.entry) {
            let row = EntryRow::parse(value)?;
            let (sequence, tx) = (row.sequence, row.tx);
            changes.push(SessionChange::new(&row.into_entry(), sequence, tx));
        }
        Ok(Page::of_global(changes, after, horizon))
    }
}

impl FeedSource for SessionStore {
    type Row = SessionChange;

    /// Sessions have no per-key readers, so the tail never asks for a transaction's rows.
    async fn rows_of(&self, _txs: &[i64]) -> StoreResult<Vec<SessionChange>> {
        Ok(Vec::new())
    }

    async fn global_page(&self, after: GlobalCursor) -> StoreResult<Page<SessionChange, GlobalCursor>> {
        self.changes_after(after).await
    }

    async fn horizon(&self) -> StoreResult<i64> {
        db::horizon(&self.pool).await
    }

    async fn key_heads(&self, _keys: &[String]) -> StoreResult<Vec<(String, i64)>> {
        Ok(Vec::new())
    }
}
