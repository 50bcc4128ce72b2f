//! What operators and Kubernetes call: the probes (`/health`, `/readyz`) and the Prometheus scrape
//! (`/metrics`); and `/`, which links to them and the rest. They read the whole state, so they stand above it, beside the page and MCP.

pub mod health;
pub mod index;
pub mod metrics;
pub mod relay;
