//! The authentication layer in front of the REST API, the page and MCP: `/health` and `/readyz` pass; every
//! other request is identified, and without a valid credential answered 401 with `WWW-Authenticate: Bearer`
//! (the MCP authorization spec's answer too) before anything reads its body.

use crate::telemetry::chain;
use axum::{
    extract::{Request, State},
    middleware::Next,
    response::Response,
};

use super::{Authenticator, Identified};
use crate::error::ApiError;

/// Probes Kubernetes sends without credentials, Prometheus's scrape (counts and route templates, never a
/// body or an id), the channels' inbound routes, whose requests Slack and GitHub sign instead (the route
/// checks the signature), and the LISTEN relay's stream, which checks the relay's own token.
pub const OPEN_PATHS: &[&str] = &[
    crate::db::relay::PATH,
    "/health",
    "/readyz",
    "/metrics",
    "/channels/github/webhook",
    "/channels/slack/interactions",
    "/channels/slack/events",
];

/// Whether `path` is one of the Durable Streams subscription requests that authenticate themselves: the
/// JWKS (public keys, for receivers to check webhooks), and a subscription's callbacks, acks and releases,
/// whose `Authorization` carries the token the broker signed for that wake (the route checks it).
fn carries_its_own_token(path: &str) -> bool {
    if path == "/v1/stream/__ds/jwks.json" {
        return true;
    }
    let Some(rest) = path.strip_prefix("/v1/stream/__ds/subscriptions/") else { return false };
    rest.split_once('/').is_some_and(|(id, action)| !id.is_empty() && matches!(action, "callback" | "ack" | "release"))
}

/// The middleware: puts the caller's [`super::Principal`] into the request's extensions.
pub async fn require_credentials(State(auth): State<Authenticator>, request: Request, next: Next) -> Response {
    match admit(&auth, request).await {
        Ok(request) => next.run(request).await,
        Err(refusal) => refusal,
    }
}

/// The check itself, for a layer that makes it among others: the request with its caller's principal, or the
/// refusal to answer instead.
pub async fn admit(auth: &Authenticator, mut request: Request) -> Result<Request, Response> {
    if OPEN_PATHS.contains(&request.uri().path()) || carries_its_own_token(request.uri().path()) {
        return Ok(request);
    }
    // Boxed: checking a token can call the API server, and that future inline would stay in this layer's
    // state for as long as the request runs (a blocking MCP call or a watch holds it for hours).
    let identified = Box::pin(auth.identify(request.method(), request.uri().path(), request.headers())).await;
    let error = match identified {
        Identified::Anonymous => return Ok(request),
        Identified::Principal(principal) => {
            request.extensions_mut().insert(principal);
            return Ok(request);
        }
        Identified::Refused { presented } => ApiError::Unauthorized {
            message: if presented {
                "the bearer token is not valid".to_owned()
            } else {
                "authentication required: send Authorization: Bearer <token>".to_owned()
            },
            invalid_token: presented,
        },
        Identified::Unverifiable(error) => {
            tracing::error!(error = %chain(&error), "cannot check a bearer token");
            ApiError::Unverifiable("the broker cannot check credentials right now; retry".to_owned())
        }
    };
    Err(crate::error::refuse(&request, error))
}

#[cfg(test)]
mod tests {
    use super::carries_its_own_token;

    #[test]
    fn only_the_subscription_requests_with_their_own_tokens_pass_without_a_credential() {
        for open in [
            "/v1/stream/__ds/jwks.json",
            "/v1/stream/__ds/subscriptions/s1/callback",
            "/v1/stream/__ds/subscriptions/s1/ack",
            "/v1/stream/__ds/subscriptions/s1/release",
        ] {
            assert!(carries_its_own_token(open), "{open}");
        }
        for closed in [
            "/v1/stream/__ds/subscriptions/s1",
            "/v1/stream/__ds/subscriptions/s1/claim",
            "/v1/stream/__ds/subscriptions/s1/streams",
            "/v1/stream/__ds/subscriptions/s1/streams/callback",
            "/v1/stream/__ds/subscriptions//ack",
            "/v1/stream/events/x",
            "/v1/stream/__ds/jwks.json/x",
        ] {
            assert!(!carries_its_own_token(closed), "{closed}");
        }
    }
}
