//! MCP tasks as each protocol era sees them. A task is the question behind it: creating a task commits
//! the question first (durable create), and status, timestamps and result are derived from the row, so
//! every replica and both eras (2025-11-25 `tasks/*`, 2026-07-28 SEP-2663) report the same task.

use crate::telemetry::chain;
use rmcp::{
    ErrorData as McpError,
    model::{DetailedTask, Task, TaskPayload, TaskStatus},
};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    caller,
    tools::{self, Caller},
};
use crate::{
    db::StoreError,
    questions::{
        bodies::NewQuestion,
        model::{Question, QuestionStatus},
    },
    state::AppState,
};

/// `_meta` key tying a message to its task.
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// What a working task says about itself.
pub const PENDING_MESSAGE: &str = "Question pending — waiting for response";
/// What a task waiting for the person at its client says (2026-07-28: its `inputRequests` ask them).
pub const CALLER_MESSAGE: &str = "Waiting for the person at this client to answer";
/// The same in 2025-11-25, where the asking happens on the `tasks/result` stream.
const LEGACY_CALLER_MESSAGE: &str = "Waiting for the person at this client: call tasks/result to be asked";
/// Shortest TTL granted, so a task is never gone before its creation reply arrives.
const MIN_TTL_MS: u64 = 1_000;

/// The tasks of this broker: create, find, list; shared by both eras' front-ends.
#[derive(Debug, Clone)]
pub struct Tasks {
    state: AppState,
}

impl Tasks {
    /// Tasks over the broker's state.
    pub fn new(state: AppState) -> Self {
        Tasks { state }
    }

    /// The poll interval suggested to clients, in milliseconds.
    pub fn task_poll_interval_ms(&self) -> u64 {
        self.state.config.mcp_task_poll_interval_ms
    }

    /// Asks `question` as a task with (at most) `requested_ttl_ms`; committed when this returns.
    pub async fn create(&self, mut question: NewQuestion, requested_ttl_ms: Option<u64>) -> Result<Question, McpError> {
        let config = &self.state.config;
        let max_ttl = config.mcp_task_max_ttl_seconds.saturating_mul(1000);
        // A task is its question: it must live until the question's own timeout has acted, so a timeout
        // longer than the requested ttl lengthens the ttl granted (within the longest this broker grants).
        let timeout_ms = question
            .timeout_seconds
            .or(question.ttl_seconds)
            .map(|seconds| seconds.max(0) as u64 * 1000)
            .or_else(|| question.expires_at.map(|at| (at - chrono::Utc::now()).num_milliseconds().max(0) as u64));
        if let Some(timeout) = timeout_ms.filter(|timeout| *timeout > max_ttl) {
            return Err(McpError::invalid_params(
                format!(
                    "timeoutSeconds: {} s is longer than the longest task this broker keeps ({} s)",
                    timeout / 1000,
                    max_ttl / 1000
                ),
                None,
            ));
        }
        let ttl = requested_ttl_ms
            .unwrap_or(config.mcp_task_ttl_seconds.saturating_mul(1000))
            .max(timeout_ms.map_or(0, |timeout| timeout.saturating_add(MIN_TTL_MS)))
            .clamp(MIN_TTL_MS, max_ttl);
        question.task_id = Some(Uuid::new_v4());
        question.task_ttl_ms = Some(ttl as i64);
        self.state.questions.create(&question).await.map_err(internal)
    }

    /// The question behind `task_id`; -32602 when there is none, it is past its TTL, or (with auth on) the
    /// caller did not create it — another principal's task is exactly an unknown one.
    pub async fn find(&self, task_id: &str, caller: &Caller) -> Result<Question, McpError> {
        let not_found =
            || McpError::invalid_params(format!("Failed to retrieve task: Task not found ({task_id})"), None);
        let id = Uuid::parse_str(task_id).map_err(|_| not_found())?;
        self.state.questions.task(id, caller.owner.as_deref()).await.map_err(internal)?.ok_or_else(not_found)
    }

    /// One page of the caller's live tasks (everyone's with auth off) after the opaque `cursor`, and the cursor
    /// of the next page.
    pub async fn list(
        &self,
        cursor: Option<&str>,
        page: i64,
        caller: &Caller,
    ) -> Result<(Vec<Question>, Option<String>), McpError> {
        let after = match cursor {
            None => 0,
            Some(cursor) => decode_cursor(cursor).ok_or_else(|| McpError::invalid_params("Invalid cursor", None))?,
        };
        let mut tasks = self.state.questions.tasks(after, page + 1, caller.owner.as_deref()).await.map_err(internal)?;
        let next = if tasks.len() as i64 > page {
            tasks.truncate(page as usize);
            tasks.last().map(|q| encode_cursor(q.sequence))
        } else {
            None
        };
        Ok((tasks, next))
    }
}

/// Maps a store failure to -32603 (logged; the details stay here), saying what happened: only an unreachable
/// database is called one.
pub fn internal(error: StoreError) -> McpError {
    tracing::warn!(error = %chain(&error), "MCP request failed in the store");
    let message = match error {
        StoreError::Unavailable(_) if crate::db::refusal::too_many_clients() => crate::db::refusal::MESSAGE,
        StoreError::Unavailable(_) => "the broker could not reach its database; retry",
        StoreError::ShuttingDown => "the broker is shutting down; retry on another replica",
        StoreError::Contended(_) => "too many concurrent changes of the same question; retry",
        StoreError::Unsettled => "the broker could not learn whether the change was stored; read the question",
        StoreError::Database(_) => "the broker failed to complete the request",
    };
    McpError::internal_error(message, None)
}

fn encode_cursor(sequence: i64) -> String {
    format!("t{sequence:x}")
}

fn decode_cursor(cursor: &str) -> Option<i64> {
    i64::from_str_radix(cursor.strip_prefix('t')?, 16).ok().filter(|n| *n >= 0)
}

/// When the task last changed.
fn last_updated(question: &Question) -> String {
    question.closed_at.clone().unwrap_or_else(|| question.created_at.clone())
}

fn task_id(question: &Question) -> String {
    question.task_id.map(|id| id.to_string()).unwrap_or_default()
}

/// The task in the 2026-07-28 (SEP-2663) shape. An expired question is a completed task whose result is a
/// tool error; only a cancelled question is a cancelled task.
pub fn modern_task(question: &Question, poll_interval_ms: u64) -> Task {
    let status = match question.status {
        QuestionStatus::Pending if caller::awaited(question) => TaskStatus::InputRequired,
        QuestionStatus::Pending => TaskStatus::Working,
        QuestionStatus::Answered | QuestionStatus::Expired | QuestionStatus::Declined => TaskStatus::Completed,
        QuestionStatus::Cancelled => TaskStatus::Cancelled,
    };
    let mut task = Task::new(task_id(question), status, question.created_at.clone(), last_updated(question))
        .with_poll_interval_ms(poll_interval_ms);
    task.ttl_ms = question.task_ttl_ms.map(|ttl| ttl as u64);
    if caller::awaited(question) {
        task = task.with_status_message(CALLER_MESSAGE);
    } else if question.status == QuestionStatus::Pending {
        task = task.with_status_message(PENDING_MESSAGE);
    }
    task
}

/// The SEP-2663 task with its inlined result, or while it awaits its caller the elicitation (its link to
/// the question's page under `page_base`).
pub fn modern_detail(question: &Question, poll_interval_ms: u64, page_base: &str) -> DetailedTask {
    let payload = match (question.status, tools::outcome(question)) {
        (QuestionStatus::Cancelled, _) => TaskPayload::Cancelled,
        (_, Some(result)) => TaskPayload::Completed { result: as_object(&result) },
        (_, None) => match caller::elicitation(question, page_base).and_then(caller::input_requests) {
            Some(input_requests) => TaskPayload::InputRequired { input_requests },
            None => TaskPayload::Working,
        },
    };
    DetailedTask::new(modern_task(question, poll_interval_ms), payload)
}

/// A tool result as the JSON object SEP-2663 inlines.
fn as_object(result: &rmcp::model::CallToolResult) -> rmcp::model::JsonObject {
    match serde_json::to_value(result) {
        Ok(Value::Object(object)) => object,
        _ => unreachable!("a CallToolResult serialises to a JSON object"),
    }
}

/// The 2025-11-25 task status of a question in `status`, and what the task says about it.
pub fn legacy_status(status: QuestionStatus) -> (&'static str, Option<&'static str>) {
    match status {
        QuestionStatus::Pending => ("working", Some(PENDING_MESSAGE)),
        QuestionStatus::Answered => ("completed", None),
        QuestionStatus::Cancelled => ("cancelled", Some("The question was cancelled.")),
        QuestionStatus::Expired => ("failed", Some("The question expired before anyone answered it.")),
        QuestionStatus::Declined => ("failed", Some("The person declined to answer the question.")),
    }
}

/// The task in the 2025-11-25 shape. There a tool error is a `failed` task, so an expired question is one.
pub fn legacy_task(question: &Question, poll_interval_ms: u64) -> Value {
    let (status, message) = match caller::awaited(question) {
        true => ("input_required", Some(LEGACY_CALLER_MESSAGE)),
        false => legacy_status(question.status),
    };
    let mut task = json!({
        "taskId": task_id(question),
        "status": status,
        "createdAt": question.created_at,
        "lastUpdatedAt": last_updated(question),
        "ttl": question.task_ttl_ms,
        "pollInterval": poll_interval_ms,
    });
    if let Some(message) = message {
        task["statusMessage"] = json!(message);
    }
    task
}

#[cfg(test)]
mod tests {
    use super::{decode_cursor, encode_cursor};

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        assert_eq!(decode_cursor(&encode_cursor(12345)), Some(12345));
        for bad in ["", "t", "12", "tzz", "t-1"] {
            assert_eq!(decode_cursor(bad), None, "{bad}");
        }
    }
}
