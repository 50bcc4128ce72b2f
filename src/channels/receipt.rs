//! What the inbound channel routes answer Slack and GitHub (which mostly only read the status): the typed
//! bodies, so the OpenAPI document describes exactly what is sent.

use axum::{
    Json,
    http::header,
    response::{IntoResponse, Response},
};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// What the broker answers one thing Slack sent, whichever way it came: the body of the HTTP reply, or what
/// a Socket Mode acknowledgement carries.
#[derive(Debug)]
pub enum Reply {
    /// What was done (Slack reads only the status).
    Receipt(Receipt),
    /// A modal's submission was not taken: the reason on its field.
    ModalErrors(ModalErrors),
    /// The URL verification, answered.
    Challenge(Challenge),
    /// Nothing to say: for a modal's submission, this closes the modal.
    Empty,
}

impl Reply {
    /// What a Socket Mode acknowledgement carries as its `payload`: only a modal's field errors mean anything
    /// to Slack there.
    pub fn socket_payload(self) -> Option<Value> {
        match self {
            Reply::ModalErrors(errors) => serde_json::to_value(errors).ok(),
            Reply::Receipt(_) | Reply::Challenge(_) | Reply::Empty => None,
        }
    }
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        match self {
            Reply::Receipt(receipt) => Json(receipt).into_response(),
            Reply::ModalErrors(errors) => Json(errors).into_response(),
            Reply::Challenge(challenge) => Json(challenge).into_response(),
            // An empty 200, declared as text so the body's type is stated.
            Reply::Empty => ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "").into_response(),
        }
    }
}

/// `{"ok":true,"outcome":…}`, or `{"ok":true,"duplicate":true}` for a delivery acted on before.
#[derive(Debug, Serialize, ToSchema)]
pub struct Receipt {
    /// Always `true`: the call was taken.
    ok: bool,
    /// What the broker did, e.g. `answered`, `declined`, `already closed`, `refused` (does not fit the form),
    /// `forbidden` (the answer policy), `ignored: …`, `pong`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    outcome: Option<String>,
    /// `true` when this delivery was acted on before (absent otherwise).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    duplicate: bool,
}

impl Receipt {
    /// What was done.
    pub fn outcome(outcome: impl Into<String>) -> Self {
        Receipt { ok: true, outcome: Some(outcome.into()), duplicate: false }
    }

    /// A delivery acted on before.
    pub fn duplicate() -> Self {
        Receipt { ok: true, outcome: None, duplicate: true }
    }
}

/// The answer to Slack's URL verification: its `challenge`, echoed.
#[derive(Debug, Serialize, ToSchema)]
pub struct Challenge {
    /// What Slack sent.
    pub challenge: Value,
}

/// The answer to a modal's submission that was not taken: the reason on the answer field.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModalErrors {
    /// Always `errors`.
    #[schema(value_type = String, pattern = "^errors$")]
    pub response_action: &'static str,
    /// The reason, by the modal's block id.
    pub errors: std::collections::BTreeMap<String, String>,
}

/// What `POST /channels/slack/interactions` answers with a body.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
#[expect(
    dead_code,
    reason = "the OpenAPI document's description of the route's JSON bodies; the handler answers each as itself"
)]
pub enum InteractionReply {
    /// A button was handled.
    Receipt(Receipt),
    /// A modal's submission was not taken.
    ModalErrors(ModalErrors),
}

/// What `POST /channels/slack/events` answers.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
#[expect(
    dead_code,
    reason = "the OpenAPI document's description of the route's bodies; the handler answers each as itself"
)]
pub enum EventReply {
    /// An event was handled.
    Receipt(Receipt),
    /// The URL verification.
    Challenge(Challenge),
}
