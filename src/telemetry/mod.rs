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

/// An error with its sources, `outer: inner: root`, for a log line: JSON logs record only an error's own
/// message. A source whose message already ends its error's own (`connection failed: refused`) is not
/// repeated.
pub fn chain<E: std::error::Error>(error: &E) -> Chain<'_> {
    Chain(error)
}

/// See [`chain`].
#[derive(Debug, Clone, Copy)]
pub struct Chain<'a>(&'a dyn std::error::Error);

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut said = self.0.to_string();
        f.write_str(&said)?;
        let mut source = self.0.source();
        while let Some(error) = source {
            let message = error.to_string();
            if !said.ends_with(&message) {
                write!(f, ": {message}")?;
            }
            said = message;
            source = error.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::chain;

    #[derive(Debug, thiserror::Error)]
    #[error("reading the feed failed")]
    struct Outer(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("reading the feed failed: {0}")]
    struct Repeats(#[source] std::io::Error);

    #[test]
    fn a_chain_names_every_source_once() {
        let refused = || std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        assert_eq!(chain(&Outer(refused())).to_string(), "reading the feed failed: connection refused");
        assert_eq!(chain(&Repeats(refused())).to_string(), "reading the feed failed: connection refused");
    }
}
