//! Waiting for a question to close, for a blocking `ask_question` and a 2025-11-25 `tasks/result`, on any
//! replica: woken through the question wake-ups (LISTEN/NOTIFY, backed by the listener's poll), with a tick for progress,
//! and told of each channel delivery as it is made or given up.

use std::{collections::HashSet, time::Duration};

use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::{
    db::{
        StoreResult,
        wakeup::{Subscription, Wakeup},
    },
    questions::{
        QuestionStore,
        model::{Question, QuestionStatus},
    },
    state::AppState,
    telemetry::metrics,
};

/// What woke the waiter.
#[derive(Debug)]
pub enum Wait {
    /// The question is closed (answered, cancelled or expired).
    Closed(Box<Question>),
    /// Still pending; a tick passed (time to send progress).
    Tick,
    /// Still pending; channel deliveries were made or given up since the last wait: what to report, e.g.
    /// "Delivered to slack:#ops".
    Delivered(Vec<String>),
}

/// Waits on one question.
#[derive(Debug)]
pub struct Waiter {
    questions: QuestionStore,
    id: String,
    subscription: Subscription,
    tick: Interval,
    /// The channels whose delivery was reported already.
    reported: HashSet<String>,
    _open: metrics::Open,
}

impl Waiter {
    /// Starts waiting on question `id`, ticking every `tick`. Subscribes before the first read.
    pub fn new(state: &AppState, id: &str, tick: Duration) -> Self {
        let subscription = state.wakeups.subscribe(Wakeup::Question(id.to_owned()));
        let mut tick = tokio::time::interval_at(Instant::now() + tick, tick);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Waiter {
            questions: state.questions.clone(),
            id: id.to_owned(),
            subscription,
            tick,
            reported: HashSet::new(),
            _open: metrics::Open::new(metrics::MCP_WAITERS),
        }
    }

    /// Waits until the question closes or the next tick. `None` if the question does not exist.
    pub async fn next(&mut self) -> StoreResult<Option<Wait>> {
        loop {
            // The store's futures are boxed: inline they would make every waiting call's state ~16 KB larger
            // for the whole wait, though they run only once per wake-up.
            let Some(question) = Box::pin(self.questions.get(&self.id)).await? else { return Ok(None) };
            if question.status != QuestionStatus::Pending {
                return Ok(Some(Wait::Closed(Box::new(question))));
            }
            let settled = self.newly_settled(&question);
            if !settled.is_empty() {
                return Ok(Some(Wait::Delivered(settled)));
            }
            if question.expires_at.is_some() && past_timeout(&question) {
                // Expire it now rather than waiting for the reaper; the change wakes us.
                Box::pin(self.questions.act_on_timeout_if_due(&self.id)).await?;
                continue;
            }
            tokio::select! {
                _ = self.subscription.woken() => {}
                _ = self.tick.tick() => return Ok(Some(Wait::Tick)),
            }
        }
    }
}

impl Waiter {
    /// What to report of the deliveries settled since the last report.
    fn newly_settled(&mut self, question: &Question) -> Vec<String> {
        let deliveries = question.deliveries.as_array().map(Vec::as_slice).unwrap_or_default();
        let mut reports = Vec::new();
        for delivery in deliveries {
            let field = |name: &str| delivery[name].as_str().unwrap_or_default();
            let report = match field("status") {
                "delivered" => format!("Delivered to {}", field("channel")),
                "failed" => format!("Could not deliver to {}: {}", field("channel"), field("error")),
                _ => continue,
            };
            if self.reported.insert(field("channel").to_owned()) {
                reports.push(report);
            }
        }
        reports
    }
}

fn past_timeout(question: &Question) -> bool {
    question
        .expires_at
        .as_deref()
        .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
        .is_some_and(|at| at <= chrono::Utc::now())
}

/// The progress a blocking call reports while its question is pending.
pub fn pending_message(question_id: &str) -> String {
    format!("Question pending — waiting for response ({question_id})")
}

/// What a caller still waiting at shutdown is told: retry; the question stays pending.
pub fn shutting_down(question_id: &str) -> rmcp::ErrorData {
    rmcp::ErrorData::internal_error(
        format!("the broker is shutting down: retry (question {question_id} stays pending and can be answered)"),
        Some(serde_json::json!({"questionId": question_id, "retry": true})),
    )
}
