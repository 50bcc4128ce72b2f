//! LLM chunk streams, upstream's `/stream` routes, durable in Postgres: NDJSON ingest group-committed per
//! replica, SSE readers on any replica, completion markers, and the raw global feed; the unified execution
//! stream's typed events in order with the chunks, streams aborted when their writer disconnected, and the
//! replica's budget for partly received NDJSON lines.

use crate::db::pool::Pool;
pub mod abort;
pub mod broker_writes;
pub mod budget;
pub mod completion;
mod completion_store;
pub mod ends;
mod flush;
mod ingest;
pub mod model;
mod ndjson;
mod reader;
pub mod retention;
mod routes;
pub mod runs_store;
pub mod store;
pub mod typed;
pub mod unified;
pub mod writer;

pub use store::ChunkStore;
pub use writer::ChunkWriter;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use utoipa_axum::{router::OpenApiRouter, routes};

use self::budget::NdjsonBudget;
use crate::{config::Config, db::live::LiveFeed, http::sse_end::StreamsEnd};

/// The part of the shared state the chunk-stream handlers reach. The whole state hands it out (`FromRef`), so this
/// domain never depends on the whole.
#[derive(Debug, Clone)]
pub struct RouteState {
    /// The settings this replica runs with.
    pub config: Arc<Config>,
    /// The request pool.
    pub pool: Pool,
    /// Chunk streams.
    pub chunks: LiveFeed<ChunkStore>,
    /// This replica's group-commit writer.
    pub writer: ChunkWriter,
    /// The bytes all open chunk POSTs may hold in partly received NDJSON lines.
    pub ndjson_budget: NdjsonBudget,
    /// When this replica's event streams end (shutdown, or PostgreSQL lost).
    pub streams_end: StreamsEnd,
    /// Cancelled when a draining replica may wait no longer: chunk POSTs still open are ended then.
    pub drain_deadline: CancellationToken,
    /// This replica's open chunk POSTs, which completion requests reach.
    pub open_writers: completion::OpenWriters,
    /// Who hears that a stream was completed.
    pub stream_ends: ends::StreamEnds,
}

/// The chunk-stream routes.
pub fn router() -> OpenApiRouter<RouteState> {
    OpenApiRouter::new()
        .routes(routes!(routes::list, routes::purge))
        .routes(routes!(routes::read, routes::ingest))
        .routes(routes!(routes::complete))
}
