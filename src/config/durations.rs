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

    /// How long a whole request may take to arrive (`REQUEST_TIMEOUT_MS`), if bounded.
    pub fn request_timeout(&self) -> Option<Duration> {
        (self.request_timeout_ms > 0).then(|| Duration::from_millis(self.request_timeout_ms))
    }

    /// How long a whole (not streamed) request body may take: the body read timeout, or the request
    /// timeout when that is shorter.
    pub fn body_deadline(&self) -> Duration {
        let body = Duration::from_secs(self.body_read_timeout_seconds);
        self.request_timeout().map_or(body, |request| request.min(body))
    }
}
