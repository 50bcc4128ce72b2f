//! The page's tabs, search box and filters (content text, recipient, sender, Query) and its paging: what the GET
//! form sends, how it becomes a store filter, the links that keep it, and the form itself. Everything works
//! without JavaScript: searching and paging are plain links and GET forms.

use chrono::{DateTime, Utc};
use maud::{Markup, html};
use serde::{Deserialize, Serialize};

use crate::{error::ApiError, questions::store::QuestionFilter};

/// Which tab is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Pending questions, with answer forms.
    Pending,
    /// Answered, cancelled and expired questions.
    Closed,
}

/// Percent-encodes one URL path segment (everything but RFC 3986's unreserved characters).
pub fn path_segment(raw: &str) -> String {
    raw.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The search and filter fields as typed (blank fields mean "any", as a form sends them).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Search {
    /// Text the content contains (case-insensitive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q: Option<String>,
    /// An `ark://` address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipient: Option<String>,
    /// An `ark://` address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<String>,
    /// `namespace/name`, or a name in any namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
}

impl Search {
    /// The same search with blank fields dropped and the rest trimmed.
    pub fn cleaned(self) -> Self {
        let clean = |value: Option<String>| value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        Search {
            q: clean(self.q),
            recipient: clean(self.recipient),
            sender: clean(self.sender),
            query: clean(self.query),
        }
    }

    /// Whether anything narrows the list.
    pub fn is_empty(&self) -> bool {
        self.q.is_none() && self.recipient.is_none() && self.sender.is_none() && self.query.is_none()
    }

    /// The store filter for these fields (status and paging are the caller's).
    pub fn filter(&self) -> QuestionFilter {
        let (query_namespace, query_name) = match self.query.as_deref().map(|q| q.split_once('/')) {
            Some(Some((namespace, name))) => (Some(namespace.to_owned()), Some(name.to_owned())),
            Some(None) => (None, self.query.clone()),
            None => (None, None),
        };
        QuestionFilter {
            recipient: self.recipient.clone(),
            sender: self.sender.clone(),
            text: self.q.clone(),
            query_name,
            query_namespace,
            ..QuestionFilter::default()
        }
    }

    /// `/ui` with this search, on `view` (pending when `None`), at `cursor` (the first page when `None`).
    pub fn url(&self, view: Option<View>, cursor: Option<&str>) -> String {
        let view = (view == Some(View::Closed)).then_some("closed");
        let params = Params { view, search: self, cursor };
        let query = serde_urlencoded::to_string(&params).unwrap_or_default();
        if query.is_empty() { "/ui".to_owned() } else { format!("/ui?{query}") }
    }
}

#[derive(Serialize)]
struct Params<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    view: Option<&'static str>,
    #[serde(flatten)]
    search: &'a Search,
    #[serde(skip_serializing_if = "Option::is_none")]
    cursor: Option<&'a str>,
}

/// The pending list's cursor: the sequence number of the last question shown.
pub fn pending_cursor(raw: Option<&str>) -> Result<i64, ApiError> {
    let Some(raw) = raw.filter(|raw| !raw.is_empty()) else { return Ok(0) };
    raw.parse().ok().filter(|n: &i64| *n >= 0).ok_or(ApiError::Pagination("cursor: not one this page made"))
}

/// The closed list's cursor, `<closed_at in µs>_<sequence>` of the last question shown (closed lists are
/// ordered by when they closed, so the keyset needs both).
pub fn closed_cursor(raw: Option<&str>) -> Result<Option<(DateTime<Utc>, i64)>, ApiError> {
    let Some(raw) = raw.filter(|raw| !raw.is_empty()) else { return Ok(None) };
    let parsed = raw.split_once('_').and_then(|(micros, sequence)| {
        Some((DateTime::from_timestamp_micros(micros.parse().ok()?)?, sequence.parse().ok()?))
    });
    parsed.map(Some).ok_or(ApiError::Pagination("cursor: not one this page made"))
}

/// The cursor of the page after the one ending with a question closed at `closed` with `sequence`.
pub fn closed_cursor_after(closed: DateTime<Utc>, sequence: i64) -> String {
    format!("{}_{sequence}", closed.timestamp_micros())
}

/// The search form: a box for the text, the other filters folded away until used.
pub fn form(view: View, search: &Search) -> Markup {
    let filtered = search.recipient.is_some() || search.sender.is_some() || search.query.is_some();
    html! {
        form .search method="get" action="/ui" role="search" {
            @if view == View::Closed { input type="hidden" name="view" value="closed"; }
            div .search-row {
                label .search-box {
                    span .label { "Search questions" }
                    input type="search" name="q" value=[search.q.as_deref()] placeholder="words in the question";
                }
                button type="submit" { "Search" }
                @if !search.is_empty() { a .clear href=(Search::default().url(Some(view), None)) { "Clear" } }
            }
            details .filters open[filtered] {
                summary { "Filters" }
                div .row {
                    label { span .label { "Recipient" }
                        input name="recipient" value=[search.recipient.as_deref()] placeholder="ark://users/dave"; }
                    label { span .label { "Sender" }
                        input name="sender" value=[search.sender.as_deref()] placeholder="ark://agents/reviewer"; }
                    label { span .label { "Query" }
                        input name="query" value=[search.query.as_deref()] placeholder="namespace/name"; }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_keep_the_search_and_blank_fields_are_dropped() {
        let search = Search { q: Some("  deploy  ".into()), recipient: Some(String::new()), ..Search::default() };
        let search = search.cleaned();
        assert_eq!(search.url(None, None), "/ui?q=deploy");
        assert_eq!(search.url(Some(View::Closed), Some("5")), "/ui?view=closed&q=deploy&cursor=5");
        assert_eq!(Search::default().url(None, None), "/ui");
    }

    #[test]
    fn a_query_filter_names_a_namespace_or_not() {
        let filter = Search { query: Some("team-a/review".into()), ..Search::default() }.filter();
        assert_eq!((filter.query_namespace.as_deref(), filter.query_name.as_deref()), (Some("team-a"), Some("review")));
        let filter = Search { query: Some("review".into()), ..Search::default() }.filter();
        assert_eq!((filter.query_namespace, filter.query_name.as_deref()), (None, Some("review")));
    }

    #[test]
    fn closed_cursors_round_trip_and_bad_ones_are_refused() {
        let closed = DateTime::from_timestamp_micros(1_700_000_000_123_456).unwrap();
        let cursor = closed_cursor_after(closed, 42);
        assert_eq!(closed_cursor(Some(&cursor)).unwrap(), Some((closed, 42)));
        assert!(closed_cursor(Some("x")).is_err() && pending_cursor(Some("-1")).is_err());
        assert_eq!(pending_cursor(None).unwrap(), 0);
    }
}
