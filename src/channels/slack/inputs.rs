//! A typed question's inputs in Slack, in Block Kit: which layout its form gets (buttons for one short
//! single-select field, selects and checkboxes in the message for a few choice fields, else a modal), the
//! inputs themselves (each field's block is `f:<index>`, its element's `action_id` [`FIELD_ACTION`]), and the
//! answer read back from an interaction's `state.values` — the message's, on its Submit button, or the
//! modal's, on its submission.

use serde_json::{Map, Number, Value, json};

use super::mrkdwn::{clip_to, escape};
use crate::channels::form::{Field, Form, Kind};

/// The `callback_id` of the modal a typed answer is given in.
pub const FORM_CALLBACK: &str = "answer_form";
/// The `action_id` of every field's element (its block tells the fields apart).
pub const FIELD_ACTION: &str = "field";
/// The in-message form's Submit button.
pub const SUBMIT_BUTTON: &str = "submit_form";

/// Most choices shown as buttons (Slack takes 25 elements in an actions block; more would not read well).
const MAX_BUTTONS: usize = 10;
/// Most fields a form shows inside the message; a longer one opens a modal.
const MAX_INLINE_FIELDS: usize = 3;
/// Slack's limits: options of a select, of a checkbox group, characters of an option's text.
const MAX_SELECT_OPTIONS: usize = 100;
const MAX_CHECKBOXES: usize = 10;
const OPTION_CHARS: usize = 75;
/// Longest `plain_text_input` Slack takes (`min_length` and `max_length` beyond it are refused).
const INPUT_CHARS: u32 = 3000;

/// How a question's message takes its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// A text question: its options as buttons, and "Answer…" for free text.
    Text,
    /// One single-select field (the index): a button per choice.
    Buttons(usize),
    /// A few choice fields: selects and checkboxes in the message, and Submit.
    Inline,
    /// Anything else: "Answer…" opens a modal with an input per field.
    Modal,
}

/// The layout of a question with `form` (`None`: a text question).
pub fn layout(form: Option<&Form>) -> Layout {
    let Some(form) = form else { return Layout::Text };
    match form.fields.as_slice() {
        [Field { kind: Kind::Choice { choices }, .. }] if choices.len() <= MAX_BUTTONS => Layout::Buttons(0),
        fields if fields.len() <= MAX_INLINE_FIELDS && fields.iter().all(fits_inline) => Layout::Inline,
        _ => Layout::Modal,
    }
}

fn fits_inline(field: &Field) -> bool {
    match &field.kind {
        Kind::Choice { choices } => choices.len() <= MAX_SELECT_OPTIONS,
        Kind::Choices { choices, .. } => choices.len() <= MAX_CHECKBOXES,
        _ => false,
    }
}

/// The block id of field `index`.
pub fn block_id(index: usize) -> String {
    format!("f:{index}")
}

/// The message's inputs for the [`Layout::Inline`] form: a section per field, its label beside its select
/// or checkboxes.
pub fn inline_blocks(form: &Form) -> Vec<Value> {
    form.fields
        .iter()
        .enumerate()
        .map(|(index, field)| {
            let mut label = format!("*{}*", escape(&field.label));
            if field.required {
                label.push_str(" (required)");
            }
            json!({"type": "section", "block_id": block_id(index), "text": {"type": "mrkdwn", "text": clip_to(&label, 3000)},
                   "accessory": element(field)})
        })
        .collect()
}

/// The modal of a [`Layout::Modal`] form: the question, then an input block per field. The question id
/// rides in `private_metadata`.
pub fn modal(question_id: &str, content: &str, form: &Form) -> Value {
    let mut blocks = vec![json!({"type": "section", "text": {"type": "mrkdwn",
                                                             "text": clip_to(&escape(content), 3000)}})];
    blocks.extend(form.fields.iter().enumerate().map(|(index, field)| {
        let mut input = json!({"type": "input", "block_id": block_id(index),
                               "label": {"type": "plain_text", "text": clip_to(&field.label, 2000)},
                               "element": element(field),
                               // A boolean's unticked box is an answer (false); a defaulted field may stay empty.
                               "optional": !field.required || field.kind == Kind::Boolean});
        if let Some(hint) = hint(field) {
            input["hint"] = json!({"type": "plain_text", "text": clip_to(&hint, 2000)});
        }
        input
    }));
    json!({
        "type": "modal",
        "callback_id": FORM_CALLBACK,
        "private_metadata": question_id,
        "title": {"type": "plain_text", "text": "Answer the question"},
        "submit": {"type": "plain_text", "text": "Answer"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": blocks,
    })
}

/// What the modal says under a field: its description, and the bounds Slack's inputs do not show.
fn hint(field: &Field) -> Option<String> {
    let bounds = match &field.kind {
        Kind::Text { format: Some(format), .. } => Some(format!("Format: {format}.")),
        Kind::Choices { min: Some(min), max: Some(max), .. } => Some(format!("Choose {min} to {max}.")),
        Kind::Choices { min: Some(min), max: None, .. } => Some(format!("Choose at least {min}.")),
        Kind::Choices { min: None, max: Some(max), .. } => Some(format!("Choose at most {max}.")),
        _ => None,
    };
    match (&field.description, bounds) {
        (Some(description), Some(bounds)) => Some(format!("{description} {bounds}")),
        (description, bounds) => description.clone().or(bounds),
    }
}

/// A field's element: a select, checkboxes, a text or number input.
fn element(field: &Field) -> Value {
    let option = |(index, (_, title)): (usize, &(String, String))| json!({"text": {"type": "plain_text", "text": clip_to(title, OPTION_CHARS)}, "value": index.to_string()});
    let chosen = |choices: &[(String, String)], value: &Value| {
        choices.iter().enumerate().filter(|(_, (v, _))| value == v).map(option).collect::<Vec<_>>()
    };
    let placeholder = json!({"type": "plain_text", "text": "Choose…"});
    let mut element = match &field.kind {
        Kind::Choice { choices } if choices.len() <= MAX_SELECT_OPTIONS => {
            let mut select = json!({"type": "static_select", "placeholder": placeholder,
                                    "options": choices.iter().enumerate().map(option).collect::<Vec<_>>()});
            if let Some(initial) = field.default.as_ref().and_then(|d| chosen(choices, d).pop()) {
                select["initial_option"] = initial;
            }
            select
        }
        Kind::Choices { choices, max, .. } if choices.len() <= MAX_SELECT_OPTIONS => {
            let options: Vec<Value> = choices.iter().enumerate().map(option).collect();
            let mut group = match choices.len() <= MAX_CHECKBOXES {
                true => json!({"type": "checkboxes", "options": options}),
                false => json!({"type": "multi_static_select", "placeholder": placeholder, "options": options}),
            };
            if let (Some(max), "multi_static_select") = (max, group["type"].as_str().unwrap_or_default()) {
                group["max_selected_items"] = json!(max.max(&1));
            }
            let initial: Vec<Value> = match &field.default {
                Some(Value::Array(values)) => values.iter().flat_map(|value| chosen(choices, value)).collect(),
                _ => Vec::new(),
            };
            if !initial.is_empty() {
                group["initial_options"] = json!(initial);
            }
            group
        }
        Kind::Number { integer, min, max } => {
            let mut input = json!({"type": "number_input", "is_decimal_allowed": !integer});
            let text = |n: f64| if *integer { (n as i64).to_string() } else { n.to_string() };
            if let Some(min) = min {
                input["min_value"] = json!(text(*min));
            }
            if let Some(max) = max {
                input["max_value"] = json!(text(*max));
            }
            if let Some(default) = field.default.as_ref().and_then(Value::as_f64) {
                input["initial_value"] = json!(text(default));
            }
            input
        }
        Kind::Boolean => {
            let yes = json!({"text": {"type": "plain_text", "text": "Yes"}, "value": "true"});
            let mut boxes = json!({"type": "checkboxes", "options": [yes.clone()]});
            if field.default == Some(Value::Bool(true)) {
                boxes["initial_options"] = json!([yes]);
            }
            boxes
        }
        // Text, and choices beyond what a select holds (typed as the value, one per line).
        kind => {
            let (min, max) = match kind {
                Kind::Text { min, max, .. } => (*min, *max),
                _ => (None, None),
            };
            let mut input = json!({"type": "plain_text_input", "multiline": max.is_none_or(|max| max > 150)});
            if let Some(min) = min.filter(|min| *min <= INPUT_CHARS) {
                input["min_length"] = json!(min);
            }
            if let Some(max) = max.filter(|max| (1..=INPUT_CHARS).contains(max)) {
                input["max_length"] = json!(max);
            }
            if let Some(default) = field.default.as_ref().and_then(Value::as_str) {
                input["initial_value"] = json!(default);
            }
            input
        }
    };
    element["action_id"] = json!(FIELD_ACTION);
    element
}

/// A field's error, shown where Slack shows it: on the field's block, by its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub block_id: String,
    pub message: String,
}

/// The answer in an interaction's `state.values`: an object of the fields given (an empty input is left
/// out, so its default applies); a value that does not read is refused on its field.
pub fn answer_of(form: &Form, values: &Value) -> Result<Value, FieldError> {
    let mut answer = Map::new();
    for (index, field) in form.fields.iter().enumerate() {
        let Some(state) = values.get(block_id(index)).and_then(|block| block.get(FIELD_ACTION)) else { continue };
        let refuse = |why: String| FieldError { block_id: block_id(index), message: format!("{}: {why}", field.name) };
        let selected = |option: &Value| -> Result<String, FieldError> {
            let choices = match &field.kind {
                Kind::Choice { choices } | Kind::Choices { choices, .. } => choices,
                _ => return Err(refuse("not a choice".into())),
            };
            let index = option["value"].as_str().and_then(|v| v.parse::<usize>().ok());
            match index.and_then(|index| choices.get(index)) {
                Some((value, _)) => Ok(value.clone()),
                None => Err(refuse(format!("no such choice {}", option["value"]))),
            }
        };
        let value = match (&field.kind, state["type"].as_str()) {
            (Kind::Boolean, _) => Some(json!(state["selected_options"].as_array().is_some_and(|o| !o.is_empty()))),
            (_, Some("static_select")) => match &state["selected_option"] {
                Value::Null => None,
                option => Some(json!(selected(option)?)),
            },
            (_, Some("checkboxes" | "multi_static_select")) => {
                let picked = state["selected_options"].as_array().cloned().unwrap_or_default();
                Some(Value::Array(picked.iter().map(selected).map(|v| v.map(Value::String)).collect::<Result<_, _>>()?))
            }
            (kind, _) => match state["value"].as_str().map(str::trim).filter(|text| !text.is_empty()) {
                None => None,
                Some(text) => Some(typed(kind, text).map_err(refuse)?),
            },
        };
        if let Some(value) = value {
            answer.insert(field.name.clone(), value);
        }
    }
    Ok(Value::Object(answer))
}

/// A text input's value as its field takes it.
fn typed(kind: &Kind, text: &str) -> Result<Value, String> {
    match kind {
        Kind::Number { integer: true, .. } => {
            text.parse::<i64>().map(Value::from).map_err(|_| format!("expected an integer, got '{text}'"))
        }
        Kind::Number { integer: false, .. } => text
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| format!("expected a number, got '{text}'")),
        // A choice typed as its value: one per line for several.
        Kind::Choices { .. } => Ok(text.lines().map(str::trim).filter(|l| !l.is_empty()).map(Value::from).collect()),
        _ => Ok(Value::String(text.to_owned())),
    }
}

/// Where the error of an answer that does not fit (`response.<name>: …`) is shown: on that field's block,
/// else on the first.
pub fn error_on_field(form: &Form, error: &str) -> FieldError {
    let index = form.field_named_in(error).unwrap_or(0);
    FieldError { block_id: block_id(index), message: error.strip_prefix("response.").unwrap_or(error).to_owned() }
}

#[cfg(test)]
#[path = "inputs_tests.rs"]
mod tests;
