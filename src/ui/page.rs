//! The HTML of the questions page (maud escapes every interpolated value): its two tabs, the search form,
//! paging, the connection banner and the screen-reader announcer; the cards are [`super::cards`]'.

use std::collections::HashMap;

use maud::{DOCTYPE, Markup, html};

pub use super::filters::{View, path_segment};
use super::{
    cards::{Extras, card},
    filters::{self, Search},
};
use crate::questions::{model::Question, record::HistoryItem};

/// The outcome of a form post, shown once after the redirect.
#[derive(Debug)]
pub enum Flash {
    /// The answer was stored.
    Answered(String),
    /// The decline was stored.
    Declined(String),
    /// Someone else answered first, or the question was cancelled or expired.
    Conflict(String),
    /// No such question.
    Missing(String),
    /// The answer was empty.
    Invalid(String),
    /// The answer policy does not let this person answer it.
    Forbidden(String),
}

/// What one rendering of the page shows.
#[derive(Debug)]
pub struct Listing<'a> {
    pub view: View,
    /// The resourceVersion the list was read at; the script watches from there.
    pub version: i64,
    /// The tab's questions, one page of them.
    pub questions: &'a [Question],
    /// Their histories, by id.
    pub histories: &'a HashMap<String, Vec<HistoryItem>>,
    /// Why the person may not answer those of them they may not, by id.
    pub refusals: &'a HashMap<String, String>,
    /// How many questions are pending under the search (every page's, exactly).
    pub pending: i64,
    /// The next page's cursor, when there is one.
    pub next: Option<String>,
    /// Whether this is the first page (live additions only go where they belong: the pending list's last
    /// page, the closed list's first).
    pub first_page: bool,
    pub search: &'a Search,
    pub flash: Option<&'a Flash>,
    /// Who answers when a trusted proxy or a token names them.
    pub person: Option<&'a str>,
}

/// The whole page.
pub fn render(listing: &Listing) -> Markup {
    let Listing { view, search, .. } = listing;
    let (name, tab_title) = match view {
        View::Pending => ("pending", "Questions"),
        View::Closed => ("closed", "Answered & closed"),
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(&format!("({}) {tab_title}", listing.pending), "/ui/assets/app.js"))
            body data-view=(name) data-resource-version=(listing.version) data-title=(tab_title)
                 data-first-page=(listing.first_page) data-last-page=(listing.next.is_none())
                 data-q=[search.q.as_deref()] data-recipient=[search.recipient.as_deref()]
                 data-sender=[search.sender.as_deref()] data-query=[search.query.as_deref()] {
                // Shown by the script while the live connection is down; the page itself stays usable.
                div #connection .banner role="status" hidden { "Offline — reconnecting…" }
                header {
                    h1 { "Questions" }
                    nav {
                        a href=(search.url(None, None)) aria-current=[(*view == View::Pending).then_some("page")] {
                            "Pending " span #pending-count .count { (listing.pending) }
                        }
                        a href=(search.url(Some(View::Closed), None)) aria-current=[(*view == View::Closed).then_some("page")] {
                            "Answered & closed"
                        }
                    }
                }
                main {
                    @if let Some(flash) = listing.flash { (flash_message(flash)) }
                    (filters::form(*view, search))
                    (list(listing))
                    nav .pager aria-label="Pages" {
                        @if !listing.first_page { a .first href=(search.url(Some(*view), None)) { "← First page" } }
                        @if let Some(next) = &listing.next {
                            a .next rel="next" href=(search.url(Some(*view), Some(next))) { "Next page →" }
                        }
                    }
                    // Polite: a new question is announced once the reader finishes what it is saying.
                    div #announcer .visually-hidden aria-live="polite" aria-atomic="true" {}
                }
            }
        }
    }
}

fn list(listing: &Listing) -> Markup {
    let empty = match (listing.view, listing.search.is_empty()) {
        (_, false) => "No questions match this search.",
        (View::Pending, true) => "No pending questions. New ones appear here as agents ask them.",
        (View::Closed, true) => "Nothing answered, cancelled or expired yet. Closed questions appear here.",
    };
    let id = match listing.view {
        View::Pending => "pending",
        View::Closed => "closed",
    };
    html! {
        p #empty .empty hidden[!listing.questions.is_empty()] { (empty) }
        ul .questions #(id) {
            @for question in listing.questions {
                (card(question, Extras {
                    person: listing.person,
                    refused: listing.refusals.get(&question.id).map(String::as_str),
                    history: listing.histories.get(&question.id).map(Vec::as_slice).unwrap_or_default(),
                }))
            }
        }
    }
}

/// The `<head>` of every page: `title` and the page's script (after the answer forms' own, which it uses).
pub fn head(title: &str, script: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · Ark Broker" }
            link rel="stylesheet" href="/ui/assets/app.css";
            script src="/ui/assets/form.js" defer {}
            script src=(script) defer {}
        }
    }
}

/// The outcome of a form post, as a status line.
pub fn flash_message(flash: &Flash) -> Markup {
    let (class, text) = match flash {
        Flash::Answered(id) => ("ok", format!("Answered {id}.")),
        Flash::Declined(id) => ("ok", format!("Declined {id}.")),
        Flash::Conflict(id) => {
            ("warn", format!("{id} was already answered, cancelled or expired; your answer was not stored."))
        }
        Flash::Missing(id) => ("warn", format!("There is no question {id}.")),
        Flash::Invalid(id) => ("warn", format!("The answer to {id} was empty; nothing was stored.")),
        Flash::Forbidden(id) => ("warn", format!("You may not answer {id}; nothing was stored.")),
    };
    html! { p .flash .(class) role="status" { (text) } }
}
