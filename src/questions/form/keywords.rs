//! The keywords a `responseSchema` may use — MCP elicitation's form schema and nothing more — checked before
//! it is read, so a keyword the broker would not enforce (`pattern`, `multipleOf`, …) is refused by name
//! instead of being ignored, and bounds no answer could meet are refused too.

use serde_json::{Map, Value};

use crate::validate::{Checked, Invalid};

const TOP: &[&str] = &["$schema", "type", "title", "description", "properties", "required"];
const STRING: &[&str] =
    &["type", "title", "description", "minLength", "maxLength", "format", "default", "enum", "enumNames", "oneOf"];
const NUMBER: &[&str] = &["type", "title", "description", "minimum", "maximum", "default"];
const BOOLEAN: &[&str] = &["type", "title", "description", "default"];
const ARRAY: &[&str] = &["type", "title", "description", "minItems", "maxItems", "items", "default"];
const FORMATS: &[&str] = &["email", "uri", "date", "date-time"];

fn invalid(why: String) -> Invalid {
    Invalid(format!("responseSchema: {why}"))
}

/// Checks that `raw` uses only the form schema's keywords, each property of a kind it has, with bounds an
/// answer can meet.
pub fn check(raw: &Value) -> Checked {
    let Some(schema) = raw.as_object() else { return Err(invalid("must be a JSON object".into())) };
    only(schema, TOP, "")?;
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(invalid("`type` must be \"object\"".into()));
    }
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Err(invalid("`properties` must be an object of fields".into()));
    };
    for (name, property) in properties {
        if name.trim().is_empty() {
            return Err(invalid("a field needs a name".into()));
        }
        let Some(property) = property.as_object() else { return Err(invalid(format!("{name}: must be an object"))) };
        field(name, property)?;
    }
    Ok(())
}

fn field(name: &str, property: &Map<String, Value>) -> Checked {
    match property.get("type").and_then(Value::as_str) {
        Some("string") => {
            only(property, STRING, name)?;
            if let Some(format) = property.get("format")
                && !format.as_str().is_some_and(|format| FORMATS.contains(&format))
            {
                return Err(invalid(format!("{name}: `format` {format} is not one of email, uri, date, date-time")));
            }
            if let (Some(Value::Array(values)), Some(Value::Array(names))) =
                (property.get("enum"), property.get("enumNames"))
                && values.len() != names.len()
            {
                return Err(invalid(format!(
                    "{name}: `enumNames` must name each of the {} `enum` values",
                    values.len()
                )));
            }
            ordered(name, property, "minLength", "maxLength")
        }
        Some("number" | "integer") => {
            only(property, NUMBER, name)?;
            ordered(name, property, "minimum", "maximum")
        }
        Some("boolean") => only(property, BOOLEAN, name),
        Some("array") => {
            only(property, ARRAY, name)?;
            let Some(items) = property.get("items").and_then(Value::as_object) else {
                return Err(invalid(format!("{name}: a list needs `items` with its choices (`enum` or `anyOf`)")));
            };
            let allowed: &[&str] = if items.contains_key("anyOf") { &["anyOf"] } else { &["type", "enum"] };
            only(items, allowed, &format!("{name}.items"))?;
            ordered(name, property, "minItems", "maxItems")
        }
        Some(other) => Err(invalid(format!(
            "{name}: type `{other}` is not supported (string, number, integer, boolean, or a list of choices)"
        ))),
        None => Err(invalid(format!("{name}: needs a `type`"))),
    }
}

/// Refuses any key of `object` not in `allowed`, naming it.
fn only(object: &Map<String, Value>, allowed: &[&str], at: &str) -> Checked {
    match object.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => {
            let at = if at.is_empty() { String::new() } else { format!("{at}: ") };
            Err(invalid(format!("{at}`{key}` is not supported here (only {})", allowed.join(", "))))
        }
        None => Ok(()),
    }
}

/// Refuses a lower bound above its upper bound.
fn ordered(name: &str, property: &Map<String, Value>, low: &str, high: &str) -> Checked {
    let bound = |key: &str| property.get(key).and_then(Value::as_f64);
    match (bound(low), bound(high)) {
        (Some(min), Some(max)) if min > max => {
            Err(invalid(format!("{name}: `{low}` {min} is above `{high}` {max}, so no answer could fit")))
        }
        _ => Ok(()),
    }
}
