//! The cluster benchmark (issue 9, point 5), run by `scripts/bench` (`--smoke` for a seconds-long run);
//! `docs/performance.md` explains what it measures and how to read it.
//!
//! It starts its own durable PostgreSQL, measures the baselines (A, C, CN, L) on it, starts three
//! `ark-broker` replicas (the release binary) on a fresh database, then runs the load shapes, the
//! saturation ramp and the HITL wake (the replica-scale phase, before those three start, brings its own
//! replicas), printing one JSON line per phase and a markdown report at the end.
//! It exits non-zero only when the checker finds a gap, duplicate, reordering or acknowledged loss.

mod baselines;
mod durable;
mod hitl;
// By path, as the smoke test includes it, so that its child module resolves the same way in both.
#[path = "load.rs"]
mod load;
mod machine;
mod meter;
mod notify_cost;
mod phases;
mod postgres;
mod prefill;
mod records;
mod replicas;
mod report;
mod scale;
mod scale_row;
mod soak;
mod volume;
mod waiters;
// By path, as the soak test includes it, beside `load` whose writer it uses.
#[path = "soak/workload.rs"]
mod workload;

use std::{path::PathBuf, process::ExitCode, time::Duration};

use load::Shape;
use phases::{Bench, Ramp, add_all, baseline_rows};
use postgres::{BROKER_DB, Postgres};
use replicas::Replica;
use report::Report;

/// What a run does.
struct Plan {
    mode: &'static str,
    baseline_seconds: u32,
    notifications: usize,
    shapes: Vec<Shape>,
    ramp: Ramp,
    hitl_iterations: usize,
    /// Waiters of each kind held on one replica to measure their memory.
    waiters: usize,
    /// The record phases' sizes.
    records: records::Sizes,
    /// The replica-scale phase's counts and load.
    scale: scale::Plan,
    /// The volume phase's sizes and load.
    volume: volume::Plan,
    /// The Durable Streams side-by-side phase's sizes.
    durable: durable::Plan,
}

impl Plan {
    fn new(smoke: bool) -> Self {
        let shape = |streams, spread, in_phase, seconds| Shape {
            streams,
            readers: 2,
            rate: 10,
            spread,
            in_phase,
            duration: Duration::from_secs(seconds),
        };
        // Every shape twice: writers staggered over one period, and all ticking at once (bursts).
        let both =
            |streams, spread, seconds| [shape(streams, spread, false, seconds), shape(streams, spread, true, seconds)];
        if smoke {
            return Plan {
                mode: "smoke",
                baseline_seconds: 2,
                notifications: 200,
                shapes: [both(5, false, 2), both(5, true, 2)].concat(),
                ramp: Ramp {
                    streams: 5,
                    rates: vec![10, 40],
                    duration: Duration::from_secs(2),
                    bisect: false,
                    every_step: false,
                },
                hitl_iterations: 20,
                waiters: 50,
                records: records::Sizes {
                    team_queries: 10,
                    sessions: 500,
                    conversations: 20,
                    messages_per_conversation: 100,
                    duration: Duration::from_secs(2),
                },
                scale: scale::Plan { counts: vec![3, 6], streams: 10, rate: 10, duration: Duration::from_secs(2) },
                volume: volume::Plan {
                    sizes: vec![20_000],
                    streams: 10,
                    duration: Duration::from_secs(2),
                    full_duration: Duration::from_secs(12),
                    reap_interval: Some("5"),
                },
                durable: durable::Plan {
                    writers: 4,
                    append_seconds: 2,
                    streams: 5,
                    rate: 10,
                    latency_seconds: 2,
                    subscribers: 50,
                },
            };
        }
        Plan {
            mode: "full",
            baseline_seconds: 10,
            notifications: 1000,
            shapes: [100, 500, 1000]
                .into_iter()
                .flat_map(|streams| [both(streams, false, 15), both(streams, true, 15)])
                .flatten()
                .collect(),
            ramp: Ramp {
                streams: 100,
                rates: vec![25, 50, 100, 200, 400, 800],
                duration: Duration::from_secs(10),
                bisect: true,
                every_step: false,
            },
            hitl_iterations: 1000,
            waiters: 1000,
            records: records::Sizes {
                team_queries: 50,
                sessions: 100_000,
                conversations: 1000,
                messages_per_conversation: 1000,
                duration: Duration::from_secs(10),
            },
            scale: scale::Plan { counts: vec![3, 12, 24], streams: 400, rate: 10, duration: Duration::from_secs(15) },
            volume: volume::Plan {
                sizes: vec![10_000_000, 50_000_000],
                streams: 200,
                duration: Duration::from_secs(20),
                full_duration: Duration::from_secs(150),
                reap_interval: None,
            },
            durable: durable::Plan {
                writers: 50,
                append_seconds: 10,
                streams: 100,
                rate: 10,
                latency_seconds: 10,
                subscribers: 1000,
            },
        }
    }
}

/// `$CARGO_TARGET_DIR/bench`, or `target/bench` under the package.
fn output_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from).join("bench")
}

#[tokio::main]
async fn main() -> ExitCode {
    // reqwest's TLS (unused here, but built with every client) takes the process's rustls provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // cargo passes `--bench`; only `--smoke`, `--only <phase>` (repeatable), `--rates <r,r,…>` (the
    // saturation ramp's chunks/s per stream, every one run, no bisection: to look at chosen steps) and
    // `--soak <minutes>` (with `--soak-rate <r>`: chunks/s per stream instead of half the measured saturation)
    // and `--replicas <n,n,…>` (the replica-scale phase's counts) mean anything here.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut plan = Plan::new(args.iter().any(|arg| arg == "--smoke"));
    let only: Vec<&str> = args.windows(2).filter(|pair| pair[0] == "--only").map(|pair| pair[1].as_str()).collect();
    if let Some(rates) = args.windows(2).find(|pair| pair[0] == "--rates").map(|pair| &pair[1]) {
        plan.ramp.rates = rates
            .split(',')
            .map(|rate| rate.trim().parse().expect("--rates takes r,r,… (chunks/s per stream)"))
            .collect();
        plan.ramp.bisect = false;
        plan.ramp.every_step = true;
    }
    if let Some(counts) = value_of(&args, "--replicas") {
        plan.scale.counts =
            counts.split(',').map(|n| n.trim().parse().expect("--replicas takes n,n,… (replica counts)")).collect();
    }
    let runs = |phase: &str| only.is_empty() || only.contains(&phase);
    let scratch = std::env::temp_dir().join(format!("ark-bench-{}", std::process::id()));
    let mut report = Report::create(output_dir());
    let mut machine = machine::Machine::record();
    let mut pg = Postgres::start(&scratch.join("postgres")).await;
    machine.postgres = pg.version().await;
    if let Some(minutes) = value_of(&args, "--soak") {
        let minutes = minutes.parse().expect("--soak takes whole minutes");
        let rate = value_of(&args, "--soak-rate").map(|r| r.parse().expect("--soak-rate takes chunks/s per stream"));
        report.line(&serde_json::json!({"phase": "machine", "mode": "soak", "machine": machine}));
        let (correct, md) = soak::run(minutes, rate, &mut pg, &mut report, &scratch).await;
        let title = format!("Soak, {minutes} min, {}", title_tail());
        let md = format!("### {title}\n\nMachine: {}.\n\n{md}", machine.describe());
        report.write_markdown(&md);
        println!("\n{md}");
        drop(pg);
        let _ = std::fs::remove_dir_all(&scratch);
        if !correct {
            eprintln!("FAILED: the soak's checker found something wrong (see Correctness above)");
            return ExitCode::FAILURE;
        }
        return ExitCode::SUCCESS;
    }
    report.line(&serde_json::json!({"phase": "machine", "mode": plan.mode, "machine": machine}));

    eprintln!("baselines: pgbench {} s per case, {} notifications", plan.baseline_seconds, plan.notifications);
    let baselines =
        baselines::measure(&mut pg, &scratch.join("pgbench"), plan.baseline_seconds, plan.notifications).await;
    add_all(&mut report, baseline_rows(&baselines));
    // What NOTIFY costs as listeners multiply, on a server no broker uses yet.
    let mut appendix = String::new();
    if runs("notify-cost") {
        let costs = notify_cost::measure(&mut pg, &scratch.join("notify"), plan.baseline_seconds).await;
        for run in &costs {
            report.line(&serde_json::json!({"phase": "notify-cost", "run": run}));
        }
        appendix = notify_cost::markdown(&costs);
    }
    if let Some(sizes) = value_of(&args, "--volume-rows") {
        plan.volume.sizes =
            sizes.split(',').map(|n| n.trim().parse().expect("--volume-rows takes n,n,… (chunk rows)")).collect();
    }
    if runs("volume") {
        let runs = volume::run(&plan.volume, &scratch).await;
        for run in &runs {
            report.line(&serde_json::json!({"phase": "volume", "run": run}));
        }
        appendix += &volume::markdown(&runs);
    }
    // Before the three replicas start: this phase brings its own, and no other broker may use the server.
    if runs("replica-scale") {
        add_all(&mut report, scale::run(&mut pg, &plan.scale).await);
    }

    pg.create_database(BROKER_DB).await;
    let url = pg.url(BROKER_DB);
    let (a, b, c) = tokio::join!(Replica::start(&url), Replica::start(&url), Replica::start(&url));
    let replicas = [a, b, c];
    let mut bench = Bench { pg: &mut pg, replicas: &replicas, client: reqwest::Client::new(), baselines };
    for shape in plan.shapes.iter().filter(|shape| runs(&phases::phase_id(shape))) {
        let (row, _) = bench.shape(shape).await;
        report.add(row);
    }
    if runs("saturation") {
        add_all(&mut report, bench.saturation(&plan.ramp).await);
    }
    if runs("hitl") {
        report.add(bench.hitl(plan.hitl_iterations).await);
    }
    if runs("records") {
        add_all(&mut report, bench.records(&plan.records).await);
    }
    if runs("durable-streams") {
        let bases: Vec<String> = replicas.iter().map(|replica| replica.base.clone()).collect();
        let pids: Vec<u32> = replicas.iter().map(Replica::pid).collect();
        let measured = durable::run(&plan.durable, &bases, &pids, &scratch).await;
        for target in &measured {
            report.line(&serde_json::json!({"phase": "durable-streams", "run": target}));
        }
        appendix += &durable::markdown(&plan.durable, &measured);
    }
    // `--only memory` measures every kind; `--only memory-mcp-waiter-2026` (a kind's phase id) just that one.
    for kind in waiters::Kind::ALL.into_iter().filter(|kind| runs("memory") || runs(kind.phase())) {
        report.add(waiters::measure(&url, kind, plan.waiters).await);
    }

    let title = format!("{} run, {}", plan.mode, title_tail());
    let md = format!("{}\n{appendix}", report.finish(&title, &machine, &bench.baselines));
    report.write_markdown(&md);
    println!("\n{md}");
    for (name, replica) in ["A", "B", "C"].iter().zip(&replicas) {
        for line in replica.warning_samples() {
            eprintln!("replica {name} warned: {line}");
        }
    }
    for replica in replicas {
        replica.stop().await;
    }
    drop(pg);
    let _ = std::fs::remove_dir_all(&scratch);
    if report.has_correctness_failure() {
        eprintln!("FAILED: the checker found gaps, duplicates, reordering or acknowledged losses");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// The value after `flag` on the command line.
fn value_of<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.windows(2).find(|pair| pair[0] == flag).map(|pair| pair[1].as_str())
}

/// `2026-11-26 00:08 UTC (broker at 1ea6f0c)`: when, and which broker.
fn title_tail() -> String {
    format!(
        "{} (broker at {})",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        git_revision().unwrap_or_else(|| "unknown revision".to_owned())
    )
}

/// `git describe --always --dirty` of the working tree, when there is one.
fn git_revision() -> Option<String> {
    let output = std::process::Command::new("git").args(["describe", "--always", "--dirty"]).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}
