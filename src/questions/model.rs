//! The shapes of questions: the stored row and the JSON clients see (camelCase, as seed 000). The bodies
//! of the write routes are in [`super::bodies`].

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{
    form::field_order,
    timeout::{EscalateTo, OnTimeout},
};
use crate::timestamp::iso_timestamp;

/// Where a question is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum QuestionStatus {
    /// Waiting for an answer.
    Pending,
    /// Answered; final.
    Answered,
    /// Withdrawn before an answer; final.
    Cancelled,
    /// Not answered before its timeout; final.
    Expired,
    /// The person refused to answer; final.
    Declined,
}

impl QuestionStatus {
    /// Reads the stored (and query-parameter) form.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "pending" => Some(QuestionStatus::Pending),
            "answered" => Some(QuestionStatus::Answered),
            "cancelled" => Some(QuestionStatus::Cancelled),
            "expired" => Some(QuestionStatus::Expired),
            "declined" => Some(QuestionStatus::Declined),
            _ => None,
        }
    }

    /// The stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionStatus::Pending => "pending",
            QuestionStatus::Answered => "answered",
            QuestionStatus::Cancelled => "cancelled",
            QuestionStatus::Expired => "expired",
            QuestionStatus::Declined => "declined",
        }
    }
}

/// A `questions` row as stored.
#[derive(Debug, Clone)]
pub struct QuestionRow {
    pub id: String,
    pub sequence_number: i64,
    pub sender: String,
    pub recipient: String,
    pub channels: Vec<String>,
    pub content: String,
    pub status: String,
    pub response: Option<String>,
    pub answered_by: Option<String>,
    pub created_at: DateTime<Utc>,
    pub answered_at: Option<DateTime<Utc>>,
    pub closed_at: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub query_namespace: Option<String>,
    pub query_name: Option<String>,
    pub tool_call_id: Option<String>,
    pub task_id: Option<Uuid>,
    pub resource_version: i64,
    pub task_ttl_ms: Option<i64>,
    pub owner: Option<String>,
    pub options: Vec<String>,
    pub deliveries: serde_json::Value,
    pub response_schema: Option<Value>,
    pub response_value: Option<Value>,
    pub decline_reason: Option<String>,
    pub on_timeout: String,
    pub escalate_to: Option<Value>,
    pub escalated_at: Option<DateTime<Utc>>,
    pub remind_every_seconds: Option<i32>,
    pub response_fields: Option<Vec<String>>,
    pub caller_elicitation: Option<Value>,
    pub caller_replied_at: Option<DateTime<Utc>>,
}

/// The Query that asked, when known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct QueryRef {
    /// Its namespace (may be unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 512)]
    pub namespace: Option<String>,
    /// Its name.
    #[schema(min_length = 1, max_length = 512)]
    pub name: String,
}

/// One channel delivery of a question, as the API shows it (written by the outbox's SQL).
#[derive(Debug, ToSchema)]
#[schema(rename_all = "camelCase")]
#[expect(dead_code, reason = "the OpenAPI document's description of a delivery; the outbox's SQL writes the JSON")]
pub struct Delivery {
    /// The channel entry, e.g. `slack:#ops`.
    channel: String,
    /// Where it stands.
    status: DeliveryStatus,
    /// Sends tried so far.
    attempts: i64,
    /// The message or comment, once delivered.
    #[schema(nullable = false)]
    url: Option<String>,
    /// The last failure.
    #[schema(nullable = false)]
    error: Option<String>,
    /// When it was delivered (ISO 8601).
    #[schema(nullable = false)]
    delivered_at: Option<String>,
}

/// [`Delivery::status`].
#[derive(Debug, ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum DeliveryStatus {
    /// Not sent yet, or being retried.
    Pending,
    /// Sent.
    Delivered,
    /// Given up.
    Failed,
}

/// A question as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    /// Its id.
    pub id: String,
    /// Who asks: `ark://agents|users|teams|channels/<name>`.
    pub sender: String,
    /// Who is asked: `ark://agents|users|teams|channels/<name>`.
    pub recipient: String,
    /// Where else it is delivered (`slack:<channel>`, `github:<owner>/<repo>#<number>`).
    pub channels: Vec<String>,
    /// Short answers offered as buttons.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// The form an answer fills (MCP elicitation's restricted JSON Schema); absent: a free-text answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, value_type = Object)]
    pub response_schema: Option<Value>,
    /// Where each channel delivery stands.
    #[serde(skip_serializing_if = "no_deliveries")]
    #[schema(value_type = Vec<Delivery>)]
    pub deliveries: serde_json::Value,
    /// The question.
    pub content: String,
    /// Where it is in its life.
    pub status: QuestionStatus,
    /// The answer: the form's fields for a typed question, else the text.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = text_or_fields)]
    pub response: Option<Value>,
    /// The answer as text, for messages and the page (a typed answer's compact JSON).
    #[serde(skip)]
    pub response_text: Option<String>,
    /// Who answered (or declined).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub answered_by: Option<String>,
    /// Why the person declined, when they said.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub decline_reason: Option<String>,
    /// When it was asked (ISO 8601).
    pub created_at: String,
    /// When it was answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub answered_at: Option<String>,
    /// When it stopped being pending.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub closed_at: Option<String>,
    /// When its timeout passes unless answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub expires_at: Option<String>,
    /// What its timeout does (absent: it expires).
    #[serde(skip_serializing_if = "OnTimeout::is_expire")]
    pub on_timeout: OnTimeout,
    /// Who else hears of it when its timeout escalates it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub escalate_to: Option<EscalateTo>,
    /// When it escalated (its timeout started again then).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub escalated_at: Option<String>,
    /// Seconds between reminders on each of its delivered channels while it is pending.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub remind_every_seconds: Option<i32>,
    /// The asking Query.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub query: Option<QueryRef>,
    /// The tool call that asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub tool_call_id: Option<String>,
    /// The MCP task waiting for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub task_id: Option<Uuid>,
    /// The version of the last change, a string as in Kubernetes.
    pub resource_version: String,
    /// The version as a number.
    #[serde(skip)]
    pub version: i64,
    /// The TTL its MCP task was granted, in milliseconds.
    #[serde(skip)]
    pub task_ttl_ms: Option<i64>,
    /// When it stopped being pending.
    #[serde(skip)]
    pub closed: Option<DateTime<Utc>>,
    /// Creation order; the page cursor.
    #[serde(skip)]
    pub sequence: i64,
    /// The principal that asked, when authentication was on.
    #[serde(skip)]
    pub owner: Option<String>,
    /// When it was created, for the page's age display.
    #[serde(skip)]
    pub created: DateTime<Utc>,
    /// What was asked of the person at the calling MCP client (`mcp:caller`): the elicitation's parameters
    /// without its link, which each replica adds.
    #[serde(skip)]
    pub caller_elicitation: Option<Value>,
    /// Whether that client replied (accepted, declined or cancelled).
    #[serde(skip)]
    pub caller_replied: bool,
}

impl From<QuestionRow> for Question {
    fn from(row: QuestionRow) -> Self {
        Question {
            status: QuestionStatus::parse(&row.status).unwrap_or(QuestionStatus::Pending),
            query: row.query_name.map(|name| QueryRef { namespace: row.query_namespace, name }),
            created_at: iso_timestamp(row.created_at),
            answered_at: row.answered_at.map(iso_timestamp),
            closed_at: row.closed_at.map(iso_timestamp),
            expires_at: row.expires_at.map(iso_timestamp),
            resource_version: row.resource_version.to_string(),
            version: row.resource_version,
            task_ttl_ms: row.task_ttl_ms,
            closed: row.closed_at,
            sequence: row.sequence_number,
            created: row.created_at,
            id: row.id,
            sender: row.sender,
            recipient: row.recipient,
            channels: row.channels,
            options: row.options,
            deliveries: row.deliveries,
            content: row.content,
            response_schema: row
                .response_schema
                .map(|schema| field_order::restored(schema, row.response_fields.as_deref())),
            on_timeout: OnTimeout::parse(&row.on_timeout),
            escalate_to: row.escalate_to.and_then(|to| serde_json::from_value(to).ok()),
            escalated_at: row.escalated_at.map(iso_timestamp),
            remind_every_seconds: row.remind_every_seconds,
            // Rows answered before answers were kept as JSON have only the text.
            response: row.response_value.or_else(|| row.response.clone().map(Value::String)),
            response_text: row.response,
            decline_reason: row.decline_reason,
            answered_by: row.answered_by,
            tool_call_id: row.tool_call_id,
            task_id: row.task_id,
            owner: row.owner,
            caller_elicitation: row.caller_elicitation,
            caller_replied: row.caller_replied_at.is_some(),
        }
    }
}

/// An answer in the OpenAPI document: the text, or a typed question's object of fields.
pub(super) fn text_or_fields() -> utoipa::openapi::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
    Schema::OneOf(
        OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::String))
            .item(ObjectBuilder::new().schema_type(Type::Object))
            .build(),
    )
}

fn no_deliveries(deliveries: &serde_json::Value) -> bool {
    deliveries.as_array().is_none_or(Vec::is_empty)
}
