//! Typed events of the unified execution stream (seed 002): their types, which of them writers may post as
//! NDJSON lines beside the OpenAI chunks, and the checks those lines must pass.

use serde::Deserialize;
use serde_json::{Map, Value, value::RawValue};

/// The type of a typed event, as stored in `chunks.event_type` and sent as `event`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    TextDelta,
    ToolCallStart,
    ToolCallResult,
    QuestionRaised,
    QuestionAnswered,
    QuestionCancelled,
    QuestionExpired,
    QuestionDeclined,
    PhaseChange,
    CompletedQuery,
    /// The broker's frame for a stream whose writer disconnected: stored as an error chunk OpenAI-format
    /// readers see too, sent as `error` in the unified format.
    StreamAborted,
}

impl EventType {
    const ALL: [EventType; 11] = [
        EventType::TextDelta,
        EventType::ToolCallStart,
        EventType::ToolCallResult,
        EventType::QuestionRaised,
        EventType::QuestionAnswered,
        EventType::QuestionCancelled,
        EventType::QuestionExpired,
        EventType::QuestionDeclined,
        EventType::PhaseChange,
        EventType::CompletedQuery,
        EventType::StreamAborted,
    ];

    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::TextDelta => "text_delta",
            EventType::ToolCallStart => "tool_call_start",
            EventType::ToolCallResult => "tool_call_result",
            EventType::QuestionRaised => "question_raised",
            EventType::QuestionAnswered => "question_answered",
            EventType::QuestionCancelled => "question_cancelled",
            EventType::QuestionExpired => "question_expired",
            EventType::QuestionDeclined => "question_declined",
            EventType::PhaseChange => "phase_change",
            EventType::CompletedQuery => "completed_query",
            EventType::StreamAborted => "stream_aborted",
        }
    }

    /// Reads a stored name.
    pub fn parse(name: &str) -> Option<Self> {
        EventType::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// Whether OpenAI-format readers (and the raw `GET /stream` feed) see rows of this type.
    pub fn is_openai_visible(self) -> bool {
        self == EventType::StreamAborted
    }

    /// Whether a writer may post it. Question events and the abort frame are the broker's alone: it writes
    /// them in the same transaction as the change they report, so the stream cannot claim what did not happen.
    fn writers_may_post(self) -> bool {
        !matches!(
            self,
            EventType::QuestionRaised
                | EventType::QuestionAnswered
                | EventType::QuestionCancelled
                | EventType::QuestionExpired
                | EventType::QuestionDeclined
                | EventType::StreamAborted
        )
    }
}

/// What a posted NDJSON line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// An OpenAI chunk (or any other opaque JSON): stored and served as it is.
    Chunk,
    /// A typed event `{"event":…,"data":{…}}` a writer may post.
    Typed(EventType),
    /// A line that names an event but is not one a writer may post as written.
    Refused,
}

/// The top level of a posted object, read without converting numbers (a line Postgres stores must not slip
/// past as an OpenAI chunk because a number in it is out of `f64`'s range).
#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(borrow, default)]
    event: Option<&'a RawValue>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
}

/// Classifies one posted line that is valid JSON. Seed 002: "the `event` field distinguishes event types;
/// lines without it are OpenAI chunks".
pub fn classify(text: &str) -> LineKind {
    // Cheap test first: nearly every line is an OpenAI chunk.
    if !text.contains("\"event\"") || !text.trim_start().starts_with('{') {
        return LineKind::Chunk;
    }
    let Ok(probe) = serde_json::from_str::<Probe>(text) else {
        // An object whose top level cannot be read as one (a repeated `event` key): not taken as a chunk.
        return LineKind::Refused;
    };
    let Some(event) = probe.event else {
        return LineKind::Chunk;
    };
    let kind =
        serde_json::from_str::<&str>(event.get()).ok().and_then(EventType::parse).filter(|t| t.writers_may_post());
    let data = probe.data.and_then(|data| serde_json::from_str::<Map<String, Value>>(data.get()).ok());
    match (kind, data) {
        (Some(kind), Some(data)) if data_is_valid(kind, &data) && !holds_nul(text) => LineKind::Typed(kind),
        _ => LineKind::Refused,
    }
}

/// Whether a typed line holds a NUL (`\u0000`) anywhere: the resume views read typed events' fields as text,
/// which Postgres cannot give for one, so such a line would make the Query's state unreadable.
fn holds_nul(text: &str) -> bool {
    text.contains("\\u0000")
        && serde_json::from_str::<Value>(text).is_ok_and(|value| crate::validate::contains_nul(&value))
}

/// The fields each type must carry for readers and the resume state to rely on them.
fn data_is_valid(kind: EventType, data: &Map<String, Value>) -> bool {
    let text = |field: &str| data.get(field).and_then(Value::as_str).is_some_and(|s| !s.is_empty());
    let optional = |field: &str, check: fn(&Value) -> bool| data.get(field).is_none_or(|v| v.is_null() || check(v));
    match kind {
        EventType::TextDelta => data.get("content").is_some_and(Value::is_string),
        EventType::ToolCallStart => text("tool_call_id") && text("tool_name"),
        EventType::ToolCallResult => {
            text("tool_call_id") && optional("success", Value::is_boolean) && optional("duration_ms", Value::is_number)
        }
        EventType::PhaseChange => {
            text("to") && optional("from", Value::is_string) && optional("reason", Value::is_string)
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_chunks_are_chunks() {
        assert_eq!(classify(r#"{"id":"c","choices":[{"delta":{"content":"an \"event\" word"}}]}"#), LineKind::Chunk);
        assert_eq!(classify(r#"{"type":"tool_approval_request","taskId":"t"}"#), LineKind::Chunk);
        assert_eq!(classify(r#"["event"]"#), LineKind::Chunk);
        assert_eq!(classify(r#"{"choices":[],"usage":{"big":1e400},"x":"event"}"#), LineKind::Chunk);
    }

    #[test]
    fn typed_events_writers_may_post_are_recognised() {
        let start =
            r#"{"event":"tool_call_start","data":{"tool_call_id":"call_1","tool_name":"search","arguments":{}}}"#;
        assert_eq!(classify(start), LineKind::Typed(EventType::ToolCallStart));
        let result = r#"{"event":"tool_call_result","data":{"tool_call_id":"call_1","success":true,"result":"ok","duration_ms":12}}"#;
        assert_eq!(classify(result), LineKind::Typed(EventType::ToolCallResult));
        let phase = r#"{"event":"phase_change","data":{"from":"pending","to":"running","reason":"started"}}"#;
        assert_eq!(classify(phase), LineKind::Typed(EventType::PhaseChange));
        let escaped = r#"{"event":"text_delta","data":{"content":"a literal \\u0000, not a NUL"}}"#;
        assert_eq!(classify(escaped), LineKind::Typed(EventType::TextDelta));
    }

    #[test]
    fn broker_only_unknown_and_incomplete_events_are_refused() {
        for line in [
            r#"{"event":"question_answered","data":{"question_id":"q-1","response":"yes"}}"#,
            r#"{"event":"stream_aborted","data":{}}"#,
            r#"{"event":"made_up","data":{}}"#,
            r#"{"event":"tool_call_start","data":{"tool_name":"search"}}"#,
            r#"{"event":"tool_call_result","data":{"tool_call_id":"c","success":"yes"}}"#,
            r#"{"event":"phase_change","data":{"from":"running"}}"#,
            r#"{"event":"text_delta","data":"hello"}"#,
            r#"{"event":7,"data":{}}"#,
            r#"{"event":"tool_call_result","data":{"tool_call_id":"x","duration_ms":1e400}}"#,
            r#"{"event":"text_delta","event":"text_delta","data":{"content":"twice"}}"#,
            r#"{"event":"phase_change","data":{"to":"running\u0000x"}}"#,
            r#"{"event":"text_delta","data":{"content":"ok"},"note":{"\u0000":1}}"#,
        ] {
            assert_eq!(classify(line), LineKind::Refused, "{line}");
        }
    }

    #[test]
    fn names_round_trip() {
        for kind in EventType::ALL {
            assert_eq!(EventType::parse(kind.as_str()), Some(kind));
        }
    }
}
