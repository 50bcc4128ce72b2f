//! Telemetry: logs (JSON lines when not on a terminal, text otherwise, filtered by `LOG_LEVEL`; a request's
//! lines carry its `request.id`) and Prometheus [`metrics`].

pub mod metrics;

use std::io::IsTerminal;

use tracing_subscriber::{EnvFilter, fmt, prelude::*};

use crate::config::{Config, LogFormat};

/// Installs the global subscriber. Call once, from `main`.
pub fn init(config: &Config) {
    let filter = EnvFilter::try_new(&config.log_level).unwrap_or_else(|_| EnvFilter::new("info"));
    let json = match config.log_format {
        LogFormat::Json => true,
        LogFormat::Text => false,
        LogFormat::Auto => !std::io::stdout().is_terminal(),
    };
    let registry = tracing_subscriber::registry().with(filter);
    if json {
        // Every line logged while serving a request lists the spans it is in, the request's first (method,
        // path, request.id): at `debug` a handler's or a store call's span is the innermost, and a line naming
        // only that one would lose its request.
        registry.with(fmt::layer().json().flatten_event(true).with_current_span(false).with_span_list(true)).init();
    } else {
        registry.with(fmt::layer()).init();
    }
}
