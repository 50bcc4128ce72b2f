//! An answer that arrives from a channel (a Slack button, modal or thread reply; a GitHub `/answer`): checked
//! as REST checks an answer, then given by the same first-answer-wins path.

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
    /// the person.
    Refused(String),
}

/// Answers question `id` with `text` (for a typed question, a JSON object or `field: value` lines), recorded
/// as answered by `by` (`slack:<user>`, `github:<login>`).
pub async fn answer(state: &RouteState, id: &str, text: &str, by: String) -> StoreResult<Answered> {
    // `slack:U…` answered via Slack, `github:login` via GitHub.
    let via = by.split_once(':').map_or("channel", |(kind, _)| kind);
    let answerer = Answerer::Channel(&by);
    let change = match answering::answer(&state.questions, &state.policy, id, Given::Text(text), answerer, via).await? {
        Outcome::Changed(change) => *change,
        Outcome::Refused(refused) => return Ok(Answered::Refused(refused.to_string())),
        Outcome::Forbidden(why) => return Ok(Answered::Refused(format!("You may not answer this question: {why}."))),
    };
    Ok(match change {
        Change::Made(_) => Answered::Made,
        Change::Conflict(question) => Answered::Closed(Box::new(question)),
        Change::NotFound => Answered::NotFound,
    })
}
