//! A typed form's post turned into the answer REST would send: the object of the question's fields, numbers
//! as numbers, a ticked box as `true` and an unticked one as `false`, the ticked choices of a multi-select as
//! a list, an empty input left out (so its default applies, or `required` is refused by name). Whether the
//! answer fits is then the question's form's check, the same as for REST.

use rmcp::model::PrimitiveSchemaDefinition;
use serde_json::{Map, Value};

use super::answer_form::{FIELD_PREFIX, TYPED_MARKER};
use crate::questions::form::{self, ResponseSchema};

/// A form's fields as posted, in order (a name repeats for ticked checkboxes).
pub type Pairs = [(String, String)];

/// Whether the post came from a typed form (rather than a text box, which the question takes as text).
pub fn is_typed(pairs: &Pairs) -> bool {
    pairs.iter().any(|(name, _)| name == TYPED_MARKER || name.starts_with(FIELD_PREFIX))
}

/// The answer object of `pairs` for `schema`. A posted field the schema does not have is passed on as text,
/// for the check to refuse by name.
pub fn answer(schema: &ResponseSchema, pairs: &Pairs) -> Value {
    let mut answer = Map::new();
    let mut known = Vec::new();
    for (name, property) in schema.fields() {
        let input = format!("{FIELD_PREFIX}{name}");
        let values: Vec<&str> = pairs.iter().filter(|(n, _)| *n == input).map(|(_, v)| v.as_str()).collect();
        known.push(input);
        if form::is_multi_select(property) {
            answer.insert(name.to_owned(), values.iter().map(|v| Value::from(*v)).collect());
            continue;
        }
        if let PrimitiveSchemaDefinition::Boolean(_) = property {
            answer.insert(name.to_owned(), Value::Bool(values.iter().any(|v| matches!(*v, "true" | "on"))));
            continue;
        }
        let Some(value) = values.last().map(|v| v.trim()).filter(|v| !v.is_empty()) else { continue };
        answer.insert(name.to_owned(), typed(property, value));
    }
    for (name, value) in pairs {
        if let Some(field) = name.strip_prefix(FIELD_PREFIX)
            && !known.contains(name)
        {
            answer.insert(field.to_owned(), Value::from(value.as_str()));
        }
    }
    Value::Object(answer)
}

/// One input's text as its field's JSON; what does not read as its kind stays text, which the check refuses
/// naming the field ("expected a number").
fn typed(property: &PrimitiveSchemaDefinition, value: &str) -> Value {
    match property {
        PrimitiveSchemaDefinition::Number(_) | PrimitiveSchemaDefinition::Integer(_) => {
            if let Ok(whole) = value.parse::<i64>() {
                return Value::from(whole);
            }
            value.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map_or_else(|| value.into(), Value::Number)
        }
        PrimitiveSchemaDefinition::String(s) if s.format == Some(rmcp::model::StringFormat::DateTime) => {
            Value::from(date_time(value))
        }
        _ => Value::from(value),
    }
}

/// A `datetime-local` input's value (no offset, maybe no seconds) read as UTC, in RFC 3339; anything else as
/// it is.
fn date_time(value: &str) -> String {
    if chrono::DateTime::parse_from_rfc3339(value).is_ok() {
        return value.to_owned();
    }
    ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"]
        .iter()
        .find_map(|format| chrono::NaiveDateTime::parse_from_str(value, format).ok())
        .map_or_else(|| value.to_owned(), |at| at.and_utc().format("%Y-%m-%dT%H:%M:%SZ").to_string())
}

/// The posted fields as `field: value` lines (a list as JSON), for the error page to offer again when the
/// answer could not be stored (the question, and so its form, could not be read then).
pub fn as_lines(pairs: &Pairs) -> String {
    let mut lines: Vec<(String, Vec<&str>)> = Vec::new();
    for (name, value) in pairs {
        let Some(field) = name.strip_prefix(FIELD_PREFIX) else { continue };
        match lines.iter_mut().find(|(n, _)| n == field) {
            Some((_, values)) => values.push(value),
            None => lines.push((field.to_owned(), vec![value])),
        }
    }
    lines
        .into_iter()
        .filter(|(_, values)| values.iter().any(|v| !v.trim().is_empty()))
        .map(|(name, values)| match values.as_slice() {
            [one] => format!("{name}: {one}"),
            many => format!("{name}: {}", Value::from(many.to_vec())),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn a_typed_post_becomes_the_object_rest_would_send() {
        let schema = ResponseSchema::parse(&json!({"type": "object", "properties": {
            "decision": {"type": "string", "enum": ["approve", "reject"]},
            "replicas": {"type": "integer"},
            "ratio": {"type": "number"},
            "notify": {"type": "boolean"},
            "urgent": {"type": "boolean", "default": true},
            "regions": {"type": "array", "items": {"type": "string", "enum": ["eu", "us", "ap"]}},
            "zones": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            "note": {"type": "string"},
            "at": {"type": "string", "format": "date-time"}
        }}))
        .unwrap();
        let posted = pairs(&[
            ("typed", "1"),
            ("back", "/ui"),
            ("field.decision", "approve"),
            ("field.replicas", "3"),
            ("field.ratio", "0.5"),
            ("field.notify", "true"),
            ("field.regions", "eu"),
            ("field.regions", "ap"),
            ("field.note", "  "),
            ("field.at", "2026-03-01T09:30"),
        ]);
        assert!(is_typed(&posted));
        assert_eq!(
            answer(&schema, &posted),
            json!({"decision": "approve", "replicas": 3, "ratio": 0.5, "notify": true, "urgent": false,
                   "regions": ["eu", "ap"], "zones": [], "at": "2026-03-01T09:30:00Z"})
        );
        let odd = answer(&schema, &pairs(&[("field.replicas", "three"), ("field.colour", "red")]));
        assert_eq!((odd["replicas"].as_str(), odd["colour"].as_str()), (Some("three"), Some("red")));
        assert!(!is_typed(&pairs(&[("response", "yes"), ("answeredBy", "dave")])));
    }

    #[test]
    fn an_unsent_typed_post_comes_back_as_field_lines() {
        let posted = pairs(&[("typed", "1"), ("field.a", "x"), ("field.r", "eu"), ("field.r", "us"), ("field.e", "")]);
        assert_eq!(as_lines(&posted), "a: x\nr: [\"eu\",\"us\"]");
    }
}
