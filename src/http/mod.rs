//! Cross-cutting HTTP pieces: extractors that answer in our error body, query-parameter rules shared by
//! every list route, SSE framing, the health routes, the refusal of NUL bytes in parameters, and of
//! state-changing requests from other sites.

pub mod extract;
pub mod health;
pub mod nul;
pub mod params;
pub mod reply;
pub mod same_origin;
pub mod sse;
