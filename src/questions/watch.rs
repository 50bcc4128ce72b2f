//! `GET /questions?watch=true[&resourceVersion=N]`: Kubernetes-style change stream. Each change is
//! `event: question_created|question_answered|question_cancelled|question_expired|question_updated`, `id:` its
//! resourceVersion, `data:` the question after the change. A watch from N streams only changes after N
//! (`Last-Event-ID` works the same); a version older than the log keeps gets 410 so the client relists.

use axum::response::{Response, sse::Event};
use futures::StreamExt;

use super::{RouteState, store::QuestionFilter};
use crate::{
    db::{wakeup::Wakeup, watch::question_changes},
    error::ApiError,
    http::sse,
};

/// Starts a watch after `from` (or after now).
pub async fn respond(state: &RouteState, filter: QuestionFilter, from: Option<i64>) -> Result<Response, ApiError> {
    let store = state.questions.clone();
    let subscription = state.wakeups.subscribe(Wakeup::Questions);
    let current = store.current_version().await?;
    let last = match from {
        None => current,
        Some(version) => {
            if version < current {
                let oldest = store.oldest_logged_version().await?;
                // The log covers (oldest - 1, current]; anything before that is gone.
                if oldest.is_none_or(|oldest| version < oldest - 1) {
                    return Err(ApiError::Gone(format!(
                        "resourceVersion {version} is too old; list again to get a current one"
                    )));
                }
            }
            version
        }
    };
    let read = move |after, limit| {
        let store = store.clone();
        async move { store.entries_after(after, limit).await }
    };
    let changes = question_changes(subscription, last, state.config.poll_interval(), read, |change| change.version)
        .filter(move |change| std::future::ready(matches(&filter, &change.question)))
        .map(|change| {
            Event::default()
                .event(change.kind.as_str())
                .id(change.version.to_string())
                .data(change.question.to_string())
        });
    Ok(sse::watch(changes, state.streams_end.token(), state.config.sse_heartbeat()))
}

/// Recipient and sender never change, so filtering on them is exact. A status filter is not applied to a
/// watch: a watcher of pending questions must still see them leave.
fn matches(filter: &QuestionFilter, question: &serde_json::Value) -> bool {
    let field_is = |name: &str, wanted: &Option<String>| {
        wanted.as_deref().is_none_or(|wanted| question.get(name).and_then(|v| v.as_str()) == Some(wanted))
    };
    field_is("recipient", &filter.recipient) && field_is("sender", &filter.sender)
}
