//! The questions behind MCP tasks (a question with a task id): finding one, and listing live ones. A task past
//! its TTL is gone.

use uuid::Uuid;

use super::QuestionStore;
use crate::{
    db::StoreResult,
    questions::model::{Question, QuestionRow},
};

impl QuestionStore {
    /// The question behind task `task_id`, unless there is none, the task is past its TTL, or `owner` is
    /// given and did not ask it.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn task(&self, task_id: Uuid, owner: Option<&str>) -> StoreResult<Option<Question>> {
        let row = sqlx::query_as!(
            QuestionRow,
            "select * from questions
             where task_id = $1 and (task_ttl_ms is null or created_at + task_ttl_ms * interval '1 millisecond' > now())
               and ($2::text is null or owner = $2)",
            task_id,
            owner,
        )
        .fetch_optional(self.pool())
        .await?;
        Ok(row.map(Question::from))
    }

    /// Up to `limit` live tasks created after sequence `after` (of `owner`, when given), oldest first.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn tasks(&self, after: i64, limit: i64, owner: Option<&str>) -> StoreResult<Vec<Question>> {
        let rows = sqlx::query_as!(
            QuestionRow,
            "select * from questions
             where task_id is not null and sequence_number > $1
               and (task_ttl_ms is null or created_at + task_ttl_ms * interval '1 millisecond' > now())
               and ($3::text is null or owner = $3)
             order by sequence_number limit $2",
            after,
            limit,
            owner,
        )
        .fetch_all(self.pool())
        .await?;
        Ok(rows.into_iter().map(Question::from).collect())
    }
}
