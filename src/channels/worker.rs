//! The delivery worker every replica runs: claims due deliveries from the outbox (each one by one replica,
//! leased), sends them, and records the outcome; failures are retried with backoff, rate limits after the
//! wait asked for, and refusals are given up at once. Once a question closes, its delivered Slack messages
//! are claimed and updated the same way.

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{
    Channel,
    outbound::Channels,
    send::{Message, SendError, Sent},
    slack_blocks::Closed,
    store::{DeliveryJob, DeliveryStore, UpdateJob},
};
use crate::{
    db::{
        hub::Hub,
        outbox::{self, CLAIM, LEASE_SECONDS, MAX_ATTEMPTS},
    },
    telemetry::metrics,
};

/// Starts this replica's delivery worker, when any channel is configured.
pub fn spawn(channels: &Channels, hub: Hub, shutdown: CancellationToken) -> Option<JoinHandle<()>> {
    let (channels, store) = (channels.clone(), channels.deliveries().clone());
    channels
        .any()
        .then(|| tokio::spawn(async move { outbox::work_off(hub, shutdown, || drain(&channels, &store)).await }))
}

async fn drain(channels: &Channels, store: &DeliveryStore) {
    drain_sends(channels, store).await;
    drain_updates(channels, store).await;
}

async fn drain_sends(channels: &Channels, store: &DeliveryStore) {
    loop {
        let jobs = match store.claim_due(CLAIM, LEASE_SECONDS).await {
            Ok(jobs) if !jobs.is_empty() => jobs,
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(%error, "cannot claim channel deliveries");
                return;
            }
        };
        for job in jobs {
            let outcome = send(channels, &job).await;
            if let Err(error) = settle(store, &job, outcome).await {
                tracing::warn!(%error, delivery.id = job.id, "cannot record a channel delivery; it will be retried");
            }
        }
    }
}

async fn send(channels: &Channels, job: &DeliveryJob) -> Result<Sent, SendError> {
    if job.status != "pending" {
        return Err(SendError::Permanent(format!("not sent: the question was {} first", job.status)));
    }
    let query = query_label(&job.query_namespace, &job.query_name);
    let message = Message {
        question_id: &job.question_id,
        sender: &job.sender,
        recipient: &job.recipient,
        content: &job.content,
        options: &job.options,
        query: query.as_deref(),
    };
    match Channel::parse(&job.channel).map_err(SendError::Permanent)? {
        Channel::Slack { channel } => match &channels.slack {
            Some(slack) => slack.post(&channel, &message).await,
            None => Err(SendError::Transient("this replica has no Slack token".into())),
        },
        Channel::GitHub { owner, repo, number } => match &channels.github {
            Some(github) => github.comment(&owner, &repo, number, &message).await,
            None => Err(SendError::Transient("this replica has no GitHub token".into())),
        },
    }
}

async fn settle(
    store: &DeliveryStore,
    job: &DeliveryJob,
    outcome: Result<Sent, SendError>,
) -> crate::db::StoreResult<()> {
    let channel = &job.channel;
    if outcome.is_err() {
        metrics::outbox_failed("channel_deliveries");
    }
    match outcome {
        Ok(sent) => {
            tracing::info!(question.id = %job.question_id, %channel, url = sent.url.as_deref().unwrap_or(""), "question delivered");
            store.delivered(job, sent.url.as_deref(), &sent.reference).await
        }
        Err(SendError::Permanent(error)) => {
            tracing::warn!(question.id = %job.question_id, %channel, %error, "channel delivery refused; given up");
            store.failed(job, &error).await
        }
        Err(_) if job.attempts >= MAX_ATTEMPTS => store.failed(job, "gave up after repeated failures").await,
        Err(SendError::RateLimited(wait)) => {
            tracing::info!(question.id = %job.question_id, %channel, wait_ms = wait.as_millis() as u64, "rate limited; waiting");
            store
                .retry_later(job, wait.as_millis() as i64, &format!("rate limited; retrying in {} s", wait.as_secs()))
                .await
        }
        Err(SendError::Transient(error)) => {
            let delay_ms = outbox::backoff_ms(job.attempts);
            tracing::warn!(question.id = %job.question_id, %channel, attempts = job.attempts, retry_ms = delay_ms, %error, "channel delivery failed; retrying");
            store.retry_later(job, delay_ms, &error).await
        }
    }
}

async fn drain_updates(channels: &Channels, store: &DeliveryStore) {
    let Some(slack) = &channels.slack else { return };
    loop {
        let jobs = match store.claim_updates(CLAIM, LEASE_SECONDS).await {
            Ok(jobs) if !jobs.is_empty() => jobs,
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(%error, "cannot claim Slack messages to update");
                return;
            }
        };
        for job in jobs {
            let query = query_label(&job.query_namespace, &job.query_name);
            let message = Message {
                question_id: &job.question_id,
                sender: &job.sender,
                recipient: &job.recipient,
                content: &job.content,
                options: &job.options,
                query: query.as_deref(),
            };
            let closed = Closed {
                status: &job.status,
                response: job.response.as_deref(),
                answered_by: job.answered_by.as_deref(),
            };
            let outcome = slack.update(&job.message_ref, &message, closed).await;
            if let Err(error) = settle_update(store, &job, outcome).await {
                tracing::warn!(%error, delivery.id = job.id, "cannot record a Slack message update; it will be retried");
            }
        }
    }
}

async fn settle_update(
    store: &DeliveryStore,
    job: &UpdateJob,
    outcome: Result<(), SendError>,
) -> crate::db::StoreResult<()> {
    let question = &job.question_id;
    if outcome.is_err() {
        metrics::outbox_failed("channel_deliveries");
    }
    match outcome {
        Ok(()) => store.update_settled(job, "done", 0).await,
        Err(SendError::Permanent(error)) => {
            tracing::warn!(question.id = %question, %error, "Slack refused to update a question's message; given up");
            store.update_settled(job, "failed", 0).await
        }
        Err(_) if job.attempts >= MAX_ATTEMPTS => store.update_settled(job, "failed", 0).await,
        Err(SendError::RateLimited(wait)) => store.update_settled(job, "waiting", wait.as_millis() as i64).await,
        Err(SendError::Transient(error)) => {
            tracing::warn!(question.id = %question, attempts = job.attempts, %error, "cannot update a question's Slack message; retrying");
            store.update_settled(job, "waiting", outbox::backoff_ms(job.attempts)).await
        }
    }
}

/// `namespace/name` of a question's Query, as its message shows it.
fn query_label(namespace: &Option<String>, name: &Option<String>) -> Option<String> {
    match (namespace, name) {
        (Some(namespace), Some(name)) => Some(format!("{namespace}/{name}")),
        (None, Some(name)) => Some(name.clone()),
        _ => None,
    }
}
