//! One `info` line per request — method, matched route, status, latency, `request.id` — except the probes and
//! `/metrics`, which are polled; and every request counted and timed for Prometheus by the same route
//! template (never the raw path, whose ids would make a metric per stream). The latency is until the
//! response head: an SSE response or a streamed download is counted when it starts.

use std::time::Instant;

use axum::{extract::MatchedPath, extract::Request, middleware::Next, response::Response};

use crate::{error, telemetry::metrics};

/// Routes polled by Kubernetes and Prometheus: counted, not logged.
const QUIET: &[&str] = &["/health", "/readyz", "/metrics"];

/// The middleware.
pub async fn record(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", MatchedPath::as_str).to_owned();
    let request_id = error::request_id(request.headers()).to_owned();
    let response = next.run(request).await;
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    metrics::http_request(method.as_str(), &route, status, elapsed);
    if !QUIET.contains(&route.as_str()) {
        tracing::info!(
            http.method = %method,
            http.route = %route,
            http.status = status,
            latency_ms = elapsed.as_micros() as f64 / 1000.0,
            request.id = %request_id,
            "request"
        );
    }
    response
}
