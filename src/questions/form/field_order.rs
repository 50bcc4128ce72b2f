//! The order of a typed question's fields as the asker wrote them: `jsonb` keeps an object's keys in an
//! order of its own, so the property names are stored beside the schema (`response_fields`) and put back in
//! order when the question is read; forms (the page, Slack, GitHub, MCP clients) show the fields so.

use serde_json::{Map, Value};

/// The field names of `schema`, in its order (the order the request gave them: serde_json keeps it).
pub fn of(schema: Option<&Value>) -> Option<Vec<String>> {
    Some(schema?.get("properties")?.as_object()?.keys().cloned().collect())
}

/// `schema` with its properties in `order`, as stored beside it; as it is without one (rows from before).
pub fn restored(mut schema: Value, order: Option<&[String]>) -> Value {
    let (Some(order), Some(properties)) = (order, schema.get_mut("properties").and_then(Value::as_object_mut)) else {
        return schema;
    };
    let mut ordered = Map::new();
    for name in order {
        if let Some(property) = properties.remove(name) {
            ordered.insert(name.clone(), property);
        }
    }
    ordered.append(properties);
    *properties = ordered;
    schema
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{of, restored};

    #[test]
    fn a_stored_schema_gets_its_fields_back_in_the_askers_order() {
        let asked: serde_json::Value =
            serde_json::from_str(r#"{"type": "object", "properties": {"zzz": {}, "a": {}, "mm": {}}}"#).unwrap();
        let order = of(Some(&asked)).unwrap();
        assert_eq!(order, ["zzz", "a", "mm"], "the request's order survives parsing");
        let stored = json!({"type": "object", "properties": {"a": {}, "mm": {}, "zzz": {}}});
        let schema = restored(stored.clone(), Some(&order));
        let names: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(names, ["zzz", "a", "mm"]);
        assert_eq!(restored(stored.clone(), None), stored, "rows from before the order was kept");
    }
}
