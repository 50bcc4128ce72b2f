//! Acting on a question's passed timeout ([`crate::questions::timeout`]: expire it, answer it with its
//! form's defaults, or escalate it once to `escalateTo` with a second timeout as long as the first), in one
//! transaction per question by whichever replica gets there first — the reaper's pass, or a waiter or a late
//! answer that finds it due — so each step happens exactly once.

use serde_json::{Value, json};

use super::{
    QuestionStore, RETRIES, deliveries,
    record::{record, record_all, record_update},
};
use crate::{
    db::{
        StoreResult,
        feed::{Feed, FeedTx},
        retry::{Attempt, in_feed_tx},
    },
    questions::{
        model::{Question, QuestionRow},
        record::{ChangeKind, Entry, Step},
        timeout::{AtTimeout, EscalateTo, OnTimeout, TIMEOUT_ACTOR, at_timeout},
    },
};

impl QuestionStore {
    /// Acts on question `id`'s timeout if it is pending past it (waiters call this so they need not wait for
    /// the reaper).
    #[tracing::instrument(level = "debug", skip_all, fields(question.id = %id))]
    pub async fn act_on_timeout_if_due(&self, id: &str) -> StoreResult<()> {
        change!(&self.pool, |tx| async { Ok(timeout_if_due(tx, id).await?.then_some(())) })
    }

    /// Acts on the timeouts of up to `limit` pending questions whose timeout has passed (expires them, answers
    /// them with their defaults, or escalates them); returns how many.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn act_on_due_timeouts(&self, limit: i64) -> StoreResult<usize> {
        // Usually nothing is due: finding that out takes no feed lock (the index on `expires_at` answers it).
        let due = sqlx::query_scalar!(
            r#"select exists (select 1 from questions where status = 'pending' and expires_at <= now()) as "due!""#
        )
        .fetch_one(&self.pool)
        .await?;
        if !due {
            return Ok(0);
        }
        change!(&self.pool, |tx| async {
            let due = sqlx::query_as!(
                QuestionRow,
                r#"select * from questions where status = 'pending' and expires_at <= now()
                   order by expires_at limit $1 for update skip locked"#,
                limit,
            )
            .fetch_all(tx.conn())
            .await?;
            let count = due.len();
            // Those that only expire are expired together first, so a Query whose questions all time out at
            // once sees each expiry with every one of them closed (its phase moves back once, after the first).
            let (expiring, acting): (Vec<_>, Vec<_>) = due.into_iter().partition(|row| {
                let on_timeout = OnTimeout::parse(&row.on_timeout);
                at_timeout(on_timeout, row.response_schema.as_ref(), row.escalated_at.is_some()) == AtTimeout::Expire
            });
            let ids: Vec<String> = expiring.into_iter().map(|row| row.id).collect();
            let expired = sqlx::query_as!(
                QuestionRow,
                r#"update questions
                   set status = 'expired', closed_at = now(), resource_version = nextval('question_versions')
                   where id = any($1) returning *"#,
                &ids,
            )
            .fetch_all(tx.conn())
            .await?;
            if record_all(tx, ChangeKind::QuestionExpired, expired, None).await?.is_none() {
                return Ok(None);
            }
            for row in acting {
                if act(tx, row).await?.is_none() {
                    return Ok(None);
                }
            }
            Ok(Some(count))
        })
    }
}

/// Acts on `id`'s timeout first if it is pending past it, so a late answer or cancel sees what the timeout
/// did (expired, answered with its defaults, or escalated and still pending). False when its Query's stream
/// could not be written right now (the change must be tried again).
pub(super) async fn timeout_if_due(tx: &mut FeedTx, id: &str) -> StoreResult<bool> {
    let due = sqlx::query_as!(
        QuestionRow,
        "select * from questions where id = $1 and status = 'pending' and expires_at <= now() for update",
        id,
    )
    .fetch_optional(tx.conn())
    .await?;
    match due {
        Some(row) => Ok(act(tx, row).await?.is_some()),
        None => Ok(true),
    }
}

/// Acts on question `row`'s passed timeout (the row is locked, pending and due). `None` when its Query's
/// stream could not be written right now (try the whole change again).
async fn act(tx: &mut FeedTx, row: QuestionRow) -> StoreResult<Option<Question>> {
    let action =
        at_timeout(OnTimeout::parse(&row.on_timeout), row.response_schema.as_ref(), row.escalated_at.is_some());
    if let AtTimeout::Answer(defaults) = action {
        let answered = sqlx::query_as!(
            QuestionRow,
            r#"update questions
               set status = 'answered', response = $2::jsonb::text, response_value = $2, answered_by = $3,
                   answered_at = now(), closed_at = now(), resource_version = nextval('question_versions')
               where id = $1 returning *"#,
            row.id,
            defaults,
            TIMEOUT_ACTOR,
        )
        .fetch_one(tx.conn())
        .await?;
        return record(tx, ChangeKind::QuestionAnswered, answered, Some("timeout")).await;
    }
    if let AtTimeout::Escalate = action {
        return escalate(tx, row).await.map(Some);
    }
    let expired = sqlx::query_as!(
        QuestionRow,
        r#"update questions set status = 'expired', closed_at = now(), resource_version = nextval('question_versions')
           where id = $1 returning *"#,
        row.id,
    )
    .fetch_one(tx.conn())
    .await?;
    record(tx, ChangeKind::QuestionExpired, expired, None).await
}

/// Escalates once: its `escalateTo` channels get deliveries, and it stays pending for another timeout as long
/// as the first. Watchers and waiters hear of it as an update; the history records who it went to.
async fn escalate(tx: &mut FeedTx, row: QuestionRow) -> StoreResult<Question> {
    let to: EscalateTo = row.escalate_to.clone().and_then(|to| serde_json::from_value(to).ok()).unwrap_or_default();
    let escalated = sqlx::query_as!(
        QuestionRow,
        r#"update questions
           set escalated_at = now(), expires_at = now() + greatest(expires_at - created_at, interval '1 second'),
               channels = array(select distinct unnest(channels || $2::text[])),
               resource_version = nextval('question_versions')
           where id = $1 returning *"#,
        row.id,
        &to.channels,
    )
    .fetch_one(tx.conn())
    .await?;
    let escalated =
        if to.channels.is_empty() { escalated } else { deliveries::queue(tx.conn(), &row.id, &to.channels).await? };
    let detail: Value =
        json!({"recipients": to.recipients, "channels": to.channels, "expiresAt": escalated.expires_at});
    let entry = Entry {
        question_id: &row.id,
        step: Step::Escalated,
        actor: Some(TIMEOUT_ACTOR),
        channel: None,
        detail: Some(detail),
    };
    record_update(tx, escalated, Some(&entry)).await
}
