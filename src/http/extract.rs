//! Extractors whose rejections are [`ApiError`]s, so a bad body or query string gets the documented error
//! body instead of axum's plain text (a body of the wrong shape is told as [`crate::validate::shape`] words
//! it). Whole bodies are read within the [`BodyDeadline`], so a client trickling one cannot hold a request
//! open.

use std::time::Duration;

use axum::{
    extract::{FromRequest, FromRequestParts, OptionalFromRequest, Request, rejection::BytesRejection},
    http::{StatusCode, header::CONTENT_TYPE, request::Parts},
};
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{error::ApiError, validate::shape::from_body};

/// A JSON body. It must be declared JSON (`application/json` or `application/*+json`), as upstream's
/// Express parser requires, else 415 — so a page of another site cannot post one as a "simple" `text/plain`
/// form. Malformed JSON is a 400 `REQUEST_ERROR`; a body that parses but has the wrong shape is a 400
/// `VALIDATION_ERROR` whose message starts with the field's path.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let value = json_body(request, state).await?;
        Ok(ApiJson(from_body(&value)?))
    }
}

/// An optional JSON body (`Option<ApiJson<T>>`): none when nothing is sent without a `Content-Type`;
/// anything else is read as [`ApiJson`] reads it.
impl<S: Send + Sync, T: DeserializeOwned> OptionalFromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Option<Self>, Self::Rejection> {
        if request.headers().contains_key(CONTENT_TYPE) {
            return <Self as FromRequest<S>>::from_request(request, state).await.map(Some);
        }
        if whole_body(request, state).await?.is_empty() {
            return Ok(None);
        }
        Err(ApiError::UnsupportedMediaType("content-type: expected application/json, received none".into()))
    }
}

/// Reads a request body declared JSON as JSON of any shape.
pub async fn json_body<S: Send + Sync>(request: Request, state: &S) -> Result<Value, ApiError> {
    let declared =
        request.headers().get(CONTENT_TYPE).map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
    let mime =
        declared.as_deref().and_then(|value| value.split(';').next()).unwrap_or_default().trim().to_ascii_lowercase();
    if mime != "application/json" && !(mime.starts_with("application/") && mime.ends_with("+json")) {
        let received = declared.map_or_else(|| "none".to_owned(), |value| format!("'{value}'"));
        return Err(ApiError::UnsupportedMediaType(format!(
            "content-type: expected application/json, received {received}"
        )));
    }
    let bytes = whole_body(request, state).await?;
    serde_json::from_slice(&bytes).map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))
}

/// How long a whole request body may take to arrive (`--body-read-timeout-seconds`), a request extension set
/// by the router as `DefaultBodyLimit` sets the size limit. Streamed bodies (chunk POSTs) have none.
#[derive(Debug, Clone, Copy)]
pub struct BodyDeadline(pub Duration);

/// Reads a whole request body, within the size limit (else 413) and the [`BodyDeadline`] (else 408).
pub async fn whole_body<S: Send + Sync>(request: Request, state: &S) -> Result<Bytes, ApiError> {
    let deadline = request.extensions().get::<BodyDeadline>().copied();
    let read = Bytes::from_request(request, state);
    let read = match deadline {
        Some(BodyDeadline(limit)) => tokio::time::timeout(limit, read).await.map_err(|_| {
            ApiError::RequestTimeout(format!("the request body did not arrive within {} s", limit.as_secs()))
        })?,
        None => read.await,
    };
    read.map_err(body_rejection)
}

/// A raw body read whole within the [`BodyDeadline`] and the size limit: for routes that must see the exact
/// bytes (a signed webhook) before parsing them.
pub struct WholeBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for WholeBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        whole_body(request, state).await.map(WholeBody)
    }
}

/// An HTML form's body (`application/x-www-form-urlencoded`, else 415), read within the [`BodyDeadline`] like
/// every whole body; a malformed one is a 400 `REQUEST_ERROR`.
pub struct ApiForm<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiForm<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let declared = request.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let mime = declared.split(';').next().unwrap_or_default().trim();
        if !mime.eq_ignore_ascii_case("application/x-www-form-urlencoded") {
            return Err(ApiError::UnsupportedMediaType(format!(
                "content-type: expected application/x-www-form-urlencoded, received '{declared}'"
            )));
        }
        let bytes = whole_body(request, state).await?;
        serde_urlencoded::from_bytes(&bytes)
            .map(ApiForm)
            .map_err(|e| ApiError::BadRequest(format!("invalid form body: {e}")))
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
