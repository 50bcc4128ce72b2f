//! What a question's change writes into its Query's unified stream, in the question's own transaction:
//! `question_raised`, `question_answered`, `question_cancelled` or `question_expired`, and a `phase_change`
//! into the waiting phase when the Query's first open question is asked, and out of it when its last one
//! closes. The stream is the Query's name (upstream keys streams by name only).

use serde_json::{Map, Value, json};

use super::model::Question;
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
pub async fn announce(tx: &mut FeedTx, kind: &str, question: &Question) -> StoreResult<bool> {
    let Some(query) = &question.query else {
        return Ok(true);
    };
    let (event, reason) = match kind {
        "question_created" => (EventType::QuestionRaised, "question_pending"),
        "question_answered" => (EventType::QuestionAnswered, "question_answered"),
        "question_cancelled" => (EventType::QuestionCancelled, "question_cancelled"),
        _ => (EventType::QuestionExpired, "question_expired"),
    };
    // Question changes hold the questions feed's lock, so this count cannot change under us.
    let others_open = sqlx::query_scalar!(
        r#"select exists (select 1 from questions
                          where status = 'pending' and query_name = $1
                            and query_namespace is not distinct from $2 and id <> $3) as "open!""#,
        query.name,
        query.namespace,
        question.id,
    )
    .fetch_one(tx.conn())
    .await?;
    let moves_phase = !others_open;
    let count = if moves_phase { 2 } else { 1 };
    let Some(base) = broker_writes::claim_positions(tx, &query.name, count).await? else {
        return Ok(false);
    };
    let mut events = vec![(event, event_data(event, question))];
    if moves_phase {
        let current = broker_writes::latest_phase(tx, &query.name).await?;
        let (from, to) = match event {
            EventType::QuestionRaised => (current.unwrap_or_else(|| RUNNING.to_owned()), WAITING.to_owned()),
            _ => (current.unwrap_or_else(|| WAITING.to_owned()), RUNNING.to_owned()),
        };
        let data = json!({"from": from, "to": to, "reason": reason, "question_id": question.id});
        events.push((EventType::PhaseChange, data));
    }
    broker_writes::insert_events(tx, &query.name, base, &events).await?;
    Ok(true)
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
        _ => {}
    }
    Value::Object(data)
}
