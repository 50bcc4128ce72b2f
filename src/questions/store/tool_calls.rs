//! SQL for the controller's tool_call_id ↔ task_id mapping (seed 001: the MCP call never carries the LLM's
//! tool call id, so the controller records which task answers which tool call). The mapping is the question's
//! own `tool_call_id`, set once.

use uuid::Uuid;

use super::{QuestionStore, record};
use crate::{
    db::StoreResult,
    questions::model::{QueryRef, Question, QuestionRow},
};

/// How recording a mapping went.
#[derive(Debug)]
pub enum Mapping {
    /// Recorded now, or it was recorded before with the same tool call: the question behind the task.
    Recorded(Box<Question>),
    /// No question has that task.
    UnknownTask,
    /// The task's question was asked by another Query (or names none).
    OtherQuery(Option<QueryRef>),
    /// The task already answers another tool call.
    OtherToolCall(String),
}

impl QuestionStore {
    /// Records that tool call `tool_call_id` of Query `namespace/name` is answered by task `task_id`.
    /// Idempotent; a task maps to one tool call. While the question is pending, the Query's `waitingFor`
    /// annotation is patched again so it shows the tool call too.
    pub async fn map_tool_call(
        &self,
        namespace: &str,
        name: &str,
        tool_call_id: &str,
        task_id: Uuid,
    ) -> StoreResult<Mapping> {
        let mut tx = self.pool().begin().await?;
        let Some(row) = sqlx::query_as!(QuestionRow, "select * from questions where task_id = $1 for update", task_id)
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(Mapping::UnknownTask);
        };
        let question = Question::from(row);
        let asked_by = QueryRef { namespace: Some(namespace.to_owned()), name: name.to_owned() };
        if question.query.as_ref() != Some(&asked_by) {
            return Ok(Mapping::OtherQuery(question.query));
        }
        match question.tool_call_id.as_deref() {
            Some(existing) if existing == tool_call_id => return Ok(Mapping::Recorded(Box::new(question))),
            Some(existing) => return Ok(Mapping::OtherToolCall(existing.to_owned())),
            None => {}
        }
        let row = sqlx::query_as!(
            QuestionRow,
            "update questions set tool_call_id = $2 where id = $1 returning *",
            question.id,
            tool_call_id,
        )
        .fetch_one(&mut *tx)
        .await?;
        if row.status == "pending" {
            record::queue_status_patch(&mut tx, &row.id, namespace, name, "wait").await?;
        }
        tx.commit().await?;
        Ok(Mapping::Recorded(Box::new(row.into())))
    }
}
