//! The Slack inputs of typed questions: which layout a form gets, the Block Kit each field becomes, and
//! answers read back from `state.values`.

use serde_json::{Value, json};

use super::*;

fn form(properties: Value, required: &[&str]) -> Form {
    Form::of(Some(&json!({"type": "object", "properties": properties, "required": required}))).unwrap()
}

fn choice(values: &[&str]) -> Value {
    json!({"type": "string", "enum": values})
}

#[test]
fn a_form_gets_buttons_selects_in_the_message_or_a_modal() {
    assert_eq!(layout(None), Layout::Text);
    assert_eq!(layout(Some(&form(json!({"go": choice(&["yes", "no"])}), &["go"]))), Layout::Buttons(0));
    let many: Vec<String> = (0..11).map(|n| format!("v{n}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    assert_eq!(layout(Some(&form(json!({"go": choice(&many)}), &[]))), Layout::Inline, "too many for buttons");
    let selects = json!({"env": choice(&["dev", "prod"]),
                         "regions": {"type": "array", "items": {"type": "string", "enum": ["eu", "us"]}}});
    assert_eq!(layout(Some(&form(selects, &["env"]))), Layout::Inline);
    let free = json!({"env": choice(&["dev", "prod"]), "note": {"type": "string"}});
    assert_eq!(layout(Some(&form(free, &[]))), Layout::Modal, "a free field needs the modal");
    let four = json!({"a": choice(&["x"]), "b": choice(&["x"]), "c": choice(&["x"]), "d": choice(&["x"])});
    assert_eq!(layout(Some(&form(four, &[]))), Layout::Modal, "more than a few fields");
    assert_eq!(layout(Some(&form(json!({"ok": {"type": "boolean"}}), &[]))), Layout::Modal);
}

#[test]
fn the_modal_has_an_input_per_field_with_its_bounds_and_defaults() {
    let form = form(
        json!({
            "decision": {"type": "string", "oneOf": [{"const": "approve", "title": "Approve"}, {"const": "reject", "title": "Reject"}]},
            "note": {"type": "string", "minLength": 2, "maxLength": 40, "description": "Why"},
            "notify": {"type": "boolean", "default": true},
            "ratio": {"type": "number", "maximum": 0.5},
            "regions": {"type": "array", "items": {"type": "string", "enum": ["eu", "us"]}, "default": ["us"]},
            "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3}
        }),
        &["decision", "replicas", "note"],
    );
    let view = modal("q-1", "Deploy?", &form);
    assert_eq!((view["callback_id"].as_str(), view["private_metadata"].as_str()), (Some(FORM_CALLBACK), Some("q-1")));
    let blocks = view["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 7, "the question, then a block per field");
    // Fields in the order the asker wrote them: decision, note, notify, ratio, regions, replicas.
    let input = |n: usize| &blocks[n + 1];
    assert_eq!(input(0)["block_id"], "f:0");
    assert_eq!(input(0)["element"]["type"], "static_select");
    assert_eq!(
        input(0)["element"]["options"][1],
        json!({"text": {"type": "plain_text", "text": "Reject"}, "value": "1"})
    );
    assert_eq!(input(0)["optional"], false);
    assert_eq!(
        input(1)["element"],
        json!({"type": "plain_text_input", "multiline": false, "min_length": 2, "max_length": 40, "action_id": FIELD_ACTION})
    );
    assert_eq!(input(1)["hint"]["text"], "Why");
    assert_eq!(input(2)["element"]["type"], "checkboxes");
    assert_eq!(input(2)["element"]["initial_options"][0]["value"], "true");
    assert_eq!(input(2)["optional"], true, "an unticked box answers false");
    let ratio = &input(3)["element"];
    assert_eq!((ratio["is_decimal_allowed"].as_bool(), ratio["max_value"].as_str()), (Some(true), Some("0.5")));
    assert_eq!(
        input(4)["element"]["initial_options"],
        json!([{"text": {"type": "plain_text", "text": "us"}, "value": "1"}])
    );
    assert_eq!(
        input(5)["element"],
        json!({"type": "number_input", "is_decimal_allowed": false, "min_value": "1", "max_value": "10",
               "initial_value": "3", "action_id": FIELD_ACTION})
    );
    assert_eq!(input(5)["optional"], true, "its default answers it");

    // What Slack sends back on submission.
    let values = json!({
        "f:0": {"field": {"type": "static_select", "selected_option": {"text": {"type": "plain_text", "text": "Reject"}, "value": "1"}}},
        "f:1": {"field": {"type": "plain_text_input", "value": "  not today  "}},
        "f:2": {"field": {"type": "checkboxes", "selected_options": []}},
        "f:3": {"field": {"type": "number_input", "value": null}},
        "f:4": {"field": {"type": "checkboxes", "selected_options": [{"value": "0"}, {"value": "1"}]}},
        "f:5": {"field": {"type": "number_input", "value": "4"}}
    });
    assert_eq!(
        answer_of(&form, &values).unwrap(),
        json!({"decision": "reject", "replicas": 4, "note": "not today", "notify": false, "regions": ["eu", "us"]})
    );
    let mut bad = values.clone();
    bad["f:5"]["field"]["value"] = json!("4.5");
    assert_eq!(
        answer_of(&form, &bad).unwrap_err(),
        FieldError { block_id: "f:5".into(), message: "replicas: expected an integer, got '4.5'".into() }
    );
    bad["f:0"]["field"]["selected_option"]["value"] = json!("9");
    assert_eq!(answer_of(&form, &bad).unwrap_err().block_id, "f:0");
    let error = error_on_field(&form, "response.note: must be 2 to 40 characters, got 1");
    assert_eq!(error, FieldError { block_id: "f:1".into(), message: "note: must be 2 to 40 characters, got 1".into() });
    assert_eq!(error_on_field(&form, "Already answered by someone").block_id, "f:0");
}

#[test]
fn the_inline_form_is_a_select_or_checkboxes_beside_each_label() {
    let form = form(
        json!({"env": {"type": "string", "title": "Environment", "enum": ["dev", "prod"], "default": "prod"},
               "regions": {"type": "array", "items": {"type": "string", "enum": ["eu", "us"]}}}),
        &["env", "regions"],
    );
    let blocks = inline_blocks(&form);
    assert_eq!(blocks[0]["text"]["text"], "*Environment*", "a default answers a required field");
    assert_eq!(blocks[0]["accessory"]["initial_option"]["value"], "1");
    assert_eq!(blocks[1]["text"]["text"], "*regions* (required)");
    assert_eq!(blocks[1]["accessory"]["type"], "checkboxes");
    let values = json!({"f:0": {"field": {"type": "static_select", "selected_option": null}},
                        "f:1": {"field": {"type": "checkboxes", "selected_options": [{"value": "1"}]}}});
    assert_eq!(answer_of(&form, &values).unwrap(), json!({"regions": ["us"]}), "the default is the check's to add");
}
