//! The delivery worker every replica runs: claims due deliveries from the outbox (each one by one replica,
//! leased), sends them, and records the outcome; failures are retried with backoff, rate limits after the
//! wait asked for, and refusals are given up at once. Once a question closes, its delivered Slack messages
//! are claimed and updated the same way.

use crate::telemetry::chain;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{
    outbound::Channels,
    send::{Message, SendError, Sent},
    slack::{Slack, blocks::Closed},
    store::{DeliveryJob, DeliveryStore, UpdateJob},
};
use crate::{
    db::{
        outbox::{self, LEASE_SECONDS, MAX_ATTEMPTS},
        wakeup::Wakeups,
    },
    questions::channel::Channel,
    questions::model::{Question, QuestionStatus},
    telemetry::metrics,
};

/// Questions looked at per round for messages to update once they closed.
const UPDATE_SCAN: i64 = 200;
/// Deliveries claimed at a time: one, so each one's lease starts right before its own send (several claimed
/// together would wait for each other's sends, and a slow channel would let their leases run out).
const CLAIM: i64 = 1;

/// Starts this replica's delivery worker, when any channel is configured.
pub fn spawn(channels: &Channels, wakeups: Wakeups, shutdown: CancellationToken) -> Option<JoinHandle<()>> {
    let (channels, store) = (channels.clone(), channels.deliveries().clone());
    channels.any().then(|| {
        tokio::spawn(async move {
            let stopping = shutdown.clone();
            outbox::work_off(wakeups, shutdown, || drain(&channels, &store, &stopping)).await
        })
    })
}

/// Works off what is due; once shutdown begins, nothing more is claimed (what another replica will send),
/// and the send in flight finishes and is recorded.
async fn drain(channels: &Channels, store: &DeliveryStore, shutdown: &CancellationToken) {
    drain_sends(channels, store, shutdown).await;
    drain_updates(channels, store, shutdown).await;
    super::remind::drain(channels, store, shutdown).await;
}

async fn drain_sends(channels: &Channels, store: &DeliveryStore, shutdown: &CancellationToken) {
    while !shutdown.is_cancelled() {
        let jobs = match store.claim_due(CLAIM, LEASE_SECONDS).await {
            Ok(jobs) if !jobs.is_empty() => jobs,
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(error = %chain(&error), "cannot claim channel deliveries");
                return;
            }
        };
        for job in jobs {
            let outcome = send(channels, &job).await;
            match settle(store, &job, outcome).await {
                Ok(true) => {}
                Ok(false) => lost_claim(&job.question_id, &job.channel),
                Err(error) => {
                    tracing::warn!(error = %chain(&error), delivery.id = job.id, "cannot record a channel delivery; it will be retried")
                }
            }
        }
    }
}

async fn send(channels: &Channels, job: &DeliveryJob) -> Result<Sent, SendError> {
    let question = question_of(channels, &job.question_id).await?;
    if question.status != QuestionStatus::Pending {
        return Err(SendError::Permanent(format!("not sent: the question was {} first", question.status.as_str())));
    }
    let query = query_label(&question);
    let message = message_of(&question, query.as_deref());
    match Channel::parse(&job.channel).map_err(SendError::Permanent)? {
        Channel::Slack { channel } => match &channels.slack {
            Some(slack) => slack.post(&channel, &message).await,
            None => Err(SendError::Transient("this replica has no Slack token".into())),
        },
        Channel::GitHub { owner, repo, number } => match &channels.github {
            Some(github) => github.comment(&owner, &repo, number, &message).await,
            None => Err(SendError::Transient("this replica has no GitHub token".into())),
        },
        // Never queued: the caller is asked on its own connection (`mcp::caller`).
        Channel::Caller => Err(SendError::Permanent("mcp:caller is not sent through the outbox".into())),
    }
}

/// The send outlived its lease and another replica claimed the delivery: its outcome is that replica's to
/// record (the channel may show the message twice).
fn lost_claim(question_id: &str, channel: &str) {
    tracing::warn!(question.id = %question_id, %channel, "a send outlived its claim; another replica took the delivery over");
}

async fn settle(
    store: &DeliveryStore,
    job: &DeliveryJob,
    outcome: Result<Sent, SendError>,
) -> crate::db::StoreResult<bool> {
    let channel = &job.channel;
    if outcome.is_err() {
        metrics::outbox_failed(metrics::Outbox::ChannelDeliveries);
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

async fn drain_updates(channels: &Channels, store: &DeliveryStore, shutdown: &CancellationToken) {
    let Some(slack) = &channels.slack else { return };
    while !shutdown.is_cancelled() {
        // Which questions wait for their messages to show how they closed, then which of them did close.
        let closed = match store.awaiting_update(UPDATE_SCAN).await {
            Ok(waiting) if waiting.is_empty() => return,
            Ok(waiting) => channels.questions.closed_among(&waiting).await,
            Err(error) => Err(error),
        };
        let jobs = match closed {
            Ok(closed) if closed.is_empty() => return,
            Ok(closed) => store.claim_updates(&closed, CLAIM, LEASE_SECONDS).await,
            Err(error) => Err(error),
        };
        let jobs = match jobs {
            Ok(jobs) if !jobs.is_empty() => jobs,
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(error = %chain(&error), "cannot claim Slack messages to update");
                return;
            }
        };
        for job in jobs {
            let outcome = update(slack, channels, &job).await;
            match settle_update(store, &job, outcome).await {
                Ok(true) => {}
                Ok(false) => lost_claim(&job.question_id, "slack (update)"),
                Err(error) => {
                    tracing::warn!(error = %chain(&error), delivery.id = job.id, "cannot record a Slack message update; it will be retried")
                }
            }
        }
    }
}

/// Shows on a question's Slack message how the question closed.
async fn update(slack: &Slack, channels: &Channels, job: &UpdateJob) -> Result<(), SendError> {
    let question = question_of(channels, &job.question_id).await?;
    let query = query_label(&question);
    let closed = Closed {
        status: question.status.as_str(),
        response: question.response_text.as_deref(),
        answered_by: question.answered_by.as_deref(),
    };
    slack.update(&job.message_ref, &message_of(&question, query.as_deref()), closed).await
}

/// The question a delivery or an update is about: gone is for good, unreadable is for now.
async fn question_of(channels: &Channels, id: &str) -> Result<Question, SendError> {
    match channels.questions.get(id).await {
        Ok(Some(question)) => Ok(question),
        Ok(None) => Err(SendError::Permanent("not sent: the question is gone".into())),
        Err(error) => Err(SendError::Transient(format!("reading the question: {}", chain(&error)))),
    }
}

/// What a question's message says.
fn message_of<'a>(question: &'a Question, query: Option<&'a str>) -> Message<'a> {
    Message {
        question_id: &question.id,
        sender: &question.sender,
        recipient: &question.recipient,
        content: &question.content,
        options: &question.options,
        response_schema: question.response_schema.as_ref(),
        query,
    }
}

async fn settle_update(
    store: &DeliveryStore,
    job: &UpdateJob,
    outcome: Result<(), SendError>,
) -> crate::db::StoreResult<bool> {
    let question = &job.question_id;
    if outcome.is_err() {
        metrics::outbox_failed(metrics::Outbox::ChannelDeliveries);
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
fn query_label(question: &Question) -> Option<String> {
    let query = question.query.as_ref()?;
    Some(match &query.namespace {
        Some(namespace) => format!("{namespace}/{}", query.name),
        None => query.name.clone(),
    })
}
