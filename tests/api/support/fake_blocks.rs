//! Block Kit as Slack validates it, for the fake Slack Web API ([`super::fake_channels`]): a message's
//! blocks (`chat.postMessage`, `chat.update`) and a modal's view (`views.open`), with Slack's documented
//! limits on the blocks and elements the broker sends — sections (with an accessory), context, actions
//! (buttons, `static_select`, `multi_static_select`, `checkboxes`, `radio_buttons`) and, in modals, `input`
//! blocks (`plain_text_input`, `number_input`, and the selects and checkboxes). Anything else is refused, as
//! Slack refuses what it does not know, with the JSON pointer of what is wrong.

use std::collections::HashSet;

use serde_json::Value;

/// Why Slack would refuse it, with where (`[json-pointer:/blocks/2/elements/0]`).
pub type Problem = String;

type Checked = Result<(), Problem>;

fn refuse(at: &str, why: &str) -> Checked {
    Err(format!("[ERROR] {why} [json-pointer:{at}]"))
}

/// A message's `blocks`: at most 50.
pub fn message(blocks: &Value) -> Checked {
    self::blocks(blocks, "/blocks", 50, false)
}

/// A modal `view`: title, submit and close of at most 24 characters (submit required with an input block),
/// at most 100 blocks, `callback_id` of at most 255 characters and `private_metadata` of at most 3000.
pub fn view(view: &Value) -> Checked {
    if view["type"] != "modal" {
        return refuse("/view/type", "must be modal");
    }
    plain_text(&view["title"], 24, "/view/title")?;
    for button in ["submit", "close"] {
        if !view[button].is_null() {
            plain_text(&view[button], 24, &format!("/view/{button}"))?;
        }
    }
    let has_input = view["blocks"].as_array().is_some_and(|b| b.iter().any(|b| b["type"] == "input"));
    if has_input && view["submit"].is_null() {
        return refuse("/view/blocks", "must define submit to use an input block in modals");
    }
    optional_string(&view["callback_id"], 255, "/view/callback_id")?;
    optional_string(&view["private_metadata"], 3000, "/view/private_metadata")?;
    blocks(&view["blocks"], "/view/blocks", 100, true)
}

fn blocks(blocks: &Value, at: &str, most: usize, in_view: bool) -> Checked {
    let Some(blocks) = blocks.as_array() else { return refuse(at, "must be an array") };
    if blocks.is_empty() || blocks.len() > most {
        return refuse(at, &format!("must have 1 to {most} blocks"));
    }
    let mut ids = HashSet::new();
    for (n, block) in blocks.iter().enumerate() {
        let at = format!("{at}/{n}");
        if !block["block_id"].is_null() {
            optional_string(&block["block_id"], 255, &format!("{at}/block_id"))?;
            if !ids.insert(block["block_id"].as_str().unwrap_or_default()) {
                return refuse(&format!("{at}/block_id"), "block_id must be unique");
            }
        }
        match block["type"].as_str() {
            Some("section") => {
                text(&block["text"], 3000, &format!("{at}/text"))?;
                if !block["accessory"].is_null() {
                    element(&block["accessory"], &format!("{at}/accessory"), ACTIONS)?;
                }
            }
            Some("context") => match block["elements"].as_array() {
                Some(elements) if (1..=10).contains(&elements.len()) => {
                    for (e, part) in elements.iter().enumerate() {
                        text(part, 3000, &format!("{at}/elements/{e}"))?;
                    }
                }
                _ => return refuse(&format!("{at}/elements"), "must have 1 to 10 elements"),
            },
            Some("actions") => {
                let Some(elements) = block["elements"].as_array().filter(|e| (1..=25).contains(&e.len())) else {
                    return refuse(&format!("{at}/elements"), "must have 1 to 25 elements");
                };
                let mut actions = HashSet::new();
                for (e, part) in elements.iter().enumerate() {
                    element(part, &format!("{at}/elements/{e}"), ACTIONS)?;
                    if !actions.insert(part["action_id"].as_str().unwrap_or_default()) {
                        return refuse(
                            &format!("{at}/elements/{e}/action_id"),
                            "action_id must be unique in its block",
                        );
                    }
                }
            }
            Some("input") if in_view => {
                plain_text(&block["label"], 2000, &format!("{at}/label"))?;
                if !block["hint"].is_null() {
                    plain_text(&block["hint"], 2000, &format!("{at}/hint"))?;
                }
                if !(block["optional"].is_null() || block["optional"].is_boolean()) {
                    return refuse(&format!("{at}/optional"), "must be a boolean");
                }
                element(&block["element"], &format!("{at}/element"), INPUTS)?;
            }
            _ => return refuse(&format!("{at}/type"), "unsupported block type"),
        }
    }
    Ok(())
}

/// The elements an actions block or a section's accessory takes (of those the fake knows).
const ACTIONS: &[&str] = &["button", "static_select", "multi_static_select", "checkboxes", "radio_buttons"];
/// The elements an input block takes (of those the fake knows).
const INPUTS: &[&str] =
    &["plain_text_input", "number_input", "static_select", "multi_static_select", "checkboxes", "radio_buttons"];

fn element(element: &Value, at: &str, allowed: &[&str]) -> Checked {
    let kind = element["type"].as_str().unwrap_or_default();
    if !allowed.contains(&kind) {
        return refuse(&format!("{at}/type"), "unsupported element type here");
    }
    optional_string(&element["action_id"], 255, &format!("{at}/action_id"))?;
    if !element["confirm"].is_null() {
        confirm(&element["confirm"], &format!("{at}/confirm"))?;
    }
    let placeholder = || match &element["placeholder"] {
        Value::Null => Ok(()),
        placeholder => plain_text(placeholder, 150, &format!("{at}/placeholder")),
    };
    match kind {
        "button" => {
            plain_text(&element["text"], 75, &format!("{at}/text"))?;
            optional_string(&element["value"], 2000, &format!("{at}/value"))?;
            match &element["style"] {
                Value::Null => Ok(()),
                Value::String(style) if style == "primary" || style == "danger" => Ok(()),
                _ => refuse(&format!("{at}/style"), "must be primary or danger"),
            }
        }
        "static_select" | "multi_static_select" => {
            placeholder()?;
            let options = options(&element["options"], 100, false, &format!("{at}/options"))?;
            initial(element, &options, kind == "multi_static_select", at)?;
            match &element["max_selected_items"] {
                Value::Null => Ok(()),
                most if most.as_u64().is_some_and(|n| n >= 1) => Ok(()),
                _ => refuse(&format!("{at}/max_selected_items"), "must be at least 1"),
            }
        }
        "checkboxes" | "radio_buttons" => {
            let options = options(&element["options"], 10, true, &format!("{at}/options"))?;
            initial(element, &options, kind == "checkboxes", at)
        }
        "plain_text_input" => {
            placeholder()?;
            let length = |name: &str, least: u64| match &element[name] {
                Value::Null => Ok(None),
                n => match n.as_u64().filter(|n| (least..=3000).contains(n)) {
                    Some(n) => Ok(Some(n)),
                    None => Err(format!("[ERROR] must be {least} to 3000 [json-pointer:{at}/{name}]")),
                },
            };
            let (min, max) = (length("min_length", 0)?, length("max_length", 1)?);
            if let (Some(min), Some(max)) = (min, max)
                && min > max
            {
                return refuse(&format!("{at}/min_length"), "must not be above max_length");
            }
            if !(element["multiline"].is_null() || element["multiline"].is_boolean()) {
                return refuse(&format!("{at}/multiline"), "must be a boolean");
            }
            optional_string(&element["initial_value"], 3000, &format!("{at}/initial_value"))
        }
        "number_input" => {
            placeholder()?;
            let Some(decimal) = element["is_decimal_allowed"].as_bool() else {
                return refuse(&format!("{at}/is_decimal_allowed"), "is required");
            };
            let read = |name: &str| -> Result<Option<f64>, Problem> {
                match &element[name] {
                    Value::Null => Ok(None),
                    Value::String(text) => match (text.parse::<i64>(), text.parse::<f64>()) {
                        (Ok(n), _) => Ok(Some(n as f64)),
                        (_, Ok(n)) if decimal => Ok(Some(n)),
                        _ => {
                            Err(format!("[ERROR] must be a number string this input allows [json-pointer:{at}/{name}]"))
                        }
                    },
                    _ => Err(format!("[ERROR] must be a string [json-pointer:{at}/{name}]")),
                }
            };
            let (min, max, initial) = (read("min_value")?, read("max_value")?, read("initial_value")?);
            if let (Some(min), Some(max)) = (min, max)
                && min > max
            {
                return refuse(&format!("{at}/min_value"), "cannot be greater than max_value");
            }
            match initial {
                Some(n) if min.is_some_and(|min| n < min) || max.is_some_and(|max| n > max) => {
                    refuse(&format!("{at}/initial_value"), "must be within min_value and max_value")
                }
                _ => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

/// A confirmation dialog: a title of at most 100 characters, a text of at most 300, confirm and deny
/// buttons of at most 30, and a style of primary or danger.
fn confirm(dialog: &Value, at: &str) -> Checked {
    plain_text(&dialog["title"], 100, &format!("{at}/title"))?;
    text(&dialog["text"], 300, &format!("{at}/text"))?;
    plain_text(&dialog["confirm"], 30, &format!("{at}/confirm"))?;
    plain_text(&dialog["deny"], 30, &format!("{at}/deny"))?;
    match &dialog["style"] {
        Value::Null => Ok(()),
        Value::String(style) if style == "primary" || style == "danger" => Ok(()),
        _ => refuse(&format!("{at}/style"), "must be primary or danger"),
    }
}

/// Option objects: 1 to `most`, text of at most 75 characters (plain text, or mrkdwn where `mrkdwn`),
/// a value of at most 150, values unique.
fn options(options: &Value, most: usize, mrkdwn: bool, at: &str) -> Result<Vec<Value>, Problem> {
    let Some(options) = options.as_array().filter(|o| (1..=most).contains(&o.len())) else {
        return Err(format!("[ERROR] must have 1 to {most} options [json-pointer:{at}]"));
    };
    let mut values = HashSet::new();
    for (n, option) in options.iter().enumerate() {
        let at = format!("{at}/{n}");
        match mrkdwn {
            true => text(&option["text"], 75, &format!("{at}/text"))?,
            false => plain_text(&option["text"], 75, &format!("{at}/text"))?,
        }
        let value = option["value"].as_str().filter(|v| (1..=150).contains(&v.chars().count()));
        let Some(value) = value else {
            return Err(format!("[ERROR] must be 1 to 150 characters [json-pointer:{at}/value]"));
        };
        if !values.insert(value) {
            return Err(format!("[ERROR] option values must be unique [json-pointer:{at}/value]"));
        }
    }
    Ok(options.clone())
}

/// `initial_option` (or `initial_options` where several are taken) must each exactly match an option.
fn initial(element: &Value, options: &[Value], several: bool, at: &str) -> Checked {
    let (name, initial) = match several {
        true => ("initial_options", element["initial_options"].as_array().cloned()),
        false => {
            ("initial_option", (!element["initial_option"].is_null()).then(|| vec![element["initial_option"].clone()]))
        }
    };
    let other = if several { "initial_option" } else { "initial_options" };
    if !element[other].is_null() {
        return refuse(&format!("{at}/{other}"), "not a field of this element");
    }
    match initial {
        Some(initial) if initial.is_empty() || !initial.iter().all(|i| options.contains(i)) => {
            refuse(&format!("{at}/{name}"), "must exactly match the element's options")
        }
        _ => Ok(()),
    }
}

/// A text object: plain text or mrkdwn, 1 to `most` characters.
fn text(text: &Value, most: usize, at: &str) -> Checked {
    match text["type"].as_str() {
        Some("plain_text" | "mrkdwn") => sized(&text["text"], most, &format!("{at}/text")),
        _ => refuse(&format!("{at}/type"), "must be plain_text or mrkdwn"),
    }
}

fn plain_text(text: &Value, most: usize, at: &str) -> Checked {
    match text["type"].as_str() {
        Some("plain_text") => sized(&text["text"], most, &format!("{at}/text")),
        _ => refuse(&format!("{at}/type"), "must be plain_text"),
    }
}

fn sized(text: &Value, most: usize, at: &str) -> Checked {
    match text.as_str() {
        Some(text) if !text.is_empty() && text.chars().count() <= most => Ok(()),
        _ => refuse(at, &format!("must be 1 to {most} characters")),
    }
}

fn optional_string(value: &Value, most: usize, at: &str) -> Checked {
    match value {
        Value::Null => Ok(()),
        Value::String(text) if text.chars().count() <= most => Ok(()),
        _ => refuse(at, &format!("must be a string of at most {most} characters")),
    }
}
