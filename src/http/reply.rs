//! Small reply shapes every domain shares with upstream: the delete acknowledgement.

use serde::Serialize;

/// `{"status":"success","message":…}`, upstream's reply to deletes.
#[derive(Debug, Serialize)]
pub struct StatusMessage {
    status: &'static str,
    message: String,
}

impl StatusMessage {
    /// A success reply with `message`.
    pub fn success(message: impl Into<String>) -> Self {
        StatusMessage { status: "success", message: message.into() }
    }
}
