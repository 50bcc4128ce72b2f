//! `GET /internal/listen-relay`: the LISTEN relay's stream ([`crate::db::relay`]), which other replicas of
//! this broker follow. Not for clients: it is not in the OpenAPI document, and it takes only the token the
//! relay wrote into PostgreSQL, which the broker's own credentials do not replace.

use std::time::Duration;

use axum::{
    Router,
    body::Body,
    extract::State,
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};

use crate::{
    db::{
        heartbeat,
        relay::{self, Relay},
    },
    error::ApiError,
};

/// The relay's route, with the relay as its state.
pub fn router<S: Clone + Send + Sync + 'static>(relay: Relay) -> Router<S> {
    Router::new().route(relay::PATH, get(stream)).with_state(relay)
}

async fn stream(State(relay): State<Relay>, headers: HeaderMap) -> Response {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    let Some(mut notifications) = token.and_then(|token| relay.subscribe(token)) else {
        return ApiError::Unauthorized {
            message: "Not this replica's LISTEN relay token (or it is not the relay)".into(),
            invalid_token: token.is_some(),
        }
        .into_response();
    };
    let lines = async_stream::stream! {
        yield Ok::<_, std::convert::Infallible>(relay::encode_line(&None));
        loop {
            match tokio::time::timeout(PING_AFTER, notifications.recv()).await {
                Ok(Some(payload)) => {
                    // What queued up meanwhile goes in the same write: one wake-up of the follower for many.
                    let mut lines = relay::encode_line(&Some(payload));
                    while lines.len() < BATCH_BYTES && let Ok(payload) = notifications.try_recv() {
                        lines.push_str(&relay::encode_line(&Some(payload)));
                    }
                    yield Ok(lines)
                }
                Ok(None) => break,
                Err(_) => yield Ok(relay::encode_line(&None)),
            }
        }
    };
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], Body::from_stream(lines)).into_response()
}

/// Up to how many bytes of queued notifications one write carries.
const BATCH_BYTES: usize = 64 << 10;

/// How long the stream may be quiet before a ping: the follower counts a relay silent for longer than its
/// deadline as lost.
const PING_AFTER: Duration = heartbeat::EVERY;
