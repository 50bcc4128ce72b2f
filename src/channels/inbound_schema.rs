//! What Slack and GitHub send the inbound routes, as the OpenAPI document describes it: the fields the
//! broker reads (every other field is ignored), with a realistic example each, so a fuzzer's cases look like
//! what Slack and GitHub send. The routes read the JSON by hand, leniently (a field of another type is
//! absent, not a 400); the tests beside them list the fields they read and hold this description to them,
//! and `tests/api/openapi_bodies.rs` sends it what the suite sends.

use utoipa::ToSchema;

/// A GitHub webhook delivery (`issue_comment` is the one acted on).
#[derive(Debug, ToSchema)]
#[schema(example = json!({
    "action": "created",
    "comment": {"body": "/answer Yes, proceed", "user": {"login": "octocat", "type": "User"}},
    "issue": {"number": 42},
    "repository": {"full_name": "acme/app"}
}))]
#[expect(
    dead_code,
    reason = "the OpenAPI document's description of a webhook delivery; the route reads the JSON itself, and its tests hold the two alike"
)]
pub struct GitHubEvent {
    /// `created` for a new comment.
    action: Option<String>,
    /// The comment.
    comment: Option<GitHubComment>,
    /// The issue or pull request commented on.
    issue: Option<GitHubIssue>,
    /// Its repository.
    repository: Option<GitHubRepository>,
}

/// `comment`.
#[derive(Debug, ToSchema)]
#[expect(dead_code, reason = "for the OpenAPI document only, as `GitHubEvent`")]
pub struct GitHubComment {
    /// Its text: a first line `/answer [Q-XXXX] <text>` answers.
    body: Option<String>,
    /// Who wrote it.
    user: Option<GitHubUser>,
    /// Set when a GitHub App wrote it (ignored, as a bot's).
    #[schema(value_type = Option<Object>)]
    performed_via_github_app: Option<serde_json::Value>,
}

/// `comment.user`.
#[derive(Debug, ToSchema)]
#[expect(dead_code, reason = "for the OpenAPI document only, as `GitHubEvent`")]
pub struct GitHubUser {
    /// The login (the answer is recorded as `github:<login>`).
    login: Option<String>,
    /// `User` or `Bot` (bots are ignored).
    #[schema(rename = "type")]
    kind: Option<String>,
}

/// `issue`.
#[derive(Debug, ToSchema)]
#[expect(dead_code, reason = "for the OpenAPI document only, as `GitHubEvent`")]
pub struct GitHubIssue {
    /// Its number.
    number: Option<u64>,
}

/// `repository`.
#[derive(Debug, ToSchema)]
#[expect(dead_code, reason = "for the OpenAPI document only, as `GitHubEvent`")]
pub struct GitHubRepository {
    /// `owner/repo`.
    full_name: Option<String>,
}

/// An Events API callback: the URL verification, or a message event (a reply in a question's thread answers).
#[derive(Debug, ToSchema)]
#[schema(example = json!({
    "type": "event_callback",
    "event_id": "Ev0001",
    "event": {"type": "message", "channel": "C0001", "user": "U0001", "text": "Yes, proceed", "ts": "1.000002", "thread_ts": "1.000001"}
}))]
#[expect(
    dead_code,
    reason = "the OpenAPI document's description of an Events API callback; the route reads the JSON itself, and its tests hold the two alike"
)]
pub struct SlackEvent {
    /// `url_verification` or `event_callback`.
    #[schema(rename = "type")]
    kind: Option<String>,
    /// The verification's challenge, echoed.
    challenge: Option<String>,
    /// The event's id: each is acted on once.
    event_id: Option<String>,
    /// The event.
    event: Option<SlackMessage>,
}

/// A message event.
#[derive(Debug, ToSchema)]
#[expect(dead_code, reason = "for the OpenAPI document only, as `SlackEvent`")]
pub struct SlackMessage {
    /// `message`.
    #[schema(rename = "type")]
    kind: Option<String>,
    /// Absent for a person's message (or `thread_broadcast`).
    subtype: Option<String>,
    /// Set on a bot's message (ignored).
    bot_id: Option<String>,
    /// The channel.
    channel: Option<String>,
    /// Who wrote it.
    user: Option<String>,
    /// What they wrote.
    text: Option<String>,
    /// The message's timestamp.
    ts: Option<String>,
    /// The thread's (the question's message's) timestamp.
    thread_ts: Option<String>,
}

/// The form Slack posts interactions as: one field, the interaction as JSON (`block_actions` for a button,
/// `view_submission` for the answer modal).
#[derive(Debug, ToSchema)]
#[schema(example = json!({
    "payload": "{\"type\":\"block_actions\",\"user\":{\"id\":\"U0001\"},\"actions\":[{\"action_id\":\"option:0\",\"value\":\"q-1|0\"}],\"response_url\":\"http://127.0.0.1:9/respond\"}"
}))]
#[expect(
    dead_code,
    reason = "the OpenAPI document's description of an interaction's form; the route reads the form itself, and its tests hold the two alike"
)]
pub struct SlackForm {
    /// The interaction, JSON.
    payload: String,
}
