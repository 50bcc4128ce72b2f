//! An answer (or a decline) that arrives from a channel (a Slack button, form, modal or thread reply; a GitHub
//! `/answer`): checked as REST checks one, then given by the same first-answer-wins path.

use super::RouteState;
use crate::{
    db::StoreResult,
    questions::{
        Change,
        answering::{self, Given, Outcome},
        model::Question,
        policy::Answerer,
    },
};

/// What answering from a channel came to.
#[derive(Debug)]
pub enum Answered {
    /// This answer is the question's.
    Made,
    /// The question was closed first (answered, cancelled or expired); as it is.
    Closed(Box<Question>),
    /// There is no such question.
    NotFound,
    /// The answer is not acceptable (empty, a NUL character, not fitting the question's form); why, to show
    /// the person (a typed answer's error names the field: `response.replicas: …`).
    Refused(String),
    /// The answer policy does not let this person answer (why); the refusal is in the question's history.
    Forbidden(String),
}

/// Answers question `id` with `given` (a typed question's object, or text: for a typed question a JSON
/// object or `field: value` lines), recorded as answered by `by` (`slack:<user>`, `github:<login>`).
pub async fn answer(state: &RouteState, id: &str, given: Given<'_>, by: String) -> StoreResult<Answered> {
    let answerer = Answerer::Channel(&by);
    let outcome = answering::answer(&state.questions, &state.policy, id, given, answerer, via(&by)).await?;
    Ok(answered(outcome))
}

/// Declines question `id` on behalf of `by` (the person refuses to answer it).
pub async fn decline(state: &RouteState, id: &str, by: String) -> StoreResult<Answered> {
    let answerer = Answerer::Channel(&by);
    let outcome = answering::decline(&state.questions, &state.policy, id, None, answerer, via(&by)).await?;
    Ok(answered(outcome))
}

/// `slack:U…` answered via Slack, `github:login` via GitHub.
fn via(by: &str) -> &str {
    by.split_once(':').map_or("channel", |(kind, _)| kind)
}

fn answered(outcome: Outcome) -> Answered {
    let change = match outcome {
        Outcome::Changed(change) => *change,
        Outcome::Refused(refused) => return Answered::Refused(refused.to_string()),
        Outcome::Forbidden(why) => return Answered::Forbidden(why),
    };
    match change {
        Change::Made(_) => Answered::Made,
        Change::Conflict(question) => Answered::Closed(Box::new(question)),
        Change::NotFound => Answered::NotFound,
    }
}
