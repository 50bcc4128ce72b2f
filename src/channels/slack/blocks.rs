//! What the broker shows in Slack, in Block Kit: a question's message (the question, who asks, the Query, and
//! how to answer: one button per option and "Answer…" for free text, or a typed question's inputs as
//! [`super::inputs`] lays them out; "Decline" on each), the same message once the question closed (the
//! outcome instead of the inputs), and the modal that takes a free-text answer.

use serde_json::{Value, json};

use super::{
    inputs::{self, Layout, SUBMIT_BUTTON},
    mrkdwn::{clip_to, escape},
};
use crate::channels::{
    form::{Form, Kind},
    send::Message,
};

/// Slack refuses a section's text beyond this many characters.
const SECTION_CHARS: usize = 3000;
/// The modal's `callback_id`, and the ids of its answer field.
pub const MODAL_CALLBACK: &str = "answer";
pub const ANSWER_BLOCK: &str = "answer";
pub const ANSWER_ACTION: &str = "text";
/// The "Answer…" button's `action_id`; option buttons are `option:<index>` (a text question's options, or the
/// choices of a typed question's one field).
pub const ANSWER_BUTTON: &str = "answer_modal";
/// The "Decline" button's `action_id`.
pub const DECLINE_BUTTON: &str = "decline";

/// How a question ended, as its updated message shows it.
#[derive(Debug, Clone, Copy)]
pub struct Closed<'a> {
    /// `answered`, `declined`, `cancelled` or `expired`.
    pub status: &'a str,
    pub response: Option<&'a str>,
    pub answered_by: Option<&'a str>,
}

/// The blocks of a question's message; with `closed`, the outcome replaces the buttons.
pub fn question(message: &Message<'_>, closed: Option<Closed<'_>>) -> Value {
    let mut context = format!("Asked by {}", escape(message.sender));
    if let Some(query) = message.query {
        context.push_str(&format!(" · Query `{}`", escape(query)));
    }
    context.push_str(&format!(" · {}", message.question_id));
    let heading = format!("*Question for {}*\n{}", escape(message.recipient), escape(message.content));
    let mut blocks = vec![
        json!({"type": "section", "text": {"type": "mrkdwn", "text": clip(&heading)}}),
        json!({"type": "context", "elements": [{"type": "mrkdwn", "text": clip(&context)}]}),
    ];
    match closed {
        None => {
            let form = Form::of(message.response_schema);
            let layout = inputs::layout(form.as_ref());
            if let (Layout::Inline, Some(form)) = (layout, &form) {
                blocks.extend(inputs::inline_blocks(form));
            }
            let buttons = buttons(message, layout, form.as_ref());
            blocks.push(
                json!({"type": "actions", "block_id": format!("q:{}", message.question_id), "elements": buttons}),
            );
        }
        Some(closed) => blocks.push(json!({"type": "section", "text": {"type": "mrkdwn", "text": outcome(closed)}})),
    }
    Value::Array(blocks)
}

/// The outcome in a sentence (mrkdwn): who answered what, or that nobody needs to.
pub fn outcome(closed: Closed<'_>) -> String {
    match closed.status {
        "answered" => clip(&format!(
            ":white_check_mark: *Answered* by {}: {}",
            person(closed.answered_by),
            escape(closed.response.unwrap_or_default())
        )),
        "cancelled" => ":no_entry_sign: *Cancelled*: no answer is needed any more.".to_owned(),
        "declined" => clip(&format!(":raised_hand: *Declined* by {}.", person(closed.answered_by))),
        _ => ":hourglass: *Expired* before anyone answered.".to_owned(),
    }
}

/// What a person whose answer came second is told (only they see it), in mrkdwn.
pub fn already(closed: Closed<'_>) -> String {
    match closed.status {
        "answered" => clip(&format!(
            "Already answered by {}: {}",
            person(closed.answered_by),
            escape(closed.response.unwrap_or_default())
        )),
        _ => outcome(closed),
    }
}

/// The same in plain text, for a modal's field error (Slack shows no markup there; at most 150 characters
/// are kept readable, so the answer is cut short).
pub fn already_plain(closed: Closed<'_>) -> String {
    let by = match closed.answered_by {
        Some(by) => by.strip_prefix("slack:").map_or_else(|| by.to_owned(), |user| format!("Slack user {user}")),
        None => "someone".to_owned(),
    };
    match closed.status {
        "answered" => {
            let response: String = closed.response.unwrap_or_default().chars().take(100).collect();
            format!("Already answered by {by}: {response}")
        }
        "cancelled" => "The question was cancelled: no answer is needed any more.".to_owned(),
        "declined" => format!("The question was declined by {by}."),
        _ => "The question expired before anyone answered.".to_owned(),
    }
}

/// Who answered, as Slack shows a person: a mention for a Slack user, the recorded name otherwise.
pub fn person(answered_by: Option<&str>) -> String {
    match answered_by {
        Some(by) => match by.strip_prefix("slack:") {
            Some(user) if user.chars().all(|c| c.is_ascii_alphanumeric()) => format!("<@{user}>"),
            _ => escape(by),
        },
        None => "someone".to_owned(),
    }
}

/// The modal a free-text answer is written in; the question id rides in `private_metadata`.
pub fn answer_modal(question_id: &str, content: &str) -> Value {
    json!({
        "type": "modal",
        "callback_id": MODAL_CALLBACK,
        "private_metadata": question_id,
        "title": {"type": "plain_text", "text": "Answer the question"},
        "submit": {"type": "plain_text", "text": "Answer"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": clip(&escape(content))}},
            {"type": "input", "block_id": ANSWER_BLOCK, "label": {"type": "plain_text", "text": "Your answer"},
             "element": {"type": "plain_text_input", "action_id": ANSWER_ACTION, "multiline": true}},
        ],
    })
}

/// The buttons under a question: what answers it in its layout, then "Decline".
fn buttons(message: &Message<'_>, layout: Layout, form: Option<&Form>) -> Vec<Value> {
    let id = message.question_id;
    let button = |action_id: &str, text: &str, value: String| {
        json!({"type": "button", "action_id": action_id, "text": {"type": "plain_text", "text": clip_to(text, 75)},
               "value": value})
    };
    let option_buttons = |labels: Vec<&str>| -> Vec<Value> {
        labels
            .into_iter()
            .enumerate()
            .map(|(index, label)| button(&format!("option:{index}"), label, format!("{id}|{index}")))
            .collect()
    };
    let mut buttons = match (layout, form) {
        (Layout::Buttons(field), Some(form)) => match &form.fields[field].kind {
            Kind::Choice { choices } => option_buttons(choices.iter().map(|(_, title)| title.as_str()).collect()),
            _ => Vec::new(),
        },
        (Layout::Inline, _) => vec![button(SUBMIT_BUTTON, "Submit", id.to_owned())],
        (Layout::Modal, _) => vec![button(ANSWER_BUTTON, "Answer…", id.to_owned())],
        _ => {
            let mut buttons = option_buttons(message.options.iter().map(String::as_str).collect());
            buttons.push(button(ANSWER_BUTTON, "Answer…", id.to_owned()));
            buttons
        }
    };
    // The button that answers is the primary one: Submit, or "Answer…" beside the options.
    if let Some(last) =
        buttons.last_mut().filter(|b| b["action_id"] == ANSWER_BUTTON || b["action_id"] == SUBMIT_BUTTON)
    {
        last["style"] = json!("primary");
    }
    let mut decline = button(DECLINE_BUTTON, "Decline", id.to_owned());
    decline["style"] = json!("danger");
    // A decline is final: Slack asks first.
    decline["confirm"] = json!({"title": {"type": "plain_text", "text": "Decline this question?"},
                                "text": {"type": "plain_text", "text": "Nobody can answer it after that; whoever asked is told you declined."},
                                "confirm": {"type": "plain_text", "text": "Decline"},
                                "deny": {"type": "plain_text", "text": "Keep it"}, "style": "danger"});
    buttons.push(decline);
    buttons
}

/// Text cut to what a section takes.
fn clip(text: &str) -> String {
    clip_to(text, SECTION_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::slack::mrkdwn::unescape;

    fn message<'a>(options: &'a [String]) -> Message<'a> {
        Message {
            question_id: "q-1",
            sender: "agent <a>",
            recipient: "ops",
            content: "Deploy *now* & <!here>?",
            options,
            response_schema: None,
            query: Some("ns/q"),
        }
    }

    #[test]
    fn a_question_offers_its_options_then_shows_who_answered() {
        let options = ["Yes".to_owned(), "No".to_owned()];
        let open = question(&message(&options), None);
        assert_eq!(open[0]["text"]["text"], "*Question for ops*\nDeploy *now* &amp; &lt;!here&gt;?");
        let actions: Vec<&str> =
            open[2]["elements"].as_array().unwrap().iter().map(|b| b["action_id"].as_str().unwrap()).collect();
        assert_eq!(actions, ["option:0", "option:1", ANSWER_BUTTON, DECLINE_BUTTON]);
        assert_eq!(open[2]["elements"][1]["value"], "q-1|1");
        let decline = &open[2]["elements"][3];
        assert_eq!((decline["value"].as_str(), decline["style"].as_str()), (Some("q-1"), Some("danger")));
        assert_eq!(decline["confirm"]["confirm"]["text"], "Decline", "a decline is final: Slack asks first");
        let closed = Closed { status: "answered", response: Some("No"), answered_by: Some("slack:U42") };
        let done = question(&message(&options), Some(closed));
        assert_eq!(done[2]["text"]["text"], ":white_check_mark: *Answered* by <@U42>: No");
        assert_eq!(person(Some("alice <x>")), "alice &lt;x&gt;");
        assert_eq!(unescape("a &lt; b &amp;&amp; c &gt; d"), "a < b && c > d");
        let plain = already_plain(closed);
        assert_eq!(plain, "Already answered by Slack user U42: No");
    }

    #[test]
    fn long_text_is_clipped_to_what_slack_takes() {
        let long = "é".repeat(5000);
        assert_eq!(clip(&long).chars().count(), SECTION_CHARS);
        let closed = Closed { status: "answered", response: Some(&long), answered_by: Some("slack:U1") };
        assert_eq!(outcome(closed).chars().count(), SECTION_CHARS, "the prefix counts too");
        assert_eq!(already(closed).chars().count(), SECTION_CHARS);
    }
}
