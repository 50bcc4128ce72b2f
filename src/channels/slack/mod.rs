//! Slack, both ways. This file is the Web API client, outbound: a question posted with `chat.postMessage` (its
//! link from `chat.getPermalink`) and updated with `chat.update` once it closed, the answer modals opened with
//! `views.open`, and the ephemeral notes a person gets when someone else answered first (`chat.postEphemeral`,
//! or an interaction's `response_url`); with the app-level token, a Socket Mode connection's URL
//! (`apps.connections.open`).
//!
//! Around it: what a question looks like in Block Kit ([`blocks`], a typed question's [`inputs`], text as
//! [`mrkdwn`] takes it), the routes Slack calls ([`inbound`]) and what a click or submission does
//! ([`actions`]), and Socket Mode ([`socket`], each envelope through [`envelope`]). Only the client,
//! [`blocks`]' closed message, [`mrkdwn`], the routes and Socket Mode are reached from outside; nothing here
//! reaches GitHub's side.

mod actions;
pub(super) mod blocks;
mod envelope;
pub(super) mod inbound;
mod inputs;
pub(super) mod mrkdwn;
pub mod socket;

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use self::blocks::Closed;
use crate::{
    channels::send::{Message, SendError, Sent, retry_after},
    config::Secret,
};

/// The Slack Web API with the bot token (or, for Socket Mode, the app-level token).
#[derive(Debug, Clone)]
pub struct Slack {
    http: reqwest::Client,
    base: String,
    token: Secret,
    /// Until when Slack asked this replica to wait (a 429): no call is made before then.
    paused_until: Arc<Mutex<Option<Instant>>>,
}

impl Slack {
    /// A client of `base` (e.g. `https://slack.com/api`).
    pub fn new(http: reqwest::Client, base: &str, token: Secret) -> Self {
        Slack { http, base: base.trim_end_matches('/').to_owned(), token, paused_until: Arc::default() }
    }

    /// Posts `message` to `channel`.
    pub async fn post(&self, channel: &str, message: &Message<'_>) -> Result<Sent, SendError> {
        let text = mrkdwn::escape(&message.fallback_text());
        let body = json!({"channel": channel, "text": text, "blocks": blocks::question(message, None)});
        let reply = self.call("chat.postMessage", &body).await?;
        let (channel_id, ts) = match (reply["channel"].as_str(), reply["ts"].as_str()) {
            (Some(channel), Some(ts)) => (channel.to_owned(), ts.to_owned()),
            _ => {
                return Err(SendError::Permanent(format!("chat.postMessage answered without channel and ts: {reply}")));
            }
        };
        // The link is a nicety: a delivered message stays delivered if it cannot be had.
        let link = self.get("chat.getPermalink", &[("channel", &channel_id), ("message_ts", &ts)]).await;
        let url = link.ok().and_then(|reply| reply["permalink"].as_str().map(str::to_owned));
        Ok(Sent { url, reference: json!({"channel": channel_id, "ts": ts}) })
    }

    /// Updates the message at `reference` (`channel`, `ts`) to show how its question ended.
    pub async fn update(&self, reference: &Value, message: &Message<'_>, closed: Closed<'_>) -> Result<(), SendError> {
        let (Some(channel), Some(ts)) = (reference["channel"].as_str(), reference["ts"].as_str()) else {
            return Err(SendError::Permanent(format!("no Slack message at {reference}")));
        };
        let text = format!("{} — {}", mrkdwn::escape(&message.fallback_text()), blocks::outcome(closed));
        let blocks = blocks::question(message, Some(closed));
        self.call("chat.update", &json!({"channel": channel, "ts": ts, "text": text, "blocks": blocks})).await?;
        Ok(())
    }

    /// Posts `text` in the thread of the message at `reference` (`channel`, `ts`): a reminder.
    pub async fn reply_in_thread(&self, reference: &Value, text: &str) -> Result<(), SendError> {
        let (Some(channel), Some(ts)) = (reference["channel"].as_str(), reference["ts"].as_str()) else {
            return Err(SendError::Permanent(format!("no Slack message at {reference}")));
        };
        self.call("chat.postMessage", &json!({"channel": channel, "thread_ts": ts, "text": text})).await?;
        Ok(())
    }

    /// Opens an answer modal (`view`: the free-text one, or a typed question's form) for a button click's
    /// `trigger_id` (valid for three seconds, once).
    pub async fn open_modal(&self, trigger_id: &str, view: &Value) -> Result<(), SendError> {
        self.call("views.open", &json!({"trigger_id": trigger_id, "view": view})).await?;
        Ok(())
    }

    /// Shows `text` to `user` alone, in the thread of `thread_ts` in `channel`.
    pub async fn post_ephemeral(
        &self,
        channel: &str,
        user: &str,
        thread_ts: &str,
        text: &str,
    ) -> Result<(), SendError> {
        let body = json!({"channel": channel, "user": user, "thread_ts": thread_ts, "text": text});
        self.call("chat.postEphemeral", &body).await?;
        Ok(())
    }

    /// Shows `text` to the person who clicked, through the interaction's `response_url` (no token: the URL
    /// is the credential).
    pub async fn respond(&self, response_url: &str, text: &str) -> Result<(), SendError> {
        let body = json!({"response_type": "ephemeral", "replace_original": false, "text": text});
        let response =
            self.http.post(response_url).json(&body).send().await.map_err(|e| SendError::Transient(e.to_string()))?;
        match response.status() {
            status if status.is_success() => Ok(()),
            status => Err(SendError::Transient(format!("response_url: HTTP {status}"))),
        }
    }

    /// A Socket Mode connection's `wss://` URL, to connect to at once (a client of the app-level token).
    pub async fn open_connection(&self) -> Result<String, SendError> {
        let reply = self.call("apps.connections.open", &json!({})).await?;
        match reply["url"].as_str() {
            Some(url) => Ok(url.to_owned()),
            None => Err(SendError::Permanent(format!("apps.connections.open answered without a url: {reply}"))),
        }
    }

    /// A Web API method that takes a JSON body.
    async fn call(&self, method: &str, body: &Value) -> Result<Value, SendError> {
        let request = self.http.post(format!("{}/{method}", self.base)).json(body);
        self.send(method, request).await
    }

    /// A Web API method that takes only query arguments (`chat.getPermalink` accepts no JSON body).
    async fn get(&self, method: &str, arguments: &[(&str, &str)]) -> Result<Value, SendError> {
        let query = serde_urlencoded::to_string(arguments).unwrap_or_default();
        let request = self.http.get(format!("{}/{method}?{query}", self.base));
        self.send(method, request).await
    }

    /// One Web API call: `ok: false` and HTTP errors become [`SendError`]s (429 and `ratelimited` with the
    /// wait Slack asks for, which also holds back this replica's other calls until then).
    async fn send(&self, method: &str, request: reqwest::RequestBuilder) -> Result<Value, SendError> {
        let paused = *self.paused_until.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(wait) = paused.and_then(|until| until.checked_duration_since(Instant::now())) {
            return Err(SendError::RateLimited(wait));
        }
        let response = request
            .bearer_auth(self.token.expose())
            .send()
            .await
            .map_err(|e| SendError::Transient(format!("{method}: {e}")))?;
        let status = response.status();
        if status.as_u16() == 429 {
            let wait = retry_after(response.headers()).unwrap_or(Duration::from_secs(1));
            *self.paused_until.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now() + wait);
            return Err(SendError::RateLimited(wait));
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
