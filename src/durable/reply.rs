//! How Durable Streams' answers look on the wire: the protocol's headers on successes, and every refusal as
//! the API's error body (written by `error::render_error_body`) with the headers the protocol requires on it.

use axum::{
    http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};

use super::{
    model::{Expiry, Refusal},
    offset::Offset,
    rules::{AppendRefusal, Stream},
};
use crate::error::ApiError;

/// `Stream-Next-Offset`.
pub const NEXT_OFFSET: HeaderName = HeaderName::from_static("stream-next-offset");
/// `Stream-Up-To-Date`.
pub const UP_TO_DATE: HeaderName = HeaderName::from_static("stream-up-to-date");
/// `Stream-Closed`.
pub const CLOSED: HeaderName = HeaderName::from_static("stream-closed");
/// `Stream-Cursor`.
pub const CURSOR: HeaderName = HeaderName::from_static("stream-cursor");
/// `Producer-Epoch`.
pub const PRODUCER_EPOCH: HeaderName = HeaderName::from_static("producer-epoch");
/// `Producer-Seq`.
pub const PRODUCER_SEQ: HeaderName = HeaderName::from_static("producer-seq");

/// The request headers a browser client may send.
const ALLOWED: [&str; 13] = [
    "content-type",
    "authorization",
    "if-none-match",
    "stream-seq",
    "stream-ttl",
    "stream-expires-at",
    "stream-closed",
    "producer-id",
    "producer-epoch",
    "producer-seq",
    "stream-forked-from",
    "stream-fork-offset",
    "stream-fork-sub-offset",
];

/// The response headers a browser client must be able to read.
const EXPOSED: [&str; 14] = [
    "stream-next-offset",
    "stream-cursor",
    "stream-up-to-date",
    "stream-closed",
    "stream-ttl",
    "stream-expires-at",
    "stream-sse-data-encoding",
    "producer-epoch",
    "producer-seq",
    "producer-expected-seq",
    "producer-received-seq",
    "etag",
    "location",
    "content-type",
];

/// CORS for the protocol's routes: any page may read them with the protocol's headers (no cookies: a
/// credential is a bearer token the page sends itself). State-changing requests from other sites' pages are
/// still refused unless `--cors-allowed-origins` names them (`http::same_origin`).
pub fn cors() -> tower_http::cors::CorsLayer {
    use axum::http::Method;
    use tower_http::cors::{AllowOrigin, CorsLayer};
    CorsLayer::new()
        .allow_origin(AllowOrigin::any())
        .allow_methods([Method::GET, Method::HEAD, Method::PUT, Method::POST, Method::DELETE, Method::OPTIONS])
        .allow_headers(ALLOWED.map(HeaderName::from_static))
        .expose_headers(EXPOSED.map(HeaderName::from_static))
        .max_age(std::time::Duration::from_secs(600))
}

/// A header list being built.
#[derive(Debug, Default)]
pub struct Headers(pub HeaderMap);

impl Headers {
    /// Adds `name: value` (a value that is not a valid header is left out: only offsets and numbers go here).
    pub fn with(mut self, name: HeaderName, value: impl AsRef<str>) -> Self {
        if let Ok(value) = HeaderValue::from_str(value.as_ref()) {
            self.0.insert(name, value);
        }
        self
    }

    /// `Stream-Next-Offset` at `position`.
    pub fn next(self, run: i64, position: i64) -> Self {
        self.with(NEXT_OFFSET, Offset { run, position }.to_string())
    }

    /// `Stream-Closed: true` when `closed`.
    pub fn closed(self, closed: bool) -> Self {
        if closed { self.with(CLOSED, "true") } else { self }
    }

    /// The stream's `Content-Type`.
    pub fn content_type(self, stream: &Stream) -> Self {
        self.with(header::CONTENT_TYPE, &stream.content_type)
    }

    /// `Stream-TTL` or `Stream-Expires-At`, as the stream has one.
    pub fn expiry(self, expiry: Expiry) -> Self {
        match expiry {
            Expiry::Never => self,
            Expiry::Ttl(seconds) => self.with(HeaderName::from_static("stream-ttl"), seconds.to_string()),
            Expiry::At(at) => self.with(
                HeaderName::from_static("stream-expires-at"),
                at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
            ),
        }
    }

    /// An answer with these headers.
    pub fn answer(self, status: StatusCode, body: impl IntoResponse) -> Response {
        (status, self.0, body).into_response()
    }
}

/// A refusal: the documented error body, with the protocol's headers added.
pub fn refuse(error: ApiError, headers: Headers) -> Response {
    let mut response = error.into_response();
    response.headers_mut().extend(headers.0);
    response
}

/// 400 naming what is wrong.
pub fn invalid(refusal: Refusal) -> Response {
    refuse(ApiError::BadRequest(refusal.0), Headers::default())
}

/// 404.
pub fn not_found() -> Response {
    refuse(ApiError::NotFound("no such stream".into()), Headers::default())
}

/// 410: the stream was deleted while forks still read it.
pub fn gone() -> Response {
    refuse(ApiError::Gone("the stream was deleted".into()), Headers::default())
}

fn conflict(message: &str, headers: Headers) -> Response {
    refuse(ApiError::Conflict { message: message.into(), current: Default::default() }, headers)
}

/// 409 for a `PUT` that finds another stream at its path.
pub fn exists_otherwise() -> Response {
    conflict("a stream with another configuration is at this path", Headers::default())
}

/// The answer to a refused append to `stream`.
pub fn refused_append(stream: &Stream, refusal: AppendRefusal) -> Response {
    match refusal {
        AppendRefusal::Invalid(refusal) => invalid(refusal),
        AppendRefusal::Closed => conflict("the stream is closed", Headers::default().closed(true).next(0, stream.tail)),
        AppendRefusal::ContentType => conflict("Content-Type: not the stream's", Headers::default()),
        AppendRefusal::StreamSeq => conflict("Stream-Seq: not above the last one taken", Headers::default()),
        AppendRefusal::StaleEpoch(current) => refuse(
            ApiError::Forbidden("Producer-Epoch: a newer epoch of this producer has written".into()),
            Headers::default().with(PRODUCER_EPOCH, current.to_string()),
        ),
        AppendRefusal::SeqGap { expected, received } => conflict(
            "Producer-Seq: a sequence number is missing before this one",
            Headers::default()
                .with(HeaderName::from_static("producer-expected-seq"), expected.to_string())
                .with(HeaderName::from_static("producer-received-seq"), received.to_string()),
        ),
    }
}

/// The headers every Durable Streams answer carries (PROTOCOL.md §12.7).
pub async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(HeaderName::from_static("cross-origin-resource-policy"), HeaderValue::from_static("cross-origin"));
    response
}
