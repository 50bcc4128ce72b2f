//! What a question's change writes into its Query's unified stream, in the question's own transaction:
//! `question_raised`, `question_answered`, `question_cancelled` or `question_expired`, and a `phase_change`
//! into the waiting phase when the Query's first open question is asked, and out of it when its last one
//! closes. The stream is the Query's name (upstream keys streams by name only).

use serde_json::{Map, Value, json};

use crate::questions::{model::Question, record::ChangeKind};
use crate::{
    db::{StoreResult, feed::FeedTx},
    streams::{broker_writes, typed::EventType},
};

/// The phase a Query is in while a question of it is open, in the stream and the resume state (seed 002's
/// word; Kubernetes gets the configured waiting phase).
pub const WAITING: &str = "waiting";
/// The phase a Query is in otherwise.
pub const RUNNING: &str = "running";

/// Writes the change `kind` of `question` into its Query's stream. Returns false when the stream cannot be
/// written right now: the caller rolls back and tries the whole change again.
pub async fn announce(tx: &mut FeedTx, kind: ChangeKind, question: &Question) -> StoreResult<bool> {
    let Some(query) = &question.query else {
        return Ok(true);
    };
    let (event, reason) = match kind {
        ChangeKind::QuestionCreated => (EventType::QuestionRaised, "question_pending"),
        ChangeKind::QuestionAnswered => (EventType::QuestionAnswered, "question_answered"),
        ChangeKind::QuestionCancelled => (EventType::QuestionCancelled, "question_cancelled"),
        ChangeKind::QuestionExpired => (EventType::QuestionExpired, "question_expired"),
        ChangeKind::QuestionDeclined => (EventType::QuestionDeclined, "question_declined"),
        // A delivery's progress is no event of the Query's.
        ChangeKind::QuestionUpdated => return Ok(true),
    };
    let Some(base) = broker_writes::claim_positions(tx, &query.name, 1).await? else {
        return Ok(false);
    };
    let mut events = vec![(event, event_data(event, question))];
    // Read under the stream's row lock, so no other writer's phase change can come in between.
    let current = broker_writes::latest_phase(tx, &query.name).await?;
    let to = if event == EventType::QuestionRaised {
        (current.as_deref() != Some(WAITING)).then_some(WAITING)
    } else {
        // Back to running when the last open question of the Query closes, unless the phase moved on already
        // (a batch of expiries closes several questions of one Query: only the first moves it).
        let others_open = other_open_questions(tx, question).await?;
        (!others_open && current.as_deref() == Some(WAITING)).then_some(RUNNING)
    };
    if let Some(to) = to {
        // The stream's row is ours now: the next position follows at once.
        if broker_writes::claim_positions(tx, &query.name, 1).await?.is_none() {
            return Ok(false);
        }
        let from = current.unwrap_or_else(|| RUNNING.to_owned());
        let data = json!({"from": from, "to": to, "reason": reason, "question_id": question.id});
        events.push((EventType::PhaseChange, data));
    }
    broker_writes::insert_events(tx, &query.name, base, &events).await?;
    Ok(true)
}

/// Whether another question of the same Query is still open. Question changes hold the questions feed's
/// lock, so this cannot change under us.
async fn other_open_questions(tx: &mut FeedTx, question: &Question) -> StoreResult<bool> {
    let Some(query) = &question.query else { return Ok(false) };
    Ok(sqlx::query_scalar!(
        r#"select exists (select 1 from questions
                          where status = 'pending' and query_name = $1
                            and query_namespace is not distinct from $2 and id <> $3) as "open!""#,
        query.name,
        query.namespace,
        question.id,
    )
    .fetch_one(tx.conn())
    .await?)
}

/// The `data` of a question event (seed 002's shapes; optional fields left out when unknown).
fn event_data(event: EventType, question: &Question) -> Value {
    let mut data = Map::new();
    data.insert("question_id".into(), json!(question.id));
    match event {
        EventType::QuestionRaised => {
            data.insert("task_id".into(), json!(question.task_id));
            if let Some(tool_call_id) = &question.tool_call_id {
                data.insert("tool_call_id".into(), json!(tool_call_id));
            }
            data.insert("recipient".into(), json!(question.recipient));
            data.insert("content".into(), json!(question.content));
        }
        EventType::QuestionAnswered => {
            data.insert("response".into(), json!(question.response));
            if let Some(answered_by) = &question.answered_by {
                data.insert("answered_by".into(), json!(answered_by));
            }
        }
        EventType::QuestionDeclined => {
            if let Some(declined_by) = &question.answered_by {
                data.insert("declined_by".into(), json!(declined_by));
            }
            if let Some(reason) = &question.decline_reason {
                data.insert("reason".into(), json!(reason));
            }
        }
        _ => {}
    }
    Value::Object(data)
}
