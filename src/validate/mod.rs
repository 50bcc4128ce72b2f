//! Input checks shared by every domain (keys that fit an index, JSON that Postgres will store, JSON of
//! the right [`shape`]) and [`Invalid`], the domain error every model's checks return; the HTTP layer maps
//! it in one place.

pub mod shape;

use serde_json::Value;

/// A value that breaks a rule of its domain; the message starts with the field. A REST route answers it with
/// 400 `VALIDATION_ERROR`, an MCP tool with invalid params.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

/// What a domain check returns.
pub type Checked<T = ()> = Result<T, Invalid>;

/// Longest id (conversation, query, stream) accepted. Postgres' b-tree entries top out near 2.7 kB; Kubernetes
/// names are at most 253 bytes.
pub const MAX_KEY_BYTES: usize = 512;

/// Checks an id used as a key: non-empty, at most [`MAX_KEY_BYTES`], no NUL.
pub fn key(field: &str, value: &str) -> Checked {
    if value.is_empty() {
        return Err(Invalid(format!("{field}: must not be empty")));
    }
    if value.len() > MAX_KEY_BYTES {
        return Err(Invalid(format!("{field}: must be at most {MAX_KEY_BYTES} bytes")));
    }
    if value.contains('\0') {
        return Err(Invalid(format!("{field}: must not contain NUL")));
    }
    Ok(())
}

/// Whether any string in `value` (key or value) holds U+0000, which `jsonb` cannot store.
pub fn contains_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(contains_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || contains_nul(v)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nul_is_found_anywhere() {
        assert!(contains_nul(&json!({"a": ["x", "y\u{0}"]})));
        assert!(contains_nul(&json!({"k\u{0}": 1})));
        assert!(!contains_nul(&json!({"a": ["x", 1, null, {"b": "c"}]})));
    }

    #[test]
    fn keys_must_fit_an_index() {
        assert!(key("id", "q1").is_ok());
        assert!(key("id", "").is_err());
        assert!(key("id", &"x".repeat(MAX_KEY_BYTES + 1)).is_err());
    }
}
