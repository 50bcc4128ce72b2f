//! `Idempotency-Key` on `POST /messages` and `POST /stream/{id}`: a retried request has exactly one effect
//! within 24 hours, whichever replica the retry reaches, and gets the first reply's status and body.
//!
//! The key's row is written by the transaction that has the effect (see [`store`]), never before or after
//! it, so there is no window in which the effect exists without the key or the key without the effect.
//! Replies that say "retry" (503) are not stored: the retry must be able to succeed.

pub mod store;

use axum::{
    extract::FromRequestParts,
    http::{StatusCode, request::Parts},
    response::{IntoResponse, Response},
};
use serde_json::Value;

use crate::error::ApiError;

/// The request header.
pub const HEADER: &str = "idempotency-key";
/// Longest key accepted, in bytes.
const MAX_KEY_BYTES: usize = 255;
/// How long a key is remembered.
pub const KEEP_SECONDS: i64 = 24 * 60 * 60;

/// A request's idempotency key: 1–255 visible ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Checks a header value.
    pub fn parse(raw: &[u8]) -> Result<Self, ApiError> {
        let visible = |b: &u8| b.is_ascii_graphic() || *b == b' ';
        let text = std::str::from_utf8(raw).ok().map(str::trim).filter(|t| !t.is_empty());
        match text {
            Some(text) if text.len() <= MAX_KEY_BYTES && text.bytes().all(|b| visible(&b)) => {
                Ok(IdempotencyKey(text.to_owned()))
            }
            _ => Err(ApiError::Validation(format!(
                "Idempotency-Key: expected 1 to {MAX_KEY_BYTES} visible ASCII characters"
            ))),
        }
    }

    /// The key's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The `Idempotency-Key` header, if the request has one (a malformed one is a 400).
#[derive(Debug, Clone)]
pub struct KeyHeader(pub Option<IdempotencyKey>);

impl<S: Send + Sync> FromRequestParts<S> for KeyHeader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let mut values = parts.headers.get_all(HEADER).iter();
        let key = values.next().map(|value| IdempotencyKey::parse(value.as_bytes())).transpose()?;
        if values.next().is_some() {
            return Err(ApiError::Validation("Idempotency-Key: given more than once".into()));
        }
        Ok(KeyHeader(key))
    }
}

/// Which route a key belongs to: the same key on the two routes names two different requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `POST /messages`.
    Messages,
    /// `POST /stream/{id}`.
    Stream,
}

impl Scope {
    fn as_str(self) -> &'static str {
        match self {
            Scope::Messages => "messages",
            Scope::Stream => "stream",
        }
    }
}

/// A final reply kept under a key.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredReply {
    /// The HTTP status.
    pub status: u16,
    /// The JSON body; none for an empty body.
    pub body: Option<Value>,
}

impl IntoResponse for StoredReply {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::OK);
        match self.body {
            Some(body) => (status, axum::Json(body)).into_response(),
            None => status.into_response(),
        }
    }
}

/// What a key says about a request that carries it.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyState {
    /// First seen now: go ahead.
    New,
    /// Seen before, no final reply yet (an earlier attempt failed or is still running); for a stream, how
    /// many of the request's lines are stored already.
    Unfinished {
        /// Lines of the request stored so far.
        lines_stored: i64,
    },
    /// Finished before: answer with this.
    Finished(StoredReply),
    /// The key was first used for a different request.
    Reused,
}

impl KeyState {
    /// The error of a key reused for another request (422, as the IETF Idempotency-Key draft says).
    pub fn reused_error() -> ApiError {
        ApiError::KeyReused("Idempotency-Key was already used for a different request".into())
    }
}
