//! One question as a card on the page — pending with its answer form (or why this person may not answer it),
//! or closed with who answered, what and when; both with the record of its decision — with friendly names for `ark://` addresses and content rendered from Markdown. The page and the
//! card endpoint the script fetches for questions that arrive live both render here, so there is one way a
//! card looks.

use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::{
    answer_form::{For, Shape, answer_form},
    filters::{Search, path_segment},
    history::history,
    markdown,
};
use crate::questions::{
    model::{Question, QuestionStatus},
    record::HistoryItem,
};

/// What a card shows besides its question.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extras<'a> {
    /// Who answers when a trusted proxy or a token names them.
    pub person: Option<&'a str>,
    /// Why this person may not answer it (the answer policy's words): the card then has no form.
    pub refused: Option<&'a str>,
    /// The record of its decision so far.
    pub history: &'a [HistoryItem],
}

/// The card for `question` as its status calls for.
pub fn card(question: &Question, extras: Extras<'_>) -> Markup {
    match question.status {
        QuestionStatus::Pending => pending_card(question, extras),
        _ => closed_card(question, extras),
    }
}

/// A pending question with its answer form (or why this person may not answer it).
fn pending_card(question: &Question, extras: Extras<'_>) -> Markup {
    html! {
        li .question #{"question-" (question.id)} data-id=(question.id) data-status="pending" {
            (meta(question))
            div .content { (markdown::render(&question.content)) }
            @match extras.refused {
                Some(why) => p .may-not-answer { "You may not answer this question: " (why) "." },
                None => (answer_form(&question.id, &Shape::of(question), For { back: None, person: extras.person })),
            }
            (history(extras.history))
        }
    }
}

/// An answered, declined, cancelled or expired question: the outcome, by whom and when.
fn closed_card(question: &Question, extras: Extras<'_>) -> Markup {
    html! {
        li .question .closed #{"question-" (question.id)} data-id=(question.id) data-status=(question.status.as_str()) {
            (meta(question))
            div .content { (markdown::render(&question.content)) }
            (outcome(question))
            (history(extras.history))
        }
    }
}

/// "answered by dave · 3 min ago" and the answer; "cancelled · 1 h ago"; "expired · 2 d ago". The script
/// draws the same for a card closed while someone types in it (`app.js`, `outcomeLine`).
fn outcome(question: &Question) -> Markup {
    html! {
        div .outcome {
            p .outcome-line {
                span .status .(question.status.as_str()) { (question.status.as_str()) }
                @if let Some(by) = &question.answered_by { " by " span .by { (by) } }
                @if let Some(closed) = question.closed {
                    " · " time .age .closed-at datetime=(iso(closed)) title=(iso(closed)) { (ago(closed)) }
                }
            }
            @if let Some(response) = &question.response_text { p .response { (response) } }
            @if let Some(reason) = &question.decline_reason { p .reason { (reason) } }
        }
    }
}

fn meta(question: &Question) -> Markup {
    html! {
        p .meta {
            (address("sender", &question.sender)) " → " (address("recipient", &question.recipient))
            " · asked " time .age datetime=(question.created_at) title=(question.created_at) { (ago(question.created)) }
            @if let Some(query) = &question.query {
                " · Query "
                @match &query.namespace {
                    Some(namespace) => a .query href={"/ui/queries/" (path_segment(namespace)) "/" (path_segment(&query.name))} {
                        (namespace) "/" (query.name)
                    },
                    None => span .query { (query.name) },
                }
            }
            span .channels { @for channel in &question.channels { " " (delivery(question, channel)) } }
        }
    }
}

/// An `ark://` address by its friendly name, the full address on hover; a link that filters the page by it.
fn address(role: &str, address: &str) -> Markup {
    let search = match role {
        "sender" => Search { sender: Some(address.to_owned()), ..Search::default() },
        _ => Search { recipient: Some(address.to_owned()), ..Search::default() },
    };
    html! { a .(role) href=(search.url(None, None)) title=(address) { (friendly_name(address)) } }
}

/// `ark://agents/reviewer` → "reviewer (agent)"; anything else as it is.
pub fn friendly_name(address: &str) -> String {
    let Some((kind, name)) = address.strip_prefix("ark://").and_then(|rest| rest.split_once('/')) else {
        return address.to_owned();
    };
    let kind = match kind {
        "agents" => "agent",
        "users" => "user",
        "teams" => "team",
        "channels" => "channel",
        _ => return address.to_owned(),
    };
    format!("{name} ({kind})")
}

/// A channel the question names, with where its delivery stands (in words, not colour alone; `app.js`'s
/// `showChannels` draws the same as deliveries move on).
fn delivery(question: &Question, channel: &str) -> Markup {
    let deliveries = question.deliveries.as_array().map(Vec::as_slice).unwrap_or_default();
    let Some(delivery) = deliveries.iter().find(|d| d["channel"] == channel) else {
        return html! { span .channel { (channel) } };
    };
    let field = |name: &str| delivery[name].as_str();
    let error = field("error").unwrap_or_default();
    // The link comes from Slack's or GitHub's reply: only a web address becomes one.
    let url = field("url").filter(|url| url.starts_with("https://") || url.starts_with("http://"));
    match (field("status").unwrap_or_default(), url) {
        ("delivered", Some(url)) => html! { a .channel .delivered href=(url) { (channel) " · delivered" } },
        ("delivered", None) => html! { span .channel .delivered { (channel) " · delivered" } },
        ("failed", _) => html! { span .channel .failed title=(error) { (channel) " · not delivered: " (error) } },
        _ if !error.is_empty() => html! { span .channel .retrying title=(error) { (channel) " · retrying" } },
        _ => html! { span .channel .sending { (channel) " · sending" } },
    }
}

fn iso(at: DateTime<Utc>) -> String {
    crate::timestamp::iso_timestamp(at)
}

/// "3 min ago" as the server sees it; the script keeps it current.
fn ago(at: DateTime<Utc>) -> String {
    let seconds = (Utc::now() - at).num_seconds().max(0);
    match seconds {
        0..60 => "just now".to_owned(),
        60..3600 => format!("{} min ago", seconds / 60),
        3600..86_400 => format!("{} h ago", seconds / 3600),
        _ => format!("{} d ago", seconds / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::friendly_name;

    #[test]
    fn addresses_get_friendly_names() {
        assert_eq!(friendly_name("ark://agents/reviewer"), "reviewer (agent)");
        assert_eq!(friendly_name("ark://users/dave@example.com"), "dave@example.com (user)");
        assert_eq!(friendly_name("ark://teams/sre"), "sre (team)");
        assert_eq!(friendly_name("ark://channels/ops"), "ops (channel)");
        assert_eq!(friendly_name("ark://robots/x"), "ark://robots/x");
        assert_eq!(friendly_name("dave"), "dave");
    }
}
