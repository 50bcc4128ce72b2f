//! A typed question's form: `responseSchema`, MCP elicitation's restricted JSON Schema (a flat object of
//! strings, numbers, integers, booleans and single- or multi-select enums; rmcp's `ElicitationSchema` reads
//! it), and the check of an answer against it. An answer is an object whose fields match their properties;
//! a field it leaves out takes its default, and a required field without a default must be there.

pub mod field_order;
mod keywords;

use rmcp::model::{
    ElicitationSchema, EnumSchema, MultiSelectEnumSchema, PrimitiveSchemaDefinition, SingleSelectEnumSchema,
    StringFormat,
};
use serde_json::{Map, Value};

use crate::validate::{Checked, Invalid};

/// Most fields one form has.
const MAX_FIELDS: usize = 20;
/// Longest stored schema, in bytes of JSON.
const MAX_SCHEMA_BYTES: usize = 16 * 1024;
/// Longest string answer, in characters, when the schema sets no `maxLength`.
const MAX_STRING_CHARS: usize = 10_000;

/// A checked `responseSchema`.
#[derive(Debug, Clone)]
pub struct ResponseSchema(ElicitationSchema);

impl ResponseSchema {
    /// Reads and checks a `responseSchema`: the restricted shape, required fields that exist, enums with
    /// choices, and defaults their own fields accept.
    pub fn parse(raw: &Value) -> Result<Self, Invalid> {
        let invalid = |why: String| Invalid(format!("responseSchema: {why}"));
        if raw.to_string().len() > MAX_SCHEMA_BYTES {
            return Err(invalid(format!("at most {MAX_SCHEMA_BYTES} bytes of JSON")));
        }
        keywords::check(raw)?;
        let schema: ElicitationSchema = serde_json::from_value(raw.clone()).map_err(|_| {
            invalid(
                "must be an object schema whose properties are strings, numbers, integers, booleans or enums \
                 (MCP elicitation's form schema)"
                    .into(),
            )
        })?;
        if schema.properties.is_empty() || schema.properties.len() > MAX_FIELDS {
            return Err(invalid(format!("must have 1 to {MAX_FIELDS} properties")));
        }
        for name in schema.required.iter().flatten() {
            if !schema.properties.contains_key(name) {
                return Err(invalid(format!("required names '{name}', which is not a property")));
            }
        }
        for (name, property) in &schema.properties {
            if choices(property).is_some_and(|choices| choices.is_empty()) {
                return Err(invalid(format!("{name}: an enum needs at least one choice")));
            }
            if let Some(default) = default_of(property) {
                check_field(name, property, &default).map_err(|Invalid(why)| invalid(format!("default of {why}")))?;
            }
        }
        Ok(ResponseSchema(schema))
    }

    /// The schema as JSON, to store and show.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(&self.0).expect("a schema serialises")
    }

    /// The fields in the order the asker wrote them, for forms.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &PrimitiveSchemaDefinition)> {
        let order = self.0.property_order.clone().unwrap_or_else(|| self.0.properties.keys().cloned().collect());
        order.into_iter().filter_map(|name| self.0.properties.get_key_value(&name)).map(|(k, v)| (k.as_str(), v))
    }

    /// Whether `name` must be answered.
    pub fn is_required(&self, name: &str) -> bool {
        self.0.required.iter().flatten().any(|required| required == name)
    }

    /// Checks an answer: an object with only the schema's fields, each matching its property, every required
    /// one there (or defaulted). Returns the answer with the defaults of the fields it left out.
    pub fn check(&self, answer: &Value) -> Result<Value, Invalid> {
        let Value::Object(given) = answer else {
            return Err(Invalid("response: expected an object with the question's fields".into()));
        };
        if let Some(unknown) = given.keys().find(|name| !self.0.properties.contains_key(*name)) {
            return Err(Invalid(format!("response.{unknown}: not a field of this question")));
        }
        let mut answer = Map::new();
        for (name, property) in self.fields() {
            match given.get(name).filter(|value| !value.is_null()).cloned().or_else(|| default_of(property)) {
                Some(value) => {
                    check_field(name, property, &value).map_err(|Invalid(why)| Invalid(format!("response.{why}")))?;
                    answer.insert(name.to_owned(), value);
                }
                None if self.is_required(name) => return Err(Invalid(format!("response.{name}: required"))),
                None => {}
            }
        }
        Ok(Value::Object(answer))
    }

    /// The answer made of the defaults alone, if they answer every required field (for `onTimeout: default`).
    pub fn defaults(&self) -> Option<Value> {
        self.check(&Value::Object(Map::new())).ok()
    }
}

/// The choices of an enum property (`None` for other kinds).
pub fn choices(property: &PrimitiveSchemaDefinition) -> Option<Vec<(String, String)>> {
    let titled = |pairs: &[rmcp::model::ConstTitle]| {
        pairs.iter().map(|pair| (pair.const_.clone(), pair.title.clone())).collect::<Vec<_>>()
    };
    let untitled = |values: &[String]| values.iter().map(|value| (value.clone(), value.clone())).collect::<Vec<_>>();
    match property {
        PrimitiveSchemaDefinition::Enum(schema) => Some(match schema {
            EnumSchema::Single(SingleSelectEnumSchema::Untitled(s)) => untitled(&s.enum_),
            EnumSchema::Single(SingleSelectEnumSchema::Titled(s)) => titled(&s.one_of),
            EnumSchema::Multi(MultiSelectEnumSchema::Untitled(s)) => untitled(&s.items.enum_),
            EnumSchema::Multi(MultiSelectEnumSchema::Titled(s)) => titled(&s.items.any_of),
            EnumSchema::Legacy(s) => match &s.enum_names {
                Some(names) if names.len() == s.enum_.len() => {
                    s.enum_.iter().cloned().zip(names.iter().cloned()).collect()
                }
                _ => untitled(&s.enum_),
            },
            _ => Vec::new(),
        }),
        _ => None,
    }
}

/// Whether an enum property takes several choices.
pub fn is_multi_select(property: &PrimitiveSchemaDefinition) -> bool {
    matches!(property, PrimitiveSchemaDefinition::Enum(EnumSchema::Multi(_)))
}

/// The `title` a form shows for a property, if it has one.
pub fn title_of(property: &PrimitiveSchemaDefinition) -> Option<String> {
    let title = match property {
        PrimitiveSchemaDefinition::String(s) => s.title.clone(),
        PrimitiveSchemaDefinition::Number(s) => s.title.clone(),
        PrimitiveSchemaDefinition::Integer(s) => s.title.clone(),
        PrimitiveSchemaDefinition::Boolean(s) => s.title.clone(),
        PrimitiveSchemaDefinition::Enum(EnumSchema::Single(SingleSelectEnumSchema::Untitled(s))) => s.title.clone(),
        PrimitiveSchemaDefinition::Enum(EnumSchema::Single(SingleSelectEnumSchema::Titled(s))) => s.title.clone(),
        PrimitiveSchemaDefinition::Enum(EnumSchema::Multi(MultiSelectEnumSchema::Untitled(s))) => s.title.clone(),
        PrimitiveSchemaDefinition::Enum(EnumSchema::Multi(MultiSelectEnumSchema::Titled(s))) => s.title.clone(),
        PrimitiveSchemaDefinition::Enum(EnumSchema::Legacy(s)) => s.title.clone(),
        _ => None,
    };
    title.map(|title| title.into_owned())
}

/// A property's `default`, as JSON.
fn default_of(property: &PrimitiveSchemaDefinition) -> Option<Value> {
    match property {
        PrimitiveSchemaDefinition::String(s) => s.default.clone().map(Value::from),
        PrimitiveSchemaDefinition::Number(s) => s.default.map(Value::from),
        PrimitiveSchemaDefinition::Integer(s) => s.default.map(Value::from),
        PrimitiveSchemaDefinition::Boolean(s) => s.default.map(Value::from),
        PrimitiveSchemaDefinition::Enum(EnumSchema::Single(SingleSelectEnumSchema::Untitled(s))) => {
            s.default.clone().map(Value::from)
        }
        PrimitiveSchemaDefinition::Enum(EnumSchema::Single(SingleSelectEnumSchema::Titled(s))) => {
            s.default.clone().map(Value::from)
        }
        PrimitiveSchemaDefinition::Enum(EnumSchema::Multi(MultiSelectEnumSchema::Untitled(s))) => {
            s.default.clone().map(Value::from)
        }
        PrimitiveSchemaDefinition::Enum(EnumSchema::Multi(MultiSelectEnumSchema::Titled(s))) => {
            s.default.clone().map(Value::from)
        }
        PrimitiveSchemaDefinition::Enum(EnumSchema::Legacy(s)) => s.default.clone().map(Value::from),
        _ => None,
    }
}

/// Checks one field's value; the error names the field.
fn check_field(name: &str, property: &PrimitiveSchemaDefinition, value: &Value) -> Checked {
    let invalid = |why: String| Err(Invalid(format!("{name}: {why}")));
    match property {
        PrimitiveSchemaDefinition::String(s) => {
            let Some(text) = value.as_str() else { return invalid("expected a string".into()) };
            let chars = text.chars().count();
            let (min, max) =
                (s.min_length.unwrap_or(0) as usize, s.max_length.map_or(MAX_STRING_CHARS, |m| m as usize));
            if chars < min || chars > max {
                return invalid(format!("must be {min} to {max} characters, got {chars}"));
            }
            if text.contains('\0') {
                return invalid("must not contain NUL".into());
            }
            match s.format {
                Some(format) if !matches_format(format, text) => {
                    invalid(format!("not a valid {}", format_name(format)))
                }
                _ => Ok(()),
            }
        }
        PrimitiveSchemaDefinition::Number(s) => {
            let Some(number) = value.as_f64() else { return invalid("expected a number".into()) };
            in_bounds(name, number, s.minimum, s.maximum)
        }
        PrimitiveSchemaDefinition::Integer(s) => {
            // `2.0` is an integer too, as JSON Schema counts them.
            let whole = value.as_f64().filter(|n| n.fract() == 0.0 && n.abs() < 9.0e15).map(|n| n as i64);
            let Some(number) = value.as_i64().or(whole) else { return invalid("expected an integer".into()) };
            in_bounds(name, number as f64, s.minimum.map(|m| m as f64), s.maximum.map(|m| m as f64))
        }
        PrimitiveSchemaDefinition::Boolean(_) => {
            if value.is_boolean() {
                Ok(())
            } else {
                invalid("expected true or false".into())
            }
        }
        PrimitiveSchemaDefinition::Enum(schema) => {
            let allowed = choices(property).unwrap_or_default();
            let allowed = |choice: &str| allowed.iter().any(|(value, _)| value == choice);
            let list =
                || choices(property).unwrap_or_default().into_iter().map(|(v, _)| v).collect::<Vec<_>>().join("', '");
            match schema {
                EnumSchema::Multi(multi) => {
                    let Some(picked) = value.as_array() else { return invalid("expected a list of choices".into()) };
                    let (min, max) = match multi {
                        MultiSelectEnumSchema::Untitled(s) => (s.min_items, s.max_items),
                        MultiSelectEnumSchema::Titled(s) => (s.min_items, s.max_items),
                        _ => (None, None),
                    };
                    for (at, choice) in picked.iter().enumerate() {
                        if !choice.as_str().is_some_and(allowed) {
                            return invalid(format!("each choice must be one of '{}', got {choice}", list()));
                        }
                        if picked[..at].contains(choice) {
                            return invalid(format!("{choice} is chosen twice"));
                        }
                    }
                    let count = picked.len() as u64;
                    if min.is_some_and(|min| count < min) || max.is_some_and(|max| count > max) {
                        return invalid(format!(
                            "choose {} to {}, got {count}",
                            min.unwrap_or(0),
                            max.map_or("any number".to_owned(), |max| max.to_string())
                        ));
                    }
                    Ok(())
                }
                _ => match value.as_str() {
                    Some(choice) if allowed(choice) => Ok(()),
                    _ => invalid(format!("must be one of '{}', got {value}", list())),
                },
            }
        }
        _ => invalid("this kind of field is not supported".into()),
    }
}

fn in_bounds(name: &str, number: f64, minimum: Option<f64>, maximum: Option<f64>) -> Checked {
    if minimum.is_some_and(|min| number < min) || maximum.is_some_and(|max| number > max) {
        let bound = |b: Option<f64>, none: &str| b.map_or(none.to_owned(), |b| b.to_string());
        return Err(Invalid(format!(
            "{name}: must be between {} and {}, got {number}",
            bound(minimum, "-∞"),
            bound(maximum, "∞")
        )));
    }
    Ok(())
}

fn format_name(format: StringFormat) -> &'static str {
    match format {
        StringFormat::Email => "email address",
        StringFormat::Uri => "URI",
        StringFormat::Date => "date (YYYY-MM-DD)",
        StringFormat::DateTime => "date-time (RFC 3339)",
        _ => "value",
    }
}

fn matches_format(format: StringFormat, text: &str) -> bool {
    match format {
        StringFormat::Email => text.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty() && domain.contains('.') && !text.chars().any(char::is_whitespace)
        }),
        StringFormat::Uri => reqwest::Url::parse(text).is_ok(),
        StringFormat::Date => chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok(),
        StringFormat::DateTime => chrono::DateTime::parse_from_rfc3339(text).is_ok(),
        _ => true,
    }
}

#[cfg(test)]
mod tests;
