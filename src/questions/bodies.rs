//! The bodies of the questions' write routes — `POST /questions` (which the MCP tool fills in too), an
//! answer, a decline — and the 409 a conflicting write gets, as the OpenAPI document describes them. Their
//! checks are in [`super::checks`].

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{
    model::{QueryRef, Question, text_or_fields},
    timeout::{EscalateTo, OnTimeout},
};
use crate::error::ErrorObject;

/// The body of `POST /questions` (and what the MCP tool fills in).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewQuestion {
    /// `ark://agents|users|teams|channels/<name>`.
    #[schema(pattern = "^ark://(agents|users|teams|channels)/[^/\\s]{1,253}$")]
    pub sender: String,
    /// `ark://agents|users|teams|channels/<name>`.
    #[schema(pattern = "^ark://(agents|users|teams|channels)/[^/\\s]{1,253}$")]
    pub recipient: String,
    /// The question (Markdown on the page; not only white space).
    #[schema(pattern = "\\S")]
    pub content: String,
    /// Where to deliver it besides the API and the page: `slack:<channel>`, `github:<owner>/<repo>#<number>`
    /// (each kind needs its token; others are a 400).
    #[serde(default)]
    #[schema(max_items = 16)]
    pub channels: Vec<String>,
    /// Short answers offered as buttons (e.g. `["Yes, proceed", "No, cancel"]`), 1 to 75 characters each.
    #[serde(default)]
    #[schema(max_items = 10)]
    pub options: Vec<String>,
    /// The form an answer fills: MCP elicitation's restricted JSON Schema (a flat object of strings,
    /// numbers, integers, booleans and single- or multi-select enums; `required`, `default`). The answer is
    /// then an object of these fields. Not with `options`.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub response_schema: Option<Value>,
    /// The asking Query.
    #[serde(default)]
    pub query: Option<QueryRef>,
    /// The tool call that asked.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// Seconds until a pending question expires (at most a year).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 31_536_000)]
    pub ttl_seconds: Option<i64>,
    /// Seconds until its timeout passes (the same as `ttlSeconds`; give one).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 31_536_000)]
    pub timeout_seconds: Option<i64>,
    /// When its timeout passes (RFC 3339, within a year); instead of `timeoutSeconds`.
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<DateTime<Utc>>,
    /// What its timeout does: `expire` (the default), `default` (answered with the `responseSchema`'s
    /// defaults, by `system:timeout`) or `escalate` (to `escalateTo`, with a second timeout as long).
    #[serde(default)]
    pub on_timeout: Option<OnTimeout>,
    /// Who else hears of it when its timeout escalates it (`onTimeout: escalate`).
    #[serde(default)]
    pub escalate_to: Option<EscalateTo>,
    /// Re-notify each channel it was delivered to (Slack in the message's thread, GitHub with a new comment)
    /// this many seconds after the delivery, and again as often, until it is closed.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 31_536_000)]
    pub remind_every_seconds: Option<i64>,
    /// The MCP task waiting for it (set by the MCP server, not by REST clients).
    #[serde(skip)]
    pub task_id: Option<Uuid>,
    /// The TTL granted to that task, in milliseconds.
    #[serde(skip)]
    pub task_ttl_ms: Option<i64>,
    /// The authenticated principal asking (its tasks and pending list are its own).
    #[serde(skip)]
    pub owner: Option<String>,
    /// The caller's trace context, when the ask carried one: its close writes the wait's span.
    #[serde(skip)]
    pub trace: Option<crate::traces::wait::WaitTrace>,
    /// With `mcp:caller` among the channels: the elicitation that asks the person at the calling MCP client
    /// (set by the MCP server; a REST client cannot name that channel).
    #[serde(skip)]
    pub caller_elicitation: Option<Value>,
}

/// The body of a 409 on a question: the error, and the question as it is (who answered first, and what).
#[derive(Debug, ToSchema)]
#[expect(
    dead_code,
    reason = "the OpenAPI document's description of a 409's body; the routes answer an `ApiError` with the question as an extra field"
)]
pub struct QuestionConflict {
    /// What conflicted (`CONFLICT`).
    error: ErrorObject,
    /// The question as stored.
    question: Question,
}

/// The body of `PATCH /questions/{id}` and `POST /questions/{id}/answer`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    /// The answer: text (not only white space), or for a typed question an object of its form's fields.
    #[schema(schema_with = text_or_fields)]
    pub response: Value,
    /// Who answered (a user, or a channel's identity).
    #[serde(default)]
    pub answered_by: Option<String>,
}

/// The body of `POST /questions/{id}/decline` (optional).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Decline {
    /// Why the person declines (at most 2000 characters).
    #[serde(default)]
    pub reason: Option<String>,
    /// Who declines (a user, or a channel's identity); the authenticated principal when there is one.
    #[serde(default)]
    pub declined_by: Option<String>,
}
