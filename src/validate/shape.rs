//! Reading JSON into a shape, with the messages upstream's zod gives: the field's path, then what was
//! expected and what was received (`messages: expected array, received string`, `data.queryId: required`).

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Checked, Invalid};

/// Reads a request body as a `T`; every body of this API is a JSON object.
pub fn from_body<T: DeserializeOwned>(value: &Value) -> Checked<T> {
    if !value.is_object() {
        return Err(Invalid(format!("body: expected object, received {}", json_type(value))));
    }
    from_value(value)
}

/// Reads `value` as a `T`. When it does not fit, the message names the field and says what was expected
/// and what was received: `ttl_seconds: expected integer, received string`, `data.queryId: required`.
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Checked<T> {
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
        Invalid(format!("{path}: {message}"))
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

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[expect(dead_code, reason = "deserialised only to test the error messages; its fields are never read")]
    struct Body {
        conversation_id: String,
        messages: Vec<Value>,
        ttl_seconds: Option<i64>,
        data: Option<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[expect(
        dead_code,
        reason = "deserialised only to test the error messages, as part of `Body`; its fields are never read"
    )]
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
