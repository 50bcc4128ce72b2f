//! What Slack sends the broker, verified by its v0 signature and answered at once (Slack waits three seconds;
//! every call back to Slack runs after the reply):
//! - `POST /channels/slack/interactions`: clicks and modal submissions, acted on by [`super::actions`].
//!   A copy Slack sends again is acknowledged and not acted on, like a retried event.
//! - `POST /channels/slack/events`: the URL verification challenge, and a person's reply in a question's
//!   thread, which answers it. Retried events (`event_id`) are acted on once; bots are ignored.
//!
//! The answering person is recorded as `slack:<user id>`. Showing the outcome on the message is the outbox's
//! part (`chat.update`, whichever path answered). Socket Mode ([`super::socket`]) hands what it receives
//! to [`interaction`] and [`event`], as these routes do once the signature is checked.

use axum::{extract::State, http::HeaderMap};
use serde_json::{Value, json};

use super::{
    Slack,
    actions::{self, already, block_action, submission, text_field},
    blocks::MODAL_CALLBACK,
    inputs::FORM_CALLBACK,
    mrkdwn,
};
use crate::{
    channels::{
        RouteState,
        answer::{Answered, answer},
        inbound_schema::{SlackEvent, SlackForm},
        receipt::{Challenge, EventReply, InteractionReply, Receipt, Reply},
        signature,
    },
    error::{ApiError, ErrorBody},
    http::extract::WholeBody,
    questions::answering::Given,
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
            Some("view_submission")
                if payload["view"]["callback_id"] == MODAL_CALLBACK
                    || payload["view"]["callback_id"] == FORM_CALLBACK =>
            {
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
    let (Some(secret), Some(slack)) = (&state.config.channels.slack_signing_secret, &state.channels.slack) else {
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
    let typed = mrkdwn::unescape(text("text"));
    let (note, outcome) = match answer(state, &question_id, Given::Text(&typed), format!("slack:{user}")).await? {
        Answered::Made => return Ok("answered"),
        Answered::Closed(question) => (already(&question), "already closed"),
        Answered::NotFound => return Ok("ignored: the question is gone"),
        Answered::Refused(why) => (format!("Not taken as an answer: {why}"), "refused"),
        Answered::Forbidden(why) => (actions::forbidden(&why, false), "forbidden"),
    };
    let (channel, user, thread) = (channel.to_owned(), user.to_owned(), thread.to_owned());
    tokio::spawn(async move {
        if let Err(error) = slack.post_ephemeral(&channel, &user, &thread, &note).await {
            tracing::warn!(?error, "cannot tell a Slack user their reply came too late");
        }
    });
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use crate::{
        channels::router,
        http::documented::{assert_documented, document_of, request_body},
    };

    /// Every field of an Events API callback [`super::event`] and [`super::thread_reply`] read, as Slack sends
    /// it (`challenge` is echoed whatever it holds; a `subtype` or `bot_id` counts when not null). A field read
    /// there is added here, and to `SlackEvent` (`channels/inbound_schema.rs`), which the document shows.
    const EVENT_READS: &[(&str, &str)] = &[
        ("type", "string"),
        ("challenge", "string"),
        ("event_id", "string"),
        ("event.type", "string"),
        ("event.subtype", "string"),
        ("event.bot_id", "string"),
        ("event.channel", "string"),
        ("event.user", "string"),
        ("event.text", "string"),
        ("event.ts", "string"),
        ("event.thread_ts", "string"),
    ];

    /// The one field of the form [`super::interactions`] reads (the interaction inside is JSON, which the
    /// document gives as an example only).
    const FORM_READS: &[(&str, &str)] = &[("payload", "string")];

    #[test]
    fn every_field_the_slack_routes_read_is_documented_alike() {
        let document = document_of(router());
        let events = request_body(&document, "post", "/channels/slack/events", "application/json");
        assert_documented(&document, events, EVENT_READS);
        let form = request_body(&document, "post", "/channels/slack/interactions", "application/x-www-form-urlencoded");
        assert_documented(&document, form, FORM_READS);
    }
}
