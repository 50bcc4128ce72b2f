//! The reading half of the load: an SSE reader of `GET /stream/{id}` that records each chunk's position
//! and latency, and the checker that judges what a reader saw against what its writer had acknowledged.

use futures::{StreamExt, TryStreamExt};
use serde::Deserialize;
use tokio::time::Instant;

use super::{causes, unix_micros};

/// What the checker found, summed over all readers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Check {
    /// Positions below a reader's highest delivered one that it never got.
    pub gaps: u64,
    /// Deliveries of a position the reader already had.
    pub duplicates: u64,
    /// Deliveries of a position lower than one delivered before it (not duplicates).
    pub out_of_order: u64,
    /// Acknowledged positions a reader never got, plus `[DONE]`s missing after an acknowledged completion.
    pub lost: u64,
    /// Readers that did not end at `[DONE]`.
    pub missing_done: u64,
}

impl Check {
    /// No gap, duplicate, reordering or acknowledged loss, and every reader ended at `[DONE]`.
    pub fn is_clean(&self) -> bool {
        *self == Check::default()
    }
}

/// What one reader saw.
#[derive(Debug)]
pub(super) struct ReaderReport {
    seen: Vec<bool>,
    duplicates: u64,
    out_of_order: u64,
    done: bool,
    /// Receive − send time of each chunk, µs.
    pub latencies_us: Vec<u64>,
    /// When the last chunk arrived.
    pub last_at: Option<Instant>,
    /// What went wrong, if anything.
    pub error: Option<String>,
}

impl ReaderReport {
    /// Adds this reader's findings, given how many chunks its stream's writer had acknowledged and whether
    /// the completion was acknowledged.
    pub(super) fn judge(&self, acknowledged: u64, completed: bool, check: &mut Check) {
        let highest = self.seen.iter().rposition(|&seen| seen);
        if let Some(highest) = highest {
            check.gaps += self.seen[..highest].iter().filter(|&&seen| !seen).count() as u64;
        }
        check.duplicates += self.duplicates;
        check.out_of_order += self.out_of_order;
        let acknowledged = acknowledged as usize;
        check.lost += (0..acknowledged).filter(|&p| !self.seen.get(p).copied().unwrap_or(false)).count() as u64;
        if !self.done {
            check.missing_done += 1;
            if completed {
                check.lost += 1;
            }
        }
    }
}

#[derive(Deserialize)]
struct Marked {
    bench: Mark,
}

#[derive(Deserialize)]
struct Mark {
    seq: u64,
    sent_us: u64,
}

/// Reads one SSE response until `[DONE]`, its end, or `deadline`.
pub(super) async fn read(response: reqwest::Response, deadline: Instant) -> ReaderReport {
    let url = response.url().to_string();
    let mut report = ReaderReport {
        seen: Vec::new(),
        duplicates: 0,
        out_of_order: 0,
        done: false,
        latencies_us: Vec::new(),
        last_at: None,
        error: None,
    };
    let mut body = response.bytes_stream().map_err(|e| causes(&e));
    let mut buffer: Vec<u8> = Vec::new();
    let mut highest: Option<u64> = None;
    loop {
        let piece = match tokio::time::timeout_at(deadline, body.next()).await {
            Ok(Some(Ok(piece))) => piece,
            Ok(Some(Err(error))) => {
                report.error = Some(format!("GET {url}: {error}"));
                return report;
            }
            Ok(None) => {
                report.error = Some(format!("GET {url}: ended before [DONE]"));
                return report;
            }
            Err(_) => {
                report.error = Some(format!("GET {url}: no [DONE] in time"));
                return report;
            }
        };
        let received_us = unix_micros();
        buffer.extend_from_slice(&piece);
        while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
            let frame: Vec<u8> = buffer.drain(..end + 2).collect();
            let Some(data) = frame[..end].strip_prefix(b"data: ") else { continue };
            if data == b"[DONE]" {
                report.done = true;
                return report;
            }
            let mark = match serde_json::from_slice::<Marked>(data) {
                Ok(marked) => marked.bench,
                Err(error) => {
                    report.error = Some(format!("GET {url}: a frame without the bench mark ({error})"));
                    continue;
                }
            };
            report.last_at = Some(Instant::now());
            report.latencies_us.push(received_us.saturating_sub(mark.sent_us));
            let position = mark.seq as usize;
            if report.seen.len() <= position {
                report.seen.resize(position + 1, false);
            }
            if report.seen[position] {
                report.duplicates += 1;
                continue;
            }
            report.seen[position] = true;
            if highest.is_some_and(|h| mark.seq < h) {
                report.out_of_order += 1;
            }
            highest = highest.max(Some(mark.seq));
        }
    }
}

// Items are named by path, not imported: a harness-less bench compiled for checking keeps this module but
// drops its `#[test]` functions, and imports would then be unused.
#[cfg(test)]
mod tests {
    #[test]
    fn the_checker_counts_gaps_and_acknowledged_losses() {
        let reader = |positions: &[usize], done: bool| {
            let mut seen = vec![false; positions.iter().max().map_or(0, |m| m + 1)];
            positions.iter().for_each(|&p| seen[p] = true);
            super::ReaderReport {
                seen,
                duplicates: 0,
                out_of_order: 0,
                done,
                latencies_us: Vec::new(),
                last_at: None,
                error: None,
            }
        };
        let mut check = super::Check::default();
        reader(&[0, 1, 3], false).judge(5, true, &mut check);
        assert_eq!(check, super::Check { gaps: 1, lost: 3, missing_done: 1, ..Default::default() });
        let mut clean = super::Check::default();
        reader(&[0, 1, 2, 3, 4], true).judge(5, true, &mut clean);
        assert!(clean.is_clean());
    }

    #[test]
    fn lines_carry_their_mark_and_quantiles_pick_samples() {
        let line = super::super::chunk_line("s", 7, 42);
        let marked: super::Marked = serde_json::from_slice(line.trim_ascii_end()).unwrap();
        assert_eq!((marked.bench.seq, marked.bench.sent_us), (7, 42));
        assert!((280..400).contains(&line.len()), "{}", line.len());
        assert_eq!(super::super::quantile_ms(&[1000, 2000, 3000], 0.5), 2.0);
        assert_eq!(super::super::quantile_ms(&[], 0.99), 0.0);
    }
}
