//! Durable Streams (ElectricSQL's protocol for resumable streams, PROTOCOL.md v1.0) at `/v1/stream/{path}`:
//! streams created, appended to (idempotent producers included), closed, forked, deleted and read —
//! catch-up, long-poll and SSE — by the protocol's own clients, on every replica over the same tables; and
//! Ark's chunk streams read with it under `ark/` ([`ark`]), and its subscriptions under `__ds/` ([`subs`]). See docs/durable-streams.md.

pub mod appends;
mod ark;
pub mod ark_runs;
mod live;
pub mod model;
pub mod offset;
mod reply;
mod routes;
pub mod rules;
pub mod store;
pub mod subs;
pub mod tail;
pub mod writer;
pub mod writes;

use std::sync::Arc;

use axum::{Router, extract::DefaultBodyLimit, middleware, routing::get};

pub use store::DurableStore;

use crate::{
    config::Config,
    db::{live::LiveFeed, wakeup::Wakeups},
    http::sse_end::StreamsEnd,
    streams::ChunkStore,
};

/// Where the protocol's streams live: `/v1/stream/{path}`.
pub const PREFIX: &str = "/v1/stream/";

/// What the protocol's handlers reach.
#[derive(Debug, Clone)]
pub struct RouteState {
    /// The settings this replica runs with.
    pub config: Arc<Config>,
    /// The streams' tables.
    pub store: DurableStore,
    /// This replica's group commit of appends.
    pub appends: writer::AppendWriter,
    /// Ark's chunk streams, which `ark/…` paths read.
    pub chunks: LiveFeed<ChunkStore>,
    /// Where live readers wait for writes.
    pub wakeups: Wakeups,
    /// When this replica's live reads end (shutdown, or PostgreSQL lost).
    pub streams_end: StreamsEnd,
    /// The subscription APIs' keys and the delivery worker's bell.
    pub subscriptions: subs::Subscriptions,
    /// Whether reads carry credentials (auth on): catch-up answers are then `Cache-Control: private`.
    pub private_reads: bool,
}

/// The protocol's routes.
pub fn router<S: Clone + Send + Sync + 'static>(state: RouteState) -> Router<S> {
    Router::new()
        // Ark's streams, read-only: other methods get 405 (with `Allow`).
        .route("/v1/stream/ark/{*rest}", get(ark::read).head(ark::head))
        .merge(subs::router())
        .route(
            "/v1/stream/{*path}",
            get(routes::read).head(routes::head).put(routes::create).post(routes::append).delete(routes::delete),
        )
        .layer(DefaultBodyLimit::max(state.config.durable.durable_max_append_bytes as usize))
        .layer(middleware::map_response(reply::security_headers))
        .layer(reply::cors())
        .with_state(state)
}
