//! The `mcp:caller` channel: a question that names it asks the person at the MCP client that called
//! `ask_question`, through MCP elicitation, in both protocol eras and from any replica. What the client
//! declared it can show ([`Modes`]) decides whether and how it is asked; what was asked is stored with the
//! question ([`ask`]), so every replica can ask again or report the task as `input_required`; a reply,
//! wherever it arrives, answers or declines the question as that person ([`reply`]).

mod ask;
mod modes;
mod reply;

pub use ask::{
    INPUT_KEY, awaited, elicitation, input_requests, params, question_of_request, request, stored, withdrawal,
};
pub use modes::Modes;
pub use reply::{Replied, apply};
