//! Slack Web API, outbound: a question posted with `chat.postMessage` (Block Kit: the question, who asks, the
//! Query, one button per option and an "Answer…" button), and its link from `chat.getPermalink`.

use std::time::Duration;

use serde_json::{Value, json};

use super::send::{Message, SendError, Sent, retry_after};
use crate::config::Secret;

/// The Slack Web API with the bot token.
#[derive(Debug, Clone)]
pub struct Slack {
    http: reqwest::Client,
    base: String,
    token: Secret,
}

impl Slack {
    /// A client of `base` (e.g. `https://slack.com/api`).
    pub fn new(http: reqwest::Client, base: &str, token: Secret) -> Self {
        Slack { http, base: base.trim_end_matches('/').to_owned(), token }
    }

    /// Posts `message` to `channel`.
    pub async fn post(&self, channel: &str, message: &Message<'_>) -> Result<Sent, SendError> {
        let body = json!({"channel": channel, "text": message.fallback_text(), "blocks": blocks(message)});
        let reply = self.call("chat.postMessage", &body).await?;
        let (channel_id, ts) = match (reply["channel"].as_str(), reply["ts"].as_str()) {
            (Some(channel), Some(ts)) => (channel.to_owned(), ts.to_owned()),
            _ => {
                return Err(SendError::Permanent(format!("chat.postMessage answered without channel and ts: {reply}")));
            }
        };
        // The link is a nicety: a delivered message stays delivered if it cannot be had.
        let link = self.call("chat.getPermalink", &json!({"channel": channel_id, "message_ts": ts})).await;
        let url = link.ok().and_then(|reply| reply["permalink"].as_str().map(str::to_owned));
        Ok(Sent { url, reference: json!({"channel": channel_id, "ts": ts}) })
    }

    /// One Web API call: `ok: false` and HTTP errors become [`SendError`]s (429 and `ratelimited` with the
    /// wait Slack asks for).
    async fn call(&self, method: &str, body: &Value) -> Result<Value, SendError> {
        let response = self
            .http
            .post(format!("{}/{method}", self.base))
            .bearer_auth(self.token.expose())
            .json(body)
            .send()
            .await
            .map_err(|e| SendError::Transient(format!("{method}: {e}")))?;
        let status = response.status();
        if status.as_u16() == 429 {
            return Err(SendError::RateLimited(retry_after(response.headers()).unwrap_or(Duration::from_secs(1))));
        }
        if !status.is_success() {
            return Err(SendError::Transient(format!("{method}: HTTP {status}")));
        }
        let reply: Value = response.json().await.map_err(|e| SendError::Transient(format!("{method}: {e}")))?;
        match (reply["ok"].as_bool(), reply["error"].as_str()) {
            (Some(true), _) => Ok(reply),
            (_, Some("ratelimited")) => Err(SendError::RateLimited(Duration::from_secs(1))),
            (_, Some(error @ ("internal_error" | "fatal_error" | "service_unavailable" | "request_timeout"))) => {
                Err(SendError::Transient(format!("{method}: {error}")))
            }
            (_, error) => Err(SendError::Permanent(format!("{method}: {}", error.unwrap_or("not ok")))),
        }
    }
}

/// The Block Kit message of a question.
fn blocks(message: &Message<'_>) -> Value {
    let mut context = format!("Asked by {}", message.sender);
    if let Some(query) = message.query {
        context.push_str(&format!(" · Query `{query}`"));
    }
    context.push_str(&format!(" · {}", message.question_id));
    let mut buttons: Vec<Value> = message
        .options
        .iter()
        .enumerate()
        .map(|(index, option)| {
            json!({"type": "button", "action_id": format!("option:{index}"),
                   "text": {"type": "plain_text", "text": option},
                   "value": format!("{}|{index}", message.question_id)})
        })
        .collect();
    buttons.push(json!({"type": "button", "action_id": "answer_modal", "style": "primary",
                        "text": {"type": "plain_text", "text": "Answer…"}, "value": message.question_id}));
    json!([
        {"type": "section", "text": {"type": "mrkdwn", "text": format!("*Question for {}*\n{}", message.recipient, message.content)}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": context}]},
        {"type": "actions", "block_id": format!("q:{}", message.question_id), "elements": buttons},
    ])
}
