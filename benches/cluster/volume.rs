//! The volume phase (issue 47, point 3): the same load on empty tables and on tables prefilled as a day of
//! traffic leaves them, while the reaper reclaims what is due, on a PostgreSQL of its own at its default
//! settings and three replicas at theirs (but an hour's stream retention, so half the prefill is due).
//!
//! The prefill is plain SQL, as a restore or an import would write it: N chunk rows of 315-byte chunks in
//! streams of 100, each stream written over 5 minutes; half the streams finished 2 h ago (due), the rest 5
//! minutes ago. Then `VACUUM ANALYZE`, as autovacuum would have left a day of writes. Per size: the load on
//! the full tables for long enough that the reaper makes passes, its p50/p99 and PostgreSQL's CPU against
//! the empty-table phase of the same run, how soon every due chunk was gone and at what rate, the table's
//! bytes and dead tuples before and after, and whether every chunk that was not due is still there.

use std::{path::Path, time::Duration};

use sqlx::{Connection, Executor, PgConnection};
use tokio::time::Instant;

use crate::{
    load::{self, Outcome, Shape},
    meter::{Meter, Usage},
    postgres::{BROKER_DB, Postgres},
    replicas::{Replica, sample},
};

/// Chunks per prefilled stream.
const PER_STREAM: i64 = 100;
/// Rows per prefill statement.
const BATCH: i64 = 500_000;
/// The replicas' stream retention: an hour, as the prefill's ages assume.
const RETENTION: &str = "3600";
/// A 315-byte chunk, as the reference measurements' (`performance.md` §2).
const CHUNK: &str = r#"{"id": "chatcmpl-9x8Yz1AbCdEfGhIjKlMnOpQrStUv", "object": "chat.completion.chunk", "created": 1718000000, "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_abc123def4", "choices": [{"index": 0, "delta": {"role": "assistant", "content": " the quick brown fox jumps"}, "logprobs": null, "finish_reason": null}]}"#;

/// What the phase runs.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Chunk rows prefilled, one measurement each.
    pub sizes: Vec<i64>,
    /// Streams of the load, one reader each, writers spread.
    pub streams: usize,
    /// Writing time of the empty-table and after phases.
    pub duration: Duration,
    /// Writing time on the full tables: long enough for the reaper's passes (one a minute).
    pub full_duration: Duration,
    /// `--reap-interval-seconds` of the replicas (None: their default, a minute).
    pub reap_interval: Option<&'static str>,
}

/// One load's figures.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Load {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub ingest_per_s: f64,
    pub requested_per_s: f64,
    pub postgres_cpu_s: f64,
    pub postgres_cpu_us_per_chunk: f64,
    pub broker_cpu_s: f64,
    pub seconds: f64,
    pub gaps: u64,
    pub duplicates: u64,
    pub lost: u64,
    pub errors: usize,
}

/// One size's run.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Run {
    pub rows: i64,
    pub empty: Load,
    pub reaping: Load,
    pub after: Load,
    /// Due chunks when the full phase began, and left when it ended.
    pub due: i64,
    pub due_left: i64,
    /// Seconds from the full phase's start until no due chunk was left (None: some were left).
    pub gone_after_s: Option<f64>,
    /// Rows the reaper said it reclaimed, per second of the full phase (`kind="streams"`).
    pub reaped_per_s: f64,
    /// Chunks that were not due, before and after: equal when nothing kept was lost.
    pub kept_before: i64,
    pub kept_after: i64,
    /// Table and index bytes of `chunks` (every partition), and dead tuples, before and after.
    pub bytes_before: i64,
    pub bytes_after: i64,
    pub dead_before: i64,
    pub dead_after: i64,
    /// Bytes per row on the full table, before reclaiming.
    pub bytes_per_row: f64,
    pub prefill_s: f64,
}

impl Run {
    /// p99 and PostgreSQL CPU per chunk while reaping, each ÷ the empty-table phase's (the phases differ in
    /// length, so CPU is compared per chunk acknowledged).
    pub fn ratios(&self) -> (f64, f64) {
        let cpu = self.reaping.postgres_cpu_us_per_chunk / self.empty.postgres_cpu_us_per_chunk;
        (self.reaping.p99_ms / self.empty.p99_ms, cpu)
    }
}

/// Runs every size on a PostgreSQL of its own at its defaults, under `scratch`.
pub async fn run(plan: &Plan, scratch: &Path) -> Vec<Run> {
    let mut runs = Vec::new();
    for &rows in &plan.sizes {
        let mut pg = Postgres::start_at_defaults(&scratch.join(format!("volume-{rows}"))).await;
        runs.push(one(&mut pg, plan, rows).await);
        drop(pg);
    }
    runs
}

async fn one(pg: &mut Postgres, plan: &Plan, rows: i64) -> Run {
    pg.create_database(BROKER_DB).await;
    let url = pg.url(BROKER_DB);
    let replicas = start_replicas(&url, plan).await;
    let client = reqwest::Client::new();
    let bases: Vec<String> = replicas.iter().map(|r| r.base.clone()).collect();
    let shape =
        |duration| Shape { streams: plan.streams, readers: 1, rate: 10, spread: true, in_phase: false, duration };
    let mut db = PgConnection::connect(&url).await.expect("connect to the broker database");
    let mut run = Run { rows, ..Run::default() };

    eprintln!("phase volume-{rows}: the load on empty tables");
    run.empty = metered(pg, &replicas, &client, &bases, &shape(plan.duration), &format!("vol{rows}e")).await;
    // Stopped while the prefill is written, so no pass reclaims any of it before the full phase; started
    // again (as after a deploy), their reapers' first passes come a minute into it.
    futures::future::join_all(replicas.into_iter().map(Replica::stop)).await;

    eprintln!("phase volume-{rows}: prefilling {rows} chunk rows as a day leaves them");
    let started = Instant::now();
    prefill(&mut db, rows).await;
    run.prefill_s = started.elapsed().as_secs_f64();
    (run.bytes_before, run.dead_before) = table_size(&mut db).await;
    run.bytes_per_row = run.bytes_before as f64 / rows as f64;
    run.due = scalar(&mut db, DUE).await;
    run.kept_before = scalar(&mut db, KEPT).await;

    eprintln!("phase volume-{rows}: the load on full tables while the reaper works ({} due)", run.due);
    let replicas = start_replicas(&url, plan).await;
    let bases: Vec<String> = replicas.iter().map(|r| r.base.clone()).collect();
    let reaped_before = reaped(&client, &replicas).await;
    let watch_started = Instant::now();
    let watcher = tokio::spawn(watch_due(url.clone(), plan.full_duration));
    run.reaping = metered(pg, &replicas, &client, &bases, &shape(plan.full_duration), &format!("vol{rows}f")).await;
    run.gone_after_s = watcher.await.expect("the watcher ran");
    run.reaped_per_s = (reaped(&client, &replicas).await - reaped_before) / watch_started.elapsed().as_secs_f64();
    run.due_left = scalar(&mut db, DUE).await;
    run.kept_after = scalar(&mut db, KEPT).await;
    (run.bytes_after, run.dead_after) = table_size(&mut db).await;

    eprintln!("phase volume-{rows}: the load after");
    run.after = metered(pg, &replicas, &client, &bases, &shape(plan.duration), &format!("vol{rows}a")).await;
    db.close().await.expect("close");
    futures::future::join_all(replicas.into_iter().map(Replica::stop)).await;
    run
}

/// Three replicas at their defaults but the stream retention.
async fn start_replicas(url: &str, plan: &Plan) -> Vec<Replica> {
    let mut flags = vec!["--stream-retention-seconds", RETENTION];
    if let Some(interval) = plan.reap_interval {
        flags.extend(["--reap-interval-seconds", interval]);
    }
    let (a, b, c) = tokio::join!(
        Replica::start_with(url, &flags),
        Replica::start_with(url, &flags),
        Replica::start_with(url, &flags)
    );
    vec![a, b, c]
}

/// The load, metered (the meter settles the server first: `VACUUM ANALYZE`, `CHECKPOINT`).
async fn metered(
    pg: &mut Postgres,
    replicas: &[Replica],
    client: &reqwest::Client,
    bases: &[String],
    shape: &Shape,
    tag: &str,
) -> Load {
    let meter = Meter::start(pg, replicas).await;
    let started = Instant::now();
    let outcome = load::run(client, bases, shape, tag).await;
    let seconds = started.elapsed().as_secs_f64();
    let usage = meter.finish(pg, replicas).await;
    load_of(&outcome, &usage, seconds)
}

fn load_of(outcome: &Outcome, usage: &Usage, seconds: f64) -> Load {
    let acknowledged = outcome.acknowledged.max(1) as f64;
    Load {
        p50_ms: outcome.latency_ms(0.5),
        p99_ms: outcome.latency_ms(0.99),
        ingest_per_s: outcome.achieved_per_s(),
        requested_per_s: outcome.requested_per_s,
        postgres_cpu_s: usage.postgres_cpu_s,
        postgres_cpu_us_per_chunk: usage.postgres_cpu_s * 1e6 / acknowledged,
        broker_cpu_s: usage.broker_cpu_s,
        seconds,
        gaps: outcome.check.gaps,
        duplicates: outcome.check.duplicates,
        lost: outcome.check.lost,
        errors: outcome.errors.len(),
    }
}

/// Chunks of due streams (finished more than the retention ago).
const DUE: &str = "select count(*) from chunks c join streams s using (stream_id)
                   where s.stream_id like 'vol-%' and s.completed_at < now() - interval '1 hour'";
/// Chunks of the prefill's streams that are not due.
const KEPT: &str = "select count(*) from chunks c join streams s using (stream_id)
                    where s.stream_id like 'vol-%' and s.completed_at >= now() - interval '1 hour'";

async fn scalar(db: &mut PgConnection, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(db).await.expect("a count")
}

/// Every partition's table and index bytes, and dead tuples.
async fn table_size(db: &mut PgConnection) -> (i64, i64) {
    sqlx::query_as(
        "select coalesce(sum(pg_total_relation_size(p.relid)), 0)::bigint, coalesce(sum(s.n_dead_tup), 0)::bigint
         from pg_partition_tree('chunks') p left join pg_stat_user_tables s on s.relid = p.relid where p.isleaf",
    )
    .fetch_one(db)
    .await
    .expect("the table's size")
}

/// The prefill, in statements of [`BATCH`] rows: streams `vol-<n>`, the even ones due.
async fn prefill(db: &mut PgConnection, rows: i64) {
    let streams = rows / PER_STREAM;
    sqlx::query(
        "insert into streams (stream_id, created_at, completed_at, last_position)
         select 'vol-' || g, now() - f - interval '5 minutes', now() - f, $2
         from generate_series(1, $1) g,
              lateral (select case when g % 2 = 0 then interval '2 hours' else interval '5 minutes' end) as a(f)",
    )
    .bind(streams)
    .bind(PER_STREAM)
    .execute(&mut *db)
    .await
    .expect("the prefill's streams");
    let per_batch = BATCH / PER_STREAM;
    let mut first = 1;
    while first <= streams {
        let last = (first + per_batch - 1).min(streams);
        sqlx::query(
            "insert into chunks (stream_id, position, chunk, bytes, created_at)
             select s.stream_id, p, $3::json, 315, s.created_at + p * interval '3 seconds'
             from generate_series($1::bigint, $2::bigint) g
             join streams s on s.stream_id = 'vol-' || g
             cross join generate_series(1, 100) p",
        )
        .bind(first)
        .bind(last)
        .bind(CHUNK)
        .execute(&mut *db)
        .await
        .expect("a prefill batch");
        first = last + 1;
    }
    db.execute("vacuum analyze chunks").await.expect("vacuum analyze");
    db.execute("vacuum analyze streams").await.expect("vacuum analyze");
}

/// Seconds until no due chunk is left, looked at every two seconds for at most `within`. The prefill's due
/// chunks are those written before 1 h 55 min ago, so the look reads only the buckets that old (a count of
/// every due chunk would be a load of its own).
async fn watch_due(url: String, within: Duration) -> Option<f64> {
    let mut db = PgConnection::connect(&url).await.expect("connect to the broker database");
    let started = Instant::now();
    while started.elapsed() < within {
        let any: bool = sqlx::query_scalar(
            "select exists (select 1 from chunks where created_at < now() - interval '115 minutes'
                            and starts_with(stream_id, 'vol-'))",
        )
        .fetch_one(&mut db)
        .await
        .expect("a look");
        if !any {
            return Some(started.elapsed().as_secs_f64());
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    None
}

/// Rows the replicas' reapers said they reclaimed of streams, summed.
async fn reaped(client: &reqwest::Client, replicas: &[Replica]) -> f64 {
    let mut total = 0.0;
    for replica in replicas {
        let metrics = replica.metrics(client).await;
        total += sample(&metrics, r#"ark_broker_reaper_deleted_total{kind="streams"}"#).unwrap_or(0.0);
    }
    total
}

/// The phase's table, and the goals' verdicts.
pub fn markdown(runs: &[Run]) -> String {
    let mut md = String::from(
        "### Volume: the load on empty tables, then on tables prefilled as a day leaves them while the reaper \
         works\n\nPostgreSQL at its defaults, three replicas at theirs (stream retention 1 h); 200 streams × 1 \
         reader × 10 chunks/s, spread. Goals: every due chunk gone within 2 minutes (plus the documented bound), \
         PostgreSQL CPU per chunk while reaping ≤ 1.3× and p99 ≤ 1.5× the empty-table phase, nothing kept lost.\n\n\
         | rows | phase | p50 / p99 ms | ingest / s | PG CPU s (µs per chunk) | due → left | gone after | reaped / s | bytes (per row) | dead tuples | kept before → after |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for run in runs {
        let line = |name: &str, load: &Load, extra: &str| {
            format!(
                "| {} | {name} | {:.1} / {:.1} | {:.0} of {:.0} | {:.1} ({:.0}) | {extra} |\n",
                run.rows,
                load.p50_ms,
                load.p99_ms,
                load.ingest_per_s,
                load.requested_per_s,
                load.postgres_cpu_s,
                load.postgres_cpu_us_per_chunk
            )
        };
        md += &line("empty", &run.empty, "— | — | — | — | — | —");
        let gone = run.gone_after_s.map_or("not within the phase".to_owned(), |s| format!("{s:.0} s"));
        let reaping = format!(
            "{} → {} | {gone} | {:.0} | {:.2} GB → {:.2} GB ({:.0}) | {} → {} | {} → {}",
            run.due,
            run.due_left,
            run.reaped_per_s,
            run.bytes_before as f64 / 1e9,
            run.bytes_after as f64 / 1e9,
            run.bytes_per_row,
            run.dead_before,
            run.dead_after,
            run.kept_before,
            run.kept_after
        );
        md += &line("reaping", &run.reaping, &reaping);
        md += &line("after", &run.after, "— | — | — | — | — | —");
    }
    md += "\n";
    for run in runs {
        let (p99, cpu) = run.ratios();
        let lossless = run.kept_before == run.kept_after
            && [&run.empty, &run.reaping, &run.after].iter().all(|l| l.gaps + l.duplicates + l.lost == 0);
        md += &format!(
            "- {} rows: p99 while reaping ×{p99:.2} (goal ≤ 1.5), PostgreSQL CPU per chunk ×{cpu:.2} (goal ≤ 1.3), due chunks \
             gone {} (goal: within 2 minutes of being due), {}.\n",
            run.rows,
            run.gone_after_s.map_or("not within the phase".to_owned(), |s| format!("after {s:.0} s")),
            if lossless { "nothing kept lost" } else { "SOMETHING KEPT WAS LOST" }
        );
    }
    md
}
