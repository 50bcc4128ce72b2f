//! Cross-cutting HTTP pieces: the request log and counts, `/metrics`, the OpenAPI document, extractors that answer in our error body, query-parameter rules shared by
//! every list route, SSE framing, the health routes, the refusal of NUL bytes in parameters, and of
//! state-changing requests from other sites, and fast 503s while Postgres cannot be reached.

pub mod access_log;
pub mod extract;
pub mod health;
pub mod hosts;
pub mod metrics;
pub mod nul;
pub mod openapi;
pub mod params;
pub mod reply;
pub mod same_origin;
pub mod sse;
pub mod unreachable;
