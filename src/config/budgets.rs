//! Upstream's byte budgets (`MESSAGE_MAX_BYTES`, `EVENT_MAX_BYTES`, `TRACE_MAX_BYTES`; its `config/schema.ts`
//! at 1839fcd4): the most bytes a table keeps, its oldest rows deleted by the reaper beyond it, the newest
//! always kept. Off unless set: upstream sized them for an in-memory store in an 870 MB Node heap, and here
//! rows are on disk and kept by their TTLs.

use clap::Args;

/// The byte budgets, flattened into [`super::Config`].
#[derive(Debug, Clone, Copy, Args)]
pub struct ByteBudgets {
    /// Most bytes of messages kept (their `bytes`); the reaper deletes the oldest beyond it, never the newest
    /// (0: no budget; upstream's default is 100 MiB for its in-memory store).
    #[arg(long, env = "MESSAGE_MAX_BYTES", default_value_t = 0)]
    pub message_max_bytes: u64,

    /// Most bytes of events kept, as `MESSAGE_MAX_BYTES` (0: no budget; upstream: 100 MiB).
    #[arg(long, env = "EVENT_MAX_BYTES", default_value_t = 0)]
    pub event_max_bytes: u64,

    /// Most bytes of spans kept, as `MESSAGE_MAX_BYTES` (0: no budget; upstream: 32 MiB).
    #[arg(long, env = "TRACE_MAX_BYTES", default_value_t = 0)]
    pub trace_max_bytes: u64,
}
