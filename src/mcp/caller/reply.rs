//! A reply to a question's `mcp:caller` elicitation — an elicitation result, however it arrived: a JSON-RPC
//! response POSTed to any replica (2025-11-25), an `inputResponses` entry of a retried call or of
//! `tasks/update` (2026-07-28) — answers or declines the question as the person at the calling client, under
//! the answer policy, recorded via `mcp:caller`; the first answer wins, as on every other channel. A
//! declined or dismissed form is a decline, not an error.

use serde_json::Value;

use super::ask::TEXT_FIELD;
use crate::{
    auth::Principal,
    db::StoreResult,
    questions::{
        Change,
        answering::{self, Given, Outcome},
        channel::CALLER,
        model::Question,
        policy::Answerer,
    },
    state::AppState,
};

/// What a reply came to.
#[derive(Debug)]
pub enum Replied {
    /// The question as it now is: closed by this reply, closed earlier (the first answer won), or still
    /// pending (the person opened its page, or the client could not show the elicitation).
    Question(Box<Question>),
    /// The reply was not taken: it does not fit the question (why); the question is as it was, answerable
    /// everywhere else.
    Refused(String),
    /// The answer policy does not let this principal answer it (the policy's words; recorded in the history).
    Forbidden(String),
    /// No such question, or it did not ask its caller.
    NotFound,
}

/// What the person did, read from an elicitation result.
enum Reply {
    /// Filled in the form: the answer, as the question takes it.
    Answer(Value),
    /// Opened the question's page (URL mode): the answer comes from there.
    Opened,
    /// Declined or dismissed.
    Decline(&'static str),
    /// The client could not show it (a JSON-RPC error): the question waits for its other channels.
    Failed,
}

/// Applies `result` — an elicitation result, or with `Err` the client's JSON-RPC error — to question
/// `question_id`, as `principal` (the principal the reply's request authenticated as; none with
/// authentication off).
pub async fn apply(
    state: &AppState,
    question_id: &str,
    principal: Option<&Principal>,
    result: Result<&Value, &Value>,
) -> StoreResult<Replied> {
    let questions = &state.questions;
    let Some(question) = questions.get(question_id).await? else { return Ok(Replied::NotFound) };
    let Some(stored) = &question.caller_elicitation else { return Ok(Replied::NotFound) };
    let reply = match result {
        Ok(result) => read(result, stored, &question),
        Err(error) => {
            tracing::info!(question.id = %question_id, %error, "the calling client could not show the elicitation");
            Ok(Reply::Failed)
        }
    };
    let answerer = Answerer::Caller(principal);
    let policy = &state.answer_policy;
    let outcome = match reply {
        Ok(Reply::Answer(value)) => {
            Some(answering::answer(questions, policy, question_id, Given::Json(&value), answerer, CALLER).await?)
        }
        Ok(Reply::Decline(reason)) => {
            Some(answering::decline(questions, policy, question_id, Some(reason), answerer, CALLER).await?)
        }
        Ok(Reply::Opened | Reply::Failed) => None,
        Err(why) => Some(Outcome::Refused(crate::validate::Invalid(why))),
    };
    // Heard back, whatever it said: the task is `working` again, and no replica asks this client again.
    questions.caller_replied(question_id).await?;
    Ok(match outcome {
        None => match questions.get(question_id).await? {
            Some(question) => Replied::Question(Box::new(question)),
            None => Replied::NotFound,
        },
        Some(Outcome::Changed(change)) => match *change {
            Change::Made(question) | Change::Conflict(question) => Replied::Question(Box::new(question)),
            Change::NotFound => Replied::NotFound,
        },
        Some(Outcome::Refused(invalid)) => Replied::Refused(invalid.0),
        Some(Outcome::Forbidden(why)) => Replied::Forbidden(why),
    })
}

/// What an elicitation result (`{"action", "content"}`) says the person did with `stored`.
fn read(result: &Value, stored: &Value, question: &Question) -> Result<Reply, String> {
    match result["action"].as_str() {
        Some("accept") if stored["mode"] == "url" => Ok(Reply::Opened),
        Some("accept") => {
            let content = result.get("content").filter(|c| c.is_object()).ok_or("an accepted form without content")?;
            if question.response_schema.is_some() {
                return Ok(Reply::Answer(content.clone()));
            }
            match content.get(TEXT_FIELD) {
                Some(Value::String(text)) => Ok(Reply::Answer(Value::String(text.clone()))),
                _ => Err(format!("response: the form's '{TEXT_FIELD}' must be text")),
            }
        }
        Some("decline") => Ok(Reply::Decline("Declined at the MCP client")),
        Some("cancel") => Ok(Reply::Decline("Dismissed at the MCP client")),
        _ => Err("an elicitation result's action is accept, decline or cancel".to_owned()),
    }
}
