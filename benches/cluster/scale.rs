//! The replica-scale phase (issue 35, point 6): the same load at 3, 12 and 24 replicas on one PostgreSQL,
//! each count on a fresh database with replicas of its own, every one with the same request pool
//! (`DATABASE_POOL_MAX=6`). Per chunk acknowledged it measures the `chunks` rows PostgreSQL read, the CPU
//! of PostgreSQL (the postmaster and all its children) and of the brokers, beside ingest and delivery latency:
//! what adding replicas costs the one database they share.
//!
//! Rows read come from `pg_stat_user_tables` (`idx_tup_fetch + seq_tup_read` of `chunks`). Backends flush
//! those counters at most once a second, and an idle one may hold them for longer, so the reading after the
//! load is taken once the replicas are stopped and every backend they had has exited (awaited on a pidfd):
//! a backend flushes its counters as it exits, so nothing is left pending and no settle time is guessed.

use std::{
    os::fd::{FromRawFd, OwnedFd},
    time::Duration,
};

use sqlx::{Connection, Executor, PgConnection};
use tokio::{
    io::{Interest, unix::AsyncFd},
    time::Instant,
};

use crate::{
    load::{self, Outcome, Shape},
    meter::Pipeline,
    postgres::Postgres,
    replicas::{Replica, cpu_seconds, machine_cpu_split, parent_pid, tree_cpu_seconds},
    report::Row,
    scale_row::Scale,
};

/// Every replica's request pool in this phase, the same at every count.
const POOL_MAX: &str = "6";
/// Statements listed per row.
const TOP_STATEMENTS: i64 = 6;
/// The longest wait for a stopped replica's backends to exit.
const EXIT_WITHIN: Duration = Duration::from_secs(15);

/// What the phase runs.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Replica counts, one measurement each.
    pub counts: Vec<usize>,
    /// Streams, one reader each, writers and readers round-robin over all replicas.
    pub streams: usize,
    /// Chunks/s per stream.
    pub rate: u32,
    /// Writing time per count.
    pub duration: Duration,
}

/// Runs every count; one row each, then the ratios of the last count to the first.
pub async fn run(pg: &mut Postgres, plan: &Plan) -> Vec<Row> {
    let mut rows = Vec::new();
    for &count in &plan.counts {
        rows.push(one(pg, plan, count).await);
    }
    if let (Some(first), Some(last)) = (rows.first(), rows.last())
        && rows.len() > 1
    {
        rows.push(summary(first, last));
    }
    rows
}

/// One count: fresh database, `count` replicas, the load, the readings, the replicas stopped.
async fn one(pg: &mut Postgres, plan: &Plan, count: usize) -> Row {
    let (db, phase) = (format!("bench_scale_{count}"), format!("replica-scale-{count}"));
    let shape = Shape {
        streams: plan.streams,
        readers: 1,
        rate: plan.rate,
        spread: true,
        in_phase: false,
        duration: plan.duration,
    };
    eprintln!("phase {phase}: {count} replicas (pool {POOL_MAX} each), {} for {:?}", shape.label(), shape.duration);
    pg.create_database(&db).await;
    let url = pg.url(&db);
    let env = [("DATABASE_POOL_MAX", POOL_MAX)];
    let replicas: Vec<Replica> =
        futures::future::join_all((0..count).map(|_| Replica::start_env(&url, &[], &env))).await;
    let bases: Vec<String> = replicas.iter().map(|r| r.base.clone()).collect();
    let client = reqwest::Client::new();

    let mut admin = PgConnection::connect(&pg.url("postgres")).await.expect("connect to PostgreSQL");
    admin.execute("checkpoint").await.expect("checkpoint");
    let backend: i32 = sqlx::query_scalar("select pg_backend_pid()").fetch_one(&mut admin).await.expect("pid");
    let postmaster = parent_pid(backend as u32).expect("the postmaster's pid");
    let reads_before = chunk_reads(&url).await;
    pg.reset_statements().await;
    let pipeline = Pipeline::scrape(&client, &replicas).await;
    let warnings: u64 = replicas.iter().map(Replica::warnings).sum();
    let broker_cpu = |replicas: &[Replica]| replicas.iter().map(|r| cpu_seconds(r.pid())).sum::<f64>();
    let cpu = |replicas: &[Replica]| {
        let own = (broker_cpu(replicas), tree_cpu_seconds(postmaster), cpu_seconds(std::process::id()));
        let [processes, irq, steal] = machine_cpu_split();
        (own, [processes - own.0 - own.1 - own.2, irq, steal])
    };
    let ((cpu_before, other_before), started) = (cpu(&replicas), Instant::now());

    let outcome = load::run(&client, &bases, &shape, &format!("scale{count}")).await;

    let (window, (cpu_after, other_after)) = (started.elapsed(), cpu(&replicas));
    let pipeline = Pipeline::scrape(&client, &replicas).await.since(pipeline);
    let warnings = replicas.iter().map(Replica::warnings).sum::<u64>() - warnings;
    let (statements, top) = statements(&mut admin, &db).await;
    let backends: Vec<i32> = sqlx::query_scalar("select pid from pg_stat_activity where datname = $1")
        .bind(&db)
        .fetch_all(&mut admin)
        .await
        .expect("the phase's backends");
    for line in replicas.iter().flat_map(Replica::warning_samples).take(5) {
        eprintln!("phase {phase}: a replica warned: {line}");
    }
    futures::future::join_all(replicas.into_iter().map(Replica::stop)).await;
    let lingering = futures::future::join_all(backends.iter().map(|&pid| exited(pid))).await;
    if lingering.iter().any(|&gone| !gone) {
        eprintln!("phase {phase}: a backend outlived its replica by {EXIT_WITHIN:?}; its reads may be missing");
    }
    let reads_after = chunk_reads(&url).await;
    admin.close().await.expect("close");
    pg.drop_database(&db).await;

    let chunks = outcome.acknowledged.max(1) as f64;
    let per_chunk_us = |before: f64, after: f64| (after - before).max(0.0) * 1e6 / chunks;
    let rows_read = reads_after.0 - reads_before.0;
    // Reader k of a stream is on replica writer + 1 + k mod (count − 1): distinct for k < count − 1.
    let reading_replicas = shape.readers.min(count - 1).max(1);
    let scale = Scale {
        replicas: count,
        streams: shape.streams,
        rate_per_stream: shape.rate,
        database_pool_max: POOL_MAX.parse().expect("a number"),
        chunk_rows_read: rows_read,
        chunk_rows_read_by_seq_scans: reads_after.1 - reads_before.1,
        chunk_seq_scans: reads_after.3 - reads_before.3,
        chunk_index_entries_read: reads_after.2 - reads_before.2,
        chunk_rows_per_chunk: rows_read as f64 / chunks,
        reading_replicas_per_stream: reading_replicas,
        chunk_rows_per_chunk_per_reading_replica: rows_read as f64 / chunks / reading_replicas as f64,
        pg_cpu_us_per_chunk: per_chunk_us(cpu_before.1, cpu_after.1),
        broker_cpu_us_per_chunk: per_chunk_us(cpu_before.0, cpu_after.0),
        flushes: pipeline.flushes,
        wakeups: pipeline.tail_reads,
        answer_after_end_p50_ms: load::quantile_ms(&outcome.answers_after_end_us, 0.5),
        answer_after_end_max_ms: load::quantile_ms(&outcome.answers_after_end_us, 1.0),
        backends: backends.len(),
        window_s: window.as_secs_f64(),
        other_processes_cpu_s: other_after[0] - other_before[0],
        irq_cpu_s: other_after[1] - other_before[1],
        steal_cpu_s: other_after[2] - other_before[2],
    };
    Row {
        statements: Some(statements),
        statements_per_event: Some(statements as f64 / outcome.delivered.max(1) as f64),
        top_statements: top,
        cpu_s: Some(cpu_after.0 - cpu_before.0),
        postgres_cpu_s: Some(cpu_after.1 - cpu_before.1),
        client_cpu_s: Some(cpu_after.2 - cpu_before.2),
        broker_warnings: Some(warnings),
        rows_per_flush: (pipeline.flushes > 0.0).then(|| pipeline.flushed_rows / pipeline.flushes),
        tail_ms: (pipeline.tail_reads > 0.0).then(|| pipeline.tail_s * 1e3 / pipeline.tail_reads),
        ..outcome_row(phase, &outcome, scale)
    }
}

/// The row's load fields.
fn outcome_row(phase: String, outcome: &Outcome, scale: Scale) -> Row {
    Row {
        phase,
        metric: "pg_cpu_us_per_chunk".to_owned(),
        value: scale.pg_cpu_us_per_chunk,
        p50_ms: Some(outcome.latency_ms(0.5)),
        p99_ms: Some(outcome.latency_ms(0.99)),
        max_ms: Some(outcome.latency_ms(1.0)),
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
        errors: Some(outcome.errors.len() as u64),
        error_samples: outcome.errors.iter().take(3).cloned().collect(),
        scale: Some(scale),
        ..Row::default()
    }
}

/// The last count against the first: PostgreSQL CPU per chunk (the headline), broker CPU and rows read.
fn summary(first: &Row, last: &Row) -> Row {
    let (Some(a), Some(b)) = (&first.scale, &last.scale) else { return Row::default() };
    let ratio = |x: f64, y: f64| if x > 0.0 { y / x } else { f64::NAN };
    Row {
        phase: "replica-scale".to_owned(),
        metric: format!("pg_cpu_per_chunk_{}_vs_{}", b.replicas, a.replicas),
        value: ratio(a.pg_cpu_us_per_chunk, b.pg_cpu_us_per_chunk),
        baseline: Some(a.pg_cpu_us_per_chunk),
        ratio: Some(ratio(a.pg_cpu_us_per_chunk, b.pg_cpu_us_per_chunk)),
        note: Some(format!(
            "{} vs {} replicas: PG CPU per chunk ×{:.2}, broker CPU per chunk ×{:.2}, chunk rows read per chunk ×{:.2}",
            b.replicas,
            a.replicas,
            ratio(a.pg_cpu_us_per_chunk, b.pg_cpu_us_per_chunk),
            ratio(a.broker_cpu_us_per_chunk, b.broker_cpu_us_per_chunk),
            ratio(a.chunk_rows_per_chunk, b.chunk_rows_per_chunk),
        )),
        ..Row::default()
    }
}

/// `(idx_tup_fetch + seq_tup_read, seq_tup_read)` of `chunks`, `idx_tup_read` of its indexes and its `seq_scan`,
/// from a fresh statistics snapshot.
async fn chunk_reads(url: &str) -> (i64, i64, i64, i64) {
    let mut conn = PgConnection::connect(url).await.expect("connect to the phase's database");
    conn.execute("select pg_stat_clear_snapshot()").await.expect("pg_stat_clear_snapshot");
    // Summed over the partitions (`chunks` is partitioned: its own row counts nothing).
    let reads = sqlx::query_as(
        "select coalesce(sum(coalesce(t.idx_tup_fetch, 0) + t.seq_tup_read), 0)::bigint,
                coalesce(sum(t.seq_tup_read), 0)::bigint,
                (select coalesce(sum(i.idx_tup_read), 0)::bigint from pg_stat_user_indexes i
                 where i.relid in (select relid from pg_partition_tree('chunks'))),
                coalesce(sum(t.seq_scan), 0)::bigint
         from pg_stat_user_tables t where t.relid in (select relid from pg_partition_tree('chunks'))",
    )
    .fetch_one(&mut conn)
    .await
    .expect("the chunks table's statistics");
    conn.close().await.expect("close");
    reads
}

/// Statements the phase's database ran since the reset, and the ones that took the most time
/// (`calls × total ms: query`).
async fn statements(admin: &mut PgConnection, db: &str) -> (i64, Vec<String>) {
    let top: Vec<(i64, f64, String)> = sqlx::query_as(
        // A select's list of columns is cut, so each statement shows what it reads (as in postgres.rs).
        "select calls, total_exec_time,
                left(regexp_replace(regexp_replace(query, '\\s+', ' ', 'g'), '^select .*? from ', 'select … from '), 120)
         from pg_stat_statements s join pg_database d on d.oid = s.dbid where d.datname = $1
         order by total_exec_time desc",
    )
    .bind(db)
    .fetch_all(&mut *admin)
    .await
    .expect("pg_stat_statements");
    let calls = top.iter().map(|(calls, _, _)| calls).sum();
    let top = top.into_iter().take(TOP_STATEMENTS as usize);
    (calls, top.map(|(calls, ms, query)| format!("{calls} × {ms:.0} ms: {query}")).collect())
}

/// Waits until process `pid` (a backend) has exited, on a pidfd; false if it is still there after
/// [`EXIT_WITHIN`].
async fn exited(pid: i32) -> bool {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1; no memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return true; // Already gone (ESRCH).
    }
    // SAFETY: the descriptor was just opened and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: the `OwnedFd` is valid and open, and stays so (returning the same descriptor) until the
    // `AsyncFd` that owns it is dropped.
    let Ok(fd) = (unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }) else { return false };
    // A pidfd becomes readable when its process has exited.
    tokio::time::timeout(EXIT_WITHIN, fd.readable()).await.is_ok()
}
