//! Questions delivered where people already are: Slack channels and GitHub issues or pull requests. A
//! question's channel entries are checked when it is asked ([`address`]); the asking transaction queues one
//! delivery per channel ([`store::queue`]), and every replica runs the [`worker`] that claims due deliveries
//! (one replica each), sends them ([`slack`], [`github`]) and retries with backoff, honouring rate limits.

pub mod address;
mod github;
mod github_webhook;
pub mod signature;
mod slack;
pub mod store;
mod worker;

use std::time::Duration;

use axum::{Router, http::HeaderMap, routing::post};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use address::Channel;
pub use github::short_id;

use self::{github::GitHub, slack::Slack, store::DeliveryStore};
use crate::{config::Config, db::hub::Hub, state::AppState};

/// The inbound routes (Slack and GitHub call them; their signatures are the credential).
pub fn router() -> Router<AppState> {
    Router::new().route("/channels/github/webhook", post(github_webhook::receive))
}

/// How long one call to Slack or GitHub may take (well inside the delivery's lease).
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// The channels this replica can deliver to: a kind is there when its token is configured.
#[derive(Debug, Clone)]
pub struct Channels {
    slack: Option<Slack>,
    github: Option<GitHub>,
    deliveries: DeliveryStore,
}

impl Channels {
    /// The channels `config` gives credentials for, with their outbox on `pool`.
    pub fn new(config: &Config, pool: sqlx::PgPool) -> Self {
        // reqwest's TLS uses the process's rustls provider: ring, as kube's does.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().timeout(SEND_TIMEOUT).build().unwrap_or_default();
        Channels {
            slack: config.slack_bot_token.clone().map(|token| Slack::new(http.clone(), &config.slack_api_url, token)),
            github: config.github_token.clone().map(|token| GitHub::new(http, &config.github_api_url, token)),
            deliveries: DeliveryStore::new(pool),
        }
    }

    /// The outbox, and the inbound deliveries seen.
    pub fn deliveries(&self) -> &DeliveryStore {
        &self.deliveries
    }

    /// Comments `text` on a GitHub issue or pull request in the background (the webhook's reply must not
    /// wait for it); a failure is logged.
    pub fn reply_on_github(&self, owner: String, repo: String, number: u64, text: String) {
        let Some(github) = self.github.clone() else { return };
        tokio::spawn(async move {
            if let Err(error) = github.create_comment(&owner, &repo, number, &text).await {
                tracing::warn!(?error, repository = %format!("{owner}/{repo}#{number}"), "cannot reply on GitHub");
            }
        });
    }

    /// Checks a question's channel entries: each must be a channel this replica delivers to. The error names
    /// the first entry that is not.
    pub fn check(&self, entries: &[String]) -> Result<(), String> {
        for entry in entries {
            let channel = Channel::parse(entry)?;
            let configured = match channel {
                Channel::Slack { .. } => self.slack.is_some(),
                Channel::GitHub { .. } => self.github.is_some(),
            };
            if !configured {
                return Err(format!(
                    "channels: '{entry}' needs --{}-{} on the broker, which is not set",
                    channel.kind(),
                    if channel.kind() == "slack" { "bot-token" } else { "token" }
                ));
            }
        }
        Ok(())
    }

    /// Starts this replica's delivery worker, when any channel is configured.
    pub fn spawn(&self, hub: Hub, shutdown: CancellationToken) -> Option<JoinHandle<()>> {
        (self.slack.is_some() || self.github.is_some())
            .then(|| worker::spawn(self.clone(), self.deliveries.clone(), hub, shutdown))
    }
}

/// What a delivered message says.
#[derive(Debug, Clone)]
pub struct Message<'a> {
    pub question_id: &'a str,
    pub sender: &'a str,
    pub recipient: &'a str,
    pub content: &'a str,
    pub options: &'a [String],
    /// `namespace/name`, when the question names its Query.
    pub query: Option<&'a str>,
}

impl Message<'_> {
    /// Plain text for notifications and clients that show no blocks.
    fn fallback_text(&self) -> String {
        format!("Question for {} from {}: {}", self.recipient, self.sender, self.content)
    }
}

/// A message sent: its link, and what finds it again (to update it once answered).
#[derive(Debug, Clone)]
pub struct Sent {
    pub url: Option<String>,
    pub reference: serde_json::Value,
}

/// Why a send failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// Slow down: try again after this long.
    RateLimited(Duration),
    /// Down or unreachable: try again with backoff.
    Transient(String),
    /// Refused for good (no such channel, no access): give up.
    Permanent(String),
}

/// A `Retry-After` in seconds, as Slack and GitHub send it.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds: u64 = headers.get("retry-after")?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds.clamp(1, 3600)))
}
