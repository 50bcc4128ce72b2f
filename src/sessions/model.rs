//! The shapes of the sessions API: upstream's SessionEntry (queries as an object keyed by name, in the order
//! they joined), the list parameters with their checks, and the rows the sessions watch fans out.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use serde::{Deserialize, Serialize, ser::SerializeMap};
use utoipa::{IntoParams, ToSchema};

use super::state::{ConversationSummary, Participant, Phase, QueryState, SessionState, Status};
use crate::{
    db::{fanout::FeedRow, feed::GlobalCursor},
    http::params::Page,
    timestamp::iso_timestamp,
    validate::{Checked, Invalid},
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

/// The query parameters of `GET /sessions`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SessionParams {
    /// `true`: a `text/event-stream` of every session, then `{"sessionId","session"}` whenever one changes.
    #[param(value_type = Option<crate::http::params::Flag>, inline)]
    pub watch: Option<String>,
    /// Only this session (watch).
    pub session_id: Option<String>,
    /// Only sessions with this status.
    #[param(value_type = Option<Status>, inline)]
    pub status: Option<String>,
    /// The sort key (default: creation order).
    #[param(value_type = Option<SortKey>, inline)]
    pub sort: Option<String>,
    /// The sort order (default `desc`).
    #[param(value_type = Option<SortOrder>, inline)]
    pub order: Option<String>,
    /// Only sessions active at or after this time (RFC 3339, or a date).
    #[serde(rename = "dateFrom")]
    #[param(rename = "dateFrom")]
    pub date_from: Option<String>,
    /// Only sessions active at or before this time (RFC 3339, or a date).
    #[serde(rename = "dateTo")]
    #[param(rename = "dateTo")]
    pub date_to: Option<String>,
    /// Case-insensitive text in the id, the name, or a query's agent, team or tool.
    pub search: Option<String>,
    /// Page size, 1 to 1000 (default 100); with it (or `cursor`) the reply is a page.
    #[param(value_type = Option<i64>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// Offset into the filtered, sorted list (the previous page's `nextCursor`).
    #[param(value_type = Option<i64>, minimum = 0)]
    pub cursor: Option<String>,
}

/// What `sort` takes.
#[derive(Debug, Clone, Copy, ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum SortKey {
    /// The last activity.
    Date,
    /// The name.
    Name,
    /// The number of conversations.
    Conversations,
}

/// What `order` takes.
#[derive(Debug, Clone, Copy, ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum SortOrder {
    /// Ascending.
    Asc,
    /// Descending.
    Desc,
}

/// What a page of sessions covers, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFilter {
    /// `active`, `idle` or `error`.
    pub status: Option<Status>,
    /// Lower bound on the last activity.
    pub date_from: Option<DateTime<Utc>>,
    /// Upper bound on the last activity.
    pub date_to: Option<DateTime<Utc>>,
    /// Lower-cased search text.
    pub search: Option<String>,
    /// `date`, `name` or `conversations`; `None` keeps creation order.
    pub sort: Option<&'static str>,
    /// Whether the sort is descending.
    pub descending: bool,
}

impl SessionParams {
    /// Checks the filter and sort parameters (zod's enum messages, dates that parse).
    pub fn filter(&self) -> Checked<SessionFilter> {
        let status = match one_of("status", self.status.as_deref(), &["active", "idle", "error"])? {
            Some("active") => Some(Status::Active),
            Some("idle") => Some(Status::Idle),
            Some(_) => Some(Status::Error),
            None => None,
        };
        let sort = one_of("sort", self.sort.as_deref(), &["date", "name", "conversations"])?;
        let descending = one_of("order", self.order.as_deref(), &["asc", "desc"])? != Some("asc");
        Ok(SessionFilter {
            status,
            date_from: date("dateFrom", self.date_from.as_deref())?,
            date_to: date("dateTo", self.date_to.as_deref())?,
            search: self.search.as_deref().filter(|s| !s.is_empty()).map(str::to_lowercase),
            sort,
            descending,
        })
    }

    /// Whether the request asks for a page (upstream: a non-empty `limit` or `cursor`).
    pub fn wants_page(&self) -> bool {
        [&self.limit, &self.cursor].into_iter().any(|p| p.as_deref().is_some_and(|v| !v.is_empty()))
    }
}

fn one_of(name: &str, raw: Option<&str>, allowed: &[&'static str]) -> Checked<Option<&'static str>> {
    let Some(raw) = raw else { return Ok(None) };
    match allowed.iter().find(|a| **a == raw) {
        Some(value) => Ok(Some(value)),
        None => {
            let expected: Vec<String> = allowed.iter().map(|a| format!("'{a}'")).collect();
            Err(Invalid(format!("{name}: Invalid enum value. Expected {}, received '{raw}'", expected.join(" | "))))
        }
    }
}

/// Parses what JavaScript's `new Date(…)` reads in practice: RFC 3339, or a date or date-time without an
/// offset (taken as UTC).
fn date(name: &str, raw: Option<&str>) -> Checked<Option<DateTime<Utc>>> {
    let Some(raw) = raw.filter(|r| !r.is_empty()) else { return Ok(None) };
    let parsed = DateTime::parse_from_rfc3339(raw)
        .map(|d| d.with_timezone(&Utc))
        .ok()
        .or_else(|| NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M:%S%.f").ok().map(|d| d.and_utc()))
        .or_else(|| NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M").ok().map(|d| d.and_utc()))
        .or_else(|| {
            NaiveDate::parse_from_str(raw, "%Y-%m-%d").ok().and_then(|d| d.and_hms_opt(0, 0, 0)).map(|d| d.and_utc())
        });
    parsed.map(Some).ok_or_else(|| Invalid(format!("{name}: Invalid date '{raw}'")))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_parameters_are_checked_like_upstreams_zod_enums() {
        let params = SessionParams { status: Some("busy".into()), ..Default::default() };
        assert_eq!(
            params.filter().unwrap_err().to_string(),
            "status: Invalid enum value. Expected 'active' | 'idle' | 'error', received 'busy'"
        );
        let params = SessionParams { sort: Some("name".into()), order: Some("asc".into()), ..Default::default() };
        let filter = params.filter().unwrap();
        assert_eq!((filter.sort, filter.descending), (Some("name"), false));
        assert!(SessionParams::default().filter().unwrap().descending, "desc by default");
    }

    #[test]
    fn dates_parse_as_javascript_reads_them_and_garbage_is_refused() {
        let day = date("dateFrom", Some("2026-11-23")).unwrap().unwrap();
        assert_eq!(iso_timestamp(day), "2026-11-23T00:00:00.000Z");
        let exact = date("dateTo", Some("2026-11-23T10:11:12.345Z")).unwrap().unwrap();
        assert_eq!(iso_timestamp(exact), "2026-11-23T10:11:12.345Z");
        assert!(date("dateFrom", Some("yesterday")).unwrap_err().to_string().starts_with("dateFrom: "));
    }
}
