//! Reading the record of a question's decision (`question_history`): every step — asked, delivered or failed
//! per channel, answered, declined, timed out, cancelled, … — with its time, who, via which channel and what,
//! for `GET /questions/{id}/history`, the page and the `report_question_decisions` view; and pruning it.
//! Steps are written only by [`super::record`], in the transaction of the change they record.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::{QuestionStore, record};
use crate::{
    db::StoreResult,
    questions::record::{Entry, HistoryItem, Step},
    timestamp::iso_timestamp,
};

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
        record::step(&mut statements, &entry).await?;
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
