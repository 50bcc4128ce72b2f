//! Questions delivered where people already are: Slack channels and GitHub issues or pull requests. A
//! question's channel entries are checked when it is asked ([`address`]); the asking transaction queues one
//! delivery per channel ([`store::queue`]), and every replica runs the [`worker`] that claims due deliveries
//! (one replica each), sends them ([`slack`], [`github`]) and retries with backoff, honouring rate limits.
//! [`outbound::Channels`], what the shared state holds, stands below the inbound routes here.

pub mod address;
mod answer;
mod github;
mod github_webhook;
mod inbound_schema;
pub mod outbound;
mod receipt;
mod send;
pub mod signature;
mod slack;
mod slack_blocks;
mod slack_inbound;
pub mod store;
pub mod worker;

use utoipa_axum::{router::OpenApiRouter, routes};

pub use address::Channel;
pub use github::short_id;

use crate::state::AppState;

/// The inbound routes (Slack and GitHub call them; their signatures are the credential).
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(github_webhook::receive))
        .routes(routes!(slack_inbound::interactions))
        .routes(routes!(slack_inbound::events))
}
