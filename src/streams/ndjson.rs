//! Splits an NDJSON body into chunks as it arrives: one JSON value per line, bad lines counted and skipped,
//! over-long lines dropped without buffering them, and a last line without a newline kept. Typed events
//! (`{"event":…,"data":…}`) are told apart from OpenAI chunks here, once, as each line is parsed.

use serde::de::IgnoredAny;

use super::{
    model::Line,
    typed::{self, LineKind},
};

/// Incremental NDJSON splitter for one request body.
#[derive(Debug)]
pub struct NdjsonLines {
    partial: Vec<u8>,
    max_line: usize,
    /// Inside a line already known to be too long: drop bytes until its newline.
    skipping: bool,
    invalid: u64,
}

impl NdjsonLines {
    /// A splitter that refuses lines longer than `max_line` bytes.
    pub fn new(max_line: usize) -> Self {
        NdjsonLines { partial: Vec::new(), max_line, skipping: false, invalid: 0 }
    }

    /// Feeds the next piece of the body; returns the complete, valid chunks it finished.
    pub fn push(&mut self, mut bytes: &[u8]) -> Vec<Line> {
        let mut chunks = Vec::new();
        while let Some(newline) = bytes.iter().position(|&b| b == b'\n') {
            let (head, rest) = (&bytes[..newline], &bytes[newline + 1..]);
            if self.skipping {
                self.skipping = false;
            } else if self.partial.is_empty() {
                self.accept(head, &mut chunks);
            } else if self.partial.len() + head.len() > self.max_line {
                // A new Vec, not `clear`: the memory goes back now, not when the next line completes.
                self.partial = Vec::new();
                self.invalid += 1;
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(head);
                self.accept(&line, &mut chunks);
            }
            bytes = rest;
        }
        if !bytes.is_empty() && !self.skipping {
            if self.partial.len() + bytes.len() > self.max_line {
                self.partial = Vec::new();
                self.skipping = true;
                self.invalid += 1;
            } else {
                self.partial.extend_from_slice(bytes);
            }
        }
        chunks
    }

    /// Ends the body: a last line without a trailing newline is still a chunk.
    pub fn finish(&mut self) -> Vec<Line> {
        let mut chunks = Vec::new();
        self.skipping = false;
        let line = std::mem::take(&mut self.partial);
        self.accept(&line, &mut chunks);
        chunks
    }

    /// Bytes buffered for the line not yet complete (what it occupies, not just its length), which the
    /// replica's [`super::budget::NdjsonBudget`] accounts.
    pub fn buffered(&self) -> usize {
        self.partial.capacity()
    }

    /// How many non-blank lines were not JSON, too long, or typed events a writer may not post, so far.
    pub fn invalid(&self) -> u64 {
        self.invalid
    }

    fn accept(&mut self, line: &[u8], chunks: &mut Vec<Line>) {
        let line = line.trim_ascii();
        if line.is_empty() {
            return;
        }
        if line.len() > self.max_line {
            self.invalid += 1;
            return;
        }
        let Some(text) = parse_chunk(line) else {
            self.invalid += 1;
            return;
        };
        match typed::classify(&text) {
            LineKind::Chunk => chunks.push(Line { text, event: None }),
            LineKind::Typed(event) => chunks.push(Line { text, event: Some(event) }),
            LineKind::Refused => self.invalid += 1,
        }
    }
}

/// The chunk's text when `line` is one JSON value. Carriage returns between tokens are legal JSON but would
/// break SSE framing, so such a line is re-serialised compactly; every other line is kept byte for byte.
fn parse_chunk(line: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(line).ok()?;
    if text.contains('\r') {
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        return serde_json::to_string(&value).ok();
    }
    if nesting_depth(line) > MAX_DEPTH {
        return None;
    }
    serde_json::from_str::<IgnoredAny>(text).ok()?;
    Some(text.to_owned())
}

/// Deepest nesting a chunk may have: serde_json's own limit for values, far below where Postgres' json
/// parser runs out of stack. A deeper line is the writer's error, so it is counted here, at parse time, and
/// never reaches a flush (where Postgres would fail every other request's chunks in the same transaction).
const MAX_DEPTH: usize = 128;

/// The deepest nesting of arrays and objects in a JSON text (brackets inside strings do not count).
fn nesting_depth(json: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &byte in json {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lines: Vec<Line>) -> Vec<String> {
        lines.into_iter().map(|line| line.text).collect()
    }

    #[test]
    fn lines_split_across_pieces_are_joined() {
        let mut lines = NdjsonLines::new(1024);
        assert!(lines.push(b"{\"a\":").is_empty());
        assert_eq!(texts(lines.push(b"1}\n{\"b\":2}\n{\"c\"")), vec![r#"{"a":1}"#, r#"{"b":2}"#]);
        assert_eq!(texts(lines.push(b":3}\n")), vec![r#"{"c":3}"#]);
        assert!(lines.finish().is_empty());
        assert_eq!(lines.invalid(), 0);
    }

    #[test]
    fn lines_nested_deeper_than_the_parser_allows_are_counted_not_stored() {
        // serde_json stops at depth 128, far below where Postgres' json parser runs out of stack, so a line
        // Postgres would refuse never reaches a flush (where it would fail other requests' chunks too).
        let deep = format!("{}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        let mut lines = NdjsonLines::new(1 << 20);
        assert!(lines.push(deep.as_bytes()).is_empty());
        assert_eq!(texts(lines.push(b"{\"ok\":1}\n")), vec![r#"{"ok":1}"#]);
        assert_eq!(lines.invalid(), 1);
        assert_eq!(nesting_depth(br#"{"a":["[[[{",{"b":[]}]}"#), 4, "brackets in strings do not count");
        assert_eq!(nesting_depth(br#""\\\"[""#), 0);
    }

    #[test]
    fn bad_lines_are_counted_and_skipped() {
        let mut lines = NdjsonLines::new(1024);
        let chunks = texts(lines.push(b"{\"ok\":1}\nnot json\n\n{\"trunc\":\n\xff\xfe\n{\"ok\":2}\n"));
        assert_eq!(chunks, vec![r#"{"ok":1}"#, r#"{"ok":2}"#]);
        assert_eq!(lines.invalid(), 3);
    }

    #[test]
    fn a_last_line_without_newline_is_kept() {
        let mut lines = NdjsonLines::new(1024);
        assert_eq!(texts(lines.push(b"{\"a\":1}\n{\"b\":2}")), vec![r#"{"a":1}"#]);
        assert_eq!(texts(lines.finish()), vec![r#"{"b":2}"#]);
    }

    #[test]
    fn over_long_lines_are_dropped_without_buffering() {
        let mut lines = NdjsonLines::new(16);
        assert!(lines.push(b"{\"x\":\"aaaaaaaaaaaaaaaa").is_empty());
        assert!(lines.push(&[b'a'; 4096]).is_empty());
        assert_eq!(lines.buffered(), 0, "nothing of the long line is kept");
        assert_eq!(texts(lines.push(b"\"}\n{\"y\":1}\n")), vec![r#"{"y":1}"#]);
        assert_eq!(lines.invalid(), 1);
    }

    #[test]
    fn buffered_bytes_follow_the_line_not_yet_complete() {
        let mut lines = NdjsonLines::new(64);
        assert!(lines.push(b"{\"a\":\"0123456789").is_empty());
        assert!(lines.buffered() >= 15);
        assert_eq!(texts(lines.push(b"\"}\n")), vec![r#"{"a":"0123456789"}"#]);
        assert_eq!(lines.buffered(), 0, "a completed line gives its memory back");
        lines.push(&[b'x'; 40]);
        assert!(lines.push(&[b'x'; 10]).is_empty());
        assert!(lines.buffered() >= 50);
        assert!(lines.push(b"xxxxxxxxxxxxxxxxxxxx\n").is_empty());
        assert_eq!(lines.buffered(), 0, "so does a line found too long at its newline");
        assert_eq!(lines.invalid(), 1);
    }

    #[test]
    fn carriage_returns_are_normalised() {
        let mut lines = NdjsonLines::new(1024);
        assert_eq!(texts(lines.push(b"{\"a\":\r1}\r\n")), vec![r#"{"a":1}"#]);
    }
}
