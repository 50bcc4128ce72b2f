//! The shapes of the sessions API: upstream's SessionEntry (queries as an object keyed by name, in the order
//! they joined), its lists and pages, the rows the sessions watch fans out, and the list parameters
//! (`model/params.rs`).

mod params;

use serde::{Deserialize, Serialize, ser::SerializeMap};
use utoipa::ToSchema;

pub use self::params::{SessionFilter, SessionParams, SortKey, SortOrder};

use super::state::{ConversationSummary, Participant, Phase, QueryState, SessionState, Status};
use crate::{
    db::{fanout::FeedRow, feed::GlobalCursor},
    http::params::Page,
    timestamp::iso_timestamp,
};

/// A session as upstream serves it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionEntry {
    /// Its id.
    session_id: String,
    /// The id without a `session-` prefix.
    name: String,
    /// Its queries by name, in the order they joined.
    #[schema(value_type = std::collections::HashMap<String, QueryEntry>)]
    queries: Queries,
    /// Derived from the queries' phases.
    status: Status,
    /// Queries in `error`.
    error_count: usize,
    /// Who took part.
    participants: Vec<Participant>,
    /// Its conversations.
    conversations: Vec<ConversationSummary>,
    /// When it was first seen (ISO 8601).
    created_at: String,
    /// When it last changed (ISO 8601).
    last_activity: String,
}

/// A session's queries: a JSON object keyed by query name, in the order they joined.
#[derive(Debug, Clone)]
struct Queries(Vec<QueryEntry>);

impl Serialize for Queries {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for query in &self.0 {
            map.serialize_entry(&query.name, query)?;
        }
        map.end()
    }
}

/// One query of a session as upstream serves it (absent fields are left out).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueryEntry {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    conversation_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    team: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool: Option<String>,
    target_type: String,
    phase: Phase,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    completed_at: Option<String>,
    last_activity: String,
}

impl From<&QueryState> for QueryEntry {
    fn from(query: &QueryState) -> Self {
        QueryEntry {
            name: query.name.clone(),
            namespace: query.namespace.clone(),
            conversation_id: query.conversation_id.clone(),
            agent: query.agent.clone(),
            team: query.team.clone(),
            tool: query.tool.clone(),
            target_type: query.target_type.clone(),
            phase: query.phase,
            error: query.error.clone(),
            created_at: iso_timestamp(query.created_at),
            completed_at: query.completed_at.map(iso_timestamp),
            last_activity: iso_timestamp(query.last_activity),
        }
    }
}

impl From<&SessionState> for SessionEntry {
    fn from(session: &SessionState) -> Self {
        SessionEntry {
            session_id: session.session_id.clone(),
            name: session.name.clone(),
            queries: Queries(session.queries.iter().map(QueryEntry::from).collect()),
            status: session.status,
            error_count: session.error_count,
            participants: session.participants.clone(),
            conversations: session.conversations.clone(),
            created_at: iso_timestamp(session.created_at),
            last_activity: iso_timestamp(session.last_activity),
        }
    }
}

impl SessionEntry {
    /// Its id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }
}

/// `{"sessions":{"<id>":SessionEntry,…}}`, in the order the sessions were created.
#[derive(Debug, Serialize, ToSchema)]
pub struct WholeStore {
    /// Every session, by id.
    #[schema(value_type = std::collections::HashMap<String, SessionEntry>)]
    sessions: Sessions,
}

impl WholeStore {
    /// The store of `sessions`.
    pub fn new(sessions: Vec<SessionEntry>) -> Self {
        WholeStore { sessions: Sessions(sessions) }
    }
}

/// Sessions as a JSON object keyed by id, in their order.
#[derive(Debug)]
struct Sessions(Vec<SessionEntry>);

impl Serialize for Sessions {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for entry in &self.0 {
            map.serialize_entry(&entry.session_id, entry)?;
        }
        map.end()
    }
}

/// What `GET /sessions` answers without `watch`: the whole store, or a page when `limit` or `cursor` is set.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum SessionList {
    /// Without `limit` and `cursor`.
    Whole(WholeStore),
    /// With `limit` or `cursor`.
    Page(SessionPage),
}

/// How many sessions match a page's filters, in total and per status.
#[derive(Debug, Clone, Copy, Default, Serialize, ToSchema)]
pub struct StatusCounts {
    /// Sessions with a query pending or running.
    pub active: i64,
    /// Sessions at rest.
    pub idle: i64,
    /// Sessions whose latest query failed.
    pub error: i64,
}

/// A page of sessions: upstream's envelope (`nextCursor` is an offset here) with `statusCounts`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionPage {
    /// The sessions, `total` matching, and where the next page starts.
    #[serde(flatten)]
    pub page: Page<SessionEntry>,
    /// How many of the matching sessions have each status.
    pub status_counts: StatusCounts,
}

/// A changed session as the watch sends it, serialised once when the replica reads it:
/// `{"sessionId":…,"session":SessionEntry}`.
#[derive(Debug)]
pub struct SessionChange {
    /// The session.
    pub session_id: String,
    /// The frame's JSON text.
    pub frame: String,
    /// Its creation order.
    pub sequence: i64,
    /// The transaction that last changed it.
    pub tx: i64,
}

impl SessionChange {
    /// The change of `entry`, last written by transaction `tx`.
    pub fn new(entry: &SessionEntry, sequence: i64, tx: i64) -> Self {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Frame<'a> {
            session_id: &'a str,
            session: &'a SessionEntry,
        }
        // Serialised straight from the entry: a `serde_json::Value` would sort the queries by name.
        let frame = serde_json::to_string(&Frame { session_id: &entry.session_id, session: entry }).unwrap_or_default();
        SessionChange { session_id: entry.session_id.clone(), frame, sequence, tx }
    }
}

impl FeedRow for SessionChange {
    fn key(&self) -> &str {
        &self.session_id
    }

    /// Sessions are followed globally only.
    fn position(&self) -> i64 {
        0
    }

    fn global(&self) -> GlobalCursor {
        GlobalCursor { tx: self.tx, sequence: self.sequence }
    }

    fn size(&self) -> usize {
        self.frame.len()
    }
}

/// `DELETE /sessions/queries/{queryName}`: upstream's delete reply with how many sessions had the query.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueryRemoved {
    /// `success`, and `Query <name> removed from <n> session(s)`.
    #[serde(flatten)]
    pub reply: crate::http::reply::StatusMessage,
    /// From how many sessions the query was removed (0 when none had it).
    pub removed: u64,
}

/// The body of `POST /sessions`: an event's data with at least a `sessionId` (with `queryName` it is
/// applied as an event's data would be, `_reason` standing for the event's reason).
#[derive(Debug, Deserialize, ToSchema)]
pub struct PostSession {
    /// The session.
    #[serde(rename = "sessionId")]
    #[schema(min_length = 1, max_length = 512)]
    pub session_id: String,
}
