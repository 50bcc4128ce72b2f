//! The steps of a question's decision as the record keeps them: what happened ([`Step`]), a step to write
//! ([`Entry`]), and a step as `GET /questions/{id}/history` shows it ([`HistoryItem`]). The store writes and
//! reads them (`store::record`, `store::history`).

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// A step of a question's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Asked.
    Created,
    /// Delivered to a channel.
    Delivered,
    /// A channel delivery given up.
    DeliveryFailed,
    /// Its channels were reminded.
    Reminded,
    /// Its timeout passed and it went to others.
    Escalated,
    /// Someone who may not answer it tried to.
    Refused,
    /// Answered.
    Answered,
    /// The person refused to answer.
    Declined,
    /// Closed by its timeout, unanswered.
    Expired,
    /// Withdrawn by its asker.
    Cancelled,
}

impl Step {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Created => "created",
            Step::Delivered => "delivered",
            Step::DeliveryFailed => "delivery_failed",
            Step::Reminded => "reminded",
            Step::Escalated => "escalated",
            Step::Refused => "refused",
            Step::Answered => "answered",
            Step::Declined => "declined",
            Step::Expired => "expired",
            Step::Cancelled => "cancelled",
        }
    }
}

/// A step to record.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    pub question_id: &'a str,
    pub step: Step,
    /// Who (a principal, `ark://…`, `slack:U…`, `system:…`).
    pub actor: Option<&'a str>,
    /// Via which channel (`api`, `page`, `mcp`, `slack:<channel>`, `github:<owner>/<repo>#<n>`).
    pub channel: Option<&'a str>,
    /// What: the answer, a reason, an error.
    pub detail: Option<Value>,
}

/// One recorded step, as `GET /questions/{id}/history` shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryItem {
    /// What happened.
    #[schema(value_type = Step)]
    pub step: String,
    /// When (ISO 8601).
    pub at: String,
    /// Who.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub actor: Option<String>,
    /// Via which channel.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub channel: Option<String>,
    /// What: the answer, a reason, an error, the asking Query.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, value_type = Object)]
    pub detail: Option<Value>,
}
