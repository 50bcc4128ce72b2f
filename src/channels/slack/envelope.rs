//! One Socket Mode envelope: acted on by the code behind `/channels/slack/interactions` (`interactive`) and
//! `/channels/slack/events` (`events_api`), then acknowledged (`{"envelope_id"}`, with the reply's `payload`
//! where Slack takes one, e.g. a modal's field errors) within Slack's three seconds.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;
use tokio_tungstenite::tungstenite::Message;

use super::{Slack, inbound};
use crate::{
    channels::{RouteState, receipt::Reply},
    error::ApiError,
};

/// How long an envelope's acknowledgement may wait for its reply: inside Slack's three seconds, with room
/// for the way back. Acting on it goes on after that; the acknowledgement then carries no reply.
pub const ACK_WITHIN: Duration = Duration::from_millis(2500);

/// What acts on the envelopes of this replica's connection.
#[derive(Debug, Clone)]
pub struct Envelopes {
    state: RouteState,
    slack: Slack,
}

impl Envelopes {
    /// Envelopes acted on with `state`, answered and updated through `slack` (the bot token).
    pub fn new(state: RouteState, slack: Slack) -> Self {
        Envelopes { state, slack }
    }

    /// Acts on `frame` in the background and sends its acknowledgement to `acks` (the connection's writer).
    pub fn take(&self, frame: Value, acks: UnboundedSender<Message>) {
        let Some(envelope_id) = frame["envelope_id"].as_str().map(str::to_owned) else {
            tracing::debug!(kind = ?frame["type"], "a Socket Mode frame without an envelope, ignored");
            return;
        };
        let envelopes = self.clone();
        tokio::spawn(async move {
            let accepts_payload = frame["accepts_response_payload"] == true;
            let mut acting = tokio::spawn(async move { envelopes.act(&frame).await });
            let payload = match tokio::time::timeout(ACK_WITHIN, &mut acting).await {
                Ok(Ok(Ok(reply))) => reply.socket_payload(),
                Ok(Ok(Err(error @ (ApiError::Internal(_) | ApiError::Unavailable(_))))) => {
                    // As the routes' 500 and 503: not acknowledged, so Slack sends it again.
                    tracing::warn!(envelope_id, %error, "cannot act on a Slack envelope now; Slack will resend it");
                    return;
                }
                Ok(Ok(Err(refused))) => {
                    tracing::warn!(envelope_id, %refused, "a Slack envelope refused; acknowledged");
                    None
                }
                Ok(Err(panicked)) => {
                    tracing::error!(envelope_id, %panicked, "acting on a Slack envelope failed; acknowledged");
                    None
                }
                Err(_) => {
                    tracing::warn!(envelope_id, "a Slack envelope took longer than {ACK_WITHIN:?}; acknowledged");
                    None
                }
            };
            let mut ack = json!({"envelope_id": envelope_id});
            if let (true, Some(payload)) = (accepts_payload, payload) {
                ack["payload"] = payload;
            }
            // The connection may be gone by now: Slack then sends the envelope again, acted on once.
            let _ = acks.send(Message::text(ack.to_string()));
        });
    }

    /// What the HTTP routes do with the same payload, once they checked its signature.
    async fn act(&self, frame: &Value) -> Result<Reply, ApiError> {
        let retry = frame["retry_attempt"].to_string();
        let (payload, slack) = (&frame["payload"], self.slack.clone());
        match frame["type"].as_str() {
            Some("interactive") => inbound::interaction(&self.state, slack, payload, &retry).await,
            Some("events_api") => inbound::event(&self.state, slack, payload, &retry).await,
            // Slash commands and whatever else the app is subscribed to: acknowledged, nothing more.
            kind => {
                tracing::debug!(?kind, "a Slack envelope the broker does not act on");
                Ok(Reply::Empty)
            }
        }
    }
}
