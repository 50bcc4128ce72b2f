//! Traces: OTLP spans the controller and SDKs export to `POST /v1/traces` (protobuf or JSON, gzip or not),
//! kept in Postgres in upstream's stored form (upstream keeps them in each process's memory), and served by
//! `/traces` — newest trace first, one trace, and watches live across replicas. The broker adds spans of its
//! own: the human wait of a question asked with a trace context ([`wait`]).

use crate::db::pool::Pool;
pub mod model;
pub mod otlp;
mod otlp_json;
mod routes;
pub mod store;
pub mod wait;
pub mod wait_store;

pub use store::SpanStore;

use std::sync::Arc;

use tower_http::decompression::RequestDecompressionLayer;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{config::Config, db::live::LiveFeed, http::sse_end::StreamsEnd};

/// The part of the shared state the OTLP receiver and the `/traces` handlers reach. The registry builds it when it registers the feed
/// (`state/registry.rs`), so this domain never depends on the whole.
#[derive(Debug, Clone)]
pub struct RouteState {
    /// The settings this replica runs with.
    pub config: Arc<Config>,
    /// The request pool.
    pub pool: Pool,
    /// Spans.
    pub spans: LiveFeed<SpanStore>,
    /// When this replica's event streams end (shutdown, or PostgreSQL lost).
    pub streams_end: StreamsEnd,
}

/// The OTLP receiver and the `/traces` routes.
pub fn router() -> OpenApiRouter<RouteState> {
    let receiver = OpenApiRouter::new().routes(routes!(routes::export)).route_layer(RequestDecompressionLayer::new());
    OpenApiRouter::new().merge(receiver).routes(routes!(routes::list, routes::purge)).routes(routes!(routes::trace))
}
