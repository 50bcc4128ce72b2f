//! Extractors whose rejections are [`ApiError`]s, so a bad body or query string gets the documented error
//! body instead of axum's plain text; and [`from_value`], which names the field a body got wrong the way
//! upstream's zod messages do (`messages: expected array, received string`). Whole bodies are read within
//! the [`BodyDeadline`], so a client trickling one cannot hold a request open.

use std::time::Duration;

use axum::{
    extract::{FromRequest, FromRequestParts, Request, rejection::BytesRejection},
    http::{StatusCode, header::CONTENT_TYPE, request::Parts},
};
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ApiError;

/// A JSON body. It must be declared JSON (`application/json` or `application/*+json`), as upstream's
/// Express parser requires, else 415 — so a page of another site cannot post one as a "simple" `text/plain`
/// form. Malformed JSON is a 400 `REQUEST_ERROR`; a body that parses but has the wrong shape is a 400
/// `VALIDATION_ERROR` whose message starts with the field's path.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let value = json_body(request, state).await?;
        from_body(&value).map(ApiJson)
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
/// by [`crate::app::app`] as `DefaultBodyLimit` sets the size limit. Streamed bodies (chunk POSTs) have none.
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

/// Reads a request body as a `T`; every body of this API is a JSON object.
pub fn from_body<T: DeserializeOwned>(value: &Value) -> Result<T, ApiError> {
    if !value.is_object() {
        return Err(ApiError::Validation(format!("body: expected object, received {}", json_type(value))));
    }
    from_value(value)
}

/// Reads `value` as a `T`. When it does not fit, the message names the field and says what was expected
/// and what was received: `ttl_seconds: expected integer, received string`, `data.queryId: required`.
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let mut path: Vec<String> = error.path().iter().filter_map(segment).collect();
        let detail = error.inner().to_string();
        let message = if let Some(field) = missing_field(&detail) {
            path.push(field.to_owned());
            "required".to_owned()
        } else if let Some(expected) = invalid_type(&detail) {
            let received = lookup(value, &path).map_or("undefined", json_type);
            format!("expected {expected}, received {received}")
        } else {
            detail
        };
        let path = if path.is_empty() { "body".to_owned() } else { path.join(".") };
        ApiError::Validation(format!("{path}: {message}"))
    })
}

fn segment(segment: &serde_path_to_error::Segment) -> Option<String> {
    use serde_path_to_error::Segment;
    match segment {
        Segment::Seq { index } => Some(index.to_string()),
        Segment::Map { key } => Some(key.clone()),
        Segment::Enum { variant } => Some(variant.clone()),
        Segment::Unknown => None,
    }
}

/// serde's "missing field `x`".
fn missing_field(detail: &str) -> Option<&str> {
    detail.strip_prefix("missing field `")?.split('`').next()
}

/// The JSON type serde's "invalid type: …, expected …" asked for (or "invalid length …, expected struct …":
/// serde reads a struct from an array too).
fn invalid_type(detail: &str) -> Option<&'static str> {
    let rest = detail.strip_prefix("invalid type: ").or_else(|| detail.strip_prefix("invalid length "))?;
    let (_, expected) = rest.rsplit_once(", expected ")?;
    let expected = if expected.starts_with("struct ") { "a map" } else { expected };
    let expected = expected.split(" at line ").next().unwrap_or(expected);
    Some(match expected {
        "a string" | "a borrowed string" | "a character" => "string",
        "a sequence" | "a tuple" => "array",
        "a boolean" => "boolean",
        "i8" | "i16" | "i32" | "i64" | "u8" | "u16" | "u32" | "u64" | "an integer" => "integer",
        "f32" | "f64" | "a number" => "number",
        other if other == "a map" || other.starts_with("struct ") => "object",
        _ => return None,
    })
}

fn lookup<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(value, |value, step| match value {
        Value::Object(map) => map.get(step),
        Value::Array(items) => items.get(step.parse::<usize>().ok()?),
        _ => None,
    })
}

/// The name zod gives a JSON value's type.
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
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

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Body {
        conversation_id: String,
        messages: Vec<Value>,
        ttl_seconds: Option<i64>,
        data: Option<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        #[serde(rename = "queryId")]
        query_id: String,
        tags: Vec<String>,
    }

    fn message(body: Value) -> String {
        from_body::<Body>(&body).unwrap_err().to_string()
    }

    #[test]
    fn messages_start_with_the_field_path_and_say_what_was_wrong() {
        let ok = json!({"conversation_id": "c", "messages": []});
        assert!(from_value::<Body>(&ok).is_ok());
        assert_eq!(
            message(json!({"conversation_id": "c", "messages": "x"})),
            "messages: expected array, received string"
        );
        assert_eq!(
            message(json!({"conversation_id": 5, "messages": []})),
            "conversation_id: expected string, received number"
        );
        assert_eq!(message(json!({"messages": []})), "conversation_id: required");
        assert_eq!(
            message(json!({"conversation_id": "c", "messages": [], "ttl_seconds": 1.5})),
            "ttl_seconds: expected integer, received number"
        );
        assert_eq!(
            message(json!({"conversation_id": "c", "messages": [], "data": {"tags": []}})),
            "data.queryId: required"
        );
        assert_eq!(
            message(json!({"conversation_id": "c", "messages": [], "data": {"queryId": "q", "tags": ["a", 7]}})),
            "data.tags.1: expected string, received number"
        );
        assert_eq!(message(json!(["not", "an", "object"])), "body: expected object, received array");
        assert_eq!(
            message(json!({"conversation_id": "c", "messages": [], "data": ["q"]})),
            "data: expected object, received array"
        );
    }
}
