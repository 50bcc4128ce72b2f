//! The MCP server on its own port: Streamable HTTP at `/mcp`, stateless (no `Mcp-Session-Id`), so any
//! replica serves any request. rmcp serves the protocol and the 2026-07-28 task extension; a layer in front
//! serves the 2025-11-25 task methods; both read the same Postgres-backed tasks.

mod legacy;
mod server;
mod store;
mod tasks;
mod tools;
mod waiter;

use std::{sync::Arc, time::Duration};

use axum::{Router, http::HeaderMap, middleware};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::never::NeverSessionManager,
};

pub use server::BrokerMcp;

use crate::{error::ApiError, state::AppState};

/// The MCP router (`/mcp`).
pub fn router(state: AppState) -> Router {
    let config = &state.config;
    let mut transport = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_cancellation_token(state.shutdown.child_token())
        .with_max_request_body_bytes(config.max_body_bytes);
    transport = if config.mcp_allowed_hosts.iter().any(|host| host == "*") {
        transport.disable_allowed_hosts()
    } else {
        transport.with_allowed_hosts(config.mcp_allowed_hosts.clone())
    };
    if !config.mcp_allowed_origins.is_empty() {
        transport = transport.with_allowed_origins(config.mcp_allowed_origins.clone());
    }
    let handler = BrokerMcp::new(state.clone());
    let service =
        StreamableHttpService::new(move || Ok(handler.clone()), Arc::new(NeverSessionManager::default()), transport);
    Router::new()
        .route_service("/mcp", service)
        .layer(middleware::from_fn_with_state(state, legacy::layer))
        .fallback(|| async { ApiError::NotFound("Not found".into()) })
}

/// Whether the request passes the configured Host and Origin checks. The legacy layer answers only requests
/// that do; the rest reach rmcp, which rejects them with its own 403.
pub(crate) fn passes_host_and_origin_checks(state: &AppState, headers: &HeaderMap) -> bool {
    let config = &state.config;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let host_ok = config.mcp_allowed_hosts.iter().any(|allowed| allowed == "*")
        || header("host").is_some_and(|host| {
            let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
            config.mcp_allowed_hosts.iter().any(|allowed| allowed == host || allowed == name)
        });
    let origin_ok = config.mcp_allowed_origins.is_empty()
        || header("origin")
            .is_none_or(|origin| config.mcp_allowed_origins.iter().any(|allowed| origin_matches(allowed, origin)));
    host_ok && origin_ok
}

/// rmcp's origin rule: exact, `scheme://host:*` for any port, or (deprecated) no port for any port.
fn origin_matches(allowed: &str, origin: &str) -> bool {
    let any_port = |base: &str| {
        origin == base
            || origin
                .strip_prefix(base)
                .and_then(|rest| rest.strip_prefix(':'))
                .is_some_and(|port| port.parse::<u16>().is_ok())
    };
    match allowed.strip_suffix(":*") {
        Some(base) => any_port(base),
        None if allowed.matches(':').count() < 2 => any_port(allowed),
        None => allowed == origin,
    }
}

#[cfg(test)]
mod tests {
    use super::origin_matches;

    #[test]
    fn origins_match_like_rmcp() {
        assert!(origin_matches("https://app.example:*", "https://app.example:8443"));
        assert!(origin_matches("https://app.example:443", "https://app.example:443"));
        assert!(origin_matches("http://localhost", "http://localhost:3000"));
        assert!(!origin_matches("https://app.example:*", "https://evil.example:443"));
        assert!(!origin_matches("https://app.example:443", "https://app.example:444"));
    }
}
