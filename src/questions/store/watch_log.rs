//! The questions watch log (the table `question_events`): each change appended in its transaction, which
//! questions a committed transaction changed (for the tail that wakes their waiters), the entries after a
//! resourceVersion (for watches), and its pruning.

use super::QuestionStore;
use crate::{
    db::{StoreResult, feed::FeedTx},
    questions::{
        model::{Question, QuestionRow},
        record::ChangeKind,
    },
};

/// Appends change `kind` of question `row` (carrying the change's new resourceVersion) to the watch log, in
/// the changing transaction; the question as it now is.
pub async fn append(tx: &mut FeedTx, kind: ChangeKind, row: QuestionRow) -> StoreResult<Question> {
    let question = Question::from(row);
    let snapshot = serde_json::to_value(&question).expect("a question serialises");
    sqlx::query!(
        "insert into question_events (resource_version, question_id, kind, question) values ($1, $2, $3, $4)",
        question.version,
        question.id,
        kind as ChangeKind,
        snapshot,
    )
    .execute(tx.conn())
    .await?;
    tx.wrote();
    Ok(question)
}

/// An entry of the watch log: a change, as watchers get it.
#[derive(Debug, Clone)]
pub struct WatchLogEntry {
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

    /// Up to `limit` watch-log entries after version `after`.
    pub async fn entries_after(&self, after: i64, limit: i64) -> StoreResult<Vec<WatchLogEntry>> {
        Ok(sqlx::query_as!(
            WatchLogEntry,
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
    pub async fn prune_watch_log(&self, keep_seconds: i64, limit: i64) -> StoreResult<usize> {
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
