//! The MCP server on its own port: Streamable HTTP at `/mcp`, stateless (no `Mcp-Session-Id`), so any
//! replica serves any request. rmcp serves the protocol and the 2026-07-28 task extension; a layer in front
//! serves the 2025-11-25 task methods, and the wait of a blocking `ask_question` of every era; both read the
//! same Postgres-backed tasks. One Host/Origin check stands in front of both (DNS-rebinding protection, on by
//! default).

mod blocking;
mod caller;
#[cfg(feature = "conformance-fixtures")]
mod fixtures;
mod handoff;
mod legacy;
mod server;
mod tasks;
mod tools;
mod waiter;

use std::{sync::Arc, time::Duration};

use tokio_util::sync::CancellationToken;

use axum::{
    Router,
    extract::{Request, State},
    http::{HeaderMap, StatusCode},
    middleware::{self, Next},
    response::{IntoResponse, Response},
};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::never::NeverSessionManager,
};
use tower_http::{
    request_id::{MakeRequestUuid, SetRequestIdLayer},
    trace::TraceLayer,
};

pub use server::BrokerMcp;

use crate::{
    error::ApiError,
    http::{access_log, hosts::host_allowed, unreachable},
    state::AppState,
};

/// The MCP router (`/mcp`).
pub fn router(state: AppState) -> Router {
    let config = &state.config;
    let mut transport = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_cancellation_token(transport_stop(&state.shutdown))
        .with_max_request_body_bytes(config.max_body_bytes);
    // Host and Origin are checked once, in front of both protocol eras ([`refuse_foreign_callers`]).
    transport = transport.disable_allowed_hosts();
    let handler = BrokerMcp::new(state.clone());
    let service =
        StreamableHttpService::new(move || Ok(handler.clone()), Arc::new(NeverSessionManager::default()), transport);
    Router::new()
        .route_service("/mcp", service)
        .layer(middleware::from_fn_with_state(state, admit))
        .layer(middleware::from_fn(access_log::record))
        .layer(TraceLayer::new_for_http().on_failure(()).make_span_with(access_log::request_span))
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .fallback(|| async { ApiError::NotFound("Not found".into()) })
}

/// How long after shutdown begins rmcp's transport is stopped: long enough for a blocking `ask_question` to
/// answer its caller with a JSON-RPC error (stopping the transport first would cut it with an HTTP 500).
const TRANSPORT_STOP_DELAY: Duration = Duration::from_millis(500);

/// A token cancelled [`TRANSPORT_STOP_DELAY`] after `shutdown`.
fn transport_stop(shutdown: &CancellationToken) -> CancellationToken {
    let stop = CancellationToken::new();
    let (shutdown, cancel) = (shutdown.clone(), stop.clone());
    tokio::spawn(async move {
        shutdown.cancelled().await;
        tokio::time::sleep(TRANSPORT_STOP_DELAY).await;
        cancel.cancel();
    });
    stop
}

/// Every check in front of both protocol eras, then the 2025-11-25 task layer ([`legacy::serve`]):
/// DNS-rebinding protection (a request whose `Host` is not an allowed host, or whose `Origin`, a browser's,
/// is not allowed, gets 403 before anything reads it), credentials, and PostgreSQL's reachability. One
/// middleware rather than four: each layer's `Next` keeps a boxed copy of the layers under it, and each
/// layer's future stays, for as long as a call runs, which for a blocking `ask_question` is until a person
/// answers (issue 27's waiter memory).
async fn admit(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let config = &state.config;
    if let Some(what) = foreign_caller(&config.mcp_allowed_hosts, &config.mcp_allowed_origins, request.headers()) {
        return (StatusCode::FORBIDDEN, format!("Forbidden: {what} is not allowed")).into_response();
    }
    let request = match crate::auth::admit(&state.auth, request).await {
        Ok(request) => request,
        Err(refusal) => return refusal,
    };
    let request = match unreachable::admit(&state.listener, request).await {
        Ok(request) => request,
        Err(refusal) => return refusal,
    };
    legacy::serve(state, request, next).await
}

/// What about the request is not allowed (`Host …` or `Origin …`), if anything. Without configured origins, a
/// browser's `Origin` must be on an allowed host.
fn foreign_caller(hosts: &[String], origins: &[String], headers: &HeaderMap) -> Option<String> {
    let header = |name: &str| headers.get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let host_allowed = |host: &str| host_allowed(hosts, host);
    let host = header("host").unwrap_or_default();
    if !host_allowed(&host) {
        return Some(format!("Host '{host}'"));
    }
    let origin = header("origin")?;
    let allowed = if origins.is_empty() {
        origin.split_once("://").is_some_and(|(_, authority)| host_allowed(authority))
    } else {
        origins.iter().any(|allowed| origin_matches(allowed, &origin))
    };
    (!allowed).then(|| format!("Origin '{origin}'"))
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
    use axum::http::HeaderMap;

    use super::{foreign_caller, origin_matches};

    fn refused(hosts: &[&str], origins: &[&str], headers: &[(&'static str, &str)]) -> Option<String> {
        let hosts: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
        let origins: Vec<String> = origins.iter().map(|o| o.to_string()).collect();
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, value.parse().unwrap());
        }
        foreign_caller(&hosts, &origins, &map)
    }

    #[test]
    fn only_allowed_hosts_and_their_origins_pass_by_default() {
        let loopback = ["localhost", "127.0.0.1", "[::1]"];
        assert_eq!(refused(&loopback, &[], &[("host", "127.0.0.1:8081")]), None);
        assert_eq!(refused(&loopback, &[], &[("host", "[::1]:8081")]), None);
        assert!(refused(&loopback, &[], &[("host", "evil.example:8081")]).is_some(), "DNS rebinding");
        assert_eq!(refused(&loopback, &[], &[("host", "localhost:8081"), ("origin", "http://localhost:6274")]), None);
        assert!(refused(&loopback, &[], &[("host", "localhost:8081"), ("origin", "https://evil.example")]).is_some());
        assert_eq!(refused(&["*"], &[], &[("host", "anything")]), None);
        let configured = refused(
            &loopback,
            &["https://app.example:*"],
            &[("host", "localhost"), ("origin", "https://app.example:443")],
        );
        assert_eq!(configured, None);
    }

    #[test]
    fn origins_match_like_rmcp() {
        assert!(origin_matches("https://app.example:*", "https://app.example:8443"));
        assert!(origin_matches("https://app.example:443", "https://app.example:443"));
        assert!(origin_matches("http://localhost", "http://localhost:3000"));
        assert!(!origin_matches("https://app.example:*", "https://evil.example:443"));
        assert!(!origin_matches("https://app.example:443", "https://app.example:444"));
    }
}
