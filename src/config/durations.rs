//! The settings that are durations, as `Duration`s.

use std::time::Duration;

use super::Config;

impl Config {
    /// The fallback poll period.
    pub fn poll_interval(&self) -> Duration {
        Duration::from_millis(self.poll_interval_ms)
    }

    /// The heartbeat period of `watch` streams.
    pub fn sse_heartbeat(&self) -> Duration {
        Duration::from_secs(self.sse_heartbeat_seconds)
    }

    /// Time between progress notifications of a blocking `ask_question`.
    pub fn mcp_progress_interval(&self) -> Duration {
        Duration::from_millis(self.mcp_progress_interval_ms)
    }

    /// How long shutdown waits for open requests.
    pub fn shutdown_timeout(&self) -> Duration {
        Duration::from_secs(self.shutdown_timeout_seconds)
    }
}
