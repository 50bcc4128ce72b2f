//! A typed question's form: which schemas are accepted, and which answers.

use serde_json::json;

use super::ResponseSchema;

fn deploy_form() -> ResponseSchema {
    ResponseSchema::parse(&json!({
        "type": "object",
        "properties": {
            "decision": {"type": "string", "oneOf": [{"const": "approve", "title": "Approve"}, {"const": "reject", "title": "Reject"}]},
            "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
            "reason": {"type": "string", "maxLength": 20},
            "notify": {"type": "boolean", "default": false},
            "regions": {"type": "array", "items": {"type": "string", "enum": ["eu", "us", "ap"]}, "maxItems": 2},
            "contact": {"type": "string", "format": "email"}
        },
        "required": ["decision", "replicas"]
    }))
    .expect("a valid form")
}

#[test]
fn an_answer_matching_the_form_is_kept_with_the_defaults_of_the_fields_it_left_out() {
    let answer = deploy_form().check(&json!({"decision": "approve", "regions": ["eu"]})).unwrap();
    assert_eq!(answer, json!({"decision": "approve", "replicas": 3, "notify": false, "regions": ["eu"]}));
}

#[test]
fn an_answer_that_does_not_match_names_the_field() {
    let form = deploy_form();
    let refused = |answer: serde_json::Value| form.check(&answer).unwrap_err().0;
    assert_eq!(refused(json!({"replicas": 2})), "response.decision: required");
    assert!(refused(json!({"decision": "maybe"})).starts_with("response.decision: must be one of 'approve', 'reject'"));
    assert!(
        refused(json!({"decision": "approve", "replicas": 11})).starts_with("response.replicas: must be between 1")
    );
    assert_eq!(refused(json!({"decision": "approve", "replicas": 2.5})), "response.replicas: expected an integer");
    assert!(
        refused(json!({"decision": "approve", "reason": "x".repeat(21)}))
            .starts_with("response.reason: must be 0 to 20")
    );
    assert_eq!(refused(json!({"decision": "approve", "notify": "yes"})), "response.notify: expected true or false");
    assert!(
        refused(json!({"decision": "approve", "regions": ["eu", "mars"]})).starts_with("response.regions: each choice")
    );
    assert!(
        refused(json!({"decision": "approve", "regions": ["eu", "us", "ap"]}))
            .starts_with("response.regions: choose 0 to 2")
    );
    assert_eq!(
        refused(json!({"decision": "approve", "regions": ["eu", "eu"]})),
        "response.regions: \"eu\" is chosen twice"
    );
    assert!(form.check(&json!({"decision": "approve", "replicas": 2.0})).is_ok(), "2.0 is an integer");
    assert_eq!(
        refused(json!({"decision": "approve", "contact": "nobody"})),
        "response.contact: not a valid email address"
    );
    assert_eq!(refused(json!({"decision": "approve", "extra": 1})), "response.extra: not a field of this question");
    assert_eq!(refused(json!("approve")), "response: expected an object with the question's fields");
}

#[test]
fn only_flat_forms_of_the_elicitation_kinds_are_accepted() {
    let refused = |schema: serde_json::Value| ResponseSchema::parse(&schema).unwrap_err().0;
    assert!(
        refused(json!({"type": "object", "properties": {"a": {"type": "object"}}}))
            .starts_with("responseSchema: a: type `object` is not supported")
    );
    assert_eq!(refused(json!({"type": "array"})), "responseSchema: `type` must be \"object\"");
    assert_eq!(refused(json!({"type": "object", "properties": {}})), "responseSchema: must have 1 to 20 properties");
    assert_eq!(
        refused(json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]})),
        "responseSchema: required names 'b', which is not a property"
    );
    assert!(
        refused(json!({"type": "object", "properties": {"n": {"type": "integer", "maximum": 3, "default": 5}}}))
            .starts_with("responseSchema: default of n: must be between")
    );
    // Keywords the broker would not enforce are refused by name, as are bounds no answer could meet.
    let field = |property: serde_json::Value| json!({"type": "object", "properties": {"f": property}});
    for (property, said) in [
        (json!({"type": "string", "pattern": "^[0-9]+$"}), "responseSchema: f: `pattern` is not supported here"),
        (json!({"type": "integer", "multipleOf": 2}), "responseSchema: f: `multipleOf` is not supported here"),
        (json!({"type": "integer", "enum": [1, 2]}), "responseSchema: f: `enum` is not supported here"),
        (json!({"type": "string", "format": "ipv4"}), "responseSchema: f: `format` \"ipv4\" is not one of"),
        (json!({"type": "integer", "minimum": 5, "maximum": 1}), "responseSchema: f: `minimum` 5 is above `maximum` 1"),
        (json!({"type": "string", "minLength": 9, "maxLength": 2}), "responseSchema: f: `minLength` 9 is above"),
        (json!({"type": "object"}), "responseSchema: f: type `object` is not supported"),
        (json!({"type": "string", "enum": ["a", "b"], "enumNames": ["A"]}), "responseSchema: f: `enumNames` must name"),
        (
            json!({"type": "array", "items": {"type": "string", "enum": ["a"]}, "uniqueItems": true}),
            "responseSchema: f: `uniqueItems`",
        ),
    ] {
        let refused = refused(field(property.clone()));
        assert!(refused.starts_with(said), "{property}: {refused}");
    }

    // The legacy form (enum with enumNames) and a plain enum are read too.
    let legacy = ResponseSchema::parse(&json!({"type": "object", "properties": {
        "size": {"type": "string", "enum": ["s", "l"], "enumNames": ["Small", "Large"]}}}))
    .unwrap();
    assert!(legacy.check(&json!({"size": "l"})).is_ok());
    assert!(legacy.check(&json!({"size": "Large"})).is_err(), "the value, not its title, is the answer");
}

#[test]
fn defaults_answer_the_form_only_when_they_cover_every_required_field() {
    assert_eq!(deploy_form().defaults(), None, "decision has no default");
    let defaulted = ResponseSchema::parse(&json!({"type": "object", "properties": {
        "go": {"type": "boolean", "default": true}}, "required": ["go"]}))
    .unwrap();
    assert_eq!(defaulted.defaults(), Some(json!({"go": true})));
}
