//! What Slack sends the broker, verified by its v0 signature and answered at once (Slack waits three seconds;
//! every call back to Slack runs after the reply):
//! - `POST /channels/slack/interactions`: an option button answers with that option; "Answer…" opens the
//!   modal (`views.open`), whose submission answers with its text. A click or submission that lost the race
//!   is told who answered (an ephemeral note, or the modal's field error). A copy Slack sends again is
//!   acknowledged and not acted on, like a retried event.
//! - `POST /channels/slack/events`: the URL verification challenge, and a person's reply in a question's
//!   thread, which answers it. Retried events (`event_id`) are acted on once; bots are ignored.
//!
//! The answering person is recorded as `slack:<user id>`. Showing the outcome on the message is the outbox's
//! part (`chat.update`, whichever path answered). Socket Mode ([`super::slack_socket`]) hands what it receives
//! to [`interaction`] and [`event`], as these routes do once the signature is checked.

use axum::{extract::State, http::HeaderMap};
use serde_json::{Value, json};

use super::{
    RouteState,
    answer::{Answered, answer},
    inbound_schema::{SlackEvent, SlackForm},
    receipt::{Challenge, EventReply, InteractionReply, ModalErrors, Receipt, Reply},
    signature,
    slack::Slack,
    slack_blocks::{self, ANSWER_ACTION, ANSWER_BLOCK, ANSWER_BUTTON, Closed, MODAL_CALLBACK},
};
use crate::{
    error::{ApiError, ErrorBody},
    http::extract::WholeBody,
    questions::model::{Question, QuestionStatus},
};

/// `POST /channels/slack/interactions`: a form with one field, `payload`, the interaction as JSON.
#[utoipa::path(
    post,
    path = "/channels/slack/interactions",
    tag = "channels",
    operation_id = "slack_interactions",
    params(
        ("X-Slack-Request-Timestamp" = String, Header, description = "Unix seconds, within five minutes of now"),
        ("X-Slack-Signature" = String, Header, description = "`v0=<hex>`: HMAC-SHA256 of `v0:{timestamp}:{body}` with the signing secret"),
    ),
    request_body(content = SlackForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "Taken: a button's receipt or a modal's field error (JSON), or an empty acknowledgement (text; a submitted modal closes)",
            content((InteractionReply = "application/json"), (String = "text/plain"))),
        (status = 400, description = "Not a form with a JSON `payload`, or a field Slack always sends is missing or wrong", body = ErrorBody),
        (status = 401, description = "The signature is missing, stale or wrong", body = ErrorBody),
        (status = 404, description = "Slack is not configured (`--slack-signing-secret` and `--slack-bot-token`)", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn interactions(
    State(state): State<RouteState>,
    headers: HeaderMap,
    WholeBody(body): WholeBody,
) -> Result<Reply, ApiError> {
    let slack = verified(&state, &headers, &body)?;
    let form: Vec<(String, String)> =
        serde_urlencoded::from_bytes(&body).map_err(|e| ApiError::BadRequest(format!("invalid form body: {e}")))?;
    let payload = form.into_iter().find(|(name, _)| name == "payload").map(|(_, payload)| payload);
    let payload: Value = payload
        .as_deref()
        .and_then(|payload| serde_json::from_str(payload).ok())
        .ok_or_else(|| ApiError::BadRequest("an interaction needs a JSON `payload` field".into()))?;
    interaction(&state, slack, &payload, retry_num(&headers)).await
}

/// Acts on an interaction `payload` (a click, a modal's submission) taken from Slack; `retry` is Slack's
/// count of its copies, for the log.
pub(super) async fn interaction(
    state: &RouteState,
    slack: Slack,
    payload: &Value,
    retry: &str,
) -> Result<Reply, ApiError> {
    let user = text_field(&payload["user"]["id"], "user.id")?;
    let act = async {
        match payload["type"].as_str() {
            Some("block_actions") => block_action(state, slack, payload, user).await,
            Some("view_submission") if payload["view"]["callback_id"] == MODAL_CALLBACK => {
                submission(state, &payload["view"], user).await
            }
            // Another app's modal, or a kind of interaction the broker does not offer: acknowledged, nothing more.
            _ => Ok(Reply::Empty),
        }
    };
    // Slack sends a copy again (`X-Slack-Retry-Num`) when the first reply was late or lost, and Socket Mode
    // may hand one envelope to two replicas' connections. Acting on it again would call Slack a second time
    // (the loser's note, another modal) for one click, so a copy, on any replica, is acknowledged only; what
    // the first copy did stands.
    match state.channels.deliveries().once("slack", &interaction_id(payload), act).await? {
        Some(reply) => Ok(reply),
        None => {
            tracing::debug!(retry, "a Slack interaction seen before, acted on already");
            // A modal's copy gets the empty reply that closes it; a button's, a receipt saying so.
            Ok(match payload["type"].as_str() {
                Some("view_submission") => Reply::Empty,
                _ => Reply::Receipt(Receipt::outcome("duplicate")),
            })
        }
    }
}

/// Slack's `X-Slack-Retry-Num` (its copies of a request), for the log.
fn retry_num(headers: &HeaderMap) -> &str {
    headers.get("x-slack-retry-num").and_then(|v| v.to_str().ok()).unwrap_or("?")
}

/// What tells one interaction from another, the same in Slack's copies of it: its `trigger_id` (Slack issues
/// one per click and per submission), or for a payload without one the digest of the payload itself.
fn interaction_id(payload: &Value) -> String {
    match payload["trigger_id"].as_str() {
        Some(trigger) if crate::validate::key("trigger_id", trigger).is_ok() => format!("interaction:{trigger}"),
        _ => {
            use sha2::Digest;
            format!("interaction:sha256:{}", hex::encode(sha2::Sha256::digest(payload.to_string().as_bytes())))
        }
    }
}

/// `POST /channels/slack/events`: the Events API's JSON.
#[utoipa::path(
    post,
    path = "/channels/slack/events",
    tag = "channels",
    operation_id = "slack_events",
    params(
        ("X-Slack-Request-Timestamp" = String, Header, description = "Unix seconds, within five minutes of now"),
        ("X-Slack-Signature" = String, Header, description = "`v0=<hex>`: HMAC-SHA256 of `v0:{timestamp}:{body}` with the signing secret"),
    ),
    request_body(content = SlackEvent, content_type = "application/json"),
    responses(
        (status = 200, description = "Taken (or a URL verification answered)", body = EventReply),
        (status = 400, description = "Not JSON, or a field Slack always sends is missing or wrong", body = ErrorBody),
        (status = 401, description = "The signature is missing, stale or wrong", body = ErrorBody),
        (status = 404, description = "Slack is not configured (`--slack-signing-secret` and `--slack-bot-token`)", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn events(
    State(state): State<RouteState>,
    headers: HeaderMap,
    WholeBody(body): WholeBody,
) -> Result<Reply, ApiError> {
    let slack = verified(&state, &headers, &body)?;
    let event: Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))?;
    self::event(&state, slack, &event, retry_num(&headers)).await
}

/// Acts on an Events API `event` (the callback, or the URL verification) taken from Slack; `retry` is
/// Slack's count of its copies, for the log.
pub(super) async fn event(state: &RouteState, slack: Slack, event: &Value, retry: &str) -> Result<Reply, ApiError> {
    let outcome = match event["type"].as_str() {
        Some("url_verification") => return Ok(Reply::Challenge(Challenge { challenge: event["challenge"].clone() })),
        Some("event_callback") => {
            let event_id = text_field(&event["event_id"], "event_id")?;
            let reply = thread_reply(state, slack, &event["event"]);
            match state.channels.deliveries().once("slack", event_id, reply).await? {
                Some(outcome) => outcome,
                None => {
                    tracing::debug!(event_id, retry, "a retried Slack event, acted on already");
                    "duplicate"
                }
            }
        }
        _ => "ignored",
    };
    Ok(Reply::Receipt(Receipt::outcome(outcome)))
}

/// Checks the signature; returns the Slack client to answer through.
fn verified(state: &RouteState, headers: &HeaderMap, body: &[u8]) -> Result<Slack, ApiError> {
    let (Some(secret), Some(slack)) = (&state.config.slack_signing_secret, &state.channels.slack) else {
        return Err(ApiError::NotFound(
            "Slack is not configured (--slack-signing-secret and --slack-bot-token)".into(),
        ));
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let now = chrono::Utc::now().timestamp();
    signature::slack(secret.expose(), header("x-slack-request-timestamp"), body, header("x-slack-signature"), now)
        .map_err(|refused| ApiError::Unauthorized { message: refused.to_string(), invalid_token: false })?;
    Ok(slack.clone())
}

/// A button on a question's message.
#[tracing::instrument(level = "debug", skip_all)]
async fn block_action(state: &RouteState, slack: Slack, payload: &Value, user: &str) -> Result<Reply, ApiError> {
    let action = &payload["actions"][0];
    let (action_id, value) = (action["action_id"].as_str().unwrap_or_default(), action["value"].as_str());
    let response_url = payload["response_url"].as_str().map(str::to_owned);
    if let Some(value) = value {
        text_field(&json!(value), "actions[0].value")?;
    }
    let (question_id, option) = match (action_id, value) {
        (ANSWER_BUTTON, Some(id)) => (id, None),
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
    if action_id == ANSWER_BUTTON {
        if question.status != QuestionStatus::Pending {
            tell(slack, response_url, already(&question));
        } else if let Some(trigger) = payload["trigger_id"].as_str().map(str::to_owned) {
            let (id, content) = (question.id.clone(), question.content.clone());
            tokio::spawn(async move {
                if let Err(error) = slack.open_modal(&trigger, &id, &content).await {
                    tracing::warn!(?error, question.id = %id, "cannot open the Slack answer modal");
                }
            });
        }
        return Ok(Reply::Receipt(Receipt::outcome("modal")));
    }
    let Some(text) = option.and_then(|index| question.options.get(index)) else {
        return Err(ApiError::BadRequest(format!("question {question_id} offers no such option")));
    };
    let outcome = match answer(state, &question.id, text, format!("slack:{user}")).await? {
        Answered::Made => "answered",
        Answered::Closed(question) => {
            tell(slack, response_url, already(&question));
            "already closed"
        }
        Answered::NotFound => "not found",
        Answered::Refused(why) => {
            tell(slack, response_url, why);
            "refused"
        }
    };
    Ok(Reply::Receipt(Receipt::outcome(outcome)))
}

/// The modal, submitted: answers with its text; a lost race or an unacceptable answer is shown on the field.
#[tracing::instrument(level = "debug", skip_all)]
async fn submission(state: &RouteState, view: &Value, user: &str) -> Result<Reply, ApiError> {
    let question_id = view["private_metadata"].as_str().unwrap_or_default();
    let text = view["state"]["values"][ANSWER_BLOCK][ANSWER_ACTION]["value"].as_str().unwrap_or_default();
    text_field(&json!(question_id), "view.private_metadata")?;
    let problem = match answer(state, question_id, text, format!("slack:{user}")).await? {
        // An empty reply closes the modal.
        Answered::Made => return Ok(Reply::Empty),
        // A modal's field error is plain text: no mentions or markup.
        Answered::Closed(question) => slack_blocks::already_plain(closed(&question)),
        Answered::NotFound => "This question no longer exists.".to_owned(),
        Answered::Refused(why) => why,
    };
    let errors = [(ANSWER_BLOCK.to_owned(), problem)].into_iter().collect();
    Ok(Reply::ModalErrors(ModalErrors { response_action: "errors", errors }))
}

/// A message event: a person's reply in a question's thread answers it.
#[tracing::instrument(level = "debug", skip_all)]
async fn thread_reply(state: &RouteState, slack: Slack, event: &Value) -> Result<&'static str, ApiError> {
    let text = |name: &str| event[name].as_str().unwrap_or_default();
    // A reply also sent to the channel (`thread_broadcast`) is still a person's reply; other subtypes (edits,
    // joins, bots' messages) are not.
    let plain = event["subtype"].is_null() || event["subtype"] == "thread_broadcast";
    if event["type"] != "message" || !event["bot_id"].is_null() || !plain {
        return Ok("ignored: not a person's message");
    }
    let (channel, user, thread) = (text("channel"), text("user"), text("thread_ts"));
    if thread.is_empty() || thread == text("ts") || user.is_empty() {
        return Ok("ignored: not a reply in a thread");
    }
    for (value, field) in [(channel, "event.channel"), (user, "event.user"), (thread, "event.thread_ts")] {
        text_field(&json!(value), field)?;
    }
    let Some(question_id) = state.channels.deliveries().question_of_message(channel, thread).await? else {
        return Ok("ignored: not a question's thread");
    };
    // Slack escapes &, < and > in message text; the answer is what the person typed.
    let typed = slack_blocks::unescape(text("text"));
    let (note, outcome) = match answer(state, &question_id, &typed, format!("slack:{user}")).await? {
        Answered::Made => return Ok("answered"),
        Answered::Closed(question) => (already(&question), "already closed"),
        Answered::NotFound => return Ok("ignored: the question is gone"),
        Answered::Refused(why) => (format!("Not taken as an answer: {why}"), "refused"),
    };
    let (channel, user, thread) = (channel.to_owned(), user.to_owned(), thread.to_owned());
    tokio::spawn(async move {
        if let Err(error) = slack.post_ephemeral(&channel, &user, &thread, &note).await {
            tracing::warn!(?error, "cannot tell a Slack user their reply came too late");
        }
    });
    Ok(outcome)
}

/// "Already answered by …", for a person whose answer came second.
fn already(question: &Question) -> String {
    slack_blocks::already(closed(question))
}

fn closed(question: &Question) -> Closed<'_> {
    Closed {
        status: question.status.as_str(),
        response: question.response_text.as_deref(),
        answered_by: question.answered_by.as_deref(),
    }
}

/// A string field of Slack's payload that names something stored (a user, a question, an event): present,
/// and a key Postgres can store and index (no NUL, not huge); else 400 naming the field.
fn text_field<'a>(value: &'a Value, field: &str) -> Result<&'a str, ApiError> {
    let text = value.as_str().ok_or_else(|| ApiError::BadRequest(format!("{field}: expected a string")))?;
    crate::validate::key(field, text)?;
    Ok(text)
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
