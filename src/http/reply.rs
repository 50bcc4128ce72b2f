//! Small reply shapes every domain shares with upstream: the delete acknowledgement, and the bare success of
//! upstream's event and session POSTs.

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
