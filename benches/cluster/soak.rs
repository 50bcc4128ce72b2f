//! `scripts/bench --soak MINUTES` (issue 25, point 3): three replicas with short retentions under a steady
//! half-saturation load for the given minutes, sampled every minute, ending with a verdict per series (flat or
//! growing) and failing on any correctness finding. `docs/performance.md` ("Soak") explains how to read it.
//!
//! 1. Saturation, quickly: short baselines (for the CN ratio), then the ramp's shape in 5 s steps on three
//!    replicas already running with the soak's flags (`half_saturation`); half of it, per stream, is the soak's
//!    rate (`--soak-rate R` gives R chunks/s per stream instead and skips this).
//! 2. Three fresh replicas on a fresh database run the workload (`workload.rs`) for the minutes given, while a
//!    sample (`sample.rs`) is taken at minute 0 and every minute after: a JSON line each, and the replicas'
//!    markdown row on stderr.
//! 3. The tables and verdicts (`table.rs`, `verdict.rs`) are printed and written to `results.md`.

mod sample;
mod table;
mod verdict;

use std::{
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::time::{Instant, MissedTickBehavior};

use crate::{
    baselines,
    load::Shape,
    phases::{Bench, SATURATION_P99_MS, SATURATION_SHARE, add_all, baseline_rows},
    postgres::{BROKER_DB, Postgres},
    replicas::Replica,
    report::Report,
    workload::{self, Tally, Workload},
};

/// The soak's database (the ramp's rows stay in the bench's own).
const SOAK_DB: &str = "ark_soak";
/// The replicas' retentions, short so rows are made and reaped all through the run: the reaper every 10 s;
/// finished streams kept 60 s (the broker's least), messages and events 60 s, sessions 90 s after their last
/// activity (at least the message and event TTLs, as the broker requires), the questions' watch log 120 s.
const FLAGS: &[&str] = &[
    "--reap-interval-seconds",
    "10",
    "--stream-retention-seconds",
    "60",
    "--message-ttl-seconds",
    "60",
    "--event-ttl-seconds",
    "60",
    "--session-ttl-seconds",
    "90",
    "--question-log-seconds",
    "120",
];
const REAP_INTERVAL: Duration = Duration::from_secs(10);
const RECORD_TTL: Duration = Duration::from_secs(60);
/// Streams written at once: the saturation ramp's, so half its per-stream rate is half its ingest.
const STREAMS: usize = 100;
/// How long each stream is written.
const LIFE: Duration = Duration::from_secs(20);
/// Minutes left out of the verdicts: a stream's life, the longest retention (the watch log's 120 s) and two
/// reaper passes, rounded up, so every kind of row has begun to be reaped.
const WARM_UP_MINUTES: usize = 3;
/// Saturation steps: chunks/s per stream, 5 s each, until one no longer keeps up.
const RAMP_RATES: [u32; 7] = [25, 50, 100, 200, 300, 400, 600];

/// Runs the soak; returns whether the checker found everything right, and the markdown report.
pub async fn run(
    minutes: u32,
    rate: Option<u32>,
    pg: &mut Postgres,
    report: &mut Report,
    scratch: &Path,
) -> (bool, String) {
    let client = reqwest::Client::new();
    let rate = match rate {
        Some(rate) => {
            eprintln!("soak: {rate} chunks/s per stream, as given (--soak-rate)");
            rate
        }
        None => half_saturation(pg, report, scratch, &client).await,
    };

    pg.create_database(SOAK_DB).await;
    let url = pg.url(SOAK_DB);
    let (a, b, c) = tokio::join!(
        Replica::start_with(&url, FLAGS),
        Replica::start_with(&url, FLAGS),
        Replica::start_with(&url, FLAGS)
    );
    let replicas = [a, b, c];
    let bases: Vec<String> = replicas.iter().map(|r| r.base.clone()).collect();
    let workload = Workload {
        tag: format!("{}", std::process::id()),
        streams: STREAMS,
        rate,
        life: LIFE,
        question_every: Duration::from_millis(500),
        answer_after: Duration::from_secs(2),
        expiring_ttl: Duration::from_secs(20),
        reap_interval: REAP_INTERVAL,
        record_ttl: RECORD_TTL,
        watcher_life: Duration::from_secs(60),
        duration: Duration::from_secs(60 * u64::from(minutes)),
    };
    let requested = STREAMS as f64 * f64::from(rate);
    eprintln!("soak: {minutes} min, {STREAMS} streams × {rate} chunks/s = {requested} chunks/s; flags {FLAGS:?}");
    report.line(&serde_json::json!({"phase": "soak-plan", "minutes": minutes, "streams": STREAMS,
        "rate_per_stream": rate, "requested_per_s": requested, "flags": FLAGS, "warm_up_minutes": WARM_UP_MINUTES}));

    let tally = Arc::new(Mutex::new(Tally::default()));
    let running = {
        let (client, tally) = (client.clone(), tally.clone());
        tokio::spawn(async move { workload::run(&client, &bases, &workload, tally).await })
    };
    let mut samples: Vec<sample::Sample> = Vec::new();
    let mut ticks = tokio::time::interval_at(Instant::now(), Duration::from_secs(60));
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    eprint!("\n{}", table::replicas_header());
    for minute in 0..=minutes {
        ticks.tick().await;
        let snapshot = tally.lock().expect("the tally lock").clone();
        let taken = sample::take(minute, &url, &replicas, &client, &snapshot, samples.last()).await;
        eprint!("{}", table::replicas_row(&taken));
        report.line(&serde_json::json!({"phase": "soak-sample", "sample": taken}));
        samples.push(taken);
    }
    running.await.expect("the workload");

    let tally = tally.lock().expect("the tally lock").clone();
    let failures = tally.failures();
    let (md, judged) = table::markdown(&samples, WARM_UP_MINUTES);
    let verdicts: serde_json::Map<String, serde_json::Value> =
        judged.iter().map(|(name, j)| (name.clone(), serde_json::json!(j))).collect();
    report.line(&serde_json::json!({"phase": "soak", "tally": tally, "failures": failures, "verdicts": verdicts}));
    let summary = format!(
        "Workload: {} streams written ({} chunks acknowledged, {} readers: {} joined late, {} left early), {} events \
         and {} messages ({} streams' read back, {} skipped near their TTL), {} questions asked, {} answered, {} \
         expired; question watchers moved {} times; {} failed requests.\n\nCorrectness: {}.\n\n",
        tally.streams,
        tally.acknowledged,
        tally.readers,
        tally.joined_late,
        tally.left_early,
        tally.events_posted,
        tally.messages_posted,
        tally.records_checked,
        tally.records_skipped,
        tally.questions_asked,
        tally.questions_answered,
        tally.questions_expired,
        tally.watcher_moves,
        tally.errors,
        if failures.is_empty() { "clean".to_owned() } else { format!("**FAILED** {failures:?}") },
    );
    for sample in &tally.error_samples {
        eprintln!("soak: failed request: {sample}");
    }
    for (name, replica) in table::NAMES.iter().zip(&replicas) {
        for line in replica.warning_samples() {
            eprintln!("replica {name} warned: {line}");
        }
    }
    for replica in replicas {
        replica.stop().await;
    }
    (failures.is_empty(), format!("{summary}{md}"))
}

/// Measures saturation with the bench's load shapes (5 s steps, 100 streams spread, one reader each) and
/// returns half of it per stream. The ramp rises until a step no longer keeps up (≥ 95 % of the requested
/// ingest, clean); saturation is the last step that also held the ramp's 50 ms commit p99, or, when none did
/// (a machine busy with other work, where even the first step's tail is long), the last step that kept up.
async fn half_saturation(pg: &mut Postgres, report: &mut Report, scratch: &Path, client: &reqwest::Client) -> u32 {
    eprintln!("soak: measuring saturation (2 s baselines, then steps of 5 s)");
    let baselines = baselines::measure(pg, &scratch.join("pgbench"), 2, 200).await;
    add_all(report, baseline_rows(&baselines));
    pg.create_database(BROKER_DB).await;
    let url = pg.url(BROKER_DB);
    let (a, b, c) = tokio::join!(
        Replica::start_with(&url, FLAGS),
        Replica::start_with(&url, FLAGS),
        Replica::start_with(&url, FLAGS)
    );
    let replicas = [a, b, c];
    let mut bench = Bench { pg, replicas: &replicas, client: client.clone(), baselines };
    let (mut held, mut kept_up) = (None, None);
    for rate in RAMP_RATES {
        let shape = Shape {
            streams: STREAMS,
            readers: 1,
            rate,
            spread: true,
            in_phase: false,
            duration: Duration::from_secs(5),
        };
        let (mut row, outcome) = bench.shape(&shape).await;
        row.phase = format!("soak-saturation-{STREAMS}x1x{rate}");
        let keeps_up = outcome.check.is_clean()
            && outcome.errors.is_empty()
            && outcome.achieved_per_s() >= SATURATION_SHARE * outcome.requested_per_s;
        let holds = keeps_up && row.commit_p99_ms.is_some_and(|p99| p99 <= SATURATION_P99_MS);
        row.note = Some(match (holds, keeps_up) {
            (true, _) => "holds".to_owned(),
            (false, true) => "keeps up, commit p99 above 50 ms".to_owned(),
            (false, false) => "does not keep up".to_owned(),
        });
        report.add(row);
        if holds {
            held = Some((rate, outcome.achieved_per_s()));
        }
        if !keeps_up {
            break;
        }
        kept_up = Some((rate, outcome.achieved_per_s()));
    }
    for replica in replicas {
        replica.stop().await;
    }
    let (criterion, (rate, ingest)) = match (held, kept_up) {
        (Some(held), _) => ("commit p99 ≤ 50 ms", held),
        (None, Some(kept_up)) => ("no step held the 50 ms commit p99; the last that kept up", kept_up),
        (None, None) => ("no step kept up", (0, 0.0)),
    };
    // Half, but never nothing: a machine where no step kept up still soaks.
    let half = (rate / 2).max(5);
    eprintln!(
        "soak: saturation {ingest:.0} chunks/s at {rate} per stream × {STREAMS} ({criterion}); the soak runs at \
         half: {half} per stream, {} chunks/s",
        half as usize * STREAMS
    );
    report.line(&serde_json::json!({"phase": "soak-saturation", "criterion": criterion,
        "saturation_per_s": ingest, "saturation_rate_per_stream": rate, "soak_rate_per_stream": half,
        "soak_requested_per_s": half as usize * STREAMS}));
    half
}
