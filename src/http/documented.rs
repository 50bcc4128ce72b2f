//! What the OpenAPI document says a request body holds, for the tests that hold a body read by hand (from a
//! `serde_json::Value`, field by field) to its documented schema: each such test lists the fields its parser
//! reads and checks them here against the document a domain's router registers.

use std::collections::BTreeSet;

use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;

/// The document `router` registers (its operations and the schemas they name), as JSON.
pub fn document_of<S: Clone + Send + Sync + 'static>(router: OpenApiRouter<S>) -> Value {
    serde_json::to_value(router.into_openapi()).expect("the OpenAPI document serialises")
}

/// The schema of the `content_type` request body of `method path` in `document`.
pub fn request_body<'a>(document: &'a Value, method: &str, path: &str, content_type: &str) -> &'a Value {
    let body = &document["paths"][path][method]["requestBody"]["content"][content_type]["schema"];
    assert!(body.is_object(), "no {content_type} request body documented for {method} {path}");
    body
}

/// Fails, naming each, where a field `reads` lists is not a property of `schema` (in `document`) of the same
/// JSON type. A field is a path: `comment.user.login`, with `[]` for an array's items
/// (`resourceSpans[].scopeSpans`); its type is a JSON Schema type, or `any` where the parser takes every
/// value (and the document names no type). `null` beside the type is allowed: the parsers read null as absent.
pub fn assert_documented(document: &Value, schema: &Value, reads: &[(&str, &str)]) {
    let wrong: Vec<String> = reads
        .iter()
        .filter_map(|&(path, wanted)| {
            let types = match property(document, schema, path) {
                Some(property) => types(document, property),
                None => return Some(format!("{path}: not in the document")),
            };
            let named: BTreeSet<&str> = types.iter().map(String::as_str).filter(|t| *t != "null").collect();
            let fits = if wanted == "any" { types.is_empty() } else { named == BTreeSet::from([wanted]) };
            (!fits).then(|| format!("{path}: read as {wanted}, documented as {types:?}"))
        })
        .collect();
    assert!(wrong.is_empty(), "fields read by hand that the document does not describe alike:\n{}", wrong.join("\n"));
}

/// The schema of the property at `path` under `schema`.
pub fn property<'a>(document: &'a Value, schema: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(schema, |schema, step| {
        let (name, items) = match step.strip_suffix("[]") {
            Some(name) => (name, true),
            None => (step, false),
        };
        let found = alternatives(document, schema).into_iter().find_map(|s| s["properties"].get(name))?;
        match items {
            true => alternatives(document, found).into_iter().find_map(|s| s.get("items")),
            false => Some(found),
        }
    })
}

/// The JSON types `schema` allows (`null` among them for an optional one); none for any value.
fn types(document: &Value, schema: &Value) -> BTreeSet<String> {
    let schema = resolve(document, schema);
    let mut types: BTreeSet<String> = match &schema["type"] {
        Value::String(name) => BTreeSet::from([name.clone()]),
        Value::Array(names) => names.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => BTreeSet::new(),
    };
    for part in ["oneOf", "anyOf", "allOf"] {
        for alternative in schema[part].as_array().into_iter().flatten() {
            types.extend(self::types(document, alternative));
        }
    }
    types
}

/// `schema` and, for a choice (`oneOf`/`anyOf`) or a combination (`allOf`), its parts: where properties are.
fn alternatives<'a>(document: &'a Value, schema: &'a Value) -> Vec<&'a Value> {
    let schema = resolve(document, schema);
    let parts = ["oneOf", "anyOf", "allOf"].iter().filter_map(|part| schema[*part].as_array()).flatten();
    std::iter::once(schema).chain(parts.flat_map(|part| alternatives(document, part))).collect()
}

/// Follows a `$ref` to a component of `document`.
pub fn resolve<'a>(document: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/schemas/")) {
        Some(name) => resolve(document, &document["components"]["schemas"][name]),
        None => schema,
    }
}

mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_field_read_is_matched_by_name_type_and_place() {
        let document = json!({"components": {"schemas": {
            "Inner": {"type": "object", "properties": {"n": {"type": ["integer", "null"]}, "v": {}}}}}});
        let schema = json!({"allOf": [{"type": "object", "properties": {
            "inner": {"oneOf": [{"$ref": "#/components/schemas/Inner"}, {"type": "null"}]},
            "list": {"type": "array", "items": {"$ref": "#/components/schemas/Inner"}}}}]});
        assert_documented(&document, &schema, &[("inner", "object"), ("inner.n", "integer"), ("list[].v", "any")]);
        for wrong in [("inner.m", "integer"), ("inner.n", "string"), ("inner.v", "string"), ("list.n", "integer")] {
            let refused = std::panic::catch_unwind(|| assert_documented(&document, &schema, &[wrong]));
            assert!(refused.is_err(), "{wrong:?} passed");
        }
    }
}
