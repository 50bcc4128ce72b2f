//! The replica-scale phase's own fields of a report row, below both the phase and the report.

use serde::Serialize;

/// The phase's own fields of a row (flattened into its JSON line).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Scale {
    pub replicas: usize,
    pub streams: usize,
    pub rate_per_stream: u32,
    pub database_pool_max: u32,
    /// `idx_tup_fetch + seq_tup_read` of `chunks` over the load; the second alone, and the `seq_scan`s.
    pub chunk_rows_read: i64,
    pub chunk_rows_read_by_seq_scans: i64,
    pub chunk_seq_scans: i64,
    /// `idx_tup_read` of the indexes of `chunks` (index entries, also those of index-only scans).
    pub chunk_index_entries_read: i64,
    pub chunk_rows_per_chunk: f64,
    /// Replicas that hold a reader of a stream (1 reader per stream here, so 1).
    pub reading_replicas_per_stream: usize,
    pub chunk_rows_per_chunk_per_reading_replica: f64,
    pub pg_cpu_us_per_chunk: f64,
    pub broker_cpu_us_per_chunk: f64,
    /// The writers' group commits and the notifications the replicas' tails woke for.
    pub flushes: f64,
    pub wakeups: f64,
    /// How long after its writing time ended a POST was answered (p50 and the slowest, which sets ingest's
    /// window).
    pub answer_after_end_p50_ms: f64,
    pub answer_after_end_max_ms: f64,
    /// Backends on the phase's database at the end of the load.
    pub backends: usize,
    /// The load's window (readers opening to the last `[DONE]`), and the machine's CPU seconds meanwhile
    /// (`/proc/stat`) that none of PostgreSQL, the replicas or the bench used: other processes (other work on a
    /// shared host skews the run), interrupt handling (loopback networking) and steal.
    pub window_s: f64,
    pub other_processes_cpu_s: f64,
    pub irq_cpu_s: f64,
    pub steal_cpu_s: f64,
}
