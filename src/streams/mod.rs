//! LLM chunk streams, upstream's `/stream` routes, durable in Postgres: NDJSON ingest group-committed per
//! replica, SSE readers on any replica, completion markers, and the raw global feed; the unified execution
//! stream's typed events in order with the chunks, streams aborted when their writer disconnected, and the
//! replica's budget for partly received NDJSON lines.

pub mod abort;
pub mod broker_writes;
pub mod budget;
pub mod model;
mod ndjson;
mod reader;
mod retention;
mod routes;
pub mod store;
pub mod typed;
pub mod unified;
pub mod writer;

pub use store::ChunkStore;
pub use writer::ChunkWriter;

use utoipa_axum::{router::OpenApiRouter, routes};

use crate::state::AppState;

/// The chunk-stream routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(routes::list, routes::purge))
        .routes(routes!(routes::read, routes::ingest))
        .routes(routes!(routes::complete))
}
