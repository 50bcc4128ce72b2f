//! The output: one JSON line per phase on stdout and in `results.jsonl`, and at the end a markdown report
//! (`results.md`: machine, baselines, the phase table, a verdict per goal).

use std::{fs::File, io::Write, path::PathBuf};

use serde::Serialize;

use crate::{baselines::Baselines, machine::Machine};

/// One phase's result. The first fields are the common ones every line has (null where they do not
/// apply); the rest appear when set.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Row {
    /// Phase id (`100x2x10-one`, `baseline-A`, `saturation`, `hitl`, …).
    pub phase: String,
    /// What `value` measures.
    pub metric: String,
    /// The headline number.
    pub value: f64,
    /// The denominator `value` is compared with.
    pub baseline: Option<f64>,
    /// `value ÷ baseline`.
    pub ratio: Option<f64>,
    /// Latency quantiles, ms.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// The raw baseline's latency quantiles, ms (record phases).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_p50_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_p99_ms: Option<f64>,
    /// Broker + PostgreSQL + bench CPU per acknowledged chunk, µs (to compare with CN's per row).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_chunk: Option<f64>,
    /// Commit latency quantiles, ms: line made → its transaction committed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_p50_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_p99_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_max_ms: Option<f64>,
    /// The writers' group commits: mean rows each and mean ms each; the readers' tails: mean ms from a
    /// notification to its rows handed out (where a burst's time goes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows_per_flush: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flush_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tail_ms: Option<f64>,
    /// Broker CPU seconds over the phase (all replicas).
    pub cpu_s: Option<f64>,
    /// Peak RSS of the largest replica (VmHWM, since start), MiB.
    pub rss_mb: Option<f64>,
    /// Broker statements ÷ delivered events.
    pub statements_per_event: Option<f64>,
    pub gaps: Option<u64>,
    pub duplicates: Option<u64>,
    pub lost: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub out_of_order: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_done: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub achieved_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_per_s: Option<f64>,
    /// Lines sent, chunks acknowledged, chunk events delivered, readers opened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acknowledged: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readers: Option<u64>,
    /// p50 ÷ L.p50 and p99 ÷ L.p99.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_vs_l: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_vs_l: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub postgres_cpu_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_cpu_s: Option<f64>,
    /// All replicas' VmRSS at the end of the phase, MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_now_mb: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub statements: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_warnings: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub error_samples: Vec<String>,
    /// The brokers' statements that took the most time in the phase, `calls × total ms: query`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub top_statements: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The replica-scale phase's own fields, at the top level of its JSON line.
    #[serde(flatten)]
    pub scale: Option<crate::scale_row::Scale>,
}

impl Row {
    /// Whether the checker found a correctness failure in this phase: a gap, duplicate, reordering or
    /// acknowledged loss (a `[DONE]` missing after an acknowledged completion is a loss). A reader left
    /// without `[DONE]` because its writer failed is an error, not a correctness failure.
    pub fn is_incorrect(&self) -> bool {
        [self.gaps, self.duplicates, self.lost, self.out_of_order].iter().flatten().any(|&n| n > 0)
    }
}

/// Collects rows, printing and appending each as it comes.
pub struct Report {
    dir: PathBuf,
    jsonl: File,
    rows: Vec<Row>,
}

impl Report {
    /// Starts `dir/results.jsonl` afresh.
    pub fn create(dir: PathBuf) -> Self {
        std::fs::create_dir_all(&dir).expect("the output directory");
        let jsonl = File::create(dir.join("results.jsonl")).expect("results.jsonl");
        Report { dir, jsonl, rows: Vec::new() }
    }

    /// Prints and stores `value` as one JSON line (for records that are not phases, like the machine).
    pub fn line(&mut self, value: &impl Serialize) {
        let text = serde_json::to_string(value).expect("JSON");
        println!("{text}");
        writeln!(self.jsonl, "{text}").expect("write results.jsonl");
    }

    /// Prints and stores one phase.
    pub fn add(&mut self, row: Row) {
        self.line(&row);
        self.rows.push(row);
    }

    /// Writes `results.md` (a run that is not phases, like the soak).
    pub fn write_markdown(&self, md: &str) {
        std::fs::write(self.dir.join("results.md"), md).expect("write results.md");
    }

    /// Whether any phase failed the checker.
    pub fn has_correctness_failure(&self) -> bool {
        self.rows.iter().any(Row::is_incorrect)
    }

    /// Writes `results.md` and returns its text.
    pub fn finish(&self, title: &str, machine: &Machine, baselines: &Baselines) -> String {
        let mut md = format!("### {title}\n\nMachine: {}.\n\n", machine.describe());
        md.push_str("| baseline | value |\n|---|---|\n");
        md.push_str(&format!("| A: single-row INSERT, 16 clients | {} rows/s |\n", thousands(baselines.a)));
        md.push_str(&format!("| C: UNNEST×100 INSERT, 16 clients | {} rows/s |\n", thousands(baselines.c)));
        md.push_str(&format!(
            "| CN: UNNEST×100 + 1 NOTIFY per batch, 16 clients | {} rows/s ({:.1} µs of machine CPU per row) |\n",
            thousands(baselines.cn),
            baselines.cn_cpu_us_per_row
        ));
        md.push_str(&format!(
            "| L: LISTEN/NOTIFY, 1 listener, p50 / p99 / max | {:.2} / {:.2} / {:.2} ms |\n\n",
            baselines.l_p50, baselines.l_p99, baselines.l_max
        ));
        md.push_str(
            "| phase | requested/s | achieved/s | delivered ev/s | commit p50 / p99 ms | rows/flush · flush ms · tail ms | p50 / p99 / max ms | p50÷L | p99÷L | ingest÷CN \
             | CPU µs/chunk | stmts/event | broker CPU s | PG CPU s | bench CPU s | RSS peak MB | gaps/dup/ooo/lost | warnings |\n",
        );
        md.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        let own_table = |r: &&Row| ["baseline", "records", "replica-scale"].iter().any(|p| r.phase.starts_with(p));
        for row in self.rows.iter().filter(|r| !own_table(r)) {
            md.push_str(&table_row(row));
        }
        if self.rows.iter().any(|r| r.phase.starts_with("records")) {
            md.push_str(&records_table(&self.rows));
        }
        md.push_str(&scale_table(&self.rows));
        md.push_str("\nVerdicts (time goals never fail the run; only gaps, duplicates and losses do):\n\n");
        for (goal, verdict) in verdicts(&self.rows) {
            md.push_str(&format!("- **{verdict}** {goal}\n"));
        }
        std::fs::write(self.dir.join("results.md"), &md).expect("write results.md");
        md
    }
}

fn table_row(row: &Row) -> String {
    let num = |v: Option<f64>| v.map_or("–".to_owned(), thousands);
    let dec = |v: Option<f64>, places: usize| v.map_or("–".to_owned(), |v| format!("{v:.places$}"));
    let latency = match (row.p50_ms, row.p99_ms, row.max_ms) {
        (Some(p50), Some(p99), Some(max)) => format!("{p50:.1} / {p99:.1} / {max:.0}"),
        _ => "–".to_owned(),
    };
    let commit = match (row.commit_p50_ms, row.commit_p99_ms) {
        (Some(p50), Some(p99)) => format!("{p50:.1} / {p99:.1}"),
        _ => "–".to_owned(),
    };
    let pipeline = match (row.rows_per_flush, row.flush_ms, row.tail_ms) {
        (Some(rows), Some(flush), Some(tail)) => format!("{rows:.1} · {flush:.2} · {tail:.2}"),
        _ => "–".to_owned(),
    };
    let checks = match (row.gaps, row.duplicates, row.out_of_order, row.lost) {
        (Some(g), Some(d), o, Some(l)) => format!("{g}/{d}/{}/{l}", o.unwrap_or(0)),
        _ => "–".to_owned(),
    };
    let ingest_vs_cn = match row.metric.as_str() {
        "ingest_per_s" | "saturation_ingest_per_s" => dec(row.ratio, 3),
        _ => "–".to_owned(),
    };
    format!(
        "| {} | {} | {} | {} | {commit} | {pipeline} | {latency} | {} | {} | {ingest_vs_cn} | {} | {} | {} | {} | {} | {} | {checks} | {} |\n",
        row.phase,
        num(row.requested_per_s),
        num(row.achieved_per_s),
        num(row.delivered_per_s),
        dec(row.p50_vs_l, 1),
        dec(row.p99_vs_l, 1),
        dec(row.cpu_us_per_chunk, 1),
        dec(row.statements_per_event, 2),
        dec(row.cpu_s, 1),
        dec(row.postgres_cpu_s, 1),
        dec(row.client_cpu_s, 1),
        dec(row.rss_mb, 0),
        row.broker_warnings.map_or("–".to_owned(), |w| w.to_string()),
    )
}

/// The record phases beside their raw PostgreSQL baselines.
fn records_table(rows: &[Row]) -> String {
    let mut md = String::from(
        "\nRecords (rows/s through the replicas beside the same work straight in PostgreSQL, same run):\n\n\
         | phase | rows/s | raw PG rows/s | ÷ raw | p50 / p99 / max ms | raw p50 / p99 ms | errors | what |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let num = |v: Option<f64>| v.map_or("–".to_owned(), thousands);
    let pair = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => format!("{a:.1} / {b:.1}"),
        _ => "–".to_owned(),
    };
    for row in rows.iter().filter(|r| r.phase.starts_with("records")) {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} / {} | {} | {} | {} |\n",
            row.phase,
            thousands(row.value),
            num(row.baseline),
            row.ratio.map_or("–".to_owned(), |r| format!("{r:.2}")),
            pair(row.p50_ms, row.p99_ms),
            row.max_ms.map_or("–".to_owned(), |m| format!("{m:.0}")),
            pair(row.baseline_p50_ms, row.baseline_p99_ms),
            row.errors.unwrap_or(0),
            row.note.as_deref().unwrap_or(""),
        ));
    }
    md
}

/// The goals of `performance.md` §5 this bench checks, each with PASS, MISS or "not run".
fn verdicts(rows: &[Row]) -> Vec<(String, String)> {
    let find = |phase: &str| rows.iter().find(|r| r.phase == phase);
    let judge = |goal: &str, row: Option<&Row>, test: &dyn Fn(&Row) -> bool, shown: &dyn Fn(&Row) -> String| {
        let verdict = match row {
            Some(row) if test(row) => format!("PASS ({})", shown(row)),
            Some(row) => format!("MISS ({})", shown(row)),
            None => "not run".to_owned(),
        };
        (goal.to_owned(), verdict)
    };
    let p99 = |r: &Row| r.p99_ms.unwrap_or(f64::INFINITY);
    let p99_text = |r: &Row| format!("p99 {:.1} ms", p99(r));
    let p50 = |r: &Row| r.p50_ms.unwrap_or(f64::INFINITY);
    let share = |r: &Row| r.achieved_per_s.unwrap_or(0.0) / r.requested_per_s.unwrap_or(f64::INFINITY);
    // Each load goal holds staggered and in phase (every writer ticking at once).
    let mut goals = Vec::new();
    for (pacing, suffix) in [("staggered", ""), ("in phase", "-inphase")] {
        goals.push(judge(
            &format!("100×2×10 one writer, {pacing}: p50 ≤ 2 ms, p99 ≤ 10 ms"),
            find(&format!("100x2x10-one{suffix}")),
            &|r| p50(r) <= 2.0 && p99(r) <= 10.0,
            &|r| format!("p50 {:.1} ms, p99 {:.1} ms", p50(r), p99(r)),
        ));
        goals.push(judge(
            &format!("500×2×10 one writer, {pacing}: p99 ≤ 25 ms"),
            find(&format!("500x2x10-one{suffix}")),
            &|r| p99(r) <= 25.0,
            &p99_text,
        ));
        goals.push(judge(
            &format!("1000×2×10 spread, {pacing}: ≥ 95 % of requested ingest, lossless, p99 ≤ 100 ms"),
            find(&format!("1000x2x10-spread{suffix}")),
            &|r| share(r) >= 0.95 && !r.is_incorrect() && p99(r) <= 100.0,
            &|r| {
                format!("{:.1} % of requested, lossless: {}, p99 {:.1} ms", share(r) * 100.0, !r.is_incorrect(), p99(r))
            },
        ));
    }
    goals.extend([
        judge("saturation ingest ≥ 0.5 × CN", find("saturation"), &|r| r.ratio.unwrap_or(0.0) >= 0.5, &|r| {
            format!("{} chunks/s = {:.3} × CN", thousands(r.value), r.ratio.unwrap_or(0.0))
        }),
        judge("HITL wake p99 ≤ 25 ms", find("hitl"), &|r| p99(r) <= 25.0, &p99_text),
    ]);
    let kib = |r: &Row| format!("{:.1} KiB each", r.value);
    for (goal, phase, most) in [
        ("a blocking MCP ask_question waiter ≤ 48 KiB", "memory-mcp-waiter", 48.0),
        ("a blocking MCP ask_question waiter of 2026-07-28 ≤ 48 KiB", "memory-mcp-waiter-2026", 48.0),
        ("an SSE stream reader ≤ 24 KiB", "memory-stream-reader", 24.0),
        ("a question watcher ≤ 24 KiB", "memory-watcher", 24.0),
    ] {
        goals.push(judge(goal, find(phase), &|r| r.value <= most && r.errors == Some(0), &kib));
    }
    goals
}

/// `12345.6` → `12,346`.
pub fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.abs());
    let mut grouped = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    if value < 0.0 { format!("-{grouped}") } else { grouped }
}

/// The "Replica scale" section of the report, when the phase ran.
fn scale_table(rows: &[Row]) -> String {
    let counts: Vec<(&Row, &crate::scale_row::Scale)> =
        rows.iter().filter_map(|r| Some((r, r.scale.as_ref()?))).collect();
    let Some((_, first)) = counts.first() else { return String::new() };
    let mut md = format!(
        "\nReplica scale ({} streams × 1 reader × {} chunks/s, writers round-robin over all replicas, each \
         stream's reader on the replica after its writer's; DATABASE_POOL_MAX={} per replica; a fresh \
         database per count):\n\n\
         | replicas | chunk rows read per chunk | ÷ reading replicas | PG CPU µs/chunk | broker CPU µs/chunk \
         | ingest achieved/requested | lines sent · POSTs answered after their end, p50/max ms \
         | delivery p50/p99 ms | flushes · tail wake-ups per chunk | gaps/dup/ooo/lost | errors | warnings |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
        first.streams, first.rate_per_stream, first.database_pool_max,
    );
    for (row, scale) in &counts {
        let chunks = row.acknowledged.unwrap_or(0).max(1) as f64;
        md.push_str(&format!(
            "| {} | {:.2} | {:.2} | {:.1} | {:.1} | {} / {} | {} · {:.0} / {:.0} | {:.1} / {:.1} | {:.3} · {:.3} \
             | {}/{}/{}/{} | {} | {} |\n",
            scale.replicas,
            scale.chunk_rows_per_chunk,
            scale.chunk_rows_per_chunk_per_reading_replica,
            scale.pg_cpu_us_per_chunk,
            scale.broker_cpu_us_per_chunk,
            thousands(row.achieved_per_s.unwrap_or(0.0)),
            thousands(row.requested_per_s.unwrap_or(0.0)),
            thousands(row.sent.unwrap_or(0) as f64),
            scale.answer_after_end_p50_ms,
            scale.answer_after_end_max_ms,
            row.p50_ms.unwrap_or(0.0),
            row.p99_ms.unwrap_or(0.0),
            scale.flushes / chunks,
            scale.wakeups / chunks,
            row.gaps.unwrap_or(0),
            row.duplicates.unwrap_or(0),
            row.out_of_order.unwrap_or(0),
            row.lost.unwrap_or(0),
            row.errors.unwrap_or(0),
            row.broker_warnings.unwrap_or(0),
        ));
    }
    if let Some(note) = rows.iter().find(|r| r.phase == "replica-scale").and_then(|r| r.note.as_deref()) {
        md.push_str(&format!("\n{note}.\n"));
    }
    let other: Vec<String> = counts
        .iter()
        .map(|(_, s)| {
            let (processes, irq, steal) = (s.other_processes_cpu_s, s.irq_cpu_s, s.steal_cpu_s);
            format!("{} replicas: {processes:.1} · {irq:.1} · {steal:.1} in {:.1} s", s.replicas, s.window_s)
        })
        .collect();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    md.push_str(&format!(
        "\nCPU seconds the machine ({cores} cores) spent outside PostgreSQL, the replicas and the bench during each \
         window, as other processes · interrupts · steal (other processes mean a skewed run): {}.\n",
        other.join("; ")
    ));
    md
}
