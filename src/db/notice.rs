//! What a feed's notification says: the feed, the transaction that committed, and — when they fit in the
//! payload — the keys it wrote with their new positions, so a replica reads only the rows its own readers
//! follow (`chunks:1234:[["stream-a",10,12],["stream-b",0,1]]`: stream-a's positions 11–12, stream-b's 1).
//!
//! Without the keys every replica with any reader of the feed would read every row of every transaction,
//! and PostgreSQL's work per row would grow with the number of replicas. A notification without them (the
//! list did not fit, or the writer did not name them) is still read the old way: every row of the
//! transaction.

use serde::Deserialize;

/// PostgreSQL refuses a payload of 8000 bytes or more.
pub const MAX_PAYLOAD: usize = 7999;

/// Positions `after + 1 ..= last` of one key, written by one transaction.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KeyRange {
    /// The key (stream, conversation, query, trace).
    pub key: String,
    /// The key's last position before the transaction.
    pub after: i64,
    /// The key's last position after it.
    pub last: i64,
}

impl KeyRange {
    /// The range as the payload writes it: `["key",after,last]`.
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!([self.key, self.after, self.last])
    }
}

/// The part after `<feed>:<tx>` naming `keys`: `:[…]`, or nothing when a payload with `prefix_len` bytes
/// before it would be too long (readers then read the whole transaction).
pub fn keys_suffix(keys: &[KeyRange], prefix_len: usize) -> String {
    if keys.is_empty() {
        return String::new();
    }
    let list = serde_json::Value::Array(keys.iter().map(KeyRange::to_json).collect()).to_string();
    // The transaction id takes at most 20 digits.
    if prefix_len + 20 + 1 + list.len() > MAX_PAYLOAD { String::new() } else { format!(":{list}") }
}

/// `ranges` as the three arrays a store's query unnests: keys, `after`s, `last`s.
pub fn columns(ranges: &[KeyRange]) -> (Vec<&str>, Vec<i64>, Vec<i64>) {
    let keys = ranges.iter().map(|range| range.key.as_str()).collect();
    (keys, ranges.iter().map(|range| range.after).collect(), ranges.iter().map(|range| range.last).collect())
}

/// The ranges of several notifications of one wake as few reads' worth: sorted by key, and a key's ranges
/// that follow each other (one key's writers commit in position order) joined into one.
pub fn merge(mut ranges: Vec<KeyRange>) -> Vec<KeyRange> {
    ranges.sort_by(|a, b| a.key.cmp(&b.key).then(a.after.cmp(&b.after)));
    let mut merged: Vec<KeyRange> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match merged.last_mut() {
            Some(previous) if previous.key == range.key && previous.last == range.after => previous.last = range.last,
            _ => merged.push(range),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(key: &str, after: i64, last: i64) -> KeyRange {
        KeyRange { key: key.to_owned(), after, last }
    }

    #[test]
    fn what_does_not_fit_is_left_out() {
        let keys: Vec<KeyRange> = (0..400).map(|i| range(&format!("stream-{i:030}"), i, i + 1)).collect();
        assert_eq!(keys_suffix(&keys, 7), "", "16 KB of keys do not fit in 8000 bytes");
        let suffix = keys_suffix(&keys[..100], 7);
        assert!(suffix.len() + 7 + 20 <= MAX_PAYLOAD && suffix.len() > 4000, "{}", suffix.len());
    }

    #[test]
    fn ranges_that_follow_each_other_are_read_as_one() {
        let merged = merge(vec![range("b", 3, 4), range("a", 1, 2), range("b", 0, 3), range("b", 6, 7)]);
        assert_eq!(merged, vec![range("a", 1, 2), range("b", 0, 4), range("b", 6, 7)]);
    }
}
