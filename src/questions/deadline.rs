//! A question's deadline: what its timeout does (`onTimeout`: expire it, answer it with its form's defaults,
//! or escalate it once to `escalateTo` with a second timeout as long as the first), acted on in one
//! transaction per question by whichever replica gets there first — the reaper's pass, or a waiter or a late
//! answer that finds it due — so each step happens exactly once.

use serde_json::{Value, json};

use super::{
    change_kind::ChangeKind,
    deliveries,
    history::{self, Entry, Step},
    model::{Question, QuestionRow},
    record::{log_change, record},
    schema::ResponseSchema,
    timeout::{EscalateTo, OnTimeout},
};
use crate::db::{StoreResult, feed::FeedTx};

/// Who acts when a deadline passes.
pub const TIMEOUT_ACTOR: &str = "system:timeout";

/// What a passed deadline does to a question.
enum Action {
    Expire,
    Answer(Value),
    Escalate,
}

fn action(row: &QuestionRow) -> Action {
    match OnTimeout::parse(&row.on_timeout) {
        OnTimeout::Default => {
            match row.response_schema.as_ref().and_then(|s| ResponseSchema::parse(s).ok()?.defaults()) {
                Some(defaults) => Action::Answer(defaults),
                None => Action::Expire,
            }
        }
        OnTimeout::Escalate if row.escalated_at.is_none() => Action::Escalate,
        _ => Action::Expire,
    }
}

/// Whether a passed deadline only expires the question (several such are expired in one statement).
pub fn only_expires(row: &QuestionRow) -> bool {
    matches!(action(row), Action::Expire)
}

/// Acts on question `row`'s passed deadline (the row is locked, pending and due). `None` when its Query's
/// stream could not be written right now (try the whole change again).
pub async fn act(tx: &mut FeedTx, row: QuestionRow) -> StoreResult<Option<Question>> {
    let action = action(&row);
    if let Action::Answer(defaults) = action {
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
    if let Action::Escalate = action {
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
    history::log(tx.conn(), &entry).await?;
    log_change(tx, ChangeKind::QuestionUpdated, escalated).await
}
