//! The query parameters of `GET /sessions` and their checks: zod's enum messages for `status`, `sort` and
//! `order`, and dates read as JavaScript's `new Date(…)` reads them.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use crate::{
    sessions::state::Status,
    validate::{Checked, Invalid},
};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timestamp::iso_timestamp;

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
