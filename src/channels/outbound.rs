//! The channels this replica delivers to ([`Channels`]: the senders whose tokens are configured, and the
//! outbox), which the shared state holds for the worker and the inbound routes.

use crate::db::pool::Pool;

use super::{github::GitHub, send::SEND_TIMEOUT, slack::Slack, store::DeliveryStore};
use crate::{config::Config, db::StoreResult, questions::store::QuestionStore};

/// The channels this replica can deliver to: a kind is there when its token is configured.
#[derive(Debug, Clone)]
pub struct Channels {
    pub(super) slack: Option<Slack>,
    pub(super) github: Option<GitHub>,
    deliveries: DeliveryStore,
    /// The questions delivered (what a message says, whether a question closed).
    pub(super) questions: QuestionStore,
}

impl Channels {
    /// The channels `config` gives credentials for, with their outbox on `pool`.
    pub fn new(config: &Config, pool: Pool) -> Self {
        // reqwest's TLS uses the process's rustls provider: ring, as kube's does.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().timeout(SEND_TIMEOUT).build().unwrap_or_default();
        let credentials = &config.channels;
        Channels {
            slack: (credentials.slack_bot_token.clone())
                .map(|token| Slack::new(http.clone(), &credentials.slack_api_url, token)),
            github: (credentials.github_token.clone())
                .map(|token| GitHub::new(http, &credentials.github_api_url, token)),
            deliveries: DeliveryStore::new(pool.clone()),
            questions: QuestionStore::new(pool),
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

    /// Work the outbox has not done: deliveries not yet made, and Slack messages of closed questions not yet
    /// updated.
    pub async fn backlog(&self) -> StoreResult<i64> {
        let pending = self.deliveries.pending_count().await?;
        let waiting = self.deliveries.awaiting_update(i64::MAX).await?;
        let closed = self.questions.closed_among(&waiting).await?;
        Ok(pending + closed.len() as i64)
    }

    /// Whether any channel is configured (else no delivery worker runs).
    pub fn any(&self) -> bool {
        self.slack.is_some() || self.github.is_some()
    }
}
