//! Offsets as the protocol's clients see them, and the cursor live reads hand out.
//!
//! An offset is `{run:016}_{position:016}`: `run` is 0 for a stream of the protocol's own and the run number of
//! an Ark stream's run ([`super::ark`]), `position` counts bytes (JSON streams: messages) from the stream's
//! start. Fixed width keeps them lexicographically ordered, as the protocol requires, and the suite's fork
//! tests name `0000000000000000_0000000000000000` as a stream's start.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where a read starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// `-1`, or no `offset`: the stream's first byte.
    Beginning,
    /// `now`: the tail at the time of the request.
    Now,
    /// An offset a response handed out.
    At(Offset),
}

/// A position in a stream, with the run it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Offset {
    /// 0, or an Ark stream's run.
    pub run: i64,
    /// Bytes (JSON streams: messages) before it.
    pub position: i64,
}

/// The largest value either half can hold in sixteen digits.
const MOST: i64 = 9_999_999_999_999_999;

impl Offset {
    /// The offset at `position` of a stream of the protocol's own.
    pub fn at(position: i64) -> Self {
        Offset { run: 0, position }
    }

    /// Reads an offset; `None` unless it is two sixteen-digit numbers joined by `_`.
    pub fn parse(text: &str) -> Option<Self> {
        let (run, position) = text.split_once('_')?;
        let digits = |part: &str| part.len() == 16 && part.bytes().all(|b| b.is_ascii_digit());
        if !digits(run) || !digits(position) {
            return None;
        }
        Some(Offset { run: run.parse().ok()?, position: position.parse().ok()? })
    }
}

impl std::fmt::Display for Offset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016}_{:016}", self.run.clamp(0, MOST), self.position.clamp(0, MOST))
    }
}

impl Start {
    /// Reads the `offset` query parameter; `None` when it is none of `-1`, `now` or an offset.
    pub fn parse(text: Option<&str>) -> Option<Self> {
        match text {
            None | Some("-1") => Some(Start::Beginning),
            Some("now") => Some(Start::Now),
            Some(other) => Offset::parse(other).map(Start::At),
        }
    }
}

/// The cursor epoch of PROTOCOL.md §10.1: 2024-10-09T00:00:00Z.
const CURSOR_EPOCH: Duration = Duration::from_secs(1_728_432_000);
/// The cursor's interval.
const CURSOR_INTERVAL: Duration = Duration::from_secs(20);

/// The `Stream-Cursor` of a live response: the current 20-second interval since the cursor epoch, and strictly
/// above the client's own cursor when that is not behind (a jitter of 1–3,600 seconds, so CDN keys move on).
pub fn cursor(client: Option<&str>) -> String {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().saturating_sub(CURSOR_EPOCH);
    let interval = since.as_secs() / CURSOR_INTERVAL.as_secs();
    match client.and_then(|c| c.parse::<u64>().ok()) {
        Some(theirs) if theirs >= interval => {
            let jitter_seconds = 1 + u64::from(uuid::Uuid::new_v4().as_bytes()[0]) * 3599 / 255;
            (theirs + jitter_seconds.div_ceil(CURSOR_INTERVAL.as_secs()).max(1)).to_string()
        }
        _ => interval.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_fixed_width_and_read_back() {
        let offset = Offset { run: 3, position: 42 };
        assert_eq!(offset.to_string(), "0000000000000003_0000000000000042");
        assert_eq!(Offset::parse(&offset.to_string()), Some(offset));
        assert!(Offset::at(9) < Offset::at(10) && Offset::at(9).to_string() < Offset::at(10).to_string());
    }

    #[test]
    fn anything_else_is_no_offset() {
        for bad in ["", "_", "12_34", "0000000000000000-0000000000000000", "000000000000000a_0000000000000000", "abc"] {
            assert_eq!(Offset::parse(bad), None, "{bad}");
        }
        assert_eq!(Start::parse(Some("-2")), None);
        assert_eq!(Start::parse(None), Some(Start::Beginning));
        assert_eq!(Start::parse(Some("now")), Some(Start::Now));
    }

    #[test]
    fn a_cursor_moves_past_the_clients_own() {
        let now: u64 = cursor(None).parse().unwrap();
        assert!(cursor(Some(&(now - 5).to_string())).parse::<u64>().unwrap() >= now);
        for _ in 0..50 {
            let ahead = now + 1000;
            let next: u64 = cursor(Some(&ahead.to_string())).parse().unwrap();
            assert!(next > ahead && next <= ahead + 180, "{next}");
        }
    }
}
