//! What the subscription APIs are sent and how it is checked (no I/O): a subscription's `PUT` body, the
//! acknowledgements of a callback or an ack, the glob a pattern is, which webhook URLs are taken, and the
//! hash a repeated `PUT` is compared by.

use std::net::{IpAddr, Ipv4Addr};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::durable::offset::Offset;

/// The lease a subscription gets when its `PUT` names none, and the bounds of one it names.
pub const DEFAULT_LEASE_TTL_MS: i64 = 30_000;
const LEASE_TTL_MS: std::ops::RangeInclusive<i64> = 1_000..=600_000;

/// How a subscription is told of new data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A signed POST to its URL.
    Webhook,
    /// A wake event appended to its wake stream, which workers read and claim.
    PullWake,
}

impl Kind {
    /// Its name on the wire and in `ds_subscriptions.kind`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Webhook => "webhook",
            Kind::PullWake => "pull-wake",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "webhook" => Some(Kind::Webhook),
            "pull-wake" => Some(Kind::PullWake),
            _ => None,
        }
    }
}

/// Why a request was refused: its status and the protocol's error code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The HTTP status.
    pub status: u16,
    /// `INVALID_REQUEST`, `WEBHOOK_URL_REJECTED`, ….
    pub code: &'static str,
    /// What is wrong, for a person.
    pub message: String,
}

impl Refused {
    /// 400 `INVALID_REQUEST`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Refused { status: 400, code: "INVALID_REQUEST", message: message.into() }
    }
}

#[derive(Debug, Deserialize)]
struct WebhookBody {
    url: String,
}

#[derive(Debug, Deserialize)]
struct PutBody {
    #[serde(rename = "type")]
    kind: String,
    pattern: Option<String>,
    #[serde(default)]
    streams: Vec<String>,
    webhook: Option<WebhookBody>,
    wake_stream: Option<String>,
    lease_ttl_ms: Option<i64>,
    description: Option<String>,
}

/// A subscription as its `PUT` asks for it, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// Webhook or pull-wake.
    pub kind: Kind,
    /// The glob of stream paths it follows, as sent.
    pub pattern: Option<String>,
    /// The glob as an anchored regex.
    pub pattern_regex: Option<String>,
    /// The streams it names, sorted, each once.
    pub streams: Vec<String>,
    /// A webhook's URL.
    pub webhook_url: Option<String>,
    /// A pull-wake's wake stream.
    pub wake_stream: Option<String>,
    /// How long a delivered wake or a claim is held without a word.
    pub lease_ttl_ms: i64,
    /// What it is for.
    pub description: Option<String>,
}

impl Wanted {
    /// What a repeated `PUT` must match: SHA-256 over its settings, in one fixed order.
    pub fn config_hash(&self) -> String {
        let canonical = serde_json::json!([
            self.kind.name(),
            self.pattern,
            self.streams,
            self.webhook_url,
            self.wake_stream,
            self.lease_ttl_ms,
            self.description,
        ]);
        hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
    }
}

/// Reads a subscription's `PUT` body; `loopback`: webhooks may go to this machine's loopback over `http`.
pub fn wanted(body: &[u8], loopback: bool) -> Result<Wanted, Refused> {
    let sent: PutBody = serde_json::from_slice(body).map_err(|error| Refused::invalid(format!("body: {error}")))?;
    let kind = Kind::parse(&sent.kind).ok_or_else(|| Refused::invalid("type: must be webhook or pull-wake"))?;
    let lease_ttl_ms = sent.lease_ttl_ms.unwrap_or(DEFAULT_LEASE_TTL_MS);
    if !LEASE_TTL_MS.contains(&lease_ttl_ms) {
        return Err(Refused::invalid("lease_ttl_ms: must be from 1000 to 600000"));
    }
    if sent.pattern.is_none() && sent.streams.is_empty() {
        return Err(Refused::invalid("a subscription needs a pattern or streams"));
    }
    let mut streams = sent.streams;
    if streams.iter().any(|path| !stream_path_ok(path)) {
        return Err(Refused::invalid("streams: each must be a stream's path"));
    }
    streams.sort();
    streams.dedup();
    let pattern_regex = match &sent.pattern {
        Some(pattern) if !stream_path_ok(pattern) => return Err(Refused::invalid("pattern: must be a glob of paths")),
        Some(pattern) => Some(glob_regex(pattern)),
        None => None,
    };
    let (webhook_url, wake_stream) = match kind {
        Kind::Webhook => {
            let url = sent.webhook.ok_or_else(|| Refused::invalid("webhook.url: required"))?.url;
            if !webhook_url_allowed(&url, loopback) {
                return Err(Refused {
                    status: 400,
                    code: "WEBHOOK_URL_REJECTED",
                    message: "webhook.url: must be https to a public host".into(),
                });
            }
            (Some(url), None)
        }
        Kind::PullWake => {
            let wake = sent.wake_stream.ok_or_else(|| Refused::invalid("wake_stream: required"))?;
            if !stream_path_ok(&wake) {
                return Err(Refused::invalid("wake_stream: must be a stream's path"));
            }
            (None, Some(wake))
        }
    };
    let description = sent.description;
    if description.as_deref().is_some_and(|d| d.contains('\0') || d.len() > 4096) {
        return Err(Refused::invalid("description: at most 4096 bytes, no NUL"));
    }
    Ok(Wanted {
        kind,
        pattern: sent.pattern,
        pattern_regex,
        streams,
        webhook_url,
        wake_stream,
        lease_ttl_ms,
        description,
    })
}

/// Whether `path` may name a stream a subscription follows.
pub fn stream_path_ok(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= 1024
        && !path.starts_with('/')
        && !path.starts_with("__ds")
        && !path.contains('\0')
}

/// The anchored regex of a glob of stream paths: `**` any characters, `*` any within one path segment, `?`
/// one character of one; everything else itself.
pub fn glob_regex(glob: &str) -> String {
    let mut regex = String::from("^");
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                regex.push_str(".*");
            }
            '*' => regex.push_str("[^/]*"),
            '?' => regex.push_str("[^/]"),
            // PostgreSQL's regexes take a backslash before punctuation only (before a letter it is a class).
            c if c.is_ascii_punctuation() && c != '/' && c != '_' && c != '-' => {
                regex.push('\\');
                regex.push(c);
            }
            c => regex.push(c),
        }
    }
    regex.push('$');
    regex
}

/// Whether webhooks may go to `url`: `https` to a name or a public address; with `loopback`, also `http` to
/// this machine's loopback (`localhost`, `127.0.0.0/8`). Private, shared, link-local, multicast and IPv6
/// literal addresses are refused, so a subscription cannot aim the broker at the cluster's insides by
/// address (a name is not resolved here: an operator keeps webhooks in with a NetworkPolicy).
pub fn webhook_url_allowed(url: &str, loopback_allowed: bool) -> bool {
    let Ok(parsed) = reqwest::Url::parse(url) else { return false };
    let host = match parsed.host_str() {
        None => return false,
        Some(literal) if literal.starts_with('[') => return false,
        Some(name) => name.parse::<Ipv4Addr>().map_or_else(|_| Host::Name(name.to_ascii_lowercase()), Host::V4),
    };
    let loopback = match &host {
        Host::Name(name) => name.trim_end_matches('.') == "localhost",
        Host::V4(ip) => ip.is_loopback(),
    };
    match parsed.scheme() {
        "http" => loopback && loopback_allowed,
        "https" => match host {
            Host::Name(name) => !loopback && !name.ends_with(".localhost"),
            Host::V4(ip) => public(IpAddr::V4(ip)),
        },
        _ => false,
    }
}

enum Host {
    Name(String),
    V4(Ipv4Addr),
}

fn public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => {
            let shared = ip.octets()[0] == 100 && (64..128).contains(&ip.octets()[1]);
            !(ip.is_private()
                || ip.is_loopback()
                || ip.is_link_local()
                || ip.is_unspecified()
                || ip.is_multicast()
                || ip.is_broadcast()
                || shared
                || ip.octets()[0] == 0
                || ip.octets()[0] >= 240)
        }
        IpAddr::V6(_) => false,
    }
}

/// One acknowledgement: the stream, and the offset read up to.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Ack {
    /// The stream's path.
    pub stream: String,
    /// An offset the stream gave.
    pub offset: String,
}

/// A callback's or an ack's body.
#[derive(Debug, Clone, Deserialize)]
pub struct Acks {
    /// The wake it answers.
    pub wake_id: String,
    /// Its generation.
    pub generation: i64,
    /// What was read.
    #[serde(default)]
    pub acks: Vec<Ack>,
    /// Whether the worker is done with the wake.
    #[serde(default)]
    pub done: bool,
}

/// A release's body.
#[derive(Debug, Clone, Deserialize)]
pub struct Release {
    /// The wake it lets go.
    pub wake_id: String,
    /// Its generation.
    pub generation: i64,
}

/// A claim's body.
#[derive(Debug, Clone, Deserialize)]
pub struct Claim {
    /// Who claims.
    pub worker: String,
}

/// `POST …/streams`'s body.
#[derive(Debug, Clone, Deserialize)]
pub struct AddStreams {
    /// The paths to link.
    pub streams: Vec<String>,
}

/// Reads a JSON body of the subscription APIs.
pub fn body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Refused> {
    serde_json::from_slice(body).map_err(|error| Refused::invalid(format!("body: {error}")))
}

/// A stream's offset as the subscription APIs write it: `-1` before the first, else the stream's own.
pub fn offset_of(position: i64) -> String {
    if position < 0 { "-1".into() } else { Offset::at(position).to_string() }
}

/// The position of an offset the subscription APIs were sent: `None` for `-1` or no offset of a stream's.
pub fn position_of(offset: &str) -> Option<i64> {
    let parsed = Offset::parse(offset)?;
    (parsed.run == 0).then_some(parsed.position)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_glob_star_stays_in_its_segment_and_a_double_star_does_not() {
        let matches = |glob: &str, path: &str| regex_lite_match(&glob_regex(glob), path);
        assert_eq!(glob_regex("events/*"), "^events/[^/]*$");
        assert_eq!(glob_regex("a.b/**"), "^a\\.b/.*$");
        assert_eq!(glob_regex("é/*"), "^é/[^/]*$", "no backslash before a letter, which PostgreSQL reads as a class");
        assert!(matches("events/*", "events/x"));
        assert!(!matches("events/*", "events/x/y"));
        assert!(matches("events/**", "events/x/y"));
    }

    /// Just enough of a regex engine for the globs above (PostgreSQL runs the real ones).
    fn regex_lite_match(regex: &str, path: &str) -> bool {
        let body = regex.trim_start_matches('^').trim_end_matches('$');
        if let Some(prefix) = body.strip_suffix("[^/]*") {
            return path.strip_prefix(prefix).is_some_and(|rest| !rest.contains('/'));
        }
        if let Some(prefix) = body.strip_suffix(".*") {
            return path.starts_with(prefix);
        }
        body == path
    }

    #[test]
    fn webhooks_go_to_public_https_or_loopback_http_only() {
        for allowed in ["https://example.com/h", "https://8.8.8.8/"] {
            assert!(webhook_url_allowed(allowed, false), "{allowed}");
        }
        for local in ["http://127.0.0.1:4000/hook", "http://localhost/hook", "http://localhost./hook"] {
            assert!(webhook_url_allowed(local, true), "{local}");
            assert!(!webhook_url_allowed(local, false), "{local} without loopback");
        }
        for refused in [
            "http://10.0.0.1/hook",
            "http://example.com/hook",
            "https://10.1.2.3/",
            "https://192.168.1.1/",
            "https://169.254.169.254/latest",
            "https://127.0.0.1/",
            "https://localhost/",
            "https://localhost./",
            "https://100.64.0.1/",
            "https://224.0.0.1/",
            "https://[::1]/",
            "ftp://example.com/",
            "not a url",
        ] {
            assert!(!webhook_url_allowed(refused, true), "{refused}");
        }
    }

    #[test]
    fn a_put_is_checked_and_its_hash_ignores_the_order_of_its_streams() {
        let body = |json: serde_json::Value| wanted(json.to_string().as_bytes(), true);
        let one =
            body(serde_json::json!({"type": "pull-wake", "streams": ["b", "a", "a"], "wake_stream": "w"})).unwrap();
        let two = body(serde_json::json!({"type": "pull-wake", "streams": ["a", "b"], "wake_stream": "w"})).unwrap();
        assert_eq!(
            (one.streams.clone(), one.lease_ttl_ms),
            (vec!["a".to_owned(), "b".to_owned()], DEFAULT_LEASE_TTL_MS)
        );
        assert_eq!(one.config_hash(), two.config_hash());
        let refused =
            body(serde_json::json!({"type": "webhook", "pattern": "e/*", "webhook": {"url": "http://10.0.0.1/"}}));
        assert_eq!(refused.unwrap_err().code, "WEBHOOK_URL_REJECTED");
        for bad in [
            serde_json::json!({"type": "push", "pattern": "e/*"}),
            serde_json::json!({"type": "pull-wake", "pattern": "e/*"}),
            serde_json::json!({"type": "pull-wake", "wake_stream": "w"}),
            serde_json::json!({"type": "pull-wake", "pattern": "e/*", "wake_stream": "w", "lease_ttl_ms": 10}),
        ] {
            assert_eq!(body(bad.clone()).unwrap_err().code, "INVALID_REQUEST", "{bad}");
        }
    }

    #[test]
    fn offsets_before_the_first_are_minus_one() {
        assert_eq!(offset_of(-1), "-1");
        assert_eq!(position_of(&offset_of(25)), Some(25));
        assert_eq!(position_of("-1"), None);
    }
}
