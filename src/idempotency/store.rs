//! SQL for idempotency keys. Functions take the connection of the caller's transaction where the key must
//! commit together with the effect it stands for.

use crate::db::pool::Pool;
use serde_json::Value;
use sqlx::PgConnection;

use super::{IdempotencyKey, KeyState, Scope, StoredReply};
use crate::db::StoreResult;

/// Records `key` for a request described by `fingerprint`, or reports what it already says. Inside a
/// transaction, a concurrent first use of the same key makes this wait until that transaction ends.
pub async fn claim(
    conn: &mut PgConnection,
    scope: Scope,
    key: &IdempotencyKey,
    fingerprint: &str,
) -> StoreResult<KeyState> {
    let inserted = sqlx::query_scalar!(
        "insert into idempotency_keys (scope, key, fingerprint) values ($1, $2, md5($3))
         on conflict do nothing
         returning 1",
        scope.as_str(),
        key.as_str(),
        fingerprint,
    )
    .fetch_optional(&mut *conn)
    .await?;
    if inserted.is_some() {
        return Ok(KeyState::New);
    }
    let row = sqlx::query!(
        r#"select fingerprint = md5($3) as "same!", lines_stored, status, body
           from idempotency_keys where scope = $1 and key = $2"#,
        scope.as_str(),
        key.as_str(),
        fingerprint,
    )
    .fetch_optional(&mut *conn)
    .await?;
    Ok(match row {
        // Deleted by the reaper between the two statements (a day-old key): treated as unfinished, with
        // nothing known to be stored.
        None => KeyState::Unfinished { lines_stored: 0 },
        Some(row) if !row.same => KeyState::Reused,
        Some(row) => match row.status {
            Some(status) => KeyState::Finished(StoredReply { status: status as u16, body: row.body }),
            None => KeyState::Unfinished { lines_stored: row.lines_stored },
        },
    })
}

/// Stores the final reply unless one is stored already; returns the reply that stands (the first one).
pub async fn finish(
    conn: &mut PgConnection,
    scope: Scope,
    key: &IdempotencyKey,
    reply: &StoredReply,
) -> StoreResult<StoredReply> {
    let row = sqlx::query!(
        r#"with set as (
             update idempotency_keys set status = $3, body = $4
             where scope = $1 and key = $2 and status is null
             returning status, body
           )
           select status as "status!", body from set
           union all
           select status as "status!", body from idempotency_keys
           where scope = $1 and key = $2 and status is not null and not exists (select 1 from set)"#,
        scope.as_str(),
        key.as_str(),
        reply.status as i16,
        reply.body.as_ref() as Option<&Value>,
    )
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row.map_or_else(|| reply.clone(), |row| StoredReply { status: row.status as u16, body: row.body }))
}

/// Locks a stream request's key and returns how many of its lines are stored; the caller holds the stream's
/// counter row, so this never waits for long.
pub async fn lock_lines(conn: &mut PgConnection, key: &IdempotencyKey) -> StoreResult<i64> {
    let stored = sqlx::query_scalar!(
        "select lines_stored from idempotency_keys where scope = 'stream' and key = $1 for update",
        key.as_str(),
    )
    .fetch_optional(&mut *conn)
    .await?;
    Ok(stored.unwrap_or(0))
}

/// Records that the request's first `lines` lines are stored.
pub async fn set_lines(conn: &mut PgConnection, key: &IdempotencyKey, lines: i64) -> StoreResult<()> {
    sqlx::query!(
        "update idempotency_keys set lines_stored = greatest(lines_stored, $2) where scope = 'stream' and key = $1",
        key.as_str(),
        lines,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The keys as a whole, for the reaper.
#[derive(Debug, Clone)]
pub struct KeyStore {
    pool: Pool,
}

impl KeyStore {
    /// A store on `pool`.
    pub fn new(pool: Pool) -> Self {
        KeyStore { pool }
    }

    /// Forgets up to `limit` keys older than `keep_seconds`; returns how many.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delete_expired(&self, keep_seconds: i64, limit: i64) -> StoreResult<u64> {
        let deleted = sqlx::query!(
            "delete from idempotency_keys where (scope, key) in (
           select scope, key from idempotency_keys where created_at < now() - make_interval(secs => $1::bigint)
           order by created_at limit $2 for update skip locked)",
            keep_seconds,
            limit,
        )
        .execute(&self.pool)
        .await?;
        Ok(deleted.rows_affected())
    }
}
