//! How a question's change is recorded beyond its row, in the changing transaction: the watch log (which
//! also tells every replica's tail whom to wake), the step in its history, the asking Query's status patch,
//! its unified stream and the caller's trace. The one writer of the history: every step — a change's, a
//! delivery's, a reminder's, a refusal's — is written here.

use sqlx::PgConnection;

use serde_json::json;

use super::{announce, watch_log};
use crate::{
    db::{StoreResult, feed::FeedTx},
    questions::{
        model::{Question, QuestionRow},
        record::{ChangeKind, Entry, Step},
        timeout::TIMEOUT_ACTOR,
    },
    traces::{wait::ClosedWait, wait_store},
};

/// Logs the change for watchers, writes it into its Query's stream and queues the NOTIFY; returns the
/// question as it now is, or `None` when the stream could not be written right now (try again).
pub(super) async fn record(
    tx: &mut FeedTx,
    kind: ChangeKind,
    row: QuestionRow,
    via: Option<&str>,
) -> StoreResult<Option<Question>> {
    let question = watch_log::append(tx, kind, row).await?;
    if let Some(entry) = history_entry(kind, &question, via) {
        step(tx.conn(), &entry).await?;
    }
    if let Some(query) = &question.query
        && let Some(namespace) = &query.namespace
        && let Some(action) = kind.status_action()
    {
        // The Query waits while the question is pending and resumes when it closes (outbox, see migration 0006).
        queue_status_patch(tx.conn(), &question.id, namespace, &query.name, action).await?;
    }
    if !announce::announce(tx, kind, &question).await? || !wait_span(tx, kind, &question, via).await? {
        return Ok(None);
    }
    Ok(Some(question))
}

/// A closing change writes the span of the wait into the caller's trace, when the question was asked with a
/// trace context. False when the trace cannot be written right now (try again).
async fn wait_span(tx: &mut FeedTx, kind: ChangeKind, question: &Question, via: Option<&str>) -> StoreResult<bool> {
    use ChangeKind::{QuestionAnswered, QuestionCancelled, QuestionDeclined, QuestionExpired};
    if !matches!(kind, QuestionAnswered | QuestionCancelled | QuestionExpired | QuestionDeclined) {
        return Ok(true);
    }
    let closed = ClosedWait {
        question_id: &question.id,
        recipient: &question.recipient,
        sender: &question.sender,
        status: question.status.as_str(),
        answered_by: question.answered_by.as_deref(),
        via,
        tool_call_id: question.tool_call_id.as_deref(),
        query_name: question.query.as_ref().map(|query| query.name.as_str()),
        query_namespace: question.query.as_ref().and_then(|query| query.namespace.as_deref()),
    };
    wait_store::close(tx, &closed).await
}

/// Records each of `rows` as changed by `kind` (via `via`), in order; `None` as soon as one's Query stream
/// could not be written (the caller rolls back and tries the whole change again), else how many.
pub(super) async fn record_all(
    tx: &mut FeedTx,
    kind: ChangeKind,
    rows: Vec<QuestionRow>,
    via: Option<&str>,
) -> StoreResult<Option<usize>> {
    let count = rows.len();
    for row in rows {
        if record(tx, kind, row, via).await?.is_none() {
            return Ok(None);
        }
    }
    Ok(Some(count))
}

/// The history step a change records: who, via what, and what (the question's own fields say it).
fn history_entry<'a>(kind: ChangeKind, question: &'a Question, via: Option<&'a str>) -> Option<Entry<'a>> {
    let entry =
        |step, actor: Option<&'a str>, detail| Entry { question_id: &question.id, step, actor, channel: via, detail };
    Some(match kind {
        ChangeKind::QuestionCreated => {
            let detail = json!({"sender": question.sender, "recipient": question.recipient, "channels": question.channels,
                                "query": question.query, "responseSchema": question.response_schema});
            entry(Step::Created, Some(question.owner.as_deref().unwrap_or(&question.sender)), Some(detail))
        }
        ChangeKind::QuestionAnswered => {
            entry(Step::Answered, question.answered_by.as_deref(), Some(json!({"response": question.response})))
        }
        ChangeKind::QuestionDeclined => {
            let detail = question.decline_reason.as_ref().map(|reason| json!({"reason": reason}));
            entry(Step::Declined, question.answered_by.as_deref(), detail)
        }
        ChangeKind::QuestionExpired => entry(Step::Expired, Some(TIMEOUT_ACTOR), None),
        ChangeKind::QuestionCancelled => entry(Step::Cancelled, question.owner.as_deref(), None),
        ChangeKind::QuestionUpdated => return None,
    })
}

/// Records an update of question `row` that leaves it as it was for its Query (a channel delivery moved on,
/// or its timeout escalated it): the watch log, for watchers and waiters, and `step` in its history when the
/// update made one. `row` carries the change's new resourceVersion.
pub async fn record_update(tx: &mut FeedTx, row: QuestionRow, made: Option<&Entry<'_>>) -> StoreResult<Question> {
    if let Some(entry) = made {
        step(tx.conn(), entry).await?;
    }
    watch_log::append(tx, ChangeKind::QuestionUpdated, row).await
}

/// Writes `entry` into the question's history, in the caller's transaction: the only place a step is written.
pub async fn step(conn: &mut PgConnection, entry: &Entry<'_>) -> StoreResult<()> {
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

/// Queues a patch of the asking Query's status (`wait` or `resume`) in the caller's transaction; one replica
/// makes it later (the outbox of migration 0006).
pub(super) async fn queue_status_patch(
    conn: &mut PgConnection,
    question_id: &str,
    namespace: &str,
    name: &str,
    action: &str,
) -> StoreResult<()> {
    sqlx::query!(
        "insert into query_status_patches (question_id, query_namespace, query_name, action) values ($1, $2, $3, $4)",
        question_id,
        namespace,
        name,
        action,
    )
    .execute(conn)
    .await?;
    Ok(())
}
