//! Traces: OTLP spans the controller and SDKs export to `POST /v1/traces` (protobuf or JSON, gzip or not),
//! kept in Postgres in upstream's stored form (upstream keeps them in each process's memory), and served by
//! `/traces` — newest trace first, one trace, and watches live across replicas.

pub mod model;
pub mod otlp;
mod routes;
pub mod store;

pub use store::SpanStore;

use axum::{
    Router,
    routing::{get, post},
};
use tower_http::decompression::RequestDecompressionLayer;

use crate::state::AppState;

/// The OTLP receiver and the `/traces` routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/traces", post(routes::export).route_layer(RequestDecompressionLayer::new()))
        .route("/traces", get(routes::list).delete(routes::purge))
        .route("/traces/{id}", get(routes::trace))
}
