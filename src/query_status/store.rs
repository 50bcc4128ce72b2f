//! SQL for Query status patching: claiming due patches from the outbox (one replica each, leased), and
//! finishing or rescheduling them.

use crate::db::StoreResult;
use crate::db::pool::Pool;

/// A patch to make.
#[derive(Debug, Clone)]
pub struct PatchJob {
    pub id: i64,
    pub question_id: String,
    pub query_namespace: String,
    pub query_name: String,
    /// `wait` or `resume`.
    pub action: String,
    /// Including this one.
    pub attempts: i32,
}

/// The outbox of Query status patches.
#[derive(Debug, Clone)]
pub struct PatchStore {
    pool: Pool,
}

impl PatchStore {
    /// A store on `pool`.
    pub fn new(pool: Pool) -> Self {
        PatchStore { pool }
    }

    /// Claims up to `limit` due patches for `lease_seconds`. A question's patches are claimed in order: a
    /// resume waits until its wait is done.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn claim_due(&self, limit: i64, lease_seconds: i64) -> StoreResult<Vec<PatchJob>> {
        Ok(sqlx::query_as!(
            PatchJob,
            r#"with due as (
                 select p.id from query_status_patches p
                 where p.done_at is null and p.next_attempt_at <= now()
                   and not exists (select 1 from query_status_patches e
                                   where e.question_id = p.question_id and e.id < p.id and e.done_at is null)
                 order by p.id limit $1
                 for update skip locked)
               update query_status_patches p
               set attempts = p.attempts + 1, next_attempt_at = now() + make_interval(secs => $2::bigint)
               from due where p.id = due.id
               returning p.id, p.question_id, p.query_namespace, p.query_name, p.action, p.attempts"#,
            limit,
            lease_seconds,
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Marks a patch done with `outcome`.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn finish(&self, id: i64, outcome: &str) -> StoreResult<()> {
        sqlx::query!("update query_status_patches set done_at = now(), outcome = $2 where id = $1", id, outcome)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Tries a patch again after `delay_ms`.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn retry_later(&self, id: i64, delay_ms: i64, error: &str) -> StoreResult<()> {
        sqlx::query!(
            "update query_status_patches
             set next_attempt_at = now() + $2::bigint * interval '1 millisecond', last_error = $3 where id = $1",
            id,
            delay_ms,
            error,
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Patches not yet done.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn backlog(&self) -> StoreResult<i64> {
        Ok(sqlx::query_scalar!(r#"select count(*) as "n!" from query_status_patches where done_at is null"#)
            .fetch_one(&self.pool)
            .await?)
    }

    /// Deletes up to `limit` patches done more than `keep_seconds` ago, and those still not done that long
    /// after they were queued: no replica patches Query status (it is off everywhere), or Kubernetes refused
    /// them for a day; the Query has long moved on, and making them now would be wrong.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delete_done_or_stale(&self, keep_seconds: i64, limit: i64) -> StoreResult<usize> {
        let deleted = sqlx::query!(
            "delete from query_status_patches where id in (
               select id from query_status_patches
               where done_at < now() - make_interval(secs => $1::bigint)
                  or (done_at is null and created_at < now() - make_interval(secs => $1::bigint))
               order by id limit $2 for update skip locked)",
            keep_seconds,
            limit,
        )
        .execute(&self.pool)
        .await?;
        Ok(deleted.rows_affected() as usize)
    }
}
