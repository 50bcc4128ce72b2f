//! Upstream's session rules (`sessions-broker.ts`), as pure functions: how an event or a message changes a
//! session, its queries' phases, and what is derived from them (status, error count, conversations,
//! participants). The store loads a session, applies one of these under the session's row lock, and writes
//! the result back in the same transaction. The state they change is [`super::state`]'s.

use chrono::{DateTime, Utc};

use super::derive::{conversations_of, participants_of};
use super::{
    event::SessionEvent,
    state::{Phase, QueryState, SessionState, Status},
};

/// What a message did to the session its query is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageEffect {
    /// The query is not in this session.
    Unknown,
    /// The session was active; nothing it shows changed.
    Activity,
    /// Query `.0` joined the message's conversation: conversations and participants changed.
    Joined(usize),
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

    /// Applies an event that arrived `sequence`th (`None`: posted to `POST /sessions`, which has no arrival
    /// order) at `now`; returns the index of the query it changed, or `None` if it changed nothing.
    ///
    /// Upstream's watermarks: an event applied after a later one of its query arrived (two writers, two
    /// transactions) only fills what is still unset, and decides the phase only if no later terminal event
    /// did; such a late terminal event leaves the query's activity alone, so it does not win the election
    /// of the session's status over the later event either.
    pub fn apply_event(&mut self, event: &SessionEvent, sequence: Option<i64>, now: DateTime<Utc>) -> Option<usize> {
        let phase = phase_of(&event.reason, event.error.as_deref());
        let arrived = sequence.unwrap_or(0);
        let index = match self.queries.iter().position(|q| q.name == event.query_name) {
            Some(index) => {
                let query = &mut self.queries[index];
                let stale = sequence.is_some_and(|s| s <= query.last_event_sequence);
                let phase_stale = sequence.is_some_and(|s| s <= query.last_phase_sequence);
                let filled = fill_metadata(query, event);
                if stale && !filled && (!phase.is_terminal() || phase_stale) {
                    return None;
                }
                if !stale {
                    query.last_activity = now;
                    apply_phase(query, phase, event, now);
                } else if phase.is_terminal() && !phase_stale {
                    apply_phase(query, phase, event, now);
                }
                query.last_event_sequence = query.last_event_sequence.max(arrived);
                if phase.is_terminal() {
                    query.last_phase_sequence = query.last_phase_sequence.max(arrived);
                }
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
                    last_event_sequence: arrived,
                    last_phase_sequence: if phase.is_terminal() { arrived } else { 0 },
                });
                self.queries.len() - 1
            }
        };
        self.last_activity = now;
        self.recalculate();
        Some(index)
    }

    /// Applies a message of query `query_name` in `conversation_id` at `now` (upstream's rule): the session
    /// was active, and a query without a conversation joins this one, which changes the session's
    /// conversations and participants (a finished query gets no later event that would show them). The
    /// query's own activity stays: it elects the query whose phase is the session's status, and a message
    /// changes no phase.
    pub fn apply_message(&mut self, query_name: &str, conversation_id: &str, now: DateTime<Utc>) -> MessageEffect {
        let Some(index) = self.queries.iter().position(|q| q.name == query_name) else {
            return MessageEffect::Unknown;
        };
        self.last_activity = now;
        let query = &mut self.queries[index];
        if query.conversation_id.is_some() {
            return MessageEffect::Activity;
        }
        query.conversation_id = Some(conversation_id.to_owned());
        self.recalculate_conversations();
        MessageEffect::Joined(index)
    }

    /// Removes query `query_name` (its Query was deleted) and derives the totals again; returns whether it
    /// was there. The activity stays where it was: a deletion is not activity.
    pub fn remove_query(&mut self, query_name: &str) -> bool {
        let before = self.queries.len();
        self.queries.retain(|q| q.name != query_name);
        if self.queries.len() == before {
            return false;
        }
        self.recalculate();
        true
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
        self.recalculate_conversations();
    }

    fn recalculate_conversations(&mut self) {
        self.conversations = conversations_of(&self.queries);
        self.participants = participants_of(&self.conversations);
    }
}

/// Fills what is still unset (every rule is first-write-wins, so an event applied late can only fill a
/// gap); returns whether anything was filled.
fn fill_metadata(query: &mut QueryState, event: &SessionEvent) -> bool {
    let mut filled = false;
    let mut fill = |slot: &mut Option<String>, value: &Option<String>| {
        if is_set(value.as_deref()) && !is_set(slot.as_deref()) {
            slot.clone_from(value);
            filled = true;
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
        filled = true;
    }
    filled
}

/// The order-sensitive rule: a `done` clears an `error`, so an older `done` must never reach it after a
/// newer `error` (the watermarks keep it out).
fn apply_phase(query: &mut QueryState, phase: Phase, event: &SessionEvent, now: DateTime<Utc>) {
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

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
