//! The API error type and the one place it becomes upstream's error body
//! `{"error":{"code","message","requestId"}}`.
//!
//! Handlers return [`ApiError`]; its `IntoResponse` only records the code and message in the response
//! extensions. [`render_error_body`], a middleware, writes the body, because only it sees the request's
//! `X-Request-ID`. The same middleware rewrites every other error response (axum's 405, tower-http's 413, …)
//! into the documented body, so no client ever sees a plain-text error.

use axum::{
    Json,
    extract::Request,
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use serde::Serialize;
use utoipa::ToSchema;

use crate::{db::StoreError, telemetry::chain, validate::Invalid};

/// What a request can fail with; each variant maps to one status code and one upstream error code.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A body or query parameter failed validation (400 `VALIDATION_ERROR`).
    #[error("{0}")]
    Validation(String),
    /// `limit` or `cursor` is out of range (400 `PAGINATION_ERROR`).
    #[error("{0}")]
    Pagination(&'static str),
    /// The request could not be read, e.g. malformed JSON (400 `REQUEST_ERROR`).
    #[error("{0}")]
    BadRequest(String),
    /// No valid credential while authentication is on (401 `UNAUTHORIZED`, with `WWW-Authenticate: Bearer`).
    #[error("{message}")]
    Unauthorized {
        /// What is missing.
        message: String,
        /// Whether a bearer token was sent but is not valid (`error="invalid_token"`, RFC 6750).
        invalid_token: bool,
    },
    /// A state-changing request from another site's page (403 `FORBIDDEN`).
    #[error("{0}")]
    Forbidden(String),
    /// A JSON route got a body that is not declared JSON (415 `UNSUPPORTED_MEDIA_TYPE`).
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// The thing asked for does not exist (404 `NOT_FOUND`).
    #[error("{0}")]
    NotFound(String),
    /// The change conflicts with the current state (409 `CONFLICT`); `current` is added to the body so the
    /// client sees what won.
    #[error("{message}")]
    Conflict {
        /// What conflicted.
        message: String,
        /// Extra top-level fields of the body, e.g. `{"question": …}`.
        current: serde_json::Map<String, serde_json::Value>,
    },
    /// The requested version is no longer kept (410 `GONE`); the client lists again.
    #[error("{0}")]
    Gone(String),
    /// An `Idempotency-Key` was first used for a different request (422 `IDEMPOTENCY_KEY_REUSED`).
    #[error("{0}")]
    KeyReused(String),
    /// A chunk POST ended early: `cause` says why, `chunks_stored` how many of its lines (a prefix) are
    /// stored. Rendered as `cause` with `chunks_stored` next to `error`.
    #[error("{cause}")]
    PartlyStored {
        /// Why the request ended.
        cause: Box<ApiError>,
        /// How many of the request's first lines are stored.
        chunks_stored: usize,
    },
    /// The body is larger than the configured limit (413 `REQUEST_ERROR`).
    #[error("{0}")]
    PayloadTooLarge(String),
    /// This replica is draining (503 `SERVICE_UNAVAILABLE`, the message says what to do); another one serves.
    #[error("{0}")]
    Draining(String),
    /// A credential cannot be checked right now, e.g. the Kubernetes API refuses the broker's TokenReview (503
    /// `SERVICE_UNAVAILABLE`; the message says so, the cause is logged).
    #[error("{0}")]
    Unverifiable(String),
    /// Postgres cannot be reached right now (503 `SERVICE_UNAVAILABLE`); the client may retry.
    #[error("{0}")]
    Unavailable(String),
    /// This replica is at one of its limits (open connections, buffered NDJSON; 503 `SERVICE_UNAVAILABLE`,
    /// the message says which); this one a moment later, or another one, serves.
    #[error("{0}")]
    AtCapacity(String),
    /// The request body did not arrive in time (408 `REQUEST_TIMEOUT`); the connection is closed after it.
    #[error("{0}")]
    RequestTimeout(String),
    /// Anything else (500 `INTERNAL_ERROR`); the details are logged, never sent.
    #[error("internal error")]
    Internal(#[source] StoreError),
}

/// Upstream's machine-readable error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// A body or parameter failed validation (400).
    ValidationError,
    /// `limit` or `cursor` is out of range (400).
    PaginationError,
    /// The request could not be read (400, 413, and other 4xx without a code of their own).
    RequestError,
    /// No valid credential (401).
    Unauthorized,
    /// A state-changing request from another site's page (403).
    Forbidden,
    /// A JSON route got a body not declared JSON (415).
    UnsupportedMediaType,
    /// Nothing there (404).
    NotFound,
    /// The change conflicts with the current state (409).
    Conflict,
    /// The requested version is no longer kept (410).
    Gone,
    /// An `Idempotency-Key` was first used for a different request (422).
    IdempotencyKeyReused,
    /// Retry: Postgres is unreachable, the replica drains or is at a limit (503).
    ServiceUnavailable,
    /// The request body did not arrive in time (408).
    RequestTimeout,
    /// Anything else (500).
    InternalError,
}

/// The body of every error response of the API: `{"error":{"code","message","requestId"}}`. A few errors
/// add top-level fields next to `error`: a 409 on a question its `question`, a chunk POST that ended early
/// its `chunks_stored`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorObject,
    /// Extra top-level fields.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// The `error` of an [`ErrorBody`].
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorObject {
    /// Upstream's machine-readable code.
    pub code: ErrorCode,
    /// What went wrong, for people; for a validation error it starts with the field.
    pub message: String,
    /// The request's `X-Request-ID` (also in the response header): the logs of the request carry it.
    pub request_id: String,
    /// The OpenAI error type of the status (`invalid_request_error`, `server_error`, …): ark-api's
    /// OpenAI-compatible endpoint passes a broker error on to its caller only with a `type`.
    #[serde(rename = "type")]
    #[schema(example = "invalid_request_error")]
    pub kind: &'static str,
}

/// The OpenAI error type of an error status.
fn openai_type(status: StatusCode) -> &'static str {
    match status {
        StatusCode::UNAUTHORIZED => "authentication_error",
        StatusCode::FORBIDDEN => "permission_error",
        StatusCode::NOT_FOUND => "not_found_error",
        StatusCode::TOO_MANY_REQUESTS => "rate_limit_error",
        StatusCode::REQUEST_TIMEOUT | StatusCode::GATEWAY_TIMEOUT => "timeout_error",
        status if status.is_client_error() => "invalid_request_error",
        _ => "server_error",
    }
}

/// The code and message of an error response, left in the response extensions for [`render_error_body`].
#[derive(Debug, Clone)]
pub struct ErrorDetails {
    /// Upstream's machine-readable code, e.g. `VALIDATION_ERROR`.
    pub code: ErrorCode,
    /// The human-readable message.
    pub message: String,
    /// Extra top-level fields next to `error`.
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl ApiError {
    fn status_and_code(&self) -> (StatusCode, ErrorCode) {
        match self {
            ApiError::Validation(_) => (StatusCode::BAD_REQUEST, ErrorCode::ValidationError),
            ApiError::Pagination(_) => (StatusCode::BAD_REQUEST, ErrorCode::PaginationError),
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, ErrorCode::RequestError),
            ApiError::Unauthorized { .. } => (StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, ErrorCode::Forbidden),
            ApiError::UnsupportedMediaType(_) => (StatusCode::UNSUPPORTED_MEDIA_TYPE, ErrorCode::UnsupportedMediaType),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, ErrorCode::NotFound),
            ApiError::Conflict { .. } => (StatusCode::CONFLICT, ErrorCode::Conflict),
            ApiError::Gone(_) => (StatusCode::GONE, ErrorCode::Gone),
            ApiError::KeyReused(_) => (StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::IdempotencyKeyReused),
            ApiError::PartlyStored { cause, .. } => cause.status_and_code(),
            ApiError::PayloadTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::RequestError),
            ApiError::Unavailable(_) | ApiError::Draining(_) | ApiError::Unverifiable(_) | ApiError::AtCapacity(_) => {
                (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::ServiceUnavailable)
            }
            ApiError::RequestTimeout(_) => (StatusCode::REQUEST_TIMEOUT, ErrorCode::RequestTimeout),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::InternalError),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        let (error, extra) = match self {
            ApiError::Conflict { message, current } => {
                (ApiError::Conflict { message, current: Default::default() }, current)
            }
            ApiError::PartlyStored { cause, chunks_stored } => {
                let mut extra = serde_json::Map::new();
                extra.insert("chunks_stored".into(), chunks_stored.into());
                (*cause, extra)
            }
            other => (other, serde_json::Map::new()),
        };
        let message = match &error {
            ApiError::Internal(error) => {
                tracing::error!(error.detail = %chain(error), "request failed");
                "Internal server error".to_owned()
            }
            ApiError::Unavailable(detail) => {
                tracing::warn!(error.detail = %detail, "database unavailable");
                "Service temporarily unavailable".to_owned()
            }
            other => other.to_string(),
        };
        let mut response = status.into_response();
        if let ApiError::Unauthorized { invalid_token, .. } = &error {
            let challenge = if *invalid_token {
                r#"Bearer realm="ark-broker", error="invalid_token""#
            } else {
                r#"Bearer realm="ark-broker""#
            };
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            // Another replica, or this one a moment later, may well succeed.
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if status == StatusCode::REQUEST_TIMEOUT {
            // The rest of the body may still be on its way: the connection cannot carry another request.
            response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response.extensions_mut().insert(ErrorDetails { code, message, extra });
        response
    }
}

impl From<Invalid> for ApiError {
    fn from(Invalid(message): Invalid) -> Self {
        ApiError::Validation(message)
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            // The database is at its connection limit: said in the answer, unlike a database that is away.
            StoreError::Unavailable(_) if crate::db::refusal::too_many_clients() => {
                ApiError::AtCapacity(crate::db::refusal::MESSAGE.into())
            }
            StoreError::Unavailable(_) => ApiError::Unavailable(chain(&error).to_string()),
            error @ StoreError::Database(_) => ApiError::Internal(error),
            StoreError::ShuttingDown => {
                ApiError::Draining("the broker is shutting down; retry on another replica".into())
            }
            StoreError::Contended(what) => ApiError::Unavailable(format!("too many concurrent writers of one {what}")),
            StoreError::Unsettled => ApiError::Unavailable(
                "the database did not answer whether the write was stored; it is not counted as stored".into(),
            ),
        }
    }
}

/// Marks an error response whose body is already what the route documents (e.g. `/readyz`'s plain
/// `Service Unavailable`), so [`render_error_body`] leaves it alone.
#[derive(Debug, Clone, Copy)]
pub struct Verbatim;

/// The request's `X-Request-ID` (empty when it has none).
pub fn request_id(headers: &axum::http::HeaderMap) -> &str {
    headers.get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or_default()
}

/// Writes the documented error body on every error response, with the request's `X-Request-ID`.
pub async fn render_error_body(request: Request, next: Next) -> Response {
    let request_id = request_id(request.headers()).to_owned();
    with_body(next.run(request).await, &request_id)
}

/// `error` as the complete answer to `request`, documented body included: for a layer that refuses a request
/// where no [`render_error_body`] stands behind it (MCP's router has none).
pub fn refuse(request: &Request, error: ApiError) -> Response {
    with_body(error.into_response(), request_id(request.headers()))
}

/// An error response with the documented body (left alone when it is not an error or already has its body).
fn with_body(response: Response, request_id: &str) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) || response.extensions().get::<Verbatim>().is_some() {
        return response;
    }
    let details = response.extensions().get::<ErrorDetails>().cloned();
    let is_json =
        response.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let details = match details {
        Some(details) => details,
        // Already in a JSON shape of its own (e.g. a legacy `{"error":"…"}` body): leave it alone.
        None if is_json => return response,
        None => ErrorDetails {
            code: fallback_code(status),
            message: fallback_message(status),
            extra: serde_json::Map::new(),
        },
    };
    let error = ErrorObject {
        code: details.code,
        message: details.message,
        request_id: request_id.to_owned(),
        kind: openai_type(status),
    };
    let body = ErrorBody { error, extra: details.extra };
    let (mut parts, _) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=utf-8"));
    (parts, Json(body)).into_response()
}

fn fallback_code(status: StatusCode) -> ErrorCode {
    match status {
        StatusCode::NOT_FOUND => ErrorCode::NotFound,
        // tower-http's decompression refusing a `Content-Encoding` it does not know.
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ErrorCode::UnsupportedMediaType,
        s if s.is_server_error() => ErrorCode::InternalError,
        _ => ErrorCode::RequestError,
    }
}

fn fallback_message(status: StatusCode) -> String {
    match status {
        StatusCode::NOT_FOUND => "Not found".to_owned(),
        StatusCode::PAYLOAD_TOO_LARGE => "request entity too large".to_owned(),
        s if s.is_server_error() => "Internal server error".to_owned(),
        s => s.canonical_reason().unwrap_or("Request error").to_owned(),
    }
}
