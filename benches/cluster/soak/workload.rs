//! The soak's workload (issue 25, point 3) and the tally of what it found wrong, shared by
//! `scripts/bench --soak` and the one-minute soak test (`tests/api/bench_smoke.rs`). Both include this file
//! with `#[path]` beside the bench's `load` module, whose writer it reuses (`super::load`).
//!
//! Until a deadline, spread over the replicas: chunk streams written one after another in a fixed number of
//! slots, each with a reader from the start and a visitor that joins late (replaying from the beginning, or
//! live) or leaves early (`streams`); events and messages posted around each stream and read back on another
//! replica (`records`); questions asked, answered on another replica and read back on a third, one in ten
//! left to expire, while one watcher per replica follows every change and moves to the next replica now and
//! then, resuming from its last `id` (`questions`). Every finding is a count in [`Tally`]; the run is correct
//! when the failure counts are zero.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use serde::Serialize;
use tokio::time::Instant;

// The bench's chunk load, a sibling module in both the bench and the test; the children use its writer.
use super::load;

#[path = "workload/questions.rs"]
mod questions;
#[path = "workload/records.rs"]
mod records;
#[path = "workload/streams.rs"]
mod streams;

/// Error messages kept (the count goes on).
const ERROR_SAMPLES: usize = 10;

/// What the soak does, and for how long.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Prefix of every id the run makes (streams, queries, sessions, questions).
    pub tag: String,
    /// Streams written at the same time (one per slot).
    pub streams: usize,
    /// Chunks per second per stream.
    pub rate: u32,
    /// How long each stream is written before it is completed.
    pub life: Duration,
    /// Time between questions.
    pub question_every: Duration,
    /// How long a question waits for its answer.
    pub answer_after: Duration,
    /// `ttlSeconds` of the questions left to expire.
    pub expiring_ttl: Duration,
    /// The replicas' `--reap-interval-seconds`: the reaper expires overdue questions, so the end waits for it.
    pub reap_interval: Duration,
    /// The replicas' message and event TTL: a read-back later than half of it is skipped, not judged.
    pub record_ttl: Duration,
    /// How long a question watcher stays on one replica before it moves to the next.
    pub watcher_life: Duration,
    /// How long the workload runs.
    pub duration: Duration,
}

/// Counts of what was done and what went wrong; the failure counts are the correctness verdict.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Tally {
    /// Streams written to the end.
    pub streams: u64,
    /// Chunks the broker acknowledged.
    pub acknowledged: u64,
    /// SSE readers opened, and of them those that joined a stream late or left it early.
    pub readers: u64,
    pub joined_late: u64,
    pub left_early: u64,
    /// Positions below a reader's highest one that it never got.
    pub gaps: u64,
    /// Positions a reader got twice.
    pub duplicates: u64,
    /// Positions that came after a higher one.
    pub out_of_order: u64,
    /// Acknowledged positions owed to a reader that it never got, and `[DONE]`s missing after an
    /// acknowledged completion.
    pub lost: u64,
    /// Readers owed `[DONE]` that did not get it (a loss when the completion was acknowledged).
    pub missing_done: u64,
    /// Events and messages acknowledged.
    pub events_posted: u64,
    pub messages_posted: u64,
    /// Streams whose events and messages were read back, and those skipped (read back too close to their
    /// TTL to tell a loss from an expiry).
    pub records_checked: u64,
    pub records_skipped: u64,
    /// Acknowledged events or messages not read back, or read back twice.
    pub records_lost: u64,
    pub records_duplicated: u64,
    /// Questions created, answered (acknowledged) and seen to expire by every watcher.
    pub questions_asked: u64,
    pub questions_answered: u64,
    pub questions_expired: u64,
    /// Times a watcher moved to another replica, resuming after its last `id`.
    pub watcher_moves: u64,
    /// Changes a watcher never saw: a creation, an acknowledged answer, an expiry.
    pub creations_unseen: u64,
    pub answers_unseen: u64,
    pub expiries_unseen: u64,
    /// Changes a watcher saw twice.
    pub question_duplicates: u64,
    /// Answered questions another replica read back as something else.
    pub answers_misread: u64,
    /// Failed requests (not correctness failures by themselves: nothing was acknowledged).
    pub errors: u64,
    pub error_samples: Vec<String>,
}

impl Tally {
    /// The failures: each names what went wrong and how often; empty when the run was correct.
    pub fn failures(&self) -> Vec<(&'static str, u64)> {
        let counts = [
            ("chunk gaps", self.gaps),
            ("chunk duplicates", self.duplicates),
            ("chunks out of order", self.out_of_order),
            ("acknowledged chunks lost", self.lost),
            ("acknowledged events or messages lost", self.records_lost),
            ("events or messages duplicated", self.records_duplicated),
            ("question creations unseen", self.creations_unseen),
            ("acknowledged answers unseen", self.answers_unseen),
            ("expiries unseen", self.expiries_unseen),
            ("question changes seen twice", self.question_duplicates),
            ("answers read back wrong", self.answers_misread),
        ];
        counts.into_iter().filter(|(_, n)| *n > 0).collect()
    }

    /// Counts a failed request, keeping the first few messages.
    pub fn error(&mut self, message: String) {
        self.errors += 1;
        if self.error_samples.len() < ERROR_SAMPLES {
            self.error_samples.push(message);
        }
    }
}

/// The tally, shared by the workload's tasks and whoever reports progress.
pub type SharedTally = Arc<Mutex<Tally>>;

/// Adds to the shared tally.
pub(crate) fn count(tally: &SharedTally, add: impl FnOnce(&mut Tally)) {
    add(&mut tally.lock().expect("the tally lock"));
}

/// Runs `workload` against `replicas` (base URLs, at least three) until its duration is over and every
/// stream, answer and watcher has ended; findings go to `tally` as they come.
pub async fn run(client: &reqwest::Client, replicas: &[String], workload: &Workload, tally: SharedTally) {
    assert!(replicas.len() >= 3, "a writer, a reader and a visitor on three replicas");
    let deadline = Instant::now() + workload.duration;
    let context =
        Arc::new(Context { client: client.clone(), replicas: replicas.to_vec(), workload: workload.clone(), tally });
    tokio::join!(streams::run(context.clone(), deadline), questions::run(context, deadline));
}

/// What every task of the workload reads.
pub(crate) struct Context {
    client: reqwest::Client,
    replicas: Vec<String>,
    workload: Workload,
    tally: SharedTally,
}

impl Context {
    /// Counts a failed request.
    fn error(&self, message: String) {
        count(&self.tally, |t| t.error(message));
    }

    /// The replica `n` steps round the ring.
    fn replica(&self, n: usize) -> &str {
        &self.replicas[n % self.replicas.len()]
    }
}
