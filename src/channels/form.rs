//! A typed question's form as the channels show it: its fields in order, each with its label, kind, bounds,
//! choices and default, read from the question's checked `responseSchema` — one description that Slack's
//! inputs and GitHub's reply syntax are both drawn from.

use rmcp::model::{PrimitiveSchemaDefinition, StringFormat};
use serde_json::{Value, json};

use crate::questions::form::{self, ResponseSchema};

/// One field of a form.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The property's name (the key of the answer's object).
    pub name: String,
    /// What a person reads: its `title`, else its name.
    pub label: String,
    /// Its `description`, if any.
    pub description: Option<String>,
    /// Whether it must be answered (required and without a default).
    pub required: bool,
    /// Its `default`, as JSON.
    pub default: Option<Value>,
    pub kind: Kind,
}

/// What a field takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// Free text, `min` to `max` characters, maybe of a `format` (`email`, `uri`, `date`, `date-time`).
    Text { min: Option<u32>, max: Option<u32>, format: Option<&'static str> },
    /// A number (`integer`: whole) within bounds.
    Number { integer: bool, min: Option<f64>, max: Option<f64> },
    /// True or false.
    Boolean,
    /// One of `choices` (value, title).
    Choice { choices: Vec<(String, String)> },
    /// Several of `choices` (value, title), `min` to `max` of them.
    Choices { choices: Vec<(String, String)>, min: Option<u64>, max: Option<u64> },
}

/// A typed question's fields, in the order the asker wrote them.
#[derive(Debug, Clone, PartialEq)]
pub struct Form {
    pub fields: Vec<Field>,
}

impl Form {
    /// The form of a question's `responseSchema` (`None` for a text question, or a schema that no longer
    /// reads, which the broker never stores).
    pub fn of(raw: Option<&Value>) -> Option<Form> {
        let raw = raw?;
        let schema = ResponseSchema::parse(raw).ok()?;
        let fields = schema
            .fields()
            .map(|(name, property)| {
                let raw_property = &raw["properties"][name];
                let default = raw_property.get("default").filter(|d| !d.is_null()).cloned();
                Field {
                    name: name.to_owned(),
                    label: form::title_of(property)
                        .filter(|title| !title.trim().is_empty())
                        .unwrap_or_else(|| name.to_owned()),
                    description: raw_property["description"].as_str().map(str::to_owned),
                    required: schema.is_required(name) && default.is_none(),
                    default,
                    kind: kind_of(property, raw_property),
                }
            })
            .collect();
        Some(Form { fields })
    }

    /// The field an answer's error names (`response.<name>: …`), by its index.
    pub fn field_named_in(&self, error: &str) -> Option<usize> {
        let named = error.strip_prefix("response.")?;
        // The longest name that fits, so `a.b` wins over `a` when both are fields.
        self.fields
            .iter()
            .enumerate()
            .filter(|(_, field)| named.strip_prefix(field.name.as_str()).is_some_and(|rest| rest.starts_with(':')))
            .max_by_key(|(_, field)| field.name.len())
            .map(|(index, _)| index)
    }

    /// An answer to show as an example: each field's default, else a value of its kind.
    pub fn example(&self) -> Value {
        let fields = self.fields.iter().map(|field| {
            let value = field.default.clone().unwrap_or_else(|| match &field.kind {
                Kind::Text { format, .. } => json!(match format {
                    Some("email") => "name@example.com",
                    Some("uri") => "https://example.com",
                    Some("date") => "2026-01-31",
                    Some("date-time") => "2026-01-31T12:00:00Z",
                    _ => "some text",
                }),
                Kind::Number { integer: true, min, max } => json!(min.or(*max).map_or(1, |n| n as i64)),
                Kind::Number { integer: false, min, max } => json!(min.or(*max).unwrap_or(1.5)),
                Kind::Boolean => json!(true),
                Kind::Choice { choices } => json!(choices[0].0),
                Kind::Choices { choices, .. } => json!([choices[0].0]),
            });
            (field.name.clone(), value)
        });
        Value::Object(fields.collect())
    }
}

impl Field {
    /// The field in a few words: its kind, bounds, choices and default (Markdown with inline code).
    pub fn summary(&self) -> String {
        let code = |value: &str| format!("`{}`", value.replace('`', "'"));
        let choice = |(value, title): &(String, String)| match value == title {
            true => code(value),
            false => format!("{} ({title})", code(value)),
        };
        let mut words = match &self.kind {
            Kind::Text { min, max, format } => {
                let mut text = match format {
                    Some(format) => format!("text, {format}"),
                    None => "text".to_owned(),
                };
                text.push_str(&range(min.map(f64::from), max.map(f64::from), "characters"));
                text
            }
            Kind::Number { integer, min, max } => {
                let kind = if *integer { "integer" } else { "number" };
                format!("{kind}{}", range(*min, *max, ""))
            }
            Kind::Boolean => "`true` or `false`".to_owned(),
            Kind::Choice { choices } => {
                format!("one of {}", choices.iter().map(choice).collect::<Vec<_>>().join(", "))
            }
            Kind::Choices { choices, min, max } => format!(
                "a list of {}{}",
                choices.iter().map(choice).collect::<Vec<_>>().join(", "),
                range(min.map(|n| n as f64), max.map(|n| n as f64), "of them")
            ),
        };
        if self.required {
            words.push_str(", required");
        }
        if let Some(default) = &self.default {
            words.push_str(&format!(", default {}", code(&default.to_string())));
        }
        words
    }
}

/// `, 1 to 10 characters`, `, at least 2`, or nothing.
fn range(min: Option<f64>, max: Option<f64>, unit: &str) -> String {
    let unit = if unit.is_empty() { String::new() } else { format!(" {unit}") };
    match (min, max) {
        (Some(min), Some(max)) => format!(", {min} to {max}{unit}"),
        (Some(min), None) => format!(", at least {min}{unit}"),
        (None, Some(max)) => format!(", at most {max}{unit}"),
        (None, None) => String::new(),
    }
}

fn kind_of(property: &PrimitiveSchemaDefinition, raw: &Value) -> Kind {
    if let Some(choices) = form::choices(property) {
        // A choice is shown by its title; one without (or an empty one) by its value, and an empty value
        // as such, since Slack refuses an empty label.
        let shown = |(value, title): (String, String)| {
            let title = match (title.trim().is_empty(), value.trim().is_empty()) {
                (false, _) => title,
                (true, false) => value.clone(),
                (true, true) => "(empty)".to_owned(),
            };
            (value, title)
        };
        let choices: Vec<(String, String)> = choices.into_iter().map(shown).collect();
        return match form::is_multi_select(property) {
            true => Kind::Choices { choices, min: raw["minItems"].as_u64(), max: raw["maxItems"].as_u64() },
            false => Kind::Choice { choices },
        };
    }
    match property {
        PrimitiveSchemaDefinition::String(s) => Kind::Text {
            min: s.min_length.filter(|min| *min > 0),
            max: s.max_length,
            format: s.format.map(|format| match format {
                StringFormat::Email => "email",
                StringFormat::Uri => "uri",
                StringFormat::Date => "date",
                StringFormat::DateTime => "date-time",
                _ => "text",
            }),
        },
        PrimitiveSchemaDefinition::Number(s) => Kind::Number { integer: false, min: s.minimum, max: s.maximum },
        PrimitiveSchemaDefinition::Integer(s) => {
            Kind::Number { integer: true, min: s.minimum.map(|m| m as f64), max: s.maximum.map(|m| m as f64) }
        }
        // Booleans, and whatever a later schema version adds (the broker refuses those when asked).
        _ => Kind::Boolean,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form() -> Form {
        Form::of(Some(&json!({
            "type": "object",
            "properties": {
                "decision": {"type": "string", "title": "Decision",
                             "oneOf": [{"const": "approve", "title": "Approve"}, {"const": "reject", "title": "Reject"}]},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
                "regions": {"type": "array", "items": {"type": "string", "enum": ["eu", "us"]}, "maxItems": 2},
                "note": {"type": "string", "maxLength": 200, "description": "Anything else"},
                "notify": {"type": "boolean"}
            },
            "required": ["decision", "replicas"]
        })))
        .unwrap()
    }

    #[test]
    fn a_schema_reads_as_fields_with_their_kinds_and_defaults() {
        let form = form();
        let names: Vec<&str> = form.fields.iter().map(|f| f.name.as_str()).collect();
        // In the order the asker wrote them.
        assert_eq!(names, ["decision", "replicas", "regions", "note", "notify"]);
        let field = |name: &str| form.fields.iter().find(|f| f.name == name).unwrap();
        assert_eq!(field("decision").label, "Decision");
        assert!(field("decision").required && !field("replicas").required, "a default answers a required field");
        assert_eq!(field("replicas").kind, Kind::Number { integer: true, min: Some(1.0), max: Some(10.0) });
        assert_eq!(field("note").description.as_deref(), Some("Anything else"));
        assert_eq!(field("decision").summary(), "one of `approve` (Approve), `reject` (Reject), required");
        assert_eq!(field("replicas").summary(), "integer, 1 to 10, default `3`");
        assert_eq!(field("regions").summary(), "a list of `eu`, `us`, at most 2 of them");
        assert_eq!(field("note").summary(), "text, at most 200 characters");
        assert_eq!(field("notify").summary(), "`true` or `false`");
        assert_eq!(
            form.example(),
            json!({"decision": "approve", "replicas": 3, "regions": ["eu"], "note": "some text", "notify": true})
        );
        assert_eq!(Form::of(None), None);
        let blank = Form::of(Some(&json!({"type": "object", "properties": {"pick": {"type": "string", "title": " ",
            "oneOf": [{"const": "", "title": ""}, {"const": "b", "title": " "}]}}})))
        .unwrap();
        assert_eq!(blank.fields[0].label, "pick", "an empty title shows the name");
        let shown = vec![(String::new(), "(empty)".to_owned()), ("b".to_owned(), "b".to_owned())];
        assert_eq!(blank.fields[0].kind, Kind::Choice { choices: shown }, "Slack refuses an empty label");
    }

    #[test]
    fn an_error_is_traced_to_the_field_it_names() {
        let form = form();
        assert_eq!(form.field_named_in("response.replicas: must be between 1 and 10, got 0"), Some(1));
        assert_eq!(form.field_named_in("response.note: must be 0 to 200 characters, got 300"), Some(3));
        assert_eq!(form.field_named_in("response: expected an object"), None);
        assert_eq!(form.field_named_in("response.colour: not a field of this question"), None);
    }
}
