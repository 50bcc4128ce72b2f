//! Small reply shapes every domain shares with upstream: the delete acknowledgement and timestamps.

use chrono::{DateTime, SecondsFormat, Utc};
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

/// Formats a timestamp the way JavaScript's `toISOString` does (milliseconds, `Z`).
pub fn iso_timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}
