//! A question's record on its card: every step of its decision (asked, delivered or failed per channel,
//! reminded, escalated, refused, answered, declined, expired, cancelled) with who, via what, what and when,
//! folded in a `<details>` — the same steps `GET /questions/{id}/history` gives.

use maud::{Markup, html};
use serde_json::Value;

use crate::questions::record::HistoryItem;

/// The card's history, folded; nothing when no step is kept.
pub fn history(items: &[HistoryItem]) -> Markup {
    if items.is_empty() {
        return html! {};
    }
    let steps = if items.len() == 1 { "1 step".to_owned() } else { format!("{} steps", items.len()) };
    html! {
        details .history {
            summary { "History (" (steps) ")" }
            ol .steps {
                @for item in items {
                    li .step data-step=(item.step) {
                        time datetime=(item.at) title=(item.at) { (short_time(&item.at)) }
                        " " span .what { (words(&item.step)) }
                        @if let Some(actor) = &item.actor { " by " span .actor { (actor) } }
                        @if let Some(channel) = &item.channel { " via " span .via { (channel) } }
                        @if let Some(detail) = detail(item) { ": " span .detail { (detail) } }
                    }
                }
            }
        }
    }
}

/// A step's name in words.
fn words(step: &str) -> &str {
    match step {
        "created" => "asked",
        "delivered" => "delivered",
        "delivery_failed" => "not delivered",
        "reminded" => "reminded",
        "escalated" => "escalated",
        "refused" => "refused an answer",
        "answered" => "answered",
        "declined" => "declined",
        "expired" => "expired",
        "cancelled" => "cancelled",
        other => other,
    }
}

/// What a step's detail says that the card does not already: the asking Query, the answer, a reason, an
/// error, where an escalation went.
fn detail(item: &HistoryItem) -> Option<String> {
    let detail = item.detail.as_ref()?;
    let text = |key: &str| detail.get(key).and_then(Value::as_str).map(str::to_owned);
    match item.step.as_str() {
        "created" => {
            let query = detail.get("query").filter(|q| q.is_object())?;
            let name = query["name"].as_str()?;
            Some(match query["namespace"].as_str() {
                Some(namespace) => format!("from Query {namespace}/{name}"),
                None => format!("from Query {name}"),
            })
        }
        "answered" => detail.get("response").map(|response| match response {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        }),
        "refused" | "declined" => text("reason"),
        "delivery_failed" => text("error"),
        "escalated" => {
            let list = |key: &str| {
                detail[key].as_array().map(|v| v.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "))
            };
            let to: Vec<String> =
                [list("recipients"), list("channels")].into_iter().flatten().filter(|s| !s.is_empty()).collect();
            (!to.is_empty()).then(|| format!("to {}", to.join(", ")))
        }
        _ => None,
    }
}

/// `2026-11-26T06:36:07.123Z` → `2026-11-26 06:36:07 UTC` (the full time on hover).
fn short_time(at: &str) -> String {
    match chrono::DateTime::parse_from_rfc3339(at) {
        Ok(at) => at.with_timezone(&chrono::Utc).format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        Err(_) => at.to_owned(),
    }
}
