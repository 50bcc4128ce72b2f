//! SQL for the resume state: the `query_resume_states` and `stream_phases` views (migration 0011, the same
//! views SQL users read) and the Query's last stored message.

use crate::db::pool::Pool;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::db::StoreResult;

/// A `query_resume_states` row: the Query's phase and the question it is blocked on, if any.
#[derive(Debug)]
pub struct ResumeRow {
    pub phase: String,
    pub question_id: Option<String>,
    pub task_id: Option<Uuid>,
    pub tool_call_id: Option<String>,
    pub question_status: Option<String>,
    pub waiting_since: Option<DateTime<Utc>>,
    pub can_resume: bool,
}

/// What the broker knows of a stream.
#[derive(Debug)]
pub struct StreamPhase {
    pub phase: String,
    pub completed: bool,
}

/// Resume state in Postgres.
#[derive(Debug, Clone)]
pub struct QueryStore {
    pool: Pool,
}

impl QueryStore {
    /// A store on `pool`.
    pub fn new(pool: Pool) -> Self {
        QueryStore { pool }
    }

    /// The resume row of Query `namespace/name`, if a question ever named it; else the row of questions that
    /// named only `name` (a caller that sent `x-ark-query: name`).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn resume_row(&self, namespace: &str, name: &str) -> StoreResult<Option<ResumeRow>> {
        Ok(sqlx::query_as!(
            ResumeRow,
            r#"select phase as "phase!", question_id, task_id, tool_call_id, question_status, waiting_since,
                      can_resume as "can_resume!"
               from query_resume_states where (namespace = $1 or namespace is null) and name = $2
               order by namespace nulls last limit 1"#,
            namespace,
            name,
        )
        .fetch_optional(&self.pool)
        .await?)
    }

    /// The phase of stream `name`, if it exists.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn stream_phase(&self, name: &str) -> StoreResult<Option<StreamPhase>> {
        Ok(sqlx::query_as!(
            StreamPhase,
            r#"select phase as "phase!", phase = 'completed' as "completed!" from stream_phases where stream_id = $1"#,
            name,
        )
        .fetch_optional(&self.pool)
        .await?)
    }

    /// The sequence number of the last message stored for Query `name` (messages name Queries by name).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn last_message_sequence(&self, name: &str) -> StoreResult<Option<i64>> {
        Ok(sqlx::query_scalar!("select max(sequence_number) from messages where query_id = $1", name)
            .fetch_one(&self.pool)
            .await?)
    }
}
