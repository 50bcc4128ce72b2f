//! How an Ark chunk stream reads as Durable Streams (no I/O): the paths of its two views, its runs, and
//! which rows each run holds.
//!
//! A Durable Stream's closure is final, but an Ark stream goes on after its `[DONE]` when the Query resumes
//! (after a tool approval): so each run — the rows up to a `[DONE]`, or after the last one — is a JSON-mode
//! stream of its own at `ark/{stream}/runs/{n}`, closed at its `[DONE]`; `ark/{stream}` lists the runs as
//! they begin. Offsets are `{n:016}_{position:016}` (the run's number, then the chunk's position in the Ark
//! stream), so a run's offsets resume exactly and never name another run's.

use crate::streams::{model::ChunkRow, runs_store::RunMarks};

/// The part of a path under `/v1/stream/` that names an Ark stream's views.
pub const ARK_PREFIX: &str = "ark/";

/// Which view a path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum View {
    /// `ark/{stream}`: the runs as they begin.
    Runs,
    /// `ark/{stream}/runs/{n}`: run `n`'s chunks.
    Run(i64),
}

/// A path under `ark/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArkPath {
    /// The Ark stream (upstream's stream id: the Query's name).
    pub stream_id: String,
    /// The view of it.
    pub view: View,
}

impl ArkPath {
    /// Reads the path after `ark/`; `None` for an empty stream id or a run that is not a number from 1.
    pub fn parse(rest: &str) -> Option<Self> {
        if let Some((stream_id, run)) = rest.rsplit_once("/runs/") {
            let number = run.parse::<i64>().ok().filter(|n| *n >= 1 && run.bytes().all(|b| b.is_ascii_digit()))?;
            return (!stream_id.is_empty())
                .then(|| ArkPath { stream_id: stream_id.to_owned(), view: View::Run(number) });
        }
        (!rest.is_empty() && !rest.ends_with("/runs")).then(|| ArkPath { stream_id: rest.to_owned(), view: View::Runs })
    }
}

/// One run, as a stream of the protocol's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// Its number, from 1.
    pub number: i64,
    /// The position it starts after (the previous run's `[DONE]`, or 0).
    pub start: i64,
    /// Its tail: its `[DONE]`'s position when closed, else the stream's last position.
    pub tail: i64,
    /// It ended with a `[DONE]`.
    pub closed: bool,
}

/// How many runs the stream has begun: one per `[DONE]`, and one more when its writers wrote after the last
/// (or nothing ended yet). The broker's own events after a `[DONE]` (a question cancelled when the Query
/// finished) begin none.
pub fn run_count(marks: &RunMarks) -> i64 {
    match marks.ends.last() {
        None => 1,
        Some(end) if marks.last_written > *end => marks.ends.len() as i64 + 1,
        Some(_) => marks.ends.len() as i64,
    }
}

/// Run `number`, when the stream has begun it.
pub fn run(marks: &RunMarks, number: i64) -> Option<Run> {
    if number < 1 || number > run_count(marks) {
        return None;
    }
    let at = (number - 1) as usize;
    let start = if at == 0 { 0 } else { marks.ends[at - 1] };
    Some(match marks.ends.get(at) {
        Some(end) => Run { number, start, tail: *end, closed: true },
        None => Run { number, start, tail: marks.last.max(start), closed: false },
    })
}

/// Whether a run shows `row`: the writers' chunks and abort frames; not the `[DONE]` (it is the closure), and
/// not the broker's typed events (the unified stream, `GET /stream/{id}?format=unified`, has those).
pub fn shows(row: &ChunkRow) -> bool {
    !row.is_done && row.is_openai_visible()
}

/// The message `ark/{stream}` holds for run `number`.
pub fn run_entry(stream_id: &str, number: i64) -> String {
    serde_json::json!({"run": number, "path": format!("{ARK_PREFIX}{stream_id}/runs/{number}")}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(ends: &[i64], last_written: i64, last: i64) -> RunMarks {
        RunMarks { ends: ends.to_vec(), last_written, last }
    }

    #[test]
    fn paths_name_the_runs_or_one_run() {
        let run = |id: &str, n| Some(ArkPath { stream_id: id.into(), view: View::Run(n) });
        assert_eq!(ArkPath::parse("q1/runs/2"), run("q1", 2));
        assert_eq!(ArkPath::parse("ns/q1/runs/10"), run("ns/q1", 10));
        assert_eq!(ArkPath::parse("q1"), Some(ArkPath { stream_id: "q1".into(), view: View::Runs }));
        for bad in ["", "q1/runs/0", "q1/runs/-1", "q1/runs/+1", "q1/runs/x", "q1/runs/", "/runs/1", "q1/runs"] {
            assert_eq!(ArkPath::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_stream_nothing_ended_has_one_open_run() {
        assert_eq!(run_count(&marks(&[], 0, 0)), 1);
        assert_eq!(run(&marks(&[], 5, 5), 1), Some(Run { number: 1, start: 0, tail: 5, closed: false }));
        assert_eq!(run(&marks(&[], 5, 5), 2), None);
    }

    #[test]
    fn each_done_closes_a_run_and_writing_after_it_begins_the_next() {
        let ended = marks(&[4], 3, 4);
        assert_eq!(run_count(&ended), 1);
        assert_eq!(run(&ended, 1), Some(Run { number: 1, start: 0, tail: 4, closed: true }));
        let resumed = marks(&[4], 7, 7);
        assert_eq!(run_count(&resumed), 2);
        assert_eq!(run(&resumed, 2), Some(Run { number: 2, start: 4, tail: 7, closed: false }));
        let twice = marks(&[4, 9], 8, 9);
        assert_eq!(run(&twice, 2), Some(Run { number: 2, start: 4, tail: 9, closed: true }));
        assert_eq!(run(&twice, 3), None);
        assert_eq!(run(&twice, 0), None);
    }

    #[test]
    fn the_brokers_own_events_after_a_done_begin_no_run() {
        // A question cancelled when the Query ended is stored at 5, after the `[DONE]` at 4.
        assert_eq!(run_count(&marks(&[4], 3, 5)), 1);
    }
}
