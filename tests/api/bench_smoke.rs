//! The benchmark's smoke shapes and a one-minute soak as tests: three real replicas, the bench's own load
//! generators and checkers (`benches/cluster/load.rs`, `benches/cluster/soak/workload.rs`), and assertions on
//! correctness only — never on time, and never on the soak's flat-or-growing verdicts (a minute is too short);
//! those verdicts' rule is checked on made-up series.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use crate::support::{Replica, fresh_database};

#[path = "../../benches/cluster/load.rs"]
#[expect(dead_code, reason = "the bench reads more of the outcome than this test does")]
mod load;

#[path = "../../benches/cluster/soak/workload.rs"]
mod workload;

#[path = "../../benches/cluster/soak/verdict.rs"]
mod verdict;

use load::Shape;
use verdict::{Verdict, judge};
use workload::{Tally, Workload};

#[tokio::test]
async fn the_bench_smoke_shapes_deliver_every_acknowledged_chunk_once_and_in_order() {
    let url = fresh_database().await;
    let (a, b, c) = tokio::join!(Replica::start(&url), Replica::start(&url), Replica::start(&url));
    let replicas = [a.base.clone(), b.base.clone(), c.base.clone()];
    let client = reqwest::Client::new();
    for (spread, in_phase) in [(false, false), (true, true)] {
        let shape = Shape { streams: 5, readers: 2, rate: 10, spread, in_phase, duration: Duration::from_secs(2) };
        let outcome = load::run(&client, &replicas, &shape, if spread { "smoke-spread" } else { "smoke-one" }).await;
        let label = shape.label();
        assert!(outcome.errors.is_empty(), "{label}: {:?}", outcome.errors);
        assert!(outcome.check.is_clean(), "{label}: {:?}", outcome.check);
        assert_eq!(outcome.readers, 10, "{label}: every reader opened");
        assert!(outcome.acknowledged > 0, "{label}: the writers wrote");
        assert_eq!(outcome.delivered, outcome.acknowledged * 2, "{label}: each chunk reached both readers once");
    }
}

/// The soak's short retentions, shorter still (the stream retention is the broker's least), so the reaper
/// deletes messages, events, sessions and the watch log, and expires questions, while the minute runs.
const SOAK_FLAGS: &[&str] = &[
    "--reap-interval-seconds",
    "5",
    "--stream-retention-seconds",
    "60",
    "--message-ttl-seconds",
    "20",
    "--event-ttl-seconds",
    "20",
    "--session-ttl-seconds",
    "30",
    "--question-log-seconds",
    "60",
];

#[tokio::test]
#[ignore = "a one-minute soak against three replicas (about 70 s): ./scripts/test runs it"]
async fn a_one_minute_soak_loses_duplicates_and_misses_nothing() {
    let url = fresh_database().await;
    let (a, b, c) = tokio::join!(
        Replica::start_with(&url, SOAK_FLAGS),
        Replica::start_with(&url, SOAK_FLAGS),
        Replica::start_with(&url, SOAK_FLAGS)
    );
    let replicas = [a.base.clone(), b.base.clone(), c.base.clone()];
    let workload = Workload {
        tag: "ci".to_owned(),
        streams: 10,
        rate: 20,
        life: Duration::from_secs(4),
        question_every: Duration::from_millis(250),
        answer_after: Duration::from_millis(500),
        expiring_ttl: Duration::from_secs(3),
        reap_interval: Duration::from_secs(5),
        record_ttl: Duration::from_secs(20),
        watcher_life: Duration::from_secs(15),
        duration: Duration::from_secs(60),
    };
    let tally = Arc::new(Mutex::new(Tally::default()));
    workload::run(&reqwest::Client::new(), &replicas, &workload, tally.clone()).await;
    let tally = tally.lock().unwrap().clone();
    assert!(tally.failures().is_empty(), "{:?} in {tally:#?}", tally.failures());
    assert_eq!(tally.errors, 0, "{:?}", tally.error_samples);
    assert_eq!(tally.missing_done, 0, "{tally:#?}");
    // Everything the soak does happened, more than once.
    assert!(tally.streams >= 50, "10 slots of 4 s streams for a minute: {tally:#?}");
    assert_eq!(tally.readers, 2 * tally.streams, "a reader from the start and a visitor per stream: {tally:#?}");
    assert!(tally.joined_late > 10 && tally.left_early > 10, "{tally:#?}");
    assert!(tally.records_checked > 10 && tally.events_posted == 2 * tally.streams, "{tally:#?}");
    assert!(tally.questions_answered > 50 && tally.questions_expired > 3, "{tally:#?}");
    assert!(tally.watcher_moves >= 3, "every watcher moved to another replica: {tally:#?}");
}

#[test]
fn the_soak_verdict_tells_a_plateau_and_a_saw_tooth_from_steady_growth() {
    // Minute samples: a warm-up of three minutes, then …
    let warming = |m: usize, then: f64| if m < 3 { m as f64 * 40.0 } else { then };
    let plateau: Vec<f64> = (0..30).map(|m| warming(m, 100.0 + (m % 4) as f64 * 3.0)).collect();
    let saw_tooth: Vec<f64> = (0..30).map(|m| warming(m, [50.0, 100.0, 150.0][m % 3])).collect();
    let leak: Vec<f64> = (0..30).map(|m| warming(m, 100.0 + m as f64 * 2.0)).collect();
    assert_eq!(judge(&plateau, 3, 5.0).verdict, Verdict::Flat);
    assert_eq!(judge(&saw_tooth, 3, 5.0).verdict, Verdict::Flat);
    assert_eq!(judge(&leak, 3, 5.0).verdict, Verdict::Growing);
    assert_eq!(Verdict::Growing.word(), "growing");
    assert_eq!(judge(&leak, 3, 1000.0).verdict, Verdict::Flat, "a rise within the slack is flat");
    assert_eq!(judge(&leak[..6], 3, 5.0).verdict, Verdict::TooShort);
}
