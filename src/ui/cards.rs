//! One question as a card on the page — pending with its answer form, or closed with who answered, what and
//! when — with friendly names for `ark://` addresses and content rendered from Markdown. The page and the
//! card endpoint the script fetches for questions that arrive live both render here, so there is one way a
//! card looks.

use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::{
    filters::{Search, path_segment},
    markdown,
};
use crate::questions::model::{Question, QuestionStatus};

/// The card for `question` as its status calls for.
pub fn card(question: &Question, person: Option<&str>) -> Markup {
    match question.status {
        QuestionStatus::Pending => pending_card(question, person),
        _ => closed_card(question),
    }
}

/// A pending question with its answer form.
pub fn pending_card(question: &Question, person: Option<&str>) -> Markup {
    html! {
        li .question #{"question-" (question.id)} data-id=(question.id) data-status="pending" {
            (meta(question))
            div .content { (markdown::render(&question.content)) }
            (answer_form(&question.id, None, person))
        }
    }
}

/// An answered, cancelled or expired question: the outcome, by whom and when.
pub fn closed_card(question: &Question) -> Markup {
    html! {
        li .question .closed #{"question-" (question.id)} data-id=(question.id) data-status=(question.status.as_str()) {
            (meta(question))
            div .content { (markdown::render(&question.content)) }
            (outcome(question))
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

/// A pending question's answer form (on both pages). `back` is the page a no-JS answer returns to (the
/// questions page when absent); with a `person`, the broker records them as the answerer, so the form says so
/// instead of asking for a name.
pub fn answer_form(id: &str, back: Option<&str>, person: Option<&str>) -> Markup {
    refilled_answer_form(id, back, person, "", "")
}

/// [`answer_form`] with the answer and name already typed in (the error page's retry).
pub fn refilled_answer_form(id: &str, back: Option<&str>, person: Option<&str>, response: &str, by: &str) -> Markup {
    html! {
        form .answer method="post" action={"/ui/questions/" (path_segment(id)) "/answer"} {
            @if let Some(back) = back { input type="hidden" name="back" value=(back); }
            label { span .label { "Answer" } textarea name="response" rows="2" required { (response) } }
            div .row {
                @match person {
                    Some(person) => p .answering-as { "Answering as " strong { (person) } },
                    None => label { span .label { "Your name" } input name="answeredBy" autocomplete="name" placeholder="optional" value=(by); },
                }
                button type="submit" { "Send answer" }
            }
            p .form-error role="alert" hidden {}
        }
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
