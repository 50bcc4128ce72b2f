//! What a Query waits for, from its questions: the question a status patch is about, and the oldest other
//! question the Query still waits for (the `query_waiting_for` view), as the Query's `waitingFor` shows them.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::QuestionStore;
use crate::db::StoreResult;

/// What the Query waits for, as the annotation shows it.
#[derive(Debug, Clone)]
pub struct WaitingFor {
    pub question_id: String,
    pub since: DateTime<Utc>,
    pub task_id: Option<Uuid>,
    pub tool_call_id: Option<String>,
    pub pending: bool,
}

impl QuestionStore {
    /// What a Query waits for while question `question_id` is open (and whether it still is).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn waiting_for(&self, question_id: &str) -> StoreResult<Option<WaitingFor>> {
        Ok(sqlx::query_as!(
            WaitingFor,
            r#"select id as question_id, created_at as since, task_id, tool_call_id, status = 'pending' as "pending!"
               from questions where id = $1"#,
            question_id,
        )
        .fetch_optional(self.pool())
        .await?)
    }

    /// Another question the same Query still waits for, if any (the oldest).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn still_waiting(&self, namespace: &str, name: &str, except: &str) -> StoreResult<Option<WaitingFor>> {
        Ok(sqlx::query_as!(
            WaitingFor,
            r#"select question_id as "question_id!", since as "since!", task_id, tool_call_id, true as "pending!"
               from query_waiting_for where namespace = $1 and name = $2 and question_id <> $3
               order by since limit 1"#,
            namespace,
            name,
            except,
        )
        .fetch_optional(self.pool())
        .await?)
    }
}
