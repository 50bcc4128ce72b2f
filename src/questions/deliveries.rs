//! A question's side of its channel deliveries (the channels module owns the outbox): the `deliveries` the
//! question carries as the API shows them, written as a new version of the question, and which of the
//! questions a channel holds are still pending or closed.

use sqlx::PgConnection;

use super::{QuestionStore, model::QuestionRow};
use crate::db::StoreResult;

/// Writes `deliveries` (as the API shows them) onto question `id` as a new version of it; returns the row.
pub async fn set_deliveries(
    conn: &mut PgConnection,
    id: &str,
    deliveries: &serde_json::Value,
) -> StoreResult<QuestionRow> {
    Ok(sqlx::query_as!(
        QuestionRow,
        "update questions set deliveries = $2, resource_version = nextval('question_versions') where id = $1
         returning *",
        id,
        deliveries,
    )
    .fetch_one(conn)
    .await?)
}

impl QuestionStore {
    /// Which of `ids` are still pending.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn pending_among(&self, ids: &[String]) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar!("select id from questions where id = any($1) and status = 'pending'", ids)
            .fetch_all(self.pool())
            .await?)
    }

    /// Which of `ids` are closed (answered, cancelled or expired).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn closed_among(&self, ids: &[String]) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar!("select id from questions where id = any($1) and status <> 'pending'", ids)
            .fetch_all(self.pool())
            .await?)
    }
}
