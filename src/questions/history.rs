//! The record of a question's decision (`question_history`): every step — asked, delivered or failed per
//! channel, answered, declined, expired, cancelled, … — with its time, who, via which channel and what.
//! Steps are written in the transaction of the change they record, so the record never says what did not
//! happen; `GET /questions/{id}/history` and the `report_question_decisions` view read it.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::PgConnection;
use utoipa::ToSchema;

use super::QuestionStore;
use crate::{db::StoreResult, timestamp::iso_timestamp};

/// A step of a question's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Asked.
    Created,
    /// Delivered to a channel.
    Delivered,
    /// A channel delivery given up.
    DeliveryFailed,
    /// Its channels were reminded.
    Reminded,
    /// Its timeout passed and it went to others.
    Escalated,
    /// Someone who may not answer it tried to.
    Refused,
    /// Answered.
    Answered,
    /// The person refused to answer.
    Declined,
    /// Closed by its deadline.
    Expired,
    /// Withdrawn by its asker.
    Cancelled,
}

impl Step {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Created => "created",
            Step::Delivered => "delivered",
            Step::DeliveryFailed => "delivery_failed",
            Step::Reminded => "reminded",
            Step::Escalated => "escalated",
            Step::Refused => "refused",
            Step::Answered => "answered",
            Step::Declined => "declined",
            Step::Expired => "expired",
            Step::Cancelled => "cancelled",
        }
    }
}

/// A step to record.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    pub question_id: &'a str,
    pub step: Step,
    /// Who (a principal, `ark://…`, `slack:U…`, `system:…`).
    pub actor: Option<&'a str>,
    /// Via which channel (`api`, `page`, `mcp`, `slack:<channel>`, `github:<owner>/<repo>#<n>`).
    pub channel: Option<&'a str>,
    /// What: the answer, a reason, an error.
    pub detail: Option<Value>,
}

/// Records `entry` in the caller's transaction.
pub async fn log(conn: &mut PgConnection, entry: &Entry<'_>) -> StoreResult<()> {
    sqlx::query!(
        "insert into question_history (question_id, step, actor, channel, detail) values ($1, $2, $3, $4, $5)",
        entry.question_id,
        entry.step.as_str(),
        entry.actor,
        entry.channel,
        entry.detail,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// One recorded step, as `GET /questions/{id}/history` shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryItem {
    /// What happened.
    #[schema(value_type = Step)]
    pub step: String,
    /// When (ISO 8601).
    pub at: String,
    /// Who.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub actor: Option<String>,
    /// Via which channel.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub channel: Option<String>,
    /// What: the answer, a reason, an error, the asking Query.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, value_type = Object)]
    pub detail: Option<Value>,
}

impl QuestionStore {
    /// Every recorded step of question `id`, in order.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn history(&self, id: &str) -> StoreResult<Vec<HistoryItem>> {
        let rows = sqlx::query!(
            "select step, at, actor, channel, detail from question_history where question_id = $1 order by id",
            id,
        )
        .fetch_all(self.pool())
        .await?;
        Ok(rows
            .into_iter()
            .map(|row| HistoryItem {
                step: row.step,
                at: iso_timestamp(row.at),
                actor: row.actor,
                channel: row.channel,
                detail: row.detail,
            })
            .collect())
    }

    /// The recorded steps of each of `ids` (in order), in one read: the page shows every card's history.
    /// A question without any step kept has no entry.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn histories(&self, ids: &[String]) -> StoreResult<HashMap<String, Vec<HistoryItem>>> {
        let mut histories: HashMap<String, Vec<HistoryItem>> = HashMap::new();
        if ids.is_empty() {
            return Ok(histories);
        }
        let rows = sqlx::query!(
            "select question_id, step, at, actor, channel, detail from question_history
             where question_id = any($1) order by question_id, id",
            ids,
        )
        .fetch_all(self.pool())
        .await?;
        for row in rows {
            let item = HistoryItem {
                step: row.step,
                at: iso_timestamp(row.at),
                actor: row.actor,
                channel: row.channel,
                detail: row.detail,
            };
            histories.entry(row.question_id).or_default().push(item);
        }
        Ok(histories)
    }

    /// Records that `actor` was refused an answer to question `id` via `channel`, and why (on its own: nothing
    /// else changed).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn record_refusal(&self, id: &str, actor: Option<&str>, channel: &str, why: &str) -> StoreResult<()> {
        let entry = Entry {
            question_id: id,
            step: Step::Refused,
            actor,
            channel: Some(channel),
            detail: Some(serde_json::json!({"reason": why})),
        };
        let mut statements = self.pool().statements().await?;
        log(&mut statements, &entry).await?;
        Ok(statements.done().await?)
    }

    /// Deletes up to `limit` steps recorded before `keep_seconds` ago; returns how many.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn prune_history(&self, keep_seconds: i64, limit: i64) -> StoreResult<usize> {
        let before: DateTime<Utc> = Utc::now() - chrono::Duration::seconds(keep_seconds);
        let deleted = sqlx::query!(
            "delete from question_history where id in (
               select id from question_history where at < $1 order by at limit $2 for update skip locked)",
            before,
            limit,
        )
        .execute(self.pool())
        .await?;
        Ok(deleted.rows_affected() as usize)
    }
}
