//! The shapes of the Memory API: upstream's MessageItem, the POST /messages body with its checks, the list
//! parameters and the replies of the conversation routes.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use crate::validate::{self, Checked, Invalid};

/// Longest `ttl_seconds` accepted (100 years); Postgres intervals overflow far beyond it.
const MAX_TTL_SECONDS: i64 = 100 * 365 * 24 * 3600;

/// One stored message, as upstream serves it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MessageItem {
    /// When it was stored, ISO 8601 with milliseconds.
    pub timestamp: String,
    /// The conversation it belongs to.
    pub conversation_id: String,
    /// The query (name) that wrote it.
    pub query_id: String,
    /// The message itself, opaque (OpenAI message params in practice).
    pub message: Value,
    /// Its position in the global messages feed; also the page cursor.
    pub sequence: i64,
    /// Its position within its conversation: 1, 2, 3, … in commit order.
    #[serde(skip)]
    pub position: i64,
    /// The id of the transaction that wrote it.
    #[serde(skip)]
    pub tx: i64,
    /// The message's size in bytes (as JSON text).
    #[serde(skip)]
    pub bytes: i32,
}

crate::feed_row!(MessageItem, conversation_id);

/// The body of `POST /messages`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct AppendMessages {
    /// Conversation to append to; it need not exist yet.
    #[schema(min_length = 1, max_length = 512)]
    pub conversation_id: String,
    /// The query (name) appending.
    #[schema(min_length = 1, max_length = 512)]
    pub query_id: String,
    /// Messages, in order.
    pub messages: Vec<Value>,
    /// Seconds until the messages are hidden and reaped (at most 100 years; default
    /// `MESSAGE_VISIBILITY_TTL_SECONDS`).
    #[schema(minimum = 1, maximum = 3_153_600_000_i64)]
    pub ttl_seconds: Option<i64>,
}

/// `value` with every object's keys sorted (serde_json keeps them in the order they came).
fn canonical(value: Value) -> Value {
    match value {
        Value::Object(object) => {
            let mut entries: Vec<(String, Value)> = object.into_iter().map(|(k, v)| (k, canonical(v))).collect();
            entries.sort_by(|(a, _), (b, _)| a.cmp(b));
            Value::Object(entries.into_iter().collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

impl AppendMessages {
    /// What identifies this request under an idempotency key: its canonical JSON (object keys sorted, so the
    /// same messages written with their keys in another order are the same request).
    pub fn fingerprint(&self) -> String {
        canonical(json!([self.conversation_id, self.query_id, self.messages, self.ttl_seconds])).to_string()
    }

    /// Checks what serde cannot: ids present and indexable, a positive TTL, and no `\u0000` (which jsonb refuses).
    pub fn validate(&self) -> Checked {
        validate::key("conversation_id", &self.conversation_id)?;
        validate::key("query_id", &self.query_id)?;
        if let Some(ttl) = self.ttl_seconds {
            if ttl <= 0 {
                return Err(Invalid("ttl_seconds: Number must be greater than 0".into()));
            }
            if ttl > MAX_TTL_SECONDS {
                return Err(Invalid(format!("ttl_seconds: Number must be at most {MAX_TTL_SECONDS}")));
            }
        }
        for (index, message) in self.messages.iter().enumerate() {
            if validate::contains_nul(message) {
                return Err(Invalid(format!("messages.{index}: text must not contain the NUL character (\\u0000)")));
            }
        }
        Ok(())
    }
}

/// The parameters of `GET /messages`: a page, or with `watch=true` the SSE feed.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MessageParams {
    /// Page size, 1 to 1000 (default 100).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// Only messages after this sequence number (the previous page's `nextCursor`); with `watch=true`,
    /// resume after it.
    #[param(value_type = Option<i64>, minimum = 0)]
    pub cursor: Option<String>,
    /// `true`: a `text/event-stream` of new messages instead of a page.
    #[param(value_type = Option<crate::http::params::Flag>, inline)]
    pub watch: Option<String>,
    /// Only this conversation.
    pub conversation_id: Option<String>,
    /// Only this query.
    pub query_id: Option<String>,
}

/// `GET /memory-status`.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemoryStatus {
    /// How many conversations have visible messages.
    pub total_conversations: usize,
    /// How many visible messages there are.
    pub total_messages: i64,
    /// Each conversation's counts, by conversation id.
    #[schema(value_type = std::collections::HashMap<String, ConversationCounts>)]
    pub conversations: serde_json::Map<String, Value>,
}

/// One conversation's counts in `GET /memory-status`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConversationCounts {
    /// Its visible messages.
    pub message_count: i64,
    /// The queries that wrote them.
    pub query_count: i64,
}

/// `GET /conversations`: the ids of conversations with visible messages.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConversationIds {
    /// The ids.
    pub conversations: Vec<String>,
}

/// `POST /conversations`: a fresh id.
#[derive(Debug, Serialize, ToSchema)]
pub struct NewConversation {
    /// A new UUID; nothing is stored until messages arrive.
    pub conversation_id: String,
}

/// `GET /conversations/{id}`: a conversation's visible messages.
#[derive(Debug, Serialize, ToSchema)]
pub struct Conversation {
    /// Its id.
    pub conversation_id: String,
    /// Its messages, in order.
    pub messages: Vec<MessageItem>,
}

/// Which messages a list or watch covers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageFilter {
    /// Only this conversation.
    pub conversation_id: Option<String>,
    /// Only this query.
    pub query_id: Option<String>,
}

impl MessageFilter {
    /// Whether `item` passes the filter.
    pub fn matches(&self, item: &MessageItem) -> bool {
        self.conversation_id.as_deref().is_none_or(|id| id == item.conversation_id)
            && self.query_id.as_deref().is_none_or(|id| id == item.query_id)
    }
}
