//! The Durable Streams protocol's settings (`/v1/stream/…`, docs/durable-streams.md).

use clap::Args;

/// The Durable Streams flags, flattened into [`super::Config`].
#[derive(Debug, Clone, Args)]
pub struct DurableStreams {
    /// How long a Durable Streams long-poll read (`live=long-poll`) waits for new data before it answers 204.
    #[arg(long, env = "ARK_BROKER_DURABLE_LONG_POLL_MS", default_value_t = 20_000,
          value_parser = clap::value_parser!(u64).range(100..=300_000))]
    pub durable_long_poll_ms: u64,

    /// How long a Durable Streams SSE read (`live=sse`) stays open before the broker ends it, so clients
    /// reconnect from their last offset and CDNs can collapse them (the protocol suggests about 60 s).
    #[arg(long, env = "ARK_BROKER_DURABLE_SSE_SECONDS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub durable_sse_seconds: u64,

    /// The largest body a Durable Streams `PUT` or `POST` may carry, in bytes (413 above it).
    #[arg(long, env = "ARK_BROKER_DURABLE_MAX_APPEND_BYTES", default_value_t = 16 << 20,
          value_parser = clap::value_parser!(u64).range(1024..=1 << 30))]
    pub durable_max_append_bytes: u64,

    /// Whether a Durable Streams webhook subscription may name an `http://` URL on this machine's loopback
    /// (`localhost`, `127.0.0.0/8`): a local receiver, or a test's. Off, only `https` to a public host is
    /// taken, since a pod's loopback reaches its sidecars' admin ports.
    #[arg(long, env = "ARK_BROKER_DURABLE_WEBHOOK_LOOPBACK", default_value_t = false)]
    pub durable_webhook_loopback: bool,
}

impl DurableStreams {
    /// The long-poll wait.
    pub fn long_poll(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.durable_long_poll_ms)
    }

    /// How long an SSE read stays open.
    pub fn sse_lifetime(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.durable_sse_seconds)
    }
}
