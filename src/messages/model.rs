//! The shapes of the Memory API: upstream's MessageItem and the POST /messages body, with its checks.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{error::ApiError, validate};

/// Longest `ttl_seconds` accepted (100 years); Postgres intervals overflow far beyond it.
const MAX_TTL_SECONDS: i64 = 100 * 365 * 24 * 3600;

/// One stored message, as upstream serves it.
#[derive(Debug, Clone, Serialize)]
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
#[derive(Debug, Deserialize)]
pub struct AppendMessages {
    /// Conversation to append to; it need not exist yet.
    pub conversation_id: String,
    /// The query (name) appending.
    pub query_id: String,
    /// Messages, in order.
    pub messages: Vec<Value>,
    /// Seconds until the messages are hidden and reaped.
    pub ttl_seconds: Option<i64>,
}

impl AppendMessages {
    /// What identifies this request under an idempotency key: its canonical JSON (object keys sorted).
    pub fn fingerprint(&self) -> String {
        json!([self.conversation_id, self.query_id, self.messages, self.ttl_seconds]).to_string()
    }

    /// Checks what serde cannot: ids present and indexable, a positive TTL, and no `\u0000` (which jsonb refuses).
    pub fn validate(&self) -> Result<(), ApiError> {
        validate::key("conversation_id", &self.conversation_id)?;
        validate::key("query_id", &self.query_id)?;
        if let Some(ttl) = self.ttl_seconds {
            if ttl <= 0 {
                return Err(ApiError::Validation("ttl_seconds: Number must be greater than 0".into()));
            }
            if ttl > MAX_TTL_SECONDS {
                return Err(ApiError::Validation(format!("ttl_seconds: Number must be at most {MAX_TTL_SECONDS}")));
            }
        }
        for (index, message) in self.messages.iter().enumerate() {
            if validate::contains_nul(message) {
                return Err(ApiError::Validation(format!(
                    "messages.{index}: text must not contain the NUL character (\\u0000)"
                )));
            }
        }
        Ok(())
    }
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
