//! Extractors whose rejections are [`ApiError`]s, so a bad body or query string gets the documented error
//! body instead of axum's plain text.

use axum::{
    extract::{FromRequest, FromRequestParts, Request, rejection::BytesRejection},
    http::{StatusCode, request::Parts},
};
use bytes::Bytes;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON body, read whatever its content type (upstream's clients are not all careful about it).
/// Malformed JSON is a 400 `REQUEST_ERROR`; a body that parses but has the wrong shape is a 400
/// `VALIDATION_ERROR`; a body over the limit is a 413.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(request, state).await.map_err(body_rejection)?;
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))?;
        serde_json::from_value(value).map(ApiJson).map_err(|e| ApiError::Validation(format!("body: {e}")))
    }
}

/// Maps a failure to read the body to our error (413 when it is over the limit).
pub fn body_rejection(rejection: BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::PayloadTooLarge("request entity too large".into())
    } else {
        ApiError::BadRequest(rejection.body_text())
    }
}

/// Query parameters; a repeated or malformed parameter is a 400 `VALIDATION_ERROR`.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        serde_urlencoded::from_str(query).map(ApiQuery).map_err(|e| ApiError::Validation(format!("query: {e}")))
    }
}
