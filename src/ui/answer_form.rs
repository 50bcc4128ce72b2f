//! A pending question's answer form, shaped by what the question takes: one input per field of its
//! `responseSchema` (radio buttons or a select for one choice, checkboxes for several, a checkbox for yes/no,
//! number inputs with their bounds, text inputs with their lengths and formats; required ones marked, defaults
//! filled in), radio buttons for its `options`, else a text box — and a Decline button. It posts without
//! JavaScript; `app.js` reads the same inputs (their `data-kind`) to answer through the REST API.

use maud::{Markup, html};
use rmcp::model::PrimitiveSchemaDefinition;
use serde_json::Value;

use super::filters::path_segment;
use crate::questions::{
    form::{self, ResponseSchema},
    model::Question,
};

/// The prefix of a typed field's input name, so no field of a form collides with `back`, `answeredBy`,
/// `response` or `reason`.
pub const FIELD_PREFIX: &str = "field.";
/// The hidden input that says the post is a typed form's (a form whose checkboxes are all unticked posts no
/// field at all).
pub const TYPED_MARKER: &str = "typed";
/// Up to this many choices show as radio buttons; more as a select.
const MAX_RADIOS: usize = 5;
/// A string field longer than this (or unbounded, without a format) gets a text box rather than a line.
const MAX_LINE_CHARS: u64 = 200;

/// What an answer to a question is made of.
#[derive(Debug)]
pub enum Shape {
    /// Free text.
    Text,
    /// One of the question's `options` (as text).
    Options(Vec<String>),
    /// The fields of its `responseSchema`, with the schema as it was asked (for the keywords the form shows).
    Typed(ResponseSchema, Value),
}

impl Shape {
    /// The shape of `question`'s answer.
    pub fn of(question: &Question) -> Shape {
        if let Some(raw) = &question.response_schema
            && let Ok(schema) = ResponseSchema::parse(raw)
        {
            return Shape::Typed(schema, raw.clone());
        }
        if question.options.is_empty() { Shape::Text } else { Shape::Options(question.options.clone()) }
    }
}

/// Who the form is for: where a no-JS post comes back to (the questions page when absent), and the person
/// the broker records as the answerer (the form then says so instead of asking for a name).
#[derive(Debug, Clone, Copy, Default)]
pub struct For<'a> {
    pub back: Option<&'a str>,
    pub person: Option<&'a str>,
}

/// The answer form of question `id` shaped as `shape`.
pub fn answer_form(id: &str, shape: &Shape, to: For<'_>) -> Markup {
    let text = html! { label { span .label { "Answer" } textarea name="response" rows="2" required {} } };
    let fields = match shape {
        Shape::Text => text,
        Shape::Options(options) => html! {
            fieldset .field .options {
                legend { "Answer" (required_mark()) }
                @for option in options {
                    label .choice { input type="radio" name="response" value=(option) required; " " (option) }
                }
            }
        },
        Shape::Typed(schema, raw) => html! {
            input type="hidden" name=(TYPED_MARKER) value="1";
            @for (name, property) in schema.fields() {
                (field(name, property, &raw["properties"][name], schema.is_required(name)))
            }
        },
    };
    form(id, to, fields, "", matches!(shape, Shape::Typed(..)))
}

/// A free-text answer form with the answer and name already typed in (the error page's retry of an answer
/// that could not be stored; a typed answer comes back as `field: value` lines, which the text box takes too).
pub fn refilled_answer_form(id: &str, to: For<'_>, response: &str, by: &str) -> Markup {
    let fields = html! { label { span .label { "Answer" } textarea name="response" rows="4" required { (response) } } };
    form(id, to, fields, by, false)
}

fn form(id: &str, to: For<'_>, fields: Markup, by: &str, typed: bool) -> Markup {
    let id = path_segment(id);
    html! {
        form .answer .typed[typed] method="post" action={"/ui/questions/" (id) "/answer"} {
            @if let Some(back) = to.back { input type="hidden" name="back" value=(back); }
            (fields)
            div .row {
                @match to.person {
                    Some(person) => p .answering-as { "Answering as " strong { (person) } },
                    None => label { span .label { "Your name" } input name="answeredBy" autocomplete="name" placeholder="optional" value=(by); },
                }
                button type="submit" .send { "Send answer" }
            }
            // Declining needs none of the answer's fields (`formnovalidate`), and posts the same name.
            details .decline {
                summary { "Decline to answer…" }
                div .row {
                    label { span .label { "Why (optional)" } input name="reason" maxlength="2000"; }
                    button type="submit" .decline formaction={"/ui/questions/" (id) "/decline"} formnovalidate data-action="decline" { "Decline" }
                }
            }
            p .form-error role="alert" hidden {}
        }
    }
}

fn required_mark() -> Markup {
    html! { " " span .required title="required" { "*" } }
}

/// One field of a typed form; `raw` is its property as asked (bounds, format, description, default).
fn field(name: &str, property: &PrimitiveSchemaDefinition, raw: &Value, required: bool) -> Markup {
    let input_name = format!("{FIELD_PREFIX}{name}");
    let title = form::title_of(property).unwrap_or_else(|| name.to_owned());
    let description = raw["description"].as_str();
    let default = &raw["default"];
    let number = |key: &str| raw[key].as_f64().map(|n| n.to_string());
    let hint = html! { @if let Some(text) = description { " " span .hint { (text) } } };
    if let Some(choices) = form::choices(property) {
        if form::is_multi_select(property) {
            let chosen = |value: &str| default.as_array().is_some_and(|d| d.iter().any(|v| v == value));
            let (min, max) = (raw["minItems"].as_u64(), raw["maxItems"].as_u64());
            return html! {
                fieldset .field data-field=(name) data-kind="multi" {
                    legend { (title) @if required || min.is_some_and(|m| m > 0) { (required_mark()) } }
                    (hint)
                    @if min.is_some() || max.is_some() {
                        span .hint { "Choose " (min.unwrap_or(0)) " to " (max.map_or("any number".to_owned(), |m| m.to_string())) "." }
                    }
                    @for (value, label) in &choices {
                        label .choice { input type="checkbox" name=(input_name) value=(value) data-kind="multi" checked[chosen(value)]; " " (label) }
                    }
                }
            };
        }
        let chosen = |value: &str| default.as_str() == Some(value);
        if choices.len() <= MAX_RADIOS {
            return html! {
                fieldset .field data-field=(name) data-kind="choice" {
                    legend { (title) @if required { (required_mark()) } }
                    (hint)
                    @for (value, label) in &choices {
                        label .choice { input type="radio" name=(input_name) value=(value) data-kind="choice" required[required] checked[chosen(value)]; " " (label) }
                    }
                }
            };
        }
        return html! {
            label .field data-field=(name) data-kind="choice" {
                span .label { (title) @if required { (required_mark()) } }
                (hint)
                select name=(input_name) data-kind="choice" required[required] {
                    option value="" selected[default.is_null()] { "—" }
                    @for (value, label) in &choices { option value=(value) selected[chosen(value)] { (label) } }
                }
            }
        };
    }
    let line = |kind: &str, input: Markup| {
        html! {
            label .field data-field=(name) data-kind=(kind) {
                span .label { (title) @if required { (required_mark()) } }
                (hint)
                (input)
            }
        }
    };
    match property {
        PrimitiveSchemaDefinition::Boolean(_) => html! {
            // Unticked is `false` (a required yes/no is answered either way, so it is not marked).
            label .field .choice data-field=(name) data-kind="boolean" {
                input type="checkbox" name=(input_name) value="true" data-kind="boolean" checked[default.as_bool() == Some(true)];
                " " (title)
                (hint)
            }
        },
        PrimitiveSchemaDefinition::Number(_) | PrimitiveSchemaDefinition::Integer(_) => {
            let (kind, step) = if matches!(property, PrimitiveSchemaDefinition::Integer(_)) {
                ("integer", "1")
            } else {
                ("number", "any")
            };
            let value = default.as_f64().map(|n| n.to_string());
            line(
                kind,
                html! {
                    input type="number" name=(input_name) data-kind=(kind) step=(step) min=[number("minimum")]
                        max=[number("maximum")] value=[value] required[required];
                },
            )
        }
        _ => {
            let format = raw["format"].as_str();
            let (min, max) = (raw["minLength"].as_u64(), raw["maxLength"].as_u64());
            let value = default.as_str().map(|v| shown_value(format, v));
            let kind = match format {
                Some("email") => "email",
                Some("uri") => "url",
                Some("date") => "date",
                Some("date-time") => "datetime-local",
                _ => "text",
            };
            let long = format.is_none() && max.is_none_or(|max| max > MAX_LINE_CHARS);
            let input = if long {
                html! {
                    textarea name=(input_name) data-kind="string" rows="2" minlength=[min] maxlength=[max] required[required] {
                        (value.unwrap_or_default())
                    }
                }
            } else {
                html! {
                    input type=(kind) name=(input_name) data-kind="string" data-format=[format] minlength=[min]
                        maxlength=[max] step=[(kind == "datetime-local").then_some("1")] value=[value] required[required];
                }
            };
            let input = match format {
                Some("date-time") => html! { (input) " " span .hint { "UTC" } },
                _ => input,
            };
            line("string", input)
        }
    }
}

/// A default as its input shows it: a date-time in UTC without its offset (`datetime-local` has none).
fn shown_value(format: Option<&str>, value: &str) -> String {
    match (format, chrono::DateTime::parse_from_rfc3339(value)) {
        (Some("date-time"), Ok(at)) => at.with_timezone(&chrono::Utc).format("%Y-%m-%dT%H:%M:%S").to_string(),
        _ => value.to_owned(),
    }
}
