//! How events, messages and deletions change sessions: each locks the session's row first (every writer
//! in the same order, so none deadlocks with another), loads its queries, applies upstream's rules and
//! writes the result back in the caller's transaction.

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use sqlx::{PgConnection, types::Json};

use super::{SessionStore, StoreResult};
use crate::{
    db::feed::{Feed, FeedTx},
    sessions::{
        event::SessionEvent,
        rules::{MessageEffect, name_of},
        state::{ConversationSummary, Participant, QueryState, SessionState, Status},
    },
};

/// Timestamps are kept to the millisecond, as upstream's ISO strings are.
fn to_millis(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(TimeDelta::milliseconds(1)).unwrap_or(at)
}

/// Applies an event that arrived `sequence`th (`None`: `POST /sessions`) to its session within the event's
/// transaction, creating the session if needed, and keeps the session `ttl_seconds` from now; returns
/// whether the session changed (an event applied after later ones of its query may change nothing).
pub async fn apply_event(
    conn: &mut PgConnection,
    event: &SessionEvent,
    sequence: Option<i64>,
    ttl_seconds: i64,
) -> StoreResult<bool> {
    // Locks the session's row (inserting it if new) and reads the time after the lock was granted, so one
    // session's changes get increasing times whichever replica writes them.
    let row = sqlx::query!(
        r#"insert into sessions as s (session_id, name, status, error_count, conversation_count, participants,
                                      conversations, created_at, last_activity, expires_at)
           values ($1, $2, 'idle', 0, 0, '[]', '[]', now(), now(), now() + make_interval(secs => $3::bigint))
           on conflict (session_id) do update set session_id = excluded.session_id
           returning (xmax = 0) as "inserted!", clock_timestamp() as "now!", session_id, name,
                     status as "status: Status", error_count,
                     participants as "participants: Json<Vec<Participant>>",
                     conversations as "conversations: Json<Vec<ConversationSummary>>", created_at, last_activity"#,
        event.session_id,
        name_of(&event.session_id),
        ttl_seconds,
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
    match session.apply_event(event, sequence, now) {
        Some(index) => save(conn, &session, index, ttl_seconds).await.map(|()| true),
        None => Ok(false),
    }
}

/// Applies a message of query `query_name` within the message's transaction, to the session upstream
/// gives it: of the sessions the query is in, a live one before an expired one (which the message then
/// revives), then the first by id. Every message keeps that session `ttl_seconds` from now; returns
/// whether the session changed for its watchers (the query joined the message's conversation).
pub async fn apply_message(
    conn: &mut PgConnection,
    query_name: &str,
    conversation_id: &str,
    ttl_seconds: i64,
) -> StoreResult<bool> {
    let session_id = sqlx::query_scalar!(
        "select q.session_id from session_queries q join sessions s on s.session_id = q.session_id
         where q.query_name = $1 order by s.expires_at > now() desc, q.session_id limit 1",
        query_name
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(session_id) = session_id else { return Ok(false) };
    // Locks the row, and moves the activity and the expiry: the message is activity of the session whatever
    // else it does (watchers are not told of that alone, as upstream's are not).
    let row = sqlx::query!(
        r#"update sessions
             set last_activity = date_trunc('milliseconds', clock_timestamp()),
                 expires_at = now() + make_interval(secs => $2::bigint)
           where session_id = $1
           returning session_id, name, status as "status: Status", error_count,
                     participants as "participants: Json<Vec<Participant>>",
                     conversations as "conversations: Json<Vec<ConversationSummary>>", created_at, last_activity"#,
        session_id,
        ttl_seconds,
    )
    .fetch_optional(&mut *conn)
    .await?;
    // Deleted meanwhile.
    let Some(row) = row else { return Ok(false) };
    let now = row.last_activity;
    let queries = queries_of(conn, &row.session_id).await?;
    let mut session = state!(row, queries);
    match session.apply_message(query_name, conversation_id, now) {
        MessageEffect::Joined(index) => save(conn, &session, index, ttl_seconds).await.map(|()| true),
        MessageEffect::Activity | MessageEffect::Unknown => Ok(false),
    }
}

async fn queries_of(conn: &mut PgConnection, session_id: &str) -> StoreResult<Vec<QueryState>> {
    let rows = sqlx::query!(
        r#"select query_name, namespace, conversation_id, agent, team, tool, target_type,
                  phase as "phase: crate::sessions::state::Phase", error, created_at, completed_at, last_activity,
                  last_event_sequence, last_phase_event_sequence
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
            last_event_sequence: row.last_event_sequence,
            last_phase_sequence: row.last_phase_event_sequence,
        })
        .collect())
}

/// Writes the session's derived fields and its query `index` back, keeps the session `ttl_seconds` from
/// now, and marks the row as changed by this transaction (for the sessions watch).
async fn save(conn: &mut PgConnection, session: &SessionState, index: usize, ttl_seconds: i64) -> StoreResult<()> {
    let query = &session.queries[index];
    sqlx::query!(
        r#"with q as (
             insert into session_queries (session_id, query_name, namespace, conversation_id, agent, team, tool,
                                          target_type, phase, error, created_at, completed_at, last_activity,
                                          last_event_sequence, last_phase_event_sequence)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $21, $22)
             on conflict (session_id, query_name) do update
               set namespace = excluded.namespace, conversation_id = excluded.conversation_id,
                   agent = excluded.agent, team = excluded.team, tool = excluded.tool,
                   target_type = excluded.target_type, phase = excluded.phase, error = excluded.error,
                   completed_at = excluded.completed_at, last_activity = excluded.last_activity,
                   last_event_sequence = excluded.last_event_sequence,
                   last_phase_event_sequence = excluded.last_phase_event_sequence
           )
           update sessions
             set status = $14, error_count = $15, conversation_count = $16, participants = $17, conversations = $18,
                 created_at = $19, last_activity = $20, expires_at = now() + make_interval(secs => $23::bigint),
                 tx = pg_current_xact_id()
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
        query.last_event_sequence,
        query.last_phase_sequence,
        ttl_seconds,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Writes the session's derived fields back without its activity or expiry (a query was removed, which is
/// not activity), and marks the row as changed by this transaction (for the sessions watch).
async fn save_totals(conn: &mut PgConnection, session: &SessionState) -> StoreResult<()> {
    sqlx::query!(
        "update sessions
           set status = $2, error_count = $3, conversation_count = $4, participants = $5, conversations = $6,
               tx = pg_current_xact_id()
         where session_id = $1",
        session.session_id,
        session.status as _,
        session.error_count as i32,
        session.conversation_count() as i32,
        Json(&session.participants) as _,
        Json(&session.conversations) as _,
    )
    .execute(conn)
    .await?;
    Ok(())
}

impl SessionStore {
    /// Applies an event outside any other write (`POST /sessions`), keeping its session `ttl_seconds`.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn apply(&self, event: &SessionEvent, ttl_seconds: i64) -> StoreResult<()> {
        let mut tx = FeedTx::begin(&self.pool, Feed::Sessions).await?;
        if apply_event(tx.conn(), event, None, ttl_seconds).await? {
            tx.wrote();
        }
        tx.commit().await
    }

    /// Removes query `query_name` from every session it is in (its Query was deleted): a session left
    /// without queries is deleted, the others get their totals derived again (their activity and expiry
    /// stay) and are sent to their watchers. Returns from how many sessions it was removed.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn remove_query(&self, query_name: &str) -> StoreResult<u64> {
        // Expired sessions too: their leftover rows are what this is for.
        let owners = sqlx::query_scalar!(
            "select distinct session_id from session_queries where query_name = $1 order by session_id",
            query_name
        )
        .fetch_all(&self.pool)
        .await?;
        let mut removed = 0;
        // One transaction per session, each locking one session's row as every writer does, so this can
        // never deadlock with them; a retry after a partial failure removes the rest.
        for session_id in owners {
            let mut tx = FeedTx::begin(&self.pool, Feed::Sessions).await?;
            let row = sqlx::query!(
                r#"select session_id, name, status as "status: Status", error_count,
                          participants as "participants: Json<Vec<Participant>>",
                          conversations as "conversations: Json<Vec<ConversationSummary>>", created_at, last_activity
                   from sessions where session_id = $1 for update"#,
                session_id
            )
            .fetch_optional(tx.conn())
            .await?;
            let Some(row) = row else {
                tx.rollback().await?;
                continue;
            };
            let queries = queries_of(tx.conn(), &row.session_id).await?;
            let mut session = state!(row, queries);
            if !session.remove_query(query_name) {
                tx.rollback().await?;
                continue;
            }
            if session.queries.is_empty() {
                // Its queries go with it; a session that is gone has nothing to send its watchers.
                sqlx::query!("delete from sessions where session_id = $1", session.session_id)
                    .execute(tx.conn())
                    .await?;
            } else {
                sqlx::query!(
                    "delete from session_queries where session_id = $1 and query_name = $2",
                    session.session_id,
                    query_name
                )
                .execute(tx.conn())
                .await?;
                save_totals(tx.conn(), &session).await?;
                tx.wrote();
            }
            tx.commit().await?;
            removed += 1;
        }
        Ok(removed)
    }
}
