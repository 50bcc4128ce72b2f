//! Questions delivered where people already are: Slack channels and GitHub issues or pull requests. A
//! question's channel entries are checked when it is asked, and the asking transaction queues one delivery
//! per channel (both in [`crate::questions`]); every replica runs the [`worker`] that claims due deliveries
//! (one replica each), sends them ([`slack`], [`github`]) and retries with backoff, honouring rate limits. A
//! typed question's [`form`] is shown as inputs in Slack and as a reply syntax on GitHub.
//! [`outbound::Channels`], what the shared state holds, stands below the inbound routes here. With
//! `--slack-app-token`, every replica also takes Slack's side over a Socket Mode connection
//! ([`slack::socket`]).
//!
//! Each channel is a room of its own, [`slack`] and [`github`], neither importing the other; beside them
//! stands what works both (the [`outbound`] senders, the [`worker`], reminders) and what both share (the
//! outbox's [`store`], a send's shape, the checked answer, the form, receipts, signatures). `src/layers.rs`
//! holds that order.

mod answer;
mod form;
mod github;
mod inbound_schema;
pub mod outbound;
mod receipt;
mod remind;
mod reminder_store;
mod send;
pub mod signature;
pub mod slack;
pub mod store;
pub mod worker;

use std::sync::Arc;

use utoipa_axum::{router::OpenApiRouter, routes};

use self::outbound::Channels;
use crate::{
    config::Config,
    questions::{policy::AnswerPolicy, store::QuestionStore},
};

pub use github::short_id;

/// The part of the shared state the inbound Slack and GitHub handlers reach. The whole state hands it out (`FromRef`),
/// so this domain never depends on the whole.
#[derive(Debug, Clone)]
pub struct RouteState {
    /// The settings this replica runs with.
    pub config: Arc<Config>,
    /// The channels questions are delivered to, with their outbox.
    pub channels: Channels,
    /// Questions.
    pub questions: QuestionStore,
    /// Who may answer them.
    pub policy: AnswerPolicy,
}

/// The inbound routes (Slack and GitHub call them; their signatures are the credential).
pub fn router() -> OpenApiRouter<RouteState> {
    OpenApiRouter::new()
        .routes(routes!(github::webhook::receive))
        .routes(routes!(slack::inbound::interactions))
        .routes(routes!(slack::inbound::events))
}
