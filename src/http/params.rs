//! The query-parameter rules every list route shares: `limit`/`cursor` paging with upstream's
//! `PAGINATION_ERROR` messages, and the `'true'|'false'` flags (`watch`, `from-beginning`). The parameter
//! structs are what the OpenAPI document describes (parameters arrive as text and are checked here, so each
//! names the type it is checked as).

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::{db::watch::Start, error::ApiError};

/// Default page size when `limit` is absent.
pub const DEFAULT_LIMIT: i64 = 100;
/// Largest page a client may ask for.
pub const MAX_LIMIT: i64 = 1000;

/// A validated `limit` and exclusive `cursor` (items with `sequence > cursor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    /// How many items at most.
    pub limit: i64,
    /// Only items after this sequence number.
    pub cursor: i64,
}

impl PageRequest {
    /// Checks the raw `limit` and `cursor` parameters.
    pub fn parse(limit: Option<&str>, cursor: Option<&str>) -> Result<Self, ApiError> {
        let limit = match limit {
            None => DEFAULT_LIMIT,
            Some(raw) => match raw.parse::<i64>() {
                Ok(n) if n > MAX_LIMIT => return Err(ApiError::Pagination("limit cannot exceed 1000")),
                Ok(n) if n > 0 => n,
                _ if is_huge_integer(raw) => return Err(ApiError::Pagination("limit cannot exceed 1000")),
                _ => return Err(ApiError::Pagination("limit must be a positive integer")),
            },
        };
        let cursor = match cursor {
            None => 0,
            Some(raw) => match raw.parse::<i64>() {
                Ok(n) if n >= 0 => n,
                _ => return Err(ApiError::Pagination("cursor must be a non-negative integer")),
            },
        };
        Ok(PageRequest { limit, cursor })
    }
}

fn is_huge_integer(raw: &str) -> bool {
    !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit()) && raw.trim_start_matches('0').len() > 18
}

/// A `'true'|'false'` flag as the OpenAPI document describes it ([`flag`] reads it).
#[derive(Debug, Clone, Copy, ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum Flag {
    /// On.
    True,
    /// Off (the default).
    False,
}

/// Parses a `'true'|'false'` flag; anything else is a 400, as upstream's zod enum.
pub fn flag(name: &str, raw: Option<&str>) -> Result<bool, ApiError> {
    match raw {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(ApiError::Validation(format!(
            "{name}: Invalid enum value. Expected 'true' | 'false', received '{other}'"
        ))),
    }
}

/// Upstream's page envelope `{items,total?,hasMore,nextCursor?}`; `nextCursor` is a JSON number and only
/// present when `hasMore`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Page<T> {
    /// The items, sequence ascending.
    pub items: Vec<T>,
    /// How many items match the filter, ignoring the cursor; omitted where upstream omits it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
    /// Whether more items follow.
    #[serde(rename = "hasMore")]
    pub has_more: bool,
    /// The cursor of the next page: the last item's sequence.
    #[serde(rename = "nextCursor", skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<i64>,
}

impl<T> Page<T> {
    /// Builds a page from up to `limit + 1` fetched items; `sequence_of` reads an item's sequence.
    pub fn from_overfetch(mut items: Vec<T>, limit: i64, total: Option<i64>, sequence_of: impl Fn(&T) -> i64) -> Self {
        let has_more = items.len() as i64 > limit;
        items.truncate(limit as usize);
        let next_cursor = if has_more { items.last().map(&sequence_of) } else { None };
        Page { items, total, has_more, next_cursor }
    }
}

/// The parameters of `GET /stream`: a page, or with `watch=true` the SSE feed.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Page size, 1 to 1000 (default 100).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// Only items after this sequence number (the previous page's `nextCursor`); with `watch=true`, resume
    /// after it.
    #[param(value_type = Option<i64>, minimum = 0)]
    pub cursor: Option<String>,
    /// `true`: a `text/event-stream` of new items instead of a page.
    #[param(value_type = Option<Flag>, inline)]
    pub watch: Option<String>,
}

/// The parameters of `GET /events` and `GET /traces`: a page, or a watch with upstream's start parameters.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FeedParams {
    /// Page size, 1 to 1000 (default 100).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// Exclusive cursor (a sequence number, the previous page's `nextCursor`); with `watch=true`, resume
    /// after it.
    #[param(value_type = Option<i64>, minimum = 0)]
    pub cursor: Option<String>,
    /// `true`: a `text/event-stream` instead of a page.
    #[param(value_type = Option<Flag>, inline)]
    pub watch: Option<String>,
    /// Only this session.
    pub session_id: Option<String>,
    /// `true` replays everything kept before going live (a watch of events).
    #[serde(rename = "from-beginning")]
    #[param(rename = "from-beginning", value_type = Option<Flag>, inline)]
    pub from_beginning: Option<String>,
}

impl FeedParams {
    /// Where a watch starts: `from-beginning=true`, else after `cursor`, else live.
    pub fn start(&self, page: PageRequest) -> Result<Start, ApiError> {
        start(self.from_beginning.as_deref(), self.cursor.is_some(), page)
    }
}

/// The parameters of one key's feed (`GET /events/{queryUID}`, `GET /traces/{id}`): a page (events) or
/// the key itself (traces), or a watch with upstream's start parameters.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct KeyFeedParams {
    /// Page size, 1 to 1000 (default 100).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// Exclusive cursor (a sequence number); with `watch=true`, resume after it.
    #[param(value_type = Option<i64>, minimum = 0)]
    pub cursor: Option<String>,
    /// `true`: a `text/event-stream` instead of a page.
    #[param(value_type = Option<Flag>, inline)]
    pub watch: Option<String>,
    /// `true` replays everything kept before going live.
    #[serde(rename = "from-beginning")]
    #[param(rename = "from-beginning", value_type = Option<Flag>, inline)]
    pub from_beginning: Option<String>,
}

impl KeyFeedParams {
    /// Where a watch starts: `from-beginning=true`, else after `cursor`, else live.
    pub fn start(&self, page: PageRequest) -> Result<Start, ApiError> {
        start(self.from_beginning.as_deref(), self.cursor.is_some(), page)
    }
}

fn start(from_beginning: Option<&str>, has_cursor: bool, page: PageRequest) -> Result<Start, ApiError> {
    let from_beginning = flag("from-beginning", from_beginning)?;
    Ok(Start::of(from_beginning, has_cursor.then_some(page.cursor)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_and_cursor_follow_upstream_rules() {
        assert_eq!(PageRequest::parse(None, None).unwrap(), PageRequest { limit: 100, cursor: 0 });
        assert_eq!(PageRequest::parse(Some("1000"), Some("7")).unwrap(), PageRequest { limit: 1000, cursor: 7 });
        for bad in ["0", "-1", "abc", "1.5", ""] {
            let err = PageRequest::parse(Some(bad), None).unwrap_err();
            assert_eq!(err.to_string(), "limit must be a positive integer", "limit={bad}");
        }
        for big in ["1001", "99999999999999999999999"] {
            let err = PageRequest::parse(Some(big), None).unwrap_err();
            assert_eq!(err.to_string(), "limit cannot exceed 1000", "limit={big}");
        }
        for bad in ["-1", "x", "2.5"] {
            let err = PageRequest::parse(None, Some(bad)).unwrap_err();
            assert_eq!(err.to_string(), "cursor must be a non-negative integer", "cursor={bad}");
        }
    }

    #[test]
    fn flags_accept_only_true_and_false() {
        assert!(flag("watch", Some("true")).unwrap());
        assert!(!flag("watch", Some("false")).unwrap());
        assert!(!flag("watch", None).unwrap());
        assert!(flag("watch", Some("1")).is_err());
    }
}
