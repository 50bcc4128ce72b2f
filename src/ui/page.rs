//! The HTML of the page (maud escapes every interpolated value).

use chrono::Utc;
use maud::{DOCTYPE, Markup, html};

use crate::questions::model::Question;

/// Which tab is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Pending questions, with answer forms.
    Pending,
    /// Answered, cancelled and expired questions.
    Closed,
}

/// The outcome of a form post, shown once after the redirect.
#[derive(Debug)]
pub enum Flash {
    /// The answer was stored.
    Answered(String),
    /// Someone else answered first, or the question was cancelled or expired.
    Conflict(String),
    /// No such question.
    Missing(String),
    /// The answer was empty.
    Invalid(String),
}

/// The whole page; `person` is who answers when a trusted proxy or a token names them.
pub fn render(
    view: View,
    version: i64,
    pending: &[Question],
    closed: &[Question],
    flash: Option<&Flash>,
    person: Option<&str>,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head("Questions", "/ui/assets/app.js"))
            body data-view=(match view { View::Pending => "pending", View::Closed => "closed" })
                 data-resource-version=(version) {
                header {
                    h1 { "Questions" }
                    nav {
                        a href="/ui" aria-current=[(view == View::Pending).then_some("page")] {
                            "Pending " span #pending-count .count { (pending.len()) }
                        }
                        a href="/ui?view=closed" aria-current=[(view == View::Closed).then_some("page")] {
                            "Answered & closed"
                        }
                    }
                }
                main {
                    @if let Some(flash) = flash { (flash_message(flash)) }
                    @match view {
                        View::Pending => {
                            p #empty .empty hidden[!pending.is_empty()] { "No pending questions. New ones appear here as agents ask them." }
                            ul #pending .questions {
                                @for question in pending { (pending_card(question, person)) }
                            }
                            template #question-template { (pending_card_skeleton(person)) }
                        }
                        View::Closed => {
                            @if closed.is_empty() { p .empty { "Nothing answered, cancelled or expired yet." } }
                            ul #closed .questions {
                                @for question in closed { (closed_card(question)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The `<head>` of every page: `title` and the page's script.
pub fn head(title: &str, script: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · Ark Broker" }
            link rel="stylesheet" href="/ui/assets/app.css";
            script src=(script) defer {}
        }
    }
}

/// The outcome of a form post, as a status line.
pub fn flash_message(flash: &Flash) -> Markup {
    let (class, text) = match flash {
        Flash::Answered(id) => ("ok", format!("Answered {id}.")),
        Flash::Conflict(id) => {
            ("warn", format!("{id} was already answered, cancelled or expired; your answer was not stored."))
        }
        Flash::Missing(id) => ("warn", format!("There is no question {id}.")),
        Flash::Invalid(id) => ("warn", format!("The answer to {id} was empty; nothing was stored.")),
    };
    html! { p .flash .(class) role="status" { (text) } }
}

fn meta(question: &Question) -> Markup {
    html! {
        p .meta {
            span .sender { (question.sender) } " → " span .recipient { (question.recipient) }
            " · " time .age datetime=(question.created_at) title=(question.created_at) { (age(question)) }
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

fn pending_card(question: &Question, person: Option<&str>) -> Markup {
    html! {
        li .question #{"question-" (question.id)} data-id=(question.id) {
            (meta(question))
            p .content { (question.content) }
            (answer_form(&question.id, None, person))
        }
    }
}

/// The empty card JavaScript fills in for questions that arrive while the page is open.
fn pending_card_skeleton(person: Option<&str>) -> Markup {
    html! {
        li .question {
            p .meta {
                span .sender {} " → " span .recipient {} " · " time .age {} span .query-part hidden { " · Query " a .query {} } span .channels {}
            }
            p .content {}
            (answer_form("", None, person))
        }
    }
}

/// A pending question's answer form (on both pages). `back` is the page a no-JS answer returns to (the
/// questions page when absent); with a `person`, the broker records them as the answerer, so the form says so
/// instead of asking for a name.
pub fn answer_form(id: &str, back: Option<&str>, person: Option<&str>) -> Markup {
    html! {
        form .answer method="post" action={"/ui/questions/" (id) "/answer"} {
            @if let Some(back) = back { input type="hidden" name="back" value=(back); }
            label { span .label { "Answer" } textarea name="response" rows="2" required {} }
            div .row {
                @match person {
                    Some(person) => p .answering-as { "Answering as " strong { (person) } },
                    None => label { span .label { "Your name" } input name="answeredBy" autocomplete="name" placeholder="optional"; },
                }
                button type="submit" { "Send answer" }
            }
            p .form-error role="alert" hidden {}
        }
    }
}

fn closed_card(question: &Question) -> Markup {
    html! {
        li .question .closed #{"question-" (question.id)} data-id=(question.id) {
            (meta(question))
            p .content { (question.content) }
            p .outcome {
                span .status .(question.status.as_str()) { (question.status.as_str()) }
                @if let Some(response) = &question.response { " " span .response { (response) } }
                @if let Some(by) = &question.answered_by { " — " span .by { (by) } }
            }
        }
    }
}

/// "3 min ago" as the server sees it; the script keeps it current.
fn age(question: &Question) -> String {
    let seconds = (Utc::now() - question.created).num_seconds().max(0);
    match seconds {
        0..60 => "just now".to_owned(),
        60..3600 => format!("{} min ago", seconds / 60),
        3600..86_400 => format!("{} h ago", seconds / 3600),
        _ => format!("{} d ago", seconds / 86_400),
    }
}

/// Percent-encodes one URL path segment (everything but RFC 3986's unreserved characters).
pub fn path_segment(raw: &str) -> String {
    raw.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
