//! A session's state as upstream's rules keep it: its queries and their phases, and what the rules derive
//! from them (status, conversations, participants). The rules ([`super::rules`]) change it, `derive.rs` computes
//! the derived parts, and the store loads and writes it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A query's lifecycle phase, derived from its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, sqlx::Type, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "text", rename_all = "lowercase")]
pub enum Phase {
    /// Known, not started.
    Pending,
    /// Started, not finished.
    Running,
    /// Finished.
    Done,
    /// Failed (or paused for a human: a later `done` clears it).
    Error,
    /// Canceled.
    Canceled,
    /// Unknown.
    Unknown,
}

impl Phase {
    /// Whether the phase ends the query (only such events move the phase watermark).
    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Done | Phase::Error | Phase::Canceled)
    }
}

/// A session's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, sqlx::Type, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "text", rename_all = "lowercase")]
pub enum Status {
    /// A query is pending or running.
    Active,
    /// Nothing running; the latest query did not fail.
    Idle,
    /// Nothing running; the latest query failed.
    Error,
}

/// What a participant (or a conversation's first participant) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ParticipantType {
    /// An agent.
    Agent,
    /// A team.
    Team,
    /// A tool.
    Tool,
}

/// One query of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryState {
    /// The Query's name.
    pub name: String,
    /// Its namespace.
    pub namespace: Option<String>,
    /// Its conversation.
    pub conversation_id: Option<String>,
    /// The agent handling it.
    pub agent: Option<String>,
    /// The team handling it.
    pub team: Option<String>,
    /// The tool handling it.
    pub tool: Option<String>,
    /// The CRD target type (agent, team, model, tool).
    pub target_type: String,
    /// Its phase.
    pub phase: Phase,
    /// Why it failed.
    pub error: Option<String>,
    /// When it was first seen.
    pub created_at: DateTime<Utc>,
    /// When it reached a terminal phase.
    pub completed_at: Option<DateTime<Utc>>,
    /// Its most recent event (which elects the query whose phase is the session's status).
    pub last_activity: DateTime<Utc>,
    /// The arrival order (`events.sequence_number`) of the latest event applied to it (0: none yet).
    #[serde(default)]
    pub last_event_sequence: i64,
    /// The arrival order of the latest terminal event applied to it (upstream's phase watermark).
    #[serde(default)]
    pub last_phase_sequence: i64,
}

/// A conversation of a session, derived from its queries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationSummary {
    /// The conversation.
    pub conversation_id: String,
    /// Its first participant, or the conversation id.
    pub name: String,
    /// Who took part (team, agent or tool of each query).
    pub participants: Vec<String>,
    /// How many queries it had (upstream's name for it).
    pub message_count: usize,
    /// `1m 3s`, `42s`, or `ongoing` while its last query runs.
    pub duration: String,
    /// When its first query was first seen (ISO 8601).
    pub start_time: String,
    /// What its first query targeted.
    pub participant_type: ParticipantType,
    /// How many of its queries failed.
    pub error_count: usize,
}

/// A participant of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Participant {
    /// Its name.
    pub id: String,
    /// Its name.
    pub name: String,
    /// What it is.
    #[serde(rename = "type")]
    pub kind: ParticipantType,
}

/// A session and its queries, in the order they joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionState {
    /// The session id.
    pub session_id: String,
    /// The id without a `session-` prefix.
    pub name: String,
    /// Its queries, in the order they were first seen.
    pub queries: Vec<QueryState>,
    /// Derived from the queries' phases.
    pub status: Status,
    /// Queries in `error`.
    pub error_count: usize,
    /// Derived from the conversations.
    pub participants: Vec<Participant>,
    /// Derived from the queries.
    pub conversations: Vec<ConversationSummary>,
    /// When it was first seen.
    pub created_at: DateTime<Utc>,
    /// Its most recent event or message.
    pub last_activity: DateTime<Utc>,
}
