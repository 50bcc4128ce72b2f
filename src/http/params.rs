//! The query-parameter rules every list route shares: `limit`/`cursor` paging with upstream's
//! `PAGINATION_ERROR` messages, and the `'true'|'false'` flags (`watch`, `from-beginning`).

use serde::{Deserialize, Serialize};

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
#[derive(Debug, Serialize)]
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

/// The parameters of a list route that can also watch (`GET /messages`, `GET /stream`).
#[derive(Debug, Default, Deserialize)]
pub struct ListParams {
    /// Page size.
    pub limit: Option<String>,
    /// Exclusive cursor.
    pub cursor: Option<String>,
    /// `true` switches to SSE.
    pub watch: Option<String>,
    /// Filter on a conversation (messages only).
    pub conversation_id: Option<String>,
    /// Filter on a query (messages only).
    pub query_id: Option<String>,
}

/// The parameters of the event and trace routes: a page, or a watch with upstream's start parameters.
#[derive(Debug, Default, Deserialize)]
pub struct FeedParams {
    /// Page size.
    pub limit: Option<String>,
    /// Exclusive cursor (a sequence number).
    pub cursor: Option<String>,
    /// `true` switches to SSE.
    pub watch: Option<String>,
    /// Only this session.
    pub session_id: Option<String>,
    /// `true` replays everything kept (watches of one query or trace).
    #[serde(rename = "from-beginning")]
    pub from_beginning: Option<String>,
}

impl FeedParams {
    /// Where a watch starts: `from-beginning=true`, else after `cursor`, else live.
    pub fn start(&self, page: PageRequest) -> Result<Start, ApiError> {
        let from_beginning = flag("from-beginning", self.from_beginning.as_deref())?;
        Ok(Start::of(from_beginning, self.cursor.is_some().then_some(page.cursor)))
    }
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
