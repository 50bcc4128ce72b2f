//! Browser safety for state-changing requests: a POST, PUT, PATCH or DELETE whose `Origin` (or, without one,
//! whose `Referer`) names another site is refused with 403, so a form on any page a person visits cannot
//! answer questions or delete data through their browser. The broker's own origin is the one the browser
//! addressed (`Host`, or a proxy's `X-Forwarded-Host`), and only under a name of `--allowed-hosts`: a page
//! whose own name was re-pointed at the broker (DNS rebinding) is same-origin with it in the browser's eyes.
//! Requests without either header (curl, SDKs, Ark's components) pass, as do the origins allowed by
//! `--cors-allowed-origins`.

use std::sync::Arc;

use axum::{
    extract::Request,
    http::{HeaderMap, Method, header},
    middleware::Next,
    response::{IntoResponse, Response},
};

use super::hosts::host_allowed;
use crate::error::ApiError;

/// Origins (`scheme://host[:port]`) other than the broker's own that may change state, and the host names the
/// broker's own pages may be served under.
#[derive(Debug, Clone, Default)]
pub struct TrustedOrigins {
    origins: Arc<Vec<String>>,
    hosts: Arc<Vec<String>>,
}

impl TrustedOrigins {
    /// From the configured lists (trailing slashes and case do not matter).
    pub fn new(origins: &[String], hosts: &[String]) -> Self {
        TrustedOrigins {
            origins: Arc::new(origins.iter().map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase()).collect()),
            hosts: Arc::new(hosts.iter().map(|h| h.trim().to_owned()).filter(|h| !h.is_empty()).collect()),
        }
    }
}

/// The middleware.
pub async fn refuse_cross_site(trusted: TrustedOrigins, request: Request, next: Next) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(request).await;
    }
    if let Some(origin) = foreign_origin(request.headers(), &trusted) {
        return ApiError::Forbidden(format!(
            "cross-site request refused: {origin} is not this broker's origin (its pages are served under \
             --allowed-hosts; origins of other sites may be allowed with --cors-allowed-origins)"
        ))
        .into_response();
    }
    next.run(request).await
}

/// The request's origin when it is neither the broker's own nor trusted.
fn foreign_origin(headers: &HeaderMap, trusted: &TrustedOrigins) -> Option<String> {
    let text =
        |name: header::HeaderName| headers.get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_owned());
    let origin = match (text(header::ORIGIN), text(header::REFERER)) {
        (Some(origin), _) => origin,
        (None, Some(referer)) => origin_of(&referer).unwrap_or(referer),
        (None, None) => return None,
    };
    let origin = origin.trim_end_matches('/').to_ascii_lowercase();
    // The broker's own origin: what the browser addressed (`Host`, or the proxy's `X-Forwarded-Host`).
    let own = [
        text(header::HOST),
        headers.get("x-forwarded-host").map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
    ];
    let authority = origin.split_once("://").map(|(_, authority)| authority);
    let is_own = authority.is_some_and(|authority| {
        host_allowed(&trusted.hosts, authority) && own.iter().flatten().any(|host| host.eq_ignore_ascii_case(authority))
    });
    (!is_own && !trusted.origins.contains(&origin)).then_some(origin)
}

/// `scheme://authority` of a URL.
fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    Some(format!("{scheme}://{authority}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(header::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
        }
        map
    }

    #[test]
    fn only_foreign_origins_are_refused() {
        let trusted = TrustedOrigins::new(
            &["https://dashboard.example/".into()],
            &["broker.example".into(), "ark.example".into()],
        );
        let host = ("host", "broker.example:8080");
        assert_eq!(foreign_origin(&headers(&[host]), &trusted), None, "no Origin, no Referer: not a browser form");
        assert_eq!(foreign_origin(&headers(&[host, ("origin", "http://broker.example:8080")]), &trusted), None);
        assert_eq!(foreign_origin(&headers(&[host, ("origin", "https://dashboard.example")]), &trusted), None);
        assert_eq!(
            foreign_origin(&headers(&[host, ("origin", "https://evil.example")]), &trusted).as_deref(),
            Some("https://evil.example")
        );
        assert!(foreign_origin(&headers(&[host, ("origin", "null")]), &trusted).is_some(), "sandboxed pages too");
        assert_eq!(foreign_origin(&headers(&[host, ("referer", "http://broker.example:8080/ui?x=1")]), &trusted), None);
        assert!(foreign_origin(&headers(&[host, ("referer", "https://evil.example/page")]), &trusted).is_some());
        let proxied =
            [("host", "10.0.0.7:8080"), ("x-forwarded-host", "ark.example"), ("origin", "https://ark.example")];
        assert_eq!(foreign_origin(&headers(&proxied), &trusted), None, "behind a proxy that sets X-Forwarded-Host");
        let rebound = [("host", "evil.example:8080"), ("origin", "http://evil.example:8080")];
        assert!(foreign_origin(&headers(&rebound), &trusted).is_some(), "DNS rebinding: a name not allowed");
        let forwarded =
            [("host", "broker.example:8080"), ("x-forwarded-host", "evil.example"), ("origin", "http://evil.example")];
        assert!(foreign_origin(&headers(&forwarded), &trusted).is_some(), "nor through X-Forwarded-Host");
    }
}
