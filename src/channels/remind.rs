//! Sends due reminders (`remindEverySeconds`): a reply in the Slack message's thread, a new comment on the
//! GitHub issue or pull request; each claimed by one replica, retried with backoff, and recorded once sent.

use tokio_util::sync::CancellationToken;

use super::{outbound::Channels, reminder_store::ReminderJob, send::SendError, slack::mrkdwn, store::DeliveryStore};
use crate::{
    db::outbox::{self, LEASE_SECONDS, MAX_ATTEMPTS},
    questions::{channel::Channel, model::QuestionStatus},
    telemetry::{chain, metrics},
};

/// Sends what is due until nothing is, or shutdown begins.
pub async fn drain(channels: &Channels, store: &DeliveryStore, shutdown: &CancellationToken) {
    while !shutdown.is_cancelled() {
        let jobs = match store.claim_reminders(1, LEASE_SECONDS).await {
            Ok(jobs) if !jobs.is_empty() => jobs,
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(error = %chain(&error), "cannot claim reminders");
                return;
            }
        };
        for job in jobs {
            let outcome = send(channels, &job).await;
            if let Err(error) = settle(store, &job, outcome).await {
                tracing::warn!(error = %chain(&error), delivery.id = job.id, "cannot record a reminder; it will be retried");
            }
        }
    }
}

/// What a reminder says (Markdown for GitHub; Slack's mrkdwn reads it the same).
fn text(content: &str, recipient: &str, number: i32) -> String {
    let quoted: String = content.lines().map(|line| format!("> {line}\n")).collect();
    format!("Reminder {number}: this question for {recipient} is still waiting for an answer.\n{quoted}")
}

async fn send(channels: &Channels, job: &ReminderJob) -> Result<Option<String>, SendError> {
    let question = match channels.questions.get(&job.question_id).await {
        Ok(Some(question)) => question,
        Ok(None) => return Err(SendError::Permanent("the question is gone".into())),
        Err(error) => return Err(SendError::Transient(chain(&error).to_string())),
    };
    if question.status != QuestionStatus::Pending {
        return Err(SendError::Permanent(format!("not reminded: the question was {}", question.status.as_str())));
    }
    let text = text(&question.content, &question.recipient, job.number);
    match Channel::parse(&job.channel).map_err(SendError::Permanent)? {
        Channel::Slack { .. } => {
            let Some(slack) = &channels.slack else {
                return Err(SendError::Transient("this replica has no Slack token".into()));
            };
            let reference = job.message_ref.clone().unwrap_or_default();
            slack.reply_in_thread(&reference, &mrkdwn::escape(&text)).await.map(|()| None)
        }
        Channel::GitHub { owner, repo, number } => match &channels.github {
            Some(github) => github.create_comment(&owner, &repo, number, &text).await.map(|sent| sent.url),
            None => Err(SendError::Transient("this replica has no GitHub token".into())),
        },
        // Never queued: the caller is asked on its own connection (`mcp::caller`).
        Channel::Caller => Err(SendError::Permanent("mcp:caller is not sent through the outbox".into())),
    }
}

async fn settle(
    store: &DeliveryStore,
    job: &ReminderJob,
    outcome: Result<Option<String>, SendError>,
) -> crate::db::StoreResult<bool> {
    let question = &job.question_id;
    let channel = &job.channel;
    if outcome.is_err() {
        metrics::outbox_failed(metrics::Outbox::ChannelDeliveries);
    }
    match outcome {
        Ok(url) => {
            tracing::info!(question.id = %question, %channel, reminder = job.number, "question reminded");
            store.reminded(job, url.as_deref()).await
        }
        Err(SendError::Permanent(error)) => {
            tracing::warn!(question.id = %question, %channel, %error, "reminder refused; no more on this channel");
            store.remind_later(job, None).await
        }
        Err(_) if job.attempts >= MAX_ATTEMPTS => store.remind_later(job, None).await,
        Err(SendError::RateLimited(wait)) => store.remind_later(job, Some(wait.as_millis() as i64)).await,
        Err(SendError::Transient(error)) => {
            tracing::warn!(question.id = %question, %channel, attempts = job.attempts, %error, "reminder failed; retrying");
            store.remind_later(job, Some(outbox::backoff_ms(job.attempts))).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::text;

    #[test]
    fn a_reminder_quotes_the_question_and_counts() {
        assert_eq!(
            text("Deploy?\nTo prod", "ark://users/alice", 2),
            "Reminder 2: this question for ark://users/alice is still waiting for an answer.\n> Deploy?\n> To prod\n"
        );
    }
}
