//! The volume phase (issue 47, point 3): the same load on empty tables and on tables prefilled as a day of
//! traffic leaves them, while the reaper reclaims what is due, on a PostgreSQL of its own at its default
//! settings and three replicas at theirs (but an hour's stream retention, so half the prefill is due).
//!
//! The prefill is plain SQL, as a restore or an import would write it: N chunk rows of 315-byte chunks in
//! streams of 100, each stream written over 5 minutes; half the streams finished 2 h ago (due), the rest 5
//! minutes ago. Beside each stream, its Query's events and conversation's messages, in proportion (10 and 4),
//! expiring an hour after the stream finished: the due half's an hour ago. Then `VACUUM ANALYZE`, as
//! autovacuum would have left a day of writes. Per size: the load on the full tables for long enough that the
//! reaper makes passes, its p50/p99 and PostgreSQL's CPU against the empty-table phase of the same run, how
//! soon every due chunk, event and message was gone and at what rate, the chunks' bytes and dead tuples
//! before and after, and whether every row that was not due is still there.

use std::{path::Path, time::Duration};

use sqlx::{Connection, PgConnection};
use tokio::time::Instant;

use crate::{
    load::{self, Outcome, Shape},
    meter::{Meter, Usage},
    postgres::{BROKER_DB, Postgres},
    prefill::prefill,
    replicas::{Replica, sample},
};

/// The replicas' stream retention: an hour, as the prefill's ages assume.
const RETENTION: &str = "3600";
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
    /// The prefilled chunks, events and messages: how each table's due rows went.
    pub chunks: Records,
    pub events: Records,
    pub messages: Records,
    /// Table and index bytes of `chunks` (every partition), and dead tuples, before and after.
    pub bytes_before: i64,
    pub bytes_after: i64,
    pub dead_before: i64,
    pub dead_after: i64,
    /// Bytes per row on the full table, before reclaiming.
    pub bytes_per_row: f64,
    pub prefill_s: f64,
}

/// How one prefilled table fared: its rows due when the full phase began and left when it ended, seconds
/// from the phase's start until none was left (None: some were left), what the reaper reported per second,
/// and the rows not due before and after (equal when nothing kept was lost).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Records {
    pub due: i64,
    pub due_left: i64,
    pub gone_after_s: Option<f64>,
    pub reaped_per_s: f64,
    pub kept_before: i64,
    pub kept_after: i64,
}

impl Records {
    fn gone(&self) -> String {
        self.gone_after_s.map_or("not within the phase".to_owned(), |s| format!("{s:.0} s"))
    }
}

/// A prefilled table: its name, the reaper's `kind` for it, the SQL that counts the prefill's due and kept
/// rows, and a look (cheap, unlike the count) at whether any due row is left.
struct RecordTable {
    name: &'static str,
    kind: &'static str,
    due: &'static str,
    kept: &'static str,
    any_due: &'static str,
}

/// The tables in `Run`'s order. Due chunks are those of streams finished more than the retention ago; the
/// look at them reads only the buckets written before 1 h 55 min ago (where the due streams' chunks are).
const TABLES: [RecordTable; 3] = [
    RecordTable {
        name: "chunks",
        kind: "streams",
        due: "select count(*) from chunks c join streams s using (stream_id)
              where s.stream_id like 'vol-%' and s.completed_at < now() - interval '1 hour'",
        kept: "select count(*) from chunks c join streams s using (stream_id)
               where s.stream_id like 'vol-%' and s.completed_at >= now() - interval '1 hour'",
        any_due: "select exists (select 1 from chunks where created_at < now() - interval '115 minutes'
                                 and starts_with(stream_id, 'vol-'))",
    },
    RecordTable {
        name: "events",
        kind: "events",
        due: "select count(*) from events where starts_with(query_id, 'vol-') and expires_at <= now()",
        kept: "select count(*) from events where starts_with(query_id, 'vol-') and expires_at > now()",
        any_due: "select exists (select 1 from events where expires_at <= now() and starts_with(query_id, 'vol-'))",
    },
    RecordTable {
        name: "messages",
        kind: "messages",
        due: "select count(*) from messages where starts_with(conversation_id, 'vol-') and expires_at <= now()",
        kept: "select count(*) from messages where starts_with(conversation_id, 'vol-') and expires_at > now()",
        any_due: "select exists (select 1 from messages where expires_at <= now()
                                 and starts_with(conversation_id, 'vol-'))",
    },
];

impl Run {
    /// The prefilled tables' figures, in `TABLES`' order.
    fn tables(&mut self) -> [&mut Records; 3] {
        [&mut self.chunks, &mut self.events, &mut self.messages]
    }

    fn records(&self) -> [&Records; 3] {
        [&self.chunks, &self.events, &self.messages]
    }

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
    for (records, table) in run.tables().into_iter().zip(&TABLES) {
        records.due = scalar(&mut db, table.due).await;
        records.kept_before = scalar(&mut db, table.kept).await;
    }

    eprintln!("phase volume-{rows}: the load on full tables while the reaper works ({} due)", run.chunks.due);
    let replicas = start_replicas(&url, plan).await;
    let bases: Vec<String> = replicas.iter().map(|r| r.base.clone()).collect();
    let reaped_before = reaped(&client, &replicas).await;
    let watch_started = Instant::now();
    let watcher = tokio::spawn(watch_due(url.clone(), plan.full_duration));
    run.reaping = metered(pg, &replicas, &client, &bases, &shape(plan.full_duration), &format!("vol{rows}f")).await;
    let gone = watcher.await.expect("the watcher ran");
    let watched = watch_started.elapsed().as_secs_f64();
    let reaped_after = reaped(&client, &replicas).await;
    for (i, (records, table)) in run.tables().into_iter().zip(&TABLES).enumerate() {
        records.gone_after_s = gone[i];
        records.reaped_per_s = (reaped_after[i] - reaped_before[i]) / watched;
        records.due_left = scalar(&mut db, table.due).await;
        records.kept_after = scalar(&mut db, table.kept).await;
    }
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

/// Seconds until no due row of each of `TABLES` is left, looked at every two seconds for at most `within`.
async fn watch_due(url: String, within: Duration) -> [Option<f64>; 3] {
    let mut db = PgConnection::connect(&url).await.expect("connect to the broker database");
    let started = Instant::now();
    let mut gone = [None; 3];
    while started.elapsed() < within && gone.iter().any(Option::is_none) {
        for (table, gone) in TABLES.iter().zip(gone.iter_mut()).filter(|(_, gone)| gone.is_none()) {
            let any: bool = sqlx::query_scalar(table.any_due).fetch_one(&mut db).await.expect("a look");
            if !any {
                *gone = Some(started.elapsed().as_secs_f64());
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    gone
}

/// Rows the replicas' reapers said they reclaimed of each of `TABLES`, summed over the replicas.
async fn reaped(client: &reqwest::Client, replicas: &[Replica]) -> [f64; 3] {
    let mut totals = [0.0; 3];
    for replica in replicas {
        let metrics = replica.metrics(client).await;
        for (total, table) in totals.iter_mut().zip(&TABLES) {
            let name = format!(r#"ark_broker_reaper_deleted_total{{kind="{}"}}"#, table.kind);
            *total += sample(&metrics, &name).unwrap_or(0.0);
        }
    }
    totals
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
        let chunks = &run.chunks;
        let reaping = format!(
            "{} → {} | {} | {:.0} | {:.2} GB → {:.2} GB ({:.0}) | {} → {} | {} → {}",
            chunks.due,
            chunks.due_left,
            chunks.gone(),
            chunks.reaped_per_s,
            run.bytes_before as f64 / 1e9,
            run.bytes_after as f64 / 1e9,
            run.bytes_per_row,
            run.dead_before,
            run.dead_after,
            chunks.kept_before,
            chunks.kept_after
        );
        md += &line("reaping", &run.reaping, &reaping);
        md += &line("after", &run.after, "— | — | — | — | — | —");
    }
    md += "\nEvery prefilled table in the same phase (chunks as above):\n\n\
           | rows | table | due → left | gone after | reaped / s | kept before → after |\n|---|---|---|---|---|---|\n";
    for run in runs {
        for (records, table) in run.records().into_iter().zip(&TABLES) {
            md += &format!(
                "| {} | {} | {} → {} | {} | {:.0} | {} → {} |\n",
                run.rows,
                table.name,
                records.due,
                records.due_left,
                records.gone(),
                records.reaped_per_s,
                records.kept_before,
                records.kept_after
            );
        }
    }
    md += "\n";
    for run in runs {
        let (p99, cpu) = run.ratios();
        let records = run.records();
        let lossless = records.iter().all(|r| r.kept_before == r.kept_after)
            && [&run.empty, &run.reaping, &run.after].iter().all(|l| l.gaps + l.duplicates + l.lost == 0);
        let others = &records[1..];
        let others_gone = match others.iter().map(|r| r.gone_after_s).collect::<Option<Vec<f64>>>() {
            Some(seconds) => format!("after {:.0} s", seconds.into_iter().fold(0.0, f64::max)),
            None => "not within the phase".to_owned(),
        };
        md += &format!(
            "- {} rows: p99 while reaping ×{p99:.2} (goal ≤ 1.5), PostgreSQL CPU per chunk ×{cpu:.2} (goal ≤ 1.3), due chunks \
             gone {} and due events and messages {others_gone} (goal: within 2 minutes of being due), {}.\n",
            run.rows,
            run.chunks.gone_after_s.map_or("not within the phase".to_owned(), |s| format!("after {s:.0} s")),
            if lossless { "nothing kept lost" } else { "SOMETHING KEPT WAS LOST" }
        );
    }
    md
}
