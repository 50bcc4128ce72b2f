//! Cross-cutting HTTP pieces: extractors that answer in our error body, query-parameter rules shared by
//! every list route, SSE framing, and the health routes.

pub mod extract;
pub mod health;
pub mod params;
pub mod reply;
pub mod sse;
