//! One question on a page of its own, `/ui/questions/{id}`: what a link to a question opens — the one an
//! MCP client shows its person for `mcp:caller` in URL mode. Its card is the list's (answer form, outcome,
//! record); answering posts the form and the list says what happened.

use maud::{DOCTYPE, Markup, html};

use super::{
    cards::{self, Extras},
    page::head,
};
use crate::questions::model::Question;

/// The page of `question`.
pub fn render(question: &Question, extras: Extras<'_>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            // The list's script does nothing here (no list): the form posts without it.
            (head(&format!("Question {}", question.id), "/ui/assets/app.js"))
            body data-page="question" {
                header {
                    h1 { "Question" }
                    nav { a href="/ui" { "Questions" } }
                }
                main {
                    ol .questions { (cards::card(question, extras)) }
                }
            }
        }
    }
}
