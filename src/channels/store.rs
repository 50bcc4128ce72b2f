//! SQL for the channel outbox: deliveries (queued with the question by the questions module) claimed one
//! replica at a time (leased), and settled; every settlement is a change of the question too (its
//! `deliveries` as the API shows them, a new resourceVersion, a `question_updated` for watchers and
//! waiters), written through the questions module, which alone touches the questions table. Once a question closes, its delivered Slack messages are claimed
//! the same way to be updated.

use crate::db::pool::Pool;
use crate::{
    db::{
        StoreError, StoreResult,
        feed::{Feed, FeedTx},
    },
    questions::{
        record::{Entry, Step},
        store::{deliveries::refresh, record::record_update},
    },
};

/// The history step of a settled delivery.
fn settled(job: &DeliveryJob, step: Step, detail: Option<serde_json::Value>) -> Entry<'_> {
    Entry { question_id: &job.question_id, step, actor: None, channel: Some(&job.channel), detail }
}

/// A delivery claimed: to send to `channel` (what the message says is the question's).
#[derive(Debug, Clone)]
pub struct DeliveryJob {
    pub id: i64,
    pub question_id: String,
    pub channel: String,
    /// Including this one.
    pub attempts: i32,
}

/// A delivered Slack message claimed to be updated, its question having closed.
#[derive(Debug, Clone)]
pub struct UpdateJob {
    pub id: i64,
    pub question_id: String,
    /// Including this one.
    pub attempts: i32,
    /// Where the message is (Slack: `channel` and `ts`).
    pub message_ref: serde_json::Value,
}

/// The outbox of channel deliveries.
#[derive(Debug, Clone)]
pub struct DeliveryStore {
    pool: Pool,
}

/// Commits a delivery's change together with its question's refreshed deliveries, logged for watchers and
/// waiters (a blocking `ask_question` reports the delivery) and, when it settled the delivery, in the
/// question's history. A change that matched nothing — the claim was lost: its lease ran out and another
/// replica claimed the delivery since — is rolled back; `false` then.
async fn commit_refreshed(
    mut tx: FeedTx,
    question_id: &str,
    changed: u64,
    settled: Option<Entry<'_>>,
) -> StoreResult<bool> {
    if changed == 0 {
        tx.rollback().await?;
        return Ok(false);
    }
    let row = refresh(tx.conn(), question_id).await?;
    record_update(&mut tx, row, settled.as_ref()).await?;
    tx.commit().await?;
    Ok(true)
}

impl DeliveryStore {
    /// A store on `pool`.
    pub fn new(pool: Pool) -> Self {
        DeliveryStore { pool }
    }

    /// Its pool, for the outbox's other SQL ([`super::reminder_store`]).
    pub(super) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Claims up to `limit` due deliveries for `lease_seconds`: no other replica sends them meanwhile.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn claim_due(&self, limit: i64, lease_seconds: i64) -> StoreResult<Vec<DeliveryJob>> {
        Ok(sqlx::query_as!(
            DeliveryJob,
            r#"with due as (
                 select id from channel_deliveries
                 where status = 'pending' and next_attempt_at <= now()
                 order by next_attempt_at, id limit $1
                 for update skip locked)
               update channel_deliveries d
               set attempts = d.attempts + 1, next_attempt_at = now() + make_interval(secs => $2::bigint)
               from due where d.id = due.id
               returning d.id, d.question_id, d.channel, d.attempts"#,
            limit,
            lease_seconds,
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Records a sent message: its link and what finds it again. `false` if the claim was lost meanwhile.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delivered(
        &self,
        job: &DeliveryJob,
        url: Option<&str>,
        reference: &serde_json::Value,
    ) -> StoreResult<bool> {
        let mut tx = FeedTx::begin(&self.pool, Feed::Questions).await?;
        let changed = sqlx::query!(
            "update channel_deliveries
             set status = 'delivered', delivered_at = now(), message_url = $2, message_ref = $3, last_error = null,
                 -- a Slack message is updated once its question closes, which may be at once
                 next_attempt_at = now(),
                 update_status = case when channel like 'slack:%' then 'waiting' else 'done' end,
                 -- its first reminder, when the question asks for them, falls due a period after this
                 remind_at = now() + make_interval(secs => (select remind_every_seconds from questions q
                                                            where q.id = channel_deliveries.question_id))
             where id = $1 and status = 'pending' and attempts = $4",
            job.id,
            url,
            reference,
            job.attempts,
        )
        .execute(tx.conn())
        .await?
        .rows_affected();
        let detail = url.map(|url| serde_json::json!({"url": url}));
        commit_refreshed(tx, &job.question_id, changed, Some(settled(job, Step::Delivered, detail))).await
    }

    /// Tries again after `delay_ms`, recording why this attempt failed. `false` if the claim was lost.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn retry_later(&self, job: &DeliveryJob, delay_ms: i64, error: &str) -> StoreResult<bool> {
        let mut tx = FeedTx::begin(&self.pool, Feed::Questions).await?;
        let changed = sqlx::query!(
            "update channel_deliveries
             set next_attempt_at = now() + $2::bigint * interval '1 millisecond', last_error = $3
             where id = $1 and status = 'pending' and attempts = $4",
            job.id,
            delay_ms,
            error,
            job.attempts,
        )
        .execute(tx.conn())
        .await?
        .rows_affected();
        commit_refreshed(tx, &job.question_id, changed, None).await
    }

    /// Acts on inbound delivery `delivery_id` of `source` (a Slack event, a GitHub webhook) unless it was acted
    /// on before, on any replica: `None` then (a retry). When acting fails, the delivery is forgotten again, so
    /// the sender's retry is acted on rather than taken for a duplicate.
    pub async fn once<T, E: From<StoreError>>(
        &self,
        source: &str,
        delivery_id: &str,
        act: impl Future<Output = Result<T, E>>,
    ) -> Result<Option<T>, E> {
        if !self.first_sight(source, delivery_id).await? {
            return Ok(None);
        }
        match act.await {
            Ok(done) => Ok(Some(done)),
            Err(error) => {
                if let Err(forget) = self.unsee(source, delivery_id).await {
                    tracing::warn!(%forget, source, "cannot forget a delivery that failed; its retry will be skipped");
                }
                Err(error)
            }
        }
    }

    /// Forgets that an inbound delivery was seen.
    #[tracing::instrument(level = "debug", skip_all)]
    async fn unsee(&self, source: &str, delivery_id: &str) -> StoreResult<()> {
        sqlx::query!("delete from inbound_deliveries where source = $1 and delivery_id = $2", source, delivery_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Records an inbound delivery's id; `false` when it was seen before (a retry).
    #[tracing::instrument(level = "debug", skip_all)]
    async fn first_sight(&self, source: &str, delivery_id: &str) -> StoreResult<bool> {
        let inserted = sqlx::query!(
            "insert into inbound_deliveries (source, delivery_id) values ($1, $2) on conflict do nothing",
            source,
            delivery_id,
        )
        .execute(&self.pool)
        .await?;
        Ok(inserted.rows_affected() == 1)
    }

    /// Deliveries not yet made.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn pending_count(&self) -> StoreResult<i64> {
        Ok(sqlx::query_scalar!(r#"select count(*) as "n!" from channel_deliveries where status = 'pending'"#)
            .fetch_one(&self.pool)
            .await?)
    }

    /// Forgets up to `limit` inbound delivery ids seen more than `keep_seconds` ago (Slack retries within
    /// the hour; GitHub redelivers on request, which is then acted on again).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn forget_inbound(&self, keep_seconds: i64, limit: i64) -> StoreResult<usize> {
        let deleted = sqlx::query!(
            "delete from inbound_deliveries where (source, delivery_id) in (
               select source, delivery_id from inbound_deliveries
               where received_at < now() - make_interval(secs => $1::bigint)
               limit $2 for update skip locked)",
            keep_seconds,
            limit,
        )
        .execute(&self.pool)
        .await?;
        Ok(deleted.rows_affected() as usize)
    }

    /// The questions delivered to `channel`, oldest first.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn questions_on(&self, channel: &str) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar!("select question_id from channel_deliveries where channel = $1 order by id", channel)
            .fetch_all(&self.pool)
            .await?)
    }

    /// Gives a delivery up, recording why. `false` if the claim was lost.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn failed(&self, job: &DeliveryJob, error: &str) -> StoreResult<bool> {
        let mut tx = FeedTx::begin(&self.pool, Feed::Questions).await?;
        let changed = sqlx::query!(
            "update channel_deliveries set status = 'failed', last_error = $2
             where id = $1 and status = 'pending' and attempts = $3",
            job.id,
            error,
            job.attempts,
        )
        .execute(tx.conn())
        .await?
        .rows_affected();
        let detail = Some(serde_json::json!({"error": error}));
        commit_refreshed(tx, &job.question_id, changed, Some(settled(job, Step::DeliveryFailed, detail))).await
    }

    /// The questions whose delivered Slack messages wait to be updated once they close, and are due.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn awaiting_update(&self, limit: i64) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar!(
            r#"select distinct question_id as "question_id!" from channel_deliveries
               where status = 'delivered' and update_status = 'waiting' and next_attempt_at <= now()
                 and channel like 'slack:%'
               limit $1"#,
            limit,
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Claims up to `limit` due message updates of `closed` questions for `lease_seconds`.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn claim_updates(
        &self,
        closed: &[String],
        limit: i64,
        lease_seconds: i64,
    ) -> StoreResult<Vec<UpdateJob>> {
        Ok(sqlx::query_as!(
            UpdateJob,
            r#"with due as (
                 select id from channel_deliveries
                 where question_id = any($1) and status = 'delivered' and update_status = 'waiting'
                   and next_attempt_at <= now() and channel like 'slack:%'
                 order by next_attempt_at, id limit $2
                 for update skip locked)
               update channel_deliveries d
               set update_attempts = d.update_attempts + 1,
                   next_attempt_at = now() + make_interval(secs => $3::bigint)
               from due where d.id = due.id
               returning d.id, d.question_id, d.update_attempts as attempts, d.message_ref as "message_ref!""#,
            closed,
            limit,
            lease_seconds,
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Records how updating a message ended: `done`, `failed` (given up), or still `waiting` for another
    /// attempt after `delay_ms`. `false` if the claim was lost meanwhile.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn update_settled(&self, job: &UpdateJob, status: &str, delay_ms: i64) -> StoreResult<bool> {
        let changed = sqlx::query!(
            "update channel_deliveries
             set update_status = $2, next_attempt_at = now() + $3::bigint * interval '1 millisecond'
             where id = $1 and update_status = 'waiting' and update_attempts = $4",
            job.id,
            status,
            delay_ms,
            job.attempts,
        )
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(changed == 1)
    }

    /// The question a Slack message (its channel id and timestamp) was delivered for.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn question_of_message(&self, channel_id: &str, ts: &str) -> StoreResult<Option<String>> {
        Ok(sqlx::query_scalar!(
            "select question_id from channel_deliveries
             where message_ref ->> 'ts' = $2 and message_ref ->> 'channel' = $1 and channel like 'slack:%'
             limit 1",
            channel_id,
            ts,
        )
        .fetch_optional(&self.pool)
        .await?)
    }
}
