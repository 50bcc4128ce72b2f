//! Upstream's session rules (`sessions-broker.ts`), as pure functions: how an event or a message changes a
//! session, its queries' phases, and what is derived from them (status, error count, conversations,
//! participants). The store loads a session, applies one of these under the session's row lock, and writes
//! the result back in the same transaction.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use super::event::SessionEvent;

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
    /// Its most recent event or message.
    pub last_activity: DateTime<Utc>,
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

/// The phase an event's reason means (checked in this order).
pub fn phase_of(reason: &str, error: Option<&str>) -> Phase {
    if reason == "QueryExecutionComplete" {
        return if is_set(error) { Phase::Error } else { Phase::Done };
    }
    if reason.contains("Canceled") {
        return Phase::Canceled;
    }
    if reason.contains("Error") {
        return Phase::Error;
    }
    Phase::Running
}

/// A session's name: its id without a `session-` prefix.
pub fn name_of(session_id: &str) -> String {
    session_id.strip_prefix("session-").unwrap_or(session_id).to_owned()
}

/// JavaScript truthiness of an optional string: present and not empty.
fn is_set(value: Option<&str>) -> bool {
    value.is_some_and(|v| !v.is_empty())
}

impl SessionState {
    /// A session first seen `now`.
    pub fn new(session_id: &str, now: DateTime<Utc>) -> Self {
        SessionState {
            session_id: session_id.to_owned(),
            name: name_of(session_id),
            queries: Vec::new(),
            status: Status::Idle,
            error_count: 0,
            participants: Vec::new(),
            conversations: Vec::new(),
            created_at: now,
            last_activity: now,
        }
    }

    /// Applies an event at `now`; returns the index of the query it changed.
    pub fn apply_event(&mut self, event: &SessionEvent, now: DateTime<Utc>) -> usize {
        self.last_activity = now;
        let phase = phase_of(&event.reason, event.error.as_deref());
        let index = match self.queries.iter().position(|q| q.name == event.query_name) {
            Some(index) => {
                update_query(&mut self.queries[index], phase, event, now);
                index
            }
            None => {
                self.queries.push(QueryState {
                    name: event.query_name.clone(),
                    namespace: event.query_namespace.clone(),
                    conversation_id: event.conversation_id.clone().filter(|c| !c.is_empty()),
                    agent: event.agent.clone(),
                    team: event.team.clone(),
                    tool: event.tool.clone(),
                    target_type: event.target_type.clone().filter(|t| !t.is_empty()).unwrap_or_else(|| "agent".into()),
                    phase,
                    error: event.error.clone(),
                    created_at: now,
                    completed_at: (phase != Phase::Running).then_some(now),
                    last_activity: now,
                });
                self.queries.len() - 1
            }
        };
        self.recalculate();
        index
    }

    /// Applies a message of query `query_name` in `conversation_id` at `now`: activity, and the
    /// conversation if the query had none. Upstream recalculates nothing else until the next event.
    pub fn apply_message(&mut self, query_name: &str, conversation_id: &str, now: DateTime<Utc>) -> Option<usize> {
        let index = self.queries.iter().position(|q| q.name == query_name)?;
        let query = &mut self.queries[index];
        query.last_activity = now;
        if query.conversation_id.is_none() {
            query.conversation_id = Some(conversation_id.to_owned());
        }
        self.last_activity = now;
        Some(index)
    }

    /// How many distinct conversations its queries have (what `sort=conversations` orders by).
    pub fn conversation_count(&self) -> usize {
        let mut ids: Vec<&str> = self.queries.iter().filter_map(|q| q.conversation_id.as_deref()).collect();
        ids.retain(|id| !id.is_empty());
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    }

    fn recalculate(&mut self) {
        if self.queries.is_empty() {
            self.status = Status::Idle;
            self.error_count = 0;
            self.participants.clear();
            self.conversations.clear();
            return;
        }
        self.error_count = self.queries.iter().filter(|q| q.phase == Phase::Error).count();
        self.status = if self.queries.iter().any(|q| matches!(q.phase, Phase::Running | Phase::Pending)) {
            Status::Active
        } else {
            // The first query with the latest activity (a strictly later one replaces it).
            let latest = self
                .queries
                .iter()
                .fold(&self.queries[0], |latest, q| if q.last_activity > latest.last_activity { q } else { latest });
            if latest.phase == Phase::Error { Status::Error } else { Status::Idle }
        };
        self.conversations = conversations_of(&self.queries);
        self.participants = participants_of(&self.conversations);
    }
}

fn update_query(query: &mut QueryState, phase: Phase, event: &SessionEvent, now: DateTime<Utc>) {
    query.last_activity = now;
    let fill = |slot: &mut Option<String>, value: &Option<String>| {
        if is_set(value.as_deref()) && !is_set(slot.as_deref()) {
            slot.clone_from(value);
        }
    };
    fill(&mut query.conversation_id, &event.conversation_id);
    fill(&mut query.agent, &event.agent);
    fill(&mut query.team, &event.team);
    fill(&mut query.tool, &event.tool);
    if let Some(target_type) = event.target_type.as_deref().filter(|t| !t.is_empty())
        && query.target_type == "agent"
    {
        query.target_type = target_type.to_owned();
    }
    match phase {
        Phase::Error => {
            query.phase = Phase::Error;
            query.error = event.error.clone();
            query.completed_at = Some(now);
        }
        Phase::Canceled if query.phase != Phase::Error => {
            query.phase = Phase::Canceled;
            query.completed_at = Some(now);
        }
        // A later `done` supersedes an earlier `error`: a query that paused for a human was recorded as
        // failing, and once it completes the error must go.
        Phase::Done if query.phase != Phase::Canceled => {
            query.phase = Phase::Done;
            query.error = None;
            query.completed_at = Some(now);
        }
        _ => {}
    }
}

fn participant_type_of(target_type: &str) -> ParticipantType {
    match target_type {
        "team" => ParticipantType::Team,
        "tool" => ParticipantType::Tool,
        _ => ParticipantType::Agent,
    }
}

fn conversations_of(queries: &[QueryState]) -> Vec<ConversationSummary> {
    let mut groups: Vec<(&str, Vec<&QueryState>)> = Vec::new();
    for query in queries {
        let Some(id) = query.conversation_id.as_deref().filter(|id| !id.is_empty()) else { continue };
        match groups.iter_mut().find(|(group, _)| *group == id) {
            Some((_, members)) => members.push(query),
            None => groups.push((id, vec![query])),
        }
    }
    groups
        .into_iter()
        .map(|(id, members)| {
            let mut participants: Vec<String> = Vec::new();
            for query in &members {
                let who = [&query.team, &query.agent, &query.tool].into_iter().flatten().find(|w| !w.is_empty());
                if let Some(who) = who
                    && !participants.contains(who)
                {
                    participants.push(who.clone());
                }
            }
            let (first, last) = (members[0], members[members.len() - 1]);
            ConversationSummary {
                conversation_id: id.to_owned(),
                name: participants.first().cloned().unwrap_or_else(|| id.to_owned()),
                participants,
                message_count: members.len(),
                duration: duration(first.created_at, last.completed_at),
                start_time: crate::timestamp::iso_timestamp(first.created_at),
                participant_type: participant_type_of(&first.target_type),
                error_count: members.iter().filter(|q| q.phase == Phase::Error).count(),
            }
        })
        .collect()
}

fn participants_of(conversations: &[ConversationSummary]) -> Vec<Participant> {
    let mut participants: Vec<Participant> = Vec::new();
    for conversation in conversations {
        if !participants.iter().any(|p| p.name == conversation.name) {
            participants.push(Participant {
                id: conversation.name.clone(),
                name: conversation.name.clone(),
                kind: conversation.participant_type,
            });
        }
    }
    participants
}

/// `1m 3s`, `42s`, or `ongoing` when there is no end yet (whole seconds, rounded down, as upstream).
fn duration(start: DateTime<Utc>, end: Option<DateTime<Utc>>) -> String {
    let Some(end) = end else { return "ongoing".into() };
    let seconds = (end - start).num_milliseconds().div_euclid(1000);
    let minutes = seconds.div_euclid(60);
    if minutes > 0 { format!("{minutes}m {}s", seconds % 60) } else { format!("{seconds}s") }
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
