//! What a connection beyond the cap is served: the probes, so Kubernetes still sees a live (and, when it is,
//! ready) replica while clients hold every slot, and a quick 503 for everything else, which tells the client
//! to retry and closes the connection.

use axum::{
    Router,
    http::{HeaderValue, header},
    middleware,
    response::{IntoResponse, Response},
};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};

use crate::{
    error::{self, ApiError},
    operations::health,
    state::AppState,
};

/// `/health` and `/readyz` as the API serves them; 503 for the rest.
pub fn probes(state: AppState) -> Router {
    with_error_bodies(Router::new().merge(health::router()).fallback(at_capacity)).with_state(state)
}

/// 503 for everything (a port without probes: MCP).
pub fn refuse_all() -> Router {
    with_error_bodies(Router::new().fallback(at_capacity))
}

fn with_error_bodies<S: Clone + Send + Sync + 'static>(router: Router<S>) -> Router<S> {
    router
        .layer(middleware::from_fn(error::render_error_body))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
}

async fn at_capacity() -> Response {
    let mut response =
        ApiError::AtCapacity("this replica is at its connection limit; retry, here or on another replica".into())
            .into_response();
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
