//! Traces: OTLP spans the controller and SDKs export to `POST /v1/traces` (protobuf or JSON, gzip or not),
//! kept in Postgres in upstream's stored form (upstream keeps them in each process's memory), and served by
//! `/traces` — newest trace first, one trace, and watches live across replicas.

pub mod model;
pub mod otlp;
mod routes;
pub mod store;

pub use store::SpanStore;

use tower_http::decompression::RequestDecompressionLayer;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::state::AppState;

/// The OTLP receiver and the `/traces` routes.
pub fn router() -> OpenApiRouter<AppState> {
    let receiver = OpenApiRouter::new().routes(routes!(routes::export)).route_layer(RequestDecompressionLayer::new());
    OpenApiRouter::new().merge(receiver).routes(routes!(routes::list, routes::purge)).routes(routes!(routes::trace))
}
