//! The shapes of the events API: the `POST /events` body with its checks (upstream's zod schema, plus string
//! checks on the `data` fields the broker reads), the columns copied out of it, and a stored event as fan-out
//! carries it.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use utoipa::{
    ToSchema,
    openapi::{
        OpenApi, RefOr,
        schema::{ObjectBuilder, Schema, SchemaType, Type},
    },
};

use crate::{
    sessions::event::SessionEvent,
    validate::{
        self, Checked, Invalid,
        shape::{from_body, json_type},
    },
};

/// Longest `ttl_seconds` accepted (100 years); Postgres intervals overflow far beyond it.
const MAX_TTL_SECONDS: i64 = 100 * 365 * 24 * 3600;

/// The `data` fields the broker reads besides `DataShape`'s (the session's, [`SessionEvent::from_data`]):
/// each must be a string when present, checked after the Query's fields so a body with several faults is told
/// the same one as ever. The OpenAPI document lists them from here ([`document_data_fields`]).
const STRING_DATA_FIELDS: [(&str, &str); 8] = [
    ("conversationId", "The conversation the Query continues."),
    ("agent", "The agent the event is about."),
    ("team", "The team the event is about."),
    ("tool", "The tool called."),
    ("toolName", "The tool called, as the completions executor names it (when `tool` is absent)."),
    ("targetType", "What the Query targets, e.g. `agent`."),
    ("error", "What went wrong."),
    ("durationMs", "How long it took, in milliseconds (a number in a string)."),
];

/// An event as `POST /events` takes it and the event routes serve it: what serde checks of the body;
/// everything else passes through untouched, as upstream's `passthrough()`.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = Event)]
#[expect(
    dead_code,
    reason = "deserialised only to check a body's shape, and described in the OpenAPI document; its fields are never read"
)]
pub struct Shape {
    /// What the event is about; the fields the broker reads are strings.
    data: DataShape,
    /// When it happened (RFC 3339).
    timestamp: Option<String>,
    /// `Normal` or `Warning`.
    #[serde(rename = "eventType")]
    event_type: Option<String>,
    /// The controller's reason, e.g. `QueryExecutionComplete`.
    reason: Option<String>,
    /// Its message.
    message: Option<String>,
}

/// The `data` of an event.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = EventData)]
#[expect(
    dead_code,
    reason = "deserialised only to check a body's shape, as part of `Shape`; its fields are never read"
)]
pub struct DataShape {
    /// The Query's UID.
    #[serde(rename = "queryId")]
    #[schema(min_length = 1, max_length = 512)]
    query_id: String,
    /// The Query's name (with `sessionId`, the event joins the session).
    #[serde(rename = "queryName", default)]
    query_name: Option<String>,
    /// The Query's namespace.
    #[serde(rename = "queryNamespace", default)]
    query_namespace: Option<String>,
    /// The session the Query belongs to.
    #[serde(rename = "sessionId", default)]
    session_id: Option<String>,
}

/// The body of `POST /events`: an event, and how long to keep it (the OpenAPI document's description of
/// what [`NewEvent::parse`] reads).
#[derive(Debug, Deserialize, ToSchema)]
#[expect(
    dead_code,
    reason = "the OpenAPI document's description of the body; `NewEvent::parse` reads it (the event as `Shape`, `ttl_seconds` by hand), and its tests hold the two alike"
)]
pub struct PostEvent {
    /// The event.
    #[serde(flatten)]
    event: Shape,
    /// Seconds to keep it (default `--event-ttl-seconds`); a string holding the number is taken too. Not
    /// stored with the event. 0 stores it already expired (hidden from reads, still applied to its session).
    #[schema(minimum = 0, maximum = 3_153_600_000_i64)]
    ttl_seconds: Option<i64>,
}

/// A checked `POST /events` body.
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// The event as stored and served: the body without `ttl_seconds`.
    pub event: Value,
    /// `data.queryId`, the Query's UID.
    pub query_id: String,
    /// `data.queryName`.
    pub query_name: Option<String>,
    /// `data.queryNamespace`.
    pub query_namespace: Option<String>,
    /// `data.sessionId`.
    pub session_id: Option<String>,
    /// `reason`.
    pub reason: Option<String>,
    /// `eventType` (`Normal` or `Warning`).
    pub event_type: Option<String>,
    /// `timestamp`, when it parses.
    pub occurred_at: Option<DateTime<Utc>>,
    /// `data.durationMs`, when it is a number (in a string, as the controller sends it, or not).
    pub duration_ms: Option<f64>,
    /// `ttl_seconds`.
    pub ttl_seconds: Option<i64>,
}

impl NewEvent {
    /// Checks a body: an object with `data.queryId` a non-empty string, the `data` fields the broker reads
    /// strings, `ttl_seconds` a non-negative integer (or a string holding one, as zod's `coerce`).
    pub fn parse(mut body: Value) -> Checked<Self> {
        let _: Shape = from_body(&body)?;
        // serde would also read `data` from an array of the right length.
        if let Some(data) = body.get("data").filter(|data| !data.is_object()) {
            return Err(Invalid(format!("data: expected object, received {}", json_type(data))));
        }
        // Stored and served without it, as upstream does.
        let ttl_seconds = body.as_object_mut().expect("checked to be an object").remove("ttl_seconds");
        let ttl_seconds = ttl_seconds.map(ttl).transpose()?.flatten();
        let data = body["data"].as_object().expect("checked to be an object");
        let text = |key: &str| data.get(key).and_then(Value::as_str).map(str::to_owned);
        let query_id = text("queryId").unwrap_or_default();
        if query_id.is_empty() {
            return Err(Invalid("data.queryId: String must contain at least 1 character(s)".into()));
        }
        validate::key("data.queryId", &query_id)?;
        // `DataShape`'s fields are strings already: serde checked them.
        for (field, _) in STRING_DATA_FIELDS {
            match data.get(field) {
                None | Some(Value::Null | Value::String(_)) => {}
                Some(other) => {
                    return Err(Invalid(format!("data.{field}: expected string, received {}", json_type(other))));
                }
            }
        }
        if validate::contains_nul(&body) {
            return Err(Invalid("body: text must not contain the NUL character (\\u0000)".into()));
        }
        let top = |key: &str| body.get(key).and_then(Value::as_str).map(str::to_owned);
        Ok(NewEvent {
            query_name: text("queryName"),
            query_namespace: text("queryNamespace"),
            session_id: text("sessionId"),
            duration_ms: text("durationMs").and_then(|d| d.trim().parse::<f64>().ok()).filter(|d| d.is_finite()),
            reason: top("reason"),
            event_type: top("eventType"),
            occurred_at: top("timestamp")
                .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
                .map(|t| t.with_timezone(&Utc)),
            query_id,
            ttl_seconds,
            event: body,
        })
    }

    /// What the event means for its session, if it names one and a query.
    pub fn session_event(&self) -> Option<SessionEvent> {
        let data = self.event.get("data")?.as_object()?;
        SessionEvent::from_data(data, self.reason.as_deref().unwrap_or_default())
    }
}

/// Adds the `data` fields [`NewEvent::parse`] checks by hand ([`STRING_DATA_FIELDS`]) to the document's
/// `EventData`, each a string or null as serde would describe it, so the document says what the check does from
/// the list the check reads.
pub(super) fn document_data_fields(document: &mut OpenApi) {
    let data = document.components.as_mut().and_then(|components| components.schemas.get_mut("EventData"));
    let Some(RefOr::T(Schema::Object(data))) = data else {
        panic!("the events routes' document has no EventData object to add the data fields to")
    };
    for (field, description) in STRING_DATA_FIELDS {
        let string = ObjectBuilder::new()
            .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
            .description(Some(description));
        data.properties.insert(field.to_owned(), string.into());
    }
}

/// `ttl_seconds`: a non-negative integer, or a string holding one; `null` means none. 0 is what Ark's Go
/// executor sends for a Query whose TTL is under a second: the event expires at once (hidden from every read,
/// reaped by the next pass), as upstream stores it, and still counts for its session.
fn ttl(value: Value) -> Checked<Option<i64>> {
    let seconds = match &value {
        Value::Null => return Ok(None),
        Value::Number(n) => n.as_i64().ok_or("expected integer, received number".to_owned()),
        Value::String(s) => s.trim().parse::<i64>().map_err(|_| "expected integer, received string".to_owned()),
        other => Err(format!("expected integer, received {}", json_type(other))),
    }
    .map_err(|message| Invalid(format!("ttl_seconds: {message}")))?;
    if seconds < 0 {
        return Err(Invalid("ttl_seconds: Number must be greater than or equal to 0".into()));
    }
    if seconds > MAX_TTL_SECONDS {
        return Err(Invalid(format!("ttl_seconds: Number must be at most {MAX_TTL_SECONDS}")));
    }
    Ok(Some(seconds))
}

/// A stored event as readers get it.
#[derive(Debug, Clone)]
pub struct EventRecord {
    /// The event as posted (without `ttl_seconds`), as JSON text.
    pub event: Box<serde_json::value::RawValue>,
    /// `data.queryId`.
    pub query_id: String,
    /// `data.sessionId`.
    pub session_id: Option<String>,
    /// Its place in the global events feed; also the page cursor.
    pub sequence: i64,
    /// Its position among its query's events.
    pub position: i64,
    /// The transaction that wrote it.
    pub tx: i64,
    /// Its size in bytes.
    pub bytes: i32,
}

crate::feed_row!(EventRecord, query_id);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{
        http::documented::{assert_documented, document_of, property, request_body},
        validate::MAX_KEY_BYTES,
    };

    #[test]
    fn every_field_parse_reads_by_hand_is_documented_alike() {
        let document = document_of(crate::events::router());
        let body = request_body(&document, "post", "/events", "application/json");
        let data_fields: Vec<String> = STRING_DATA_FIELDS.iter().map(|(field, _)| format!("data.{field}")).collect();
        let mut reads = vec![
            ("data", "object"),
            ("data.queryId", "string"),
            ("timestamp", "string"),
            ("eventType", "string"),
            ("reason", "string"),
            ("ttl_seconds", "integer"),
        ];
        reads.extend(data_fields.iter().map(|field| (field.as_str(), "string")));
        assert_documented(&document, body, &reads);
        let ttl = property(&document, body, "ttl_seconds").unwrap();
        assert_eq!((ttl["minimum"].as_i64(), ttl["maximum"].as_i64()), (Some(0), Some(MAX_TTL_SECONDS)));
        let query_id = property(&document, body, "data.queryId").unwrap();
        let bounds = (query_id["minLength"].as_u64(), query_id["maxLength"].as_u64());
        assert_eq!(bounds, (Some(1), Some(MAX_KEY_BYTES as u64)));
    }

    fn error(body: Value) -> String {
        NewEvent::parse(body).unwrap_err().to_string()
    }

    #[test]
    fn the_body_is_checked_field_by_field() {
        assert_eq!(error(json!({"reason": "x"})), "data: required");
        assert_eq!(error(json!({"data": "x"})), "data: expected object, received string");
        assert_eq!(error(json!({"data": ["uid"]})), "data: expected object, received array");
        assert_eq!(error(json!({"data": {}})), "data.queryId: required");
        assert_eq!(error(json!({"data": {"queryId": 7}})), "data.queryId: expected string, received number");
        assert_eq!(
            error(json!({"data": {"queryId": ""}})),
            "data.queryId: String must contain at least 1 character(s)"
        );
        assert_eq!(
            error(json!({"data": {"queryId": "u", "sessionId": 3}})),
            "data.sessionId: expected string, received number"
        );
        assert_eq!(error(json!({"data": {"queryId": "u"}, "reason": 1})), "reason: expected string, received number");
        assert_eq!(
            error(json!({"data": {"queryId": "u"}, "ttl_seconds": -1})),
            "ttl_seconds: Number must be greater than or equal to 0"
        );
        assert_eq!(NewEvent::parse(json!({"data": {"queryId": "u"}, "ttl_seconds": 0})).unwrap().ttl_seconds, Some(0));
        assert_eq!(
            error(json!({"data": {"queryId": "u"}, "ttl_seconds": "soon"})),
            "ttl_seconds: expected integer, received string"
        );
    }

    #[test]
    fn ttl_is_taken_out_and_everything_else_is_kept() {
        let body = json!({"reason": "LLMCallComplete", "data": {"queryId": "u", "durationMs": "12.5", "extra": 1},
                          "ttl_seconds": "3600", "custom": [1]});
        let event = NewEvent::parse(body).unwrap();
        assert_eq!(event.ttl_seconds, Some(3600));
        assert_eq!(event.duration_ms, Some(12.5));
        assert_eq!(
            event.event,
            json!({"reason": "LLMCallComplete", "data": {"queryId": "u", "durationMs": "12.5", "extra": 1}, "custom": [1]})
        );
    }
}
