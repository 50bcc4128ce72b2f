//! What the protocol's requests say, read from their headers and bodies, and the checks on them (each
//! failure is a [`Refusal`] the routes answer 400 with).

use axum::http::HeaderMap;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde_json::value::RawValue;

use super::offset::Offset;

/// The largest integer the protocol allows in producer headers (2^53 − 1, JavaScript's safe integers).
const MOST_SAFE_INTEGER: i64 = (1 << 53) - 1;
/// The longest `Stream-TTL` taken: about 317 years, so an expiry time stays far inside PostgreSQL's range.
const MOST_TTL_SECONDS: i64 = 10_000_000_000;

/// Why a request was refused with 400; the message names the header or the body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

fn refuse<T>(message: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal(message.into()))
}

/// How a stream expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Expiry {
    /// Never (until deleted).
    #[default]
    Never,
    /// This many seconds after its last read or write.
    Ttl(i64),
    /// At this time.
    At(DateTime<Utc>),
}

impl Expiry {
    /// The two columns it is stored in: `ttl_seconds`, `expires_at`.
    pub fn columns(self) -> (Option<i64>, Option<DateTime<Utc>>) {
        match self {
            Expiry::Never => (None, None),
            Expiry::Ttl(seconds) => (Some(seconds), None),
            Expiry::At(at) => (None, Some(at)),
        }
    }

    /// From the stored columns.
    pub fn from_columns(ttl: Option<i64>, at: Option<DateTime<Utc>>) -> Self {
        match (ttl, at) {
            (Some(seconds), _) => Expiry::Ttl(seconds),
            (None, Some(at)) => Expiry::At(at),
            (None, None) => Expiry::Never,
        }
    }
}

/// Where a fork branches off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkFrom {
    /// The source's path under `/v1/stream/`.
    pub source: String,
    /// `Stream-Fork-Offset`; the source's tail when absent.
    pub offset: Option<Offset>,
    /// `Stream-Fork-Sub-Offset`: messages (JSON) or bytes past `offset`.
    pub sub_offset: i64,
}

/// A `PUT`: create a stream, or find it as asked.
#[derive(Debug, Clone)]
pub struct Create {
    /// `Content-Type`, when sent.
    pub content_type: Option<String>,
    /// `Stream-TTL` or `Stream-Expires-At`.
    pub expiry: Expiry,
    /// `Stream-Closed: true`.
    pub closed: bool,
    /// `Stream-Forked-From` and its offsets.
    pub fork: Option<ForkFrom>,
    /// The initial content.
    pub body: Bytes,
}

/// An idempotent producer's request headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Producer {
    /// `Producer-Id`.
    pub id: String,
    /// `Producer-Epoch`.
    pub epoch: i64,
    /// `Producer-Seq`.
    pub seq: i64,
}

/// A `POST`: append, close, or both.
#[derive(Debug, Clone)]
pub struct Append {
    /// `Content-Type`, when sent.
    pub content_type: Option<String>,
    /// `Stream-Closed: true`.
    pub close: bool,
    /// `Stream-Seq`.
    pub stream_seq: Option<String>,
    /// The producer headers, when sent (all three or none).
    pub producer: Option<Producer>,
    /// The bytes to append.
    pub body: Bytes,
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, Refusal> {
    match headers.get(name) {
        None => Ok(None),
        Some(value) => value.to_str().map(Some).map_err(|_| Refusal(format!("{name}: must be visible ASCII"))),
    }
}

/// Whether `Stream-Closed` says `true` (any case); any other value counts as absent (PROTOCOL.md §4.1).
pub fn says_closed(headers: &HeaderMap) -> bool {
    headers.get("stream-closed").is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"true"))
}

/// A non-negative decimal integer without sign, leading zeros, point or exponent, at most `most`.
fn strict_integer(name: &str, text: &str, most: i64) -> Result<i64, Refusal> {
    let canonical =
        !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) && (text == "0" || !text.starts_with('0'));
    match text.parse::<i64>() {
        Ok(value) if canonical && value <= most => Ok(value),
        _ => refuse(format!("{name}: must be a non-negative integer (at most {most}) in plain decimal")),
    }
}

fn expiry(headers: &HeaderMap) -> Result<Expiry, Refusal> {
    let ttl = header(headers, "stream-ttl")?;
    let at = header(headers, "stream-expires-at")?;
    match (ttl, at) {
        (Some(_), Some(_)) => refuse("Stream-TTL and Stream-Expires-At: send one of them, not both"),
        (Some(ttl), None) => Ok(Expiry::Ttl(strict_integer("Stream-TTL", ttl.trim(), MOST_TTL_SECONDS)?)),
        (None, Some(at)) => match DateTime::parse_from_rfc3339(at.trim()) {
            Ok(at) => Ok(Expiry::At(at.with_timezone(&Utc))),
            Err(_) => refuse("Stream-Expires-At: must be an RFC 3339 timestamp"),
        },
        (None, None) => Ok(Expiry::Never),
    }
}

/// Reads a `PUT`.
pub fn create(headers: &HeaderMap, body: Bytes) -> Result<Create, Refusal> {
    let fork = match header(headers, "stream-forked-from")? {
        None if headers.contains_key("stream-fork-offset") || headers.contains_key("stream-fork-sub-offset") => {
            return refuse("Stream-Fork-Offset and Stream-Fork-Sub-Offset: only with Stream-Forked-From");
        }
        None => None,
        Some(source) => {
            let offset = match header(headers, "stream-fork-offset")? {
                None => None,
                Some(text) => Some(
                    Offset::parse(text.trim()).ok_or_else(|| Refusal("Stream-Fork-Offset: not an offset".into()))?,
                ),
            };
            let sub_offset = match header(headers, "stream-fork-sub-offset")? {
                None => 0,
                Some(text) => strict_integer("Stream-Fork-Sub-Offset", text.trim(), MOST_SAFE_INTEGER)?,
            };
            Some(ForkFrom { source: source_path(source)?, offset, sub_offset })
        }
    };
    Ok(Create {
        content_type: header(headers, "content-type")?.map(str::to_owned),
        expiry: expiry(headers)?,
        closed: says_closed(headers),
        fork,
        body,
    })
}

/// The path below `/v1/stream/` a `Stream-Forked-From` names (it carries the whole URL path).
fn source_path(value: &str) -> Result<String, Refusal> {
    let path = value.trim();
    let path = path.strip_prefix(super::PREFIX).unwrap_or(path).trim_start_matches('/');
    if path.is_empty() {
        return refuse("Stream-Forked-From: must name a stream");
    }
    Ok(path.to_owned())
}

/// Reads a `POST`.
pub fn append(headers: &HeaderMap, body: Bytes) -> Result<Append, Refusal> {
    let close = says_closed(headers);
    if body.is_empty() && !close {
        return refuse("the body is empty: an append needs data (or Stream-Closed: true to close)");
    }
    let producer =
        match (header(headers, "producer-id")?, header(headers, "producer-epoch")?, header(headers, "producer-seq")?) {
            (None, None, None) => None,
            (Some(id), Some(epoch), Some(seq)) => {
                if id.is_empty() {
                    return refuse("Producer-Id: must not be empty");
                }
                Some(Producer {
                    id: id.to_owned(),
                    epoch: strict_integer("Producer-Epoch", epoch.trim(), MOST_SAFE_INTEGER)?,
                    seq: strict_integer("Producer-Seq", seq.trim(), MOST_SAFE_INTEGER)?,
                })
            }
            _ => return refuse("Producer-Id, Producer-Epoch and Producer-Seq: send all three or none"),
        };
    Ok(Append {
        content_type: header(headers, "content-type")?.map(str::to_owned),
        close,
        stream_seq: header(headers, "stream-seq")?.map(str::to_owned),
        producer,
        body,
    })
}

/// A content type's media type, for comparing two of them (`Application/JSON; charset=utf-8` is
/// `application/json`).
pub fn media_type(content_type: &str) -> String {
    content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase()
}

/// Whether a stream of this content type is in JSON mode (PROTOCOL.md §9.1).
pub fn is_json(content_type: &str) -> bool {
    media_type(content_type) == "application/json"
}

/// Whether SSE carries this content type as text (else base64, PROTOCOL.md §5.8).
pub fn is_text(content_type: &str) -> bool {
    let media = media_type(content_type);
    media.starts_with("text/") || media == "application/json"
}

/// The messages of a JSON-mode body: a top-level array is flattened one level, anything else is one
/// message. `allow_empty`: a `PUT` may create an empty stream with `[]`, an append may not.
pub fn json_messages(body: &[u8], allow_empty: bool) -> Result<Vec<Bytes>, Refusal> {
    let text = std::str::from_utf8(body).map_err(|_| Refusal("the body is not UTF-8 JSON".into()))?;
    let trimmed = text.trim_matches([' ', '\t', '\n', '\r']);
    if trimmed.starts_with('[') {
        let items: Vec<Box<RawValue>> =
            serde_json::from_str(trimmed).map_err(|error| Refusal(format!("the body is not valid JSON: {error}")))?;
        if items.is_empty() && !allow_empty {
            return refuse("the body is an empty JSON array: there is nothing to append");
        }
        Ok(items.into_iter().map(|item| Bytes::copy_from_slice(item.get().as_bytes())).collect())
    } else {
        let item: Box<RawValue> =
            serde_json::from_str(trimmed).map_err(|error| Refusal(format!("the body is not valid JSON: {error}")))?;
        Ok(vec![Bytes::copy_from_slice(item.get().as_bytes())])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs.iter().map(|(name, value)| (axum::http::HeaderName::from_static(name), value.parse().unwrap())).collect()
    }

    #[test]
    fn ttl_is_plain_decimal_only() {
        for bad in ["+3600", "03600", "3600.0", "3.6e3", "-1", "", "abc"] {
            assert!(create(&headers(&[("stream-ttl", bad)]), Bytes::new()).is_err(), "{bad}");
        }
        assert_eq!(create(&headers(&[("stream-ttl", "0")]), Bytes::new()).unwrap().expiry, Expiry::Ttl(0));
        assert!(
            create(&headers(&[("stream-ttl", "5"), ("stream-expires-at", "2030-01-01T00:00:00Z")]), Bytes::new())
                .is_err()
        );
    }

    #[test]
    fn producer_headers_come_together() {
        let some = headers(&[("producer-id", "p"), ("producer-epoch", "0")]);
        assert!(append(&some, Bytes::from_static(b"x")).is_err());
        let all = headers(&[("producer-id", "p"), ("producer-epoch", "1"), ("producer-seq", "2")]);
        let producer = append(&all, Bytes::from_static(b"x")).unwrap().producer.unwrap();
        assert_eq!((producer.epoch, producer.seq), (1, 2));
        let huge = headers(&[("producer-id", "p"), ("producer-epoch", "9007199254740992"), ("producer-seq", "0")]);
        assert!(append(&huge, Bytes::from_static(b"x")).is_err());
    }

    #[test]
    fn closed_means_true_only() {
        assert!(says_closed(&headers(&[("stream-closed", "TRUE")])));
        for other in ["false", "yes", "1", ""] {
            assert!(!says_closed(&headers(&[("stream-closed", other)])), "{other}");
        }
    }

    #[test]
    fn json_bodies_flatten_one_level() {
        assert_eq!(json_messages(br#"[[1,2], [3,4]]"#, false).unwrap(), vec!["[1,2]", "[3,4]"]);
        assert_eq!(json_messages(br#"[[[1,2,3]]]"#, false).unwrap(), vec!["[[1,2,3]]"]);
        assert_eq!(json_messages(br#" {"a": 1} "#, false).unwrap(), vec![r#"{"a": 1}"#]);
        assert!(json_messages(b"[]", false).is_err());
        assert!(json_messages(b"[]", true).unwrap().is_empty());
        assert!(json_messages(b"{not json", false).is_err());
    }
}
