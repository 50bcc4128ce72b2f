//! Cross-cutting HTTP pieces every domain's routes use: the request log and counts, the OpenAPI document,
//! extractors that answer in our error body, query-parameter rules shared by every list route, reply shapes,
//! SSE framing, the refusal of NUL bytes in parameters and of state-changing requests from other sites, and
//! fast 503s while Postgres cannot be reached. It knows no domain and no shared state.

pub mod access_log;
#[cfg(test)]
pub mod documented;
pub mod extract;
pub mod hosts;
pub mod nul;
pub mod openapi;
pub mod params;
pub mod reply;
pub mod same_origin;
pub mod sse;
pub mod sse_end;
pub mod unreachable;

/// What Kubernetes and Prometheus poll: the probes and the scrape. They are counted but not logged per
/// request, and answer for themselves while the database is unreachable (readiness by failing).
pub const POLLED_PATHS: [&str; 3] = ["/health", "/readyz", "/metrics"];
