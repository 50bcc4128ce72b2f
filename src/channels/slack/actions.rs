//! What a person does on a question's Slack message or in its modal, whichever way Slack sent it (the
//! interactivity route or Socket Mode): an option or choice button answers with it; Submit answers with the
//! message's selects and checkboxes (`state.values`); "Answer…" opens the modal (free text, or a typed
//! question's inputs), whose submission answers; "Decline" declines. A person whose answer came second, who
//! may not answer (the answer policy), or whose answer does not fit is told, only them: an ephemeral note
//! through the interaction's `response_url`, or the modal's field error naming the field.

use serde_json::{Value, json};

use super::{
    Slack,
    blocks::{self, ANSWER_ACTION, ANSWER_BLOCK, ANSWER_BUTTON, Closed, DECLINE_BUTTON},
    inputs::{self, FieldError, Layout, SUBMIT_BUTTON},
};
use crate::{
    channels::{
        RouteState,
        answer::{Answered, answer, decline},
        form::{Form, Kind},
        receipt::{ModalErrors, Receipt, Reply},
    },
    error::ApiError,
    questions::{
        answering::Given,
        model::{Question, QuestionStatus},
    },
};

/// A button on a question's message (a select or checkbox changed there is acknowledged, nothing more: the
/// Submit button reads them).
#[tracing::instrument(level = "debug", skip_all)]
pub(super) async fn block_action(
    state: &RouteState,
    slack: Slack,
    payload: &Value,
    user: &str,
) -> Result<Reply, ApiError> {
    let action = &payload["actions"][0];
    let (action_id, value) = (action["action_id"].as_str().unwrap_or_default(), action["value"].as_str());
    let response_url = payload["response_url"].as_str().map(str::to_owned);
    if let Some(value) = value {
        text_field(&json!(value), "actions[0].value")?;
    }
    let (question_id, option) = match (action_id, value) {
        (ANSWER_BUTTON | SUBMIT_BUTTON | DECLINE_BUTTON, Some(id)) => (id, None),
        (id, Some(value)) if id.starts_with("option:") => match value.rsplit_once('|') {
            Some((question_id, index)) => (question_id, index.parse::<usize>().ok()),
            None => return Err(ApiError::BadRequest(format!("an option button's value '{value}' names no question"))),
        },
        _ => return Ok(Reply::Receipt(Receipt::outcome("ignored"))),
    };
    let Some(question) = state.questions.get(question_id).await? else {
        tell(slack, response_url, "This question no longer exists.".into());
        return Ok(Reply::Receipt(Receipt::outcome("not found")));
    };
    let form = Form::of(question.response_schema.as_ref());
    let by = format!("slack:{user}");
    let answered = match action_id {
        ANSWER_BUTTON => {
            if question.status != QuestionStatus::Pending {
                tell(slack, response_url, already(&question));
            } else if let Some(trigger) = payload["trigger_id"].as_str().map(str::to_owned) {
                let view = match &form {
                    Some(form) => inputs::modal(&question.id, &question.content, form),
                    None => blocks::answer_modal(&question.id, &question.content),
                };
                let id = question.id.clone();
                tokio::spawn(async move {
                    if let Err(error) = slack.open_modal(&trigger, &view).await {
                        tracing::warn!(?error, question.id = %id, "cannot open the Slack answer modal");
                    }
                });
            }
            return Ok(Reply::Receipt(Receipt::outcome("modal")));
        }
        DECLINE_BUTTON => decline(state, &question.id, by).await?,
        SUBMIT_BUTTON => {
            let Some(form) = &form else {
                return Err(ApiError::BadRequest(format!("question {question_id} has no form to submit")));
            };
            match inputs::answer_of(form, &payload["state"]["values"]) {
                Ok(answer_object) => answer(state, &question.id, Given::Json(&answer_object), by).await?,
                Err(FieldError { message, .. }) => Answered::Refused(message),
            }
        }
        _ => {
            let index = option.ok_or_else(|| no_option(question_id))?;
            match (&form, inputs::layout(form.as_ref())) {
                (Some(form), Layout::Buttons(field)) => {
                    let Kind::Choice { choices } = &form.fields[field].kind else { return Err(no_option(question_id)) };
                    let (value, _) = choices.get(index).ok_or_else(|| no_option(question_id))?;
                    let answer_object = json!({form.fields[field].name.clone(): value});
                    answer(state, &question.id, Given::Json(&answer_object), by).await?
                }
                (Some(_), _) => return Err(no_option(question_id)),
                (None, _) => {
                    let text = question.options.get(index).ok_or_else(|| no_option(question_id))?;
                    answer(state, &question.id, Given::Text(text), by).await?
                }
            }
        }
    };
    let declining = action_id == DECLINE_BUTTON;
    let outcome = match answered {
        Answered::Made if declining => "declined",
        Answered::Made => "answered",
        Answered::Closed(question) => {
            tell(slack, response_url, already(&question));
            "already closed"
        }
        Answered::NotFound => "not found",
        Answered::Refused(why) => {
            tell(slack, response_url, format!("Not taken as an answer: {why}"));
            "refused"
        }
        Answered::Forbidden(why) => {
            tell(slack, response_url, forbidden(&why, declining));
            "forbidden"
        }
    };
    Ok(Reply::Receipt(Receipt::outcome(outcome)))
}

fn no_option(question_id: &str) -> ApiError {
    ApiError::BadRequest(format!("question {question_id} offers no such option"))
}

/// What a person the answer policy refuses is told.
pub(super) fn forbidden(why: &str, declining: bool) -> String {
    let what = if declining { "decline" } else { "answer" };
    format!("You may not {what} this question: {why}.")
}

/// A modal, submitted: answers with its text, or its form's inputs; a lost race or an answer that does not
/// fit is shown on the field (the one the error names).
#[tracing::instrument(level = "debug", skip_all)]
pub(super) async fn submission(state: &RouteState, view: &Value, user: &str) -> Result<Reply, ApiError> {
    let question_id = view["private_metadata"].as_str().unwrap_or_default();
    text_field(&json!(question_id), "view.private_metadata")?;
    let values = &view["state"]["values"];
    let by = format!("slack:{user}");
    let typed = view["callback_id"] == inputs::FORM_CALLBACK;
    let form = match typed {
        true => state.questions.get(question_id).await?.and_then(|q| Form::of(q.response_schema.as_ref())),
        false => None,
    };
    let answered = match (&form, typed) {
        (Some(form), _) => match inputs::answer_of(form, values) {
            Ok(answer_object) => answer(state, question_id, Given::Json(&answer_object), by).await?,
            Err(error) => return Ok(field_errors(error)),
        },
        // The question is gone (or lost its form, which a stored question never does).
        (None, true) => Answered::NotFound,
        (None, false) => {
            let text = values[ANSWER_BLOCK][ANSWER_ACTION]["value"].as_str().unwrap_or_default();
            answer(state, question_id, Given::Text(text), by).await?
        }
    };
    // A modal's field error is plain text: no mentions or markup.
    let problem = match answered {
        // An empty reply closes the modal.
        Answered::Made => return Ok(Reply::Empty),
        Answered::Closed(question) => blocks::already_plain(closed(&question)),
        Answered::NotFound => "This question no longer exists.".to_owned(),
        Answered::Refused(why) => why,
        Answered::Forbidden(why) => forbidden(&why, false),
    };
    let error = match &form {
        Some(form) => inputs::error_on_field(form, &problem),
        // The free-text modal's one field; a typed modal whose question is gone, its first.
        None if typed => FieldError { block_id: inputs::block_id(0), message: problem },
        None => FieldError { block_id: ANSWER_BLOCK.to_owned(), message: problem },
    };
    Ok(field_errors(error))
}

fn field_errors(error: FieldError) -> Reply {
    let errors = [(error.block_id, error.message)].into_iter().collect();
    Reply::ModalErrors(ModalErrors { response_action: "errors", errors })
}

/// "Already answered by …", for a person whose answer came second.
pub(super) fn already(question: &Question) -> String {
    blocks::already(closed(question))
}

fn closed(question: &Question) -> Closed<'_> {
    Closed {
        status: question.status.as_str(),
        response: question.response_text.as_deref(),
        answered_by: question.answered_by.as_deref(),
    }
}

/// Shows `text` to the person who clicked, after the reply to Slack.
fn tell(slack: Slack, response_url: Option<String>, text: String) {
    let Some(url) = response_url else { return };
    tokio::spawn(async move {
        if let Err(error) = slack.respond(&url, &text).await {
            tracing::warn!(?error, "cannot show a Slack user an ephemeral note");
        }
    });
}

/// A string field of Slack's payload that names something stored (a user, a question, an event): present,
/// and a key Postgres can store and index (no NUL, not huge); else 400 naming the field.
pub(super) fn text_field<'a>(value: &'a Value, field: &str) -> Result<&'a str, ApiError> {
    let text = value.as_str().ok_or_else(|| ApiError::BadRequest(format!("{field}: expected a string")))?;
    crate::validate::key(field, text)?;
    Ok(text)
}
