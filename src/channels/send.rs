//! What a send to a channel is: the message, how long one call may take, what a sent one leaves behind, and
//! how a send fails (shared by the Slack and GitHub clients and the worker that retries them).

use std::time::Duration;

use axum::http::HeaderMap;

/// How long one call to Slack or GitHub may take: a delivery makes at most two, well inside its lease and
/// within what shutdown waits for the worker (so a replica going down does not leave a send half done).
pub const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// What a delivered message says.
#[derive(Debug, Clone)]
pub struct Message<'a> {
    pub question_id: &'a str,
    pub sender: &'a str,
    pub recipient: &'a str,
    pub content: &'a str,
    pub options: &'a [String],
    /// The form of a typed question (`responseSchema`).
    pub response_schema: Option<&'a serde_json::Value>,
    /// `namespace/name`, when the question names its Query.
    pub query: Option<&'a str>,
}

impl Message<'_> {
    /// Plain text for notifications and clients that show no blocks.
    pub(super) fn fallback_text(&self) -> String {
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
pub(super) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds: u64 = headers.get("retry-after")?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds.clamp(1, 3600)))
}
