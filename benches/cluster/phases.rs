//! The measured phases against the three replicas, each metered and turned into a report row: a load
//! shape, the saturation ramp, and the HITL wake.

use std::{collections::VecDeque, time::Duration};

use crate::{
    baselines::Baselines,
    hitl,
    load::{self, Outcome, Shape, quantile_ms},
    meter::{Meter, Usage},
    postgres::Postgres,
    replicas::Replica,
    report::{Report, Row},
};

/// p99 commit latency above which a saturation step no longer holds (`performance.md` §5: "ramp R until
/// commit p99 > 50 ms").
pub const SATURATION_P99_MS: f64 = 50.0;
/// Share of the requested ingest a saturation step must reach to hold.
pub const SATURATION_SHARE: f64 = 0.95;
/// Statements listed per row.
const TOP_STATEMENTS: i64 = 6;
/// Error messages kept per row.
const SAMPLES: usize = 3;

/// What the phases run against.
pub struct Bench<'a> {
    pub pg: &'a mut Postgres,
    pub replicas: &'a [Replica],
    pub client: reqwest::Client,
    pub baselines: Baselines,
}

/// How the saturation ramp steps.
#[derive(Debug, Clone)]
pub struct Ramp {
    /// Streams, writers spread over the replicas, one reader each on another replica.
    pub streams: usize,
    /// Chunks/s per stream, one step each, until a step does not hold (or all of them: `every_step`).
    pub rates: Vec<u32>,
    /// Run every step even after one did not hold (`--rates`, to look at chosen steps).
    pub every_step: bool,
    /// Writing time per step.
    pub duration: Duration,
    /// After the first step that does not hold, try once halfway between it and the last that held.
    pub bisect: bool,
}

/// The id of a shape's phase: `100x2x10-one`, `1000x2x10-spread`, with `-inphase` for bursts.
pub fn phase_id(shape: &Shape) -> String {
    let writers = if shape.spread { "spread" } else { "one" };
    let pacing = if shape.in_phase { "-inphase" } else { "" };
    format!("{}x{}x{}-{writers}{pacing}", shape.streams, shape.readers, shape.rate)
}

impl Bench<'_> {
    fn bases(&self) -> Vec<String> {
        self.replicas.iter().map(|r| r.base.clone()).collect()
    }

    /// Runs one shape, metered.
    pub async fn shape(&mut self, shape: &Shape) -> (Row, Outcome) {
        let id = phase_id(shape);
        eprintln!("phase {id}: {} for {:?}", shape.label(), shape.duration);
        let meter = Meter::start(self.pg, self.replicas).await;
        let outcome = load::run(&self.client, &self.bases(), shape, &id).await;
        let usage = meter.finish(self.pg, self.replicas).await;
        let commit = self.pg.commit_latencies_ms(&format!("bench-{id}-")).await;
        let mut row = self.shape_row(id, &outcome, &usage);
        [row.commit_p50_ms, row.commit_p99_ms, row.commit_max_ms] = commit.map_or([None; 3], |q| q.map(Some));
        let top = self.pg.top_broker_statements(TOP_STATEMENTS).await;
        row.top_statements =
            top.into_iter().map(|(calls, total_ms, query)| format!("{calls} × {total_ms:.0} ms: {query}")).collect();
        (row, outcome)
    }

    fn shape_row(&self, phase: String, outcome: &Outcome, usage: &Usage) -> Row {
        let b = &self.baselines;
        let (p50, p99) = (outcome.latency_ms(0.5), outcome.latency_ms(0.99));
        Row {
            phase,
            metric: "ingest_per_s".to_owned(),
            value: outcome.achieved_per_s(),
            baseline: Some(b.cn),
            ratio: Some(outcome.achieved_per_s() / b.cn),
            p50_ms: Some(p50),
            p99_ms: Some(p99),
            max_ms: Some(outcome.latency_ms(1.0)),
            statements_per_event: Some(usage.statements as f64 / outcome.delivered.max(1) as f64),
            cpu_us_per_chunk: Some(
                (usage.broker_cpu_s + usage.postgres_cpu_s + usage.client_cpu_s) * 1e6
                    / outcome.acknowledged.max(1) as f64,
            ),
            gaps: Some(outcome.check.gaps),
            duplicates: Some(outcome.check.duplicates),
            lost: Some(outcome.check.lost),
            out_of_order: Some(outcome.check.out_of_order),
            missing_done: Some(outcome.check.missing_done),
            requested_per_s: Some(outcome.requested_per_s),
            achieved_per_s: Some(outcome.achieved_per_s()),
            delivered_per_s: Some(outcome.delivered_per_s()),
            sent: Some(outcome.sent),
            acknowledged: Some(outcome.acknowledged),
            delivered: Some(outcome.delivered),
            readers: Some(outcome.readers as u64),
            p50_vs_l: Some(p50 / b.l_p50),
            p99_vs_l: Some(p99 / b.l_p99),
            errors: Some(outcome.errors.len() as u64),
            error_samples: outcome.errors.iter().take(SAMPLES).cloned().collect(),
            ..usage_fields(usage)
        }
    }

    /// Raises chunks/s per stream step by step until p99 commit latency exceeds 50 ms, ingest falls
    /// below 95 % of what was asked, or the checker fails; returns the steps and the summary row.
    pub async fn saturation(&mut self, ramp: &Ramp) -> Vec<Row> {
        let mut rows = Vec::new();
        let mut held: Option<(u32, f64)> = None;
        let mut rates: VecDeque<u32> = ramp.rates.iter().copied().collect();
        let mut bisected = false;
        while let Some(rate) = rates.pop_front() {
            let shape = Shape {
                streams: ramp.streams,
                readers: 1,
                rate,
                spread: true,
                in_phase: false,
                duration: ramp.duration,
            };
            let (mut row, outcome) = self.shape(&shape).await;
            row.phase = format!("saturation-{}x1x{rate}", ramp.streams);
            let holds = outcome.check.is_clean()
                && outcome.errors.is_empty()
                && row.commit_p99_ms.is_some_and(|p99| p99 <= SATURATION_P99_MS)
                && outcome.achieved_per_s() >= SATURATION_SHARE * outcome.requested_per_s;
            row.note = Some(if holds { "holds" } else { "does not hold" }.to_owned());
            rows.push(row);
            if holds {
                if held.is_none_or(|(best, _)| rate > best) {
                    held = Some((rate, outcome.achieved_per_s()));
                }
                continue;
            }
            if ramp.every_step {
                continue;
            }
            let last = held.map_or(0, |(r, _)| r);
            let middle = (last + rate) / 2;
            if ramp.bisect && !bisected && middle > last {
                bisected = true;
                rates = VecDeque::from([middle]);
                continue;
            }
            break;
        }
        let (rate, ingest) = held.unwrap_or((0, 0.0));
        let cn = self.baselines.cn;
        rows.push(Row {
            phase: "saturation".to_owned(),
            metric: "saturation_ingest_per_s".to_owned(),
            value: ingest,
            baseline: Some(cn),
            ratio: Some(ingest / cn),
            achieved_per_s: Some(ingest),
            requested_per_s: Some(rate as f64 * ramp.streams as f64),
            note: Some(format!(
                "{} streams spread, 1 reader each; last step that held: {rate} chunks/s per stream \
                 (commit p99 ≤ {SATURATION_P99_MS} ms, ≥ {:.0} % of requested, clean)",
                ramp.streams,
                SATURATION_SHARE * 100.0
            )),
            ..Row::default()
        });
        rows
    }

    /// Runs the HITL wake `iterations` times: ask on C, wait on B, answer on A.
    pub async fn hitl(&mut self, iterations: usize) -> Row {
        eprintln!("phase hitl: {iterations} wakes");
        let [a, b, c] = self.replicas else { panic!("three replicas") };
        let meter = Meter::start(self.pg, self.replicas).await;
        let wakes = hitl::run(&self.client, a, b, c, iterations).await;
        let usage = meter.finish(self.pg, self.replicas).await;
        let latencies = &wakes.latencies_us;
        let (p50, p99) = (quantile_ms(latencies, 0.5), quantile_ms(latencies, 0.99));
        Row {
            phase: "hitl".to_owned(),
            metric: "hitl_wake_p99_ms".to_owned(),
            value: p99,
            baseline: Some(self.baselines.l_p99),
            ratio: Some(p99 / self.baselines.l_p99),
            p50_ms: Some(p50),
            p99_ms: Some(p99),
            max_ms: Some(quantile_ms(latencies, 1.0)),
            p50_vs_l: Some(p50 / self.baselines.l_p50),
            p99_vs_l: Some(p99 / self.baselines.l_p99),
            errors: Some(wakes.errors.len() as u64),
            error_samples: wakes.errors.iter().take(SAMPLES).cloned().collect(),
            note: Some(format!("{} of {iterations} wakes; statements are per wake", latencies.len())),
            statements_per_event: Some(usage.statements as f64 / latencies.len().max(1) as f64),
            ..usage_fields(&usage)
        }
    }
}

/// The metered fields of a row.
fn usage_fields(usage: &Usage) -> Row {
    let pipeline = &usage.pipeline;
    let per = |total: f64, count: f64| (count > 0.0).then(|| total / count);
    Row {
        rows_per_flush: per(pipeline.flushed_rows, pipeline.flushes),
        flush_ms: per(pipeline.flush_s * 1e3, pipeline.flushes),
        tail_ms: per(pipeline.tail_s * 1e3, pipeline.tail_reads),
        cpu_s: Some(usage.broker_cpu_s),
        rss_mb: Some(usage.rss_peak_mb),
        postgres_cpu_s: Some(usage.postgres_cpu_s),
        client_cpu_s: Some(usage.client_cpu_s),
        rss_now_mb: Some(usage.rss_now_mb),
        statements: Some(usage.statements),
        broker_warnings: Some(usage.warnings),
        ..Row::default()
    }
}

/// The baseline rows.
pub fn baseline_rows(b: &Baselines) -> Vec<Row> {
    let rate = |phase: &str, metric: &str, value: f64| Row {
        phase: phase.to_owned(),
        metric: metric.to_owned(),
        value,
        ..Row::default()
    };
    vec![
        rate("baseline-A", "insert_rows_per_s", b.a),
        rate("baseline-C", "unnest100_rows_per_s", b.c),
        Row {
            baseline: Some(b.c),
            ratio: Some(b.cn / b.c),
            cpu_us_per_chunk: Some(b.cn_cpu_us_per_row),
            ..rate("baseline-CN", "unnest100_notify_rows_per_s", b.cn)
        },
        Row {
            p50_ms: Some(b.l_p50),
            p99_ms: Some(b.l_p99),
            max_ms: Some(b.l_max),
            ..rate("baseline-L", "notify_latency_p50_ms", b.l_p50)
        },
    ]
}

/// Adds `rows` to the report.
pub fn add_all(report: &mut Report, rows: Vec<Row>) {
    rows.into_iter().for_each(|row| report.add(row));
}
