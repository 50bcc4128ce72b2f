//! SQL for reminders (`remindEverySeconds`): each delivered message of a pending question falls due for a
//! reminder a period after its delivery and again a period after each reminder; one replica at a time claims
//! a due one (leased by pushing `remind_at` forward, as sends are by `next_attempt_at`), sends it, and
//! records it — in the question's history, in the same transaction.

use super::store::DeliveryStore;
use crate::{
    db::StoreResult,
    questions::{
        record::{Entry, Step},
        store::record,
    },
};

/// Who sends reminders, as the history records it.
pub const REMINDER_ACTOR: &str = "system:reminder";

/// A reminder claimed: for the message delivered to `channel`.
#[derive(Debug, Clone)]
pub struct ReminderJob {
    pub id: i64,
    pub question_id: String,
    pub channel: String,
    /// Which reminder this is (1 for the first).
    pub number: i32,
    /// Attempts at this reminder, including this one.
    pub attempts: i32,
    /// Where the delivered message is (Slack: `channel` and `ts`).
    pub message_ref: Option<serde_json::Value>,
}

impl DeliveryStore {
    /// Claims up to `limit` due reminders of pending questions for `lease_seconds`.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn claim_reminders(&self, limit: i64, lease_seconds: i64) -> StoreResult<Vec<ReminderJob>> {
        Ok(sqlx::query_as!(
            ReminderJob,
            r#"with due as (
                 select d.id from channel_deliveries d join questions q on q.id = d.question_id
                 where d.status = 'delivered' and d.remind_at <= now() and q.status = 'pending'
                 order by d.remind_at, d.id limit $1
                 for update of d skip locked)
               update channel_deliveries d
               set remind_attempts = d.remind_attempts + 1, remind_at = now() + make_interval(secs => $2::bigint)
               from due where d.id = due.id
               returning d.id, d.question_id, d.channel, d.reminders + 1 as "number!", d.remind_attempts as attempts,
                         d.message_ref"#,
            limit,
            lease_seconds,
        )
        .fetch_all(self.pool())
        .await?)
    }

    /// Records a reminder sent (and in the history), and schedules the next a period from now. `false` if the
    /// claim was lost meanwhile.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn reminded(&self, job: &ReminderJob, url: Option<&str>) -> StoreResult<bool> {
        let mut tx = self.pool().begin().await?;
        let changed = sqlx::query!(
            "update channel_deliveries d
             set reminders = d.reminders + 1, remind_attempts = 0,
                 remind_at = now() + make_interval(secs => q.remind_every_seconds)
             from questions q
             where d.id = $1 and q.id = d.question_id and d.remind_attempts = $2 and d.reminders + 1 = $3",
            job.id,
            job.attempts,
            job.number,
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if changed == 0 {
            return Ok(false);
        }
        let mut detail = serde_json::json!({"reminder": job.number});
        if let Some(url) = url {
            detail["url"] = url.into();
        }
        let entry = Entry {
            question_id: &job.question_id,
            step: Step::Reminded,
            actor: Some(REMINDER_ACTOR),
            channel: Some(&job.channel),
            detail: Some(detail),
        };
        record::step(&mut tx, &entry).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Tries this reminder again after `delay_ms`, or with `None` stops reminding on this channel (refused
    /// for good). `false` if the claim was lost meanwhile.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn remind_later(&self, job: &ReminderJob, delay_ms: Option<i64>) -> StoreResult<bool> {
        let changed = sqlx::query!(
            "update channel_deliveries
             set remind_at = now() + $2::bigint * interval '1 millisecond'
             where id = $1 and remind_attempts = $3 and reminders + 1 = $4",
            job.id,
            delay_ms,
            job.attempts,
            job.number,
        )
        .execute(self.pool())
        .await?
        .rows_affected();
        Ok(changed == 1)
    }
}
