//! The page of one Query (`/ui/queries/{namespace}/{name}`): its unified stream as a timeline — text,
//! tool-call badges with name, duration and outcome, collapsible arguments and results, phase changes, and
//! its questions inline with an answer form. This renders what is stored, so the page works without
//! JavaScript; `assets/query.js` replays the same stream live and keeps it current.

use std::collections::HashMap;

use maud::{DOCTYPE, Markup, html};
use serde_json::Value;

use super::{
    answer_form::{For, Shape, answer_form},
    markdown,
    page::{Flash, flash_message, head, path_segment},
};
use crate::streams::unified::UnifiedEvent;

/// One entry of the timeline.
#[derive(Debug)]
pub enum Item {
    /// Consecutive text deltas, joined.
    Text(String),
    /// A tool call, with its result once it has one.
    Tool { id: String, name: String, arguments: String, result: Option<ToolResult> },
    /// A question the Query asked, with its outcome once it has one.
    Question { id: String, recipient: String, content: String, outcome: Option<Outcome> },
    /// The Query moved between phases.
    Phase { from: String, to: String, reason: String },
    /// The final chunk arrived.
    Completed,
    /// An error chunk, or the abort frame.
    Error(String),
}

/// A tool call's result.
#[derive(Debug)]
pub struct ToolResult {
    success: bool,
    duration_ms: Option<f64>,
    result: String,
}

/// How a question closed.
#[derive(Debug)]
pub struct Outcome {
    status: &'static str,
    response: Option<String>,
    by: Option<String>,
}

/// How the page offers to answer one of the Query's pending questions.
#[derive(Debug)]
pub enum Offer {
    /// A form of this shape.
    Form(Shape),
    /// No form: why this person may not answer it (the answer policy's words).
    Refused(String),
}

/// The timeline of a stream's typed events, in order; results and outcomes land on their call or question.
pub fn timeline(events: &[UnifiedEvent]) -> Vec<Item> {
    let mut items: Vec<Item> = Vec::new();
    for event in events {
        let data = &event.data;
        let text = |field: &str| data.get(field).and_then(Value::as_str).unwrap_or_default().to_owned();
        match event.event {
            "text_delta" => match items.last_mut() {
                Some(Item::Text(joined)) => joined.push_str(&text("content")),
                _ => items.push(Item::Text(text("content"))),
            },
            "tool_call_start" => items.push(Item::Tool {
                id: text("tool_call_id"),
                name: text("tool_name"),
                arguments: shown(data.get("arguments")),
                result: None,
            }),
            "tool_call_result" => {
                let id = text("tool_call_id");
                let call = items.iter_mut().find(|item| matches!(item, Item::Tool { id: i, .. } if *i == id));
                if let Some(Item::Tool { result, .. }) = call {
                    *result = Some(ToolResult {
                        success: data.get("success").and_then(Value::as_bool).unwrap_or(true),
                        duration_ms: data.get("duration_ms").and_then(Value::as_f64),
                        result: shown(data.get("result")),
                    });
                }
            }
            "question_raised" => items.push(Item::Question {
                id: text("question_id"),
                recipient: text("recipient"),
                content: text("content"),
                outcome: None,
            }),
            "question_answered" | "question_cancelled" | "question_expired" | "question_declined" => {
                let id = text("question_id");
                let question = items.iter_mut().find(|item| matches!(item, Item::Question { id: i, .. } if *i == id));
                if let Some(Item::Question { outcome, .. }) = question {
                    // A typed answer is an object (shown as JSON); a decline has its reason and who declined.
                    let said = data.get("response").or_else(|| data.get("reason")).filter(|v| !v.is_null());
                    let by = data.get("answered_by").or_else(|| data.get("declined_by"));
                    *outcome = Some(Outcome {
                        status: event.event.trim_start_matches("question_"),
                        response: said.map(|said| shown(Some(said))).filter(|text| !text.is_empty()),
                        by: by.and_then(Value::as_str).map(str::to_owned),
                    });
                }
            }
            "phase_change" => items.push(Item::Phase { from: text("from"), to: text("to"), reason: text("reason") }),
            "completed_query" => items.push(Item::Completed),
            _ => items.push(Item::Error(text("message"))),
        }
    }
    items
}

/// A JSON value as the page shows it: strings as they are, anything else pretty-printed.
fn shown(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// What the page shows besides the timeline.
#[derive(Debug)]
pub struct Around<'a> {
    /// How to answer each pending question, by id (a question not among them gets a text box).
    pub offers: &'a HashMap<String, Offer>,
    pub flash: Option<&'a Flash>,
    /// Who answers when a trusted proxy or a token names them.
    pub person: Option<&'a str>,
}

/// The whole page.
pub fn render(namespace: &str, name: &str, phase: &str, items: &[Item], around: &Around<'_>) -> Markup {
    let Around { flash, person, .. } = *around;
    let back = format!("/ui/queries/{}/{}", path_segment(namespace), path_segment(name));
    let stream_url = format!("/stream/{}?format=unified&from-beginning=true", path_segment(name));
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(&format!("{namespace}/{name}"), "/ui/assets/query.js"))
            body data-page="query" data-stream-url=(stream_url) data-back=(back) {
                header {
                    h1 { "Query " span .query { (namespace) "/" (name) } }
                    span #phase .phase .{"phase-" (phase)} { (phase) }
                    nav { a href="/ui" { "Questions" } }
                }
                main {
                    @if let Some(flash) = flash { (flash_message(flash)) }
                    p #empty .empty hidden[!items.is_empty()] { "Nothing streamed yet. The Query's output appears here as it runs." }
                    ol #timeline .timeline {
                        @for item in items { (render_item(item, &back, around)) }
                    }
                }
                template #answer-template { (answer_form("", &Shape::Text, For { back: Some(&back), person })) }
            }
        }
    }
}

fn render_item(item: &Item, back: &str, around: &Around<'_>) -> Markup {
    let to = For { back: Some(back), person: around.person };
    match item {
        Item::Text(text) => html! { li .text { (text) } },
        Item::Tool { id, name, arguments, result } => html! {
            li .tool #{"tool-" (id)} data-tool-call-id=(id) {
                details {
                    summary {
                        span .badge { "tool" } " " code .tool-name { (name) } " "
                        @match result {
                            None => span .tool-status .running { "running" },
                            Some(r) if r.success => span .tool-status .ok { "succeeded" },
                            Some(_) => span .tool-status .failed { "failed" },
                        }
                        " " span .duration { (result.as_ref().and_then(|r| r.duration_ms).map(duration).unwrap_or_default()) }
                    }
                    p .label { "Arguments" } pre .args { (arguments) }
                    p .label { "Result" } pre .result { (result.as_ref().map(|r| r.result.as_str()).unwrap_or("")) }
                }
            }
        },
        Item::Question { id, recipient, content, outcome } => html! {
            li .question .asked #{"question-" (id)} data-id=(id) {
                p .meta { span .badge { "question" } " to " span .recipient { (recipient) } }
                div .content { (markdown::render(content)) }
                @match outcome {
                    None => @match around.offers.get(id) {
                        Some(Offer::Refused(why)) => p .may-not-answer { "You may not answer this question: " (why) "." },
                        Some(Offer::Form(shape)) => (answer_form(id, shape, to)),
                        None => (answer_form(id, &Shape::Text, to)),
                    },
                    Some(outcome) => p .outcome {
                        span .status .(outcome.status) { (outcome.status) }
                        @if let Some(response) = &outcome.response { " " span .response { (response) } }
                        @if let Some(by) = &outcome.by { " — " span .by { (by) } }
                    },
                }
            }
        },
        Item::Phase { from, to, reason } => html! {
            li .phase-change { "Phase " span .from { (from) } " → " span .to { (to) } " " span .reason { "(" (reason) ")" } }
        },
        Item::Completed => html! { li .completed { "Query completed" } },
        Item::Error(message) => html! { li .error { (message) } },
    }
}

/// "2.3 s" or "120 ms".
fn duration(ms: f64) -> String {
    if ms >= 1000.0 { format!("{:.1} s", ms / 1000.0) } else { format!("{ms:.0} ms") }
}
