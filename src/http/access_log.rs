//! One `info` line per request — method, matched route, status, latency, `request.id` — except the probes and
//! `/metrics`, which are polled; and every request counted and timed for Prometheus by the same route
//! template (never the raw path, whose ids would make a metric per stream). The latency is until the
//! response head: an SSE response or a streamed download is counted when it starts.

use std::time::Instant;

use axum::{
    extract::{MatchedPath, Request},
    http::{self, Method},
    middleware::Next,
    response::Response,
};

use crate::{error, telemetry::metrics};

/// The method as a metric label: the standard ones by name, any other as `OTHER` — a client choosing a new
/// method per request would otherwise make new series without end (the log line keeps the real one).
fn method_label(method: &Method) -> &'static str {
    const KNOWN: [&str; 9] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"];
    KNOWN.into_iter().find(|known| *known == method.as_str()).unwrap_or("OTHER")
}

/// The span every request is served in: at `info`, so every line logged while serving it (errors included)
/// carries its `request.id`.
pub fn request_span<B>(request: &http::Request<B>) -> tracing::Span {
    let request_id = error::request_id(request.headers());
    tracing::info_span!("http", method = %request.method(), path = %request.uri().path(), request.id = %request_id)
}

/// The middleware.
pub async fn record(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", MatchedPath::as_str).to_owned();
    let request_id = error::request_id(request.headers()).to_owned();
    let response = next.run(request).await;
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    metrics::http_request(method_label(&method), &route, status, elapsed);
    // Polled routes are counted, not logged.
    if !super::POLLED_PATHS.contains(&route.as_str()) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_standard_methods_are_labelled_by_name() {
        assert_eq!(method_label(&Method::PATCH), "PATCH");
        assert_eq!(method_label(&Method::from_bytes(b"M12345").unwrap()), "OTHER");
    }
}
