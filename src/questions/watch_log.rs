//! The questions watch log (`question_events`): which questions a committed transaction changed (for the
//! tail that wakes their waiters), the changes after a resourceVersion (for watches), and its pruning.

use super::{QuestionStore, change_kind::ChangeKind};
use crate::db::StoreResult;

/// A logged change, for watchers.
#[derive(Debug, Clone)]
pub struct QuestionEvent {
    /// The resourceVersion of the change.
    pub version: i64,
    /// What happened.
    pub kind: ChangeKind,
    /// The question after the change, as JSON.
    pub question: serde_json::Value,
}

impl QuestionStore {
    /// The questions transactions `txs` changed, with the version of each change.
    pub async fn changed_by(&self, txs: &[i64]) -> StoreResult<Vec<(String, i64)>> {
        let txs: Vec<String> = txs.iter().map(i64::to_string).collect();
        let rows = sqlx::query!(
            "select question_id, resource_version from question_events where tx = any($1::text[]::xid8[])",
            &txs,
        )
        .fetch_all(self.pool())
        .await?;
        Ok(rows.into_iter().map(|row| (row.question_id, row.resource_version)).collect())
    }

    /// The oldest resourceVersion still in the watch log, if any.
    pub async fn oldest_logged_version(&self) -> StoreResult<Option<i64>> {
        Ok(sqlx::query_scalar!("select min(resource_version) from question_events").fetch_one(self.pool()).await?)
    }

    /// Up to `limit` logged changes after version `after`.
    pub async fn events_after(&self, after: i64, limit: i64) -> StoreResult<Vec<QuestionEvent>> {
        Ok(sqlx::query_as!(
            QuestionEvent,
            r#"select resource_version as version, kind as "kind: ChangeKind", question from question_events
               where resource_version > $1 order by resource_version limit $2"#,
            after,
            limit,
        )
        .fetch_all(self.pool())
        .await?)
    }

    /// Drops up to `limit` watch-log rows older than `keep_seconds`; watches from before them get 410 and
    /// relist.
    pub async fn prune_events(&self, keep_seconds: i64, limit: i64) -> StoreResult<usize> {
        let pruned = sqlx::query!(
            "delete from question_events where resource_version in (
               select resource_version from question_events
               where created_at < now() - make_interval(secs => $1::bigint)
               order by resource_version limit $2 for update skip locked)",
            keep_seconds,
            limit,
        )
        .execute(self.pool())
        .await?;
        Ok(pruned.rows_affected() as usize)
    }
}
