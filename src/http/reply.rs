//! Small reply shapes every domain shares with upstream: the delete acknowledgement, the bare success of
//! upstream's event and session POSTs, and timestamps.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use utoipa::ToSchema;

/// `{"status":"success","message":…}`, upstream's reply to deletes.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatusMessage {
    /// Always `success`.
    #[schema(value_type = String, pattern = "^success$")]
    status: &'static str,
    /// What was done, e.g. `Memory purged`.
    message: String,
}

impl StatusMessage {
    /// A success reply with `message`.
    pub fn success(message: impl Into<String>) -> Self {
        StatusMessage { status: "success", message: message.into() }
    }
}

/// `{"status":"success"}`, upstream's reply to `POST /events` and `POST /sessions` (the controller's emitter
/// requires exactly this with 201).
#[derive(Debug, Serialize, ToSchema)]
pub struct Success {
    /// Always `success`.
    #[schema(value_type = String, pattern = "^success$")]
    status: &'static str,
}

impl Success {
    /// The reply.
    pub const fn new() -> Self {
        Success { status: "success" }
    }
}

impl Default for Success {
    fn default() -> Self {
        Self::new()
    }
}

/// Formats a timestamp the way JavaScript's `toISOString` does (milliseconds, `Z`).
pub fn iso_timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}
