//! The denominators, measured on the same server in the same run, in a database of their own
//! (`performance.md` §2 and §5): **A** single-row INSERT rows/s, **C** UNNEST×100 INSERT rows/s, **CN**
//! UNNEST×100 plus one `pg_notify` per batch rows/s (a listener draining), all with `pgbench` at 16 clients
//! and §2's scripts and chunk; and **L**, the LISTEN/NOTIFY round trip with one listener (sqlx, one
//! `pg_notify` every 2 ms, latency = receive time − the send time in the payload). The database is dropped
//! afterwards.

use std::{path::Path, process::Stdio, time::Duration};

use futures::StreamExt;
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection, postgres::PgListener};
use tokio::time::MissedTickBehavior;

use crate::{
    load::{quantile_ms, unix_micros},
    postgres::{BASELINE_DB, Postgres, client_program},
    replicas::machine_busy_seconds,
};

/// §2's 315-byte chunk (`": "` with a space: pgbench reads `:name` as a variable).
const CHUNK: &str = r#"{"id": "chatcmpl-9x8Yz1AbCdEfGhIjKlMnOpQrStUv", "object": "chat.completion.chunk", "created": 1718000000, "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_abc123def4", "choices": [{"index": 0, "delta": {"role": "assistant", "content": " the quick brown fox jumps"}, "logprobs": null, "finish_reason": null}]}"#;
const CLIENTS: u32 = 16;

/// The measured denominators.
#[derive(Debug, Clone)]
pub struct Baselines {
    /// Single-row INSERT rows/s.
    pub a: f64,
    /// UNNEST×100 INSERT rows/s.
    pub c: f64,
    /// UNNEST×100 + one NOTIFY per batch rows/s.
    pub cn: f64,
    /// Busy CPU seconds of the whole machine per CN row, in µs: what one durable row costs at CN.
    pub cn_cpu_us_per_row: f64,
    /// LISTEN/NOTIFY latency p50, ms.
    pub l_p50: f64,
    /// LISTEN/NOTIFY latency p99, ms.
    pub l_p99: f64,
    /// LISTEN/NOTIFY latency max, ms.
    pub l_max: f64,
}

/// Measures A, C, CN for `seconds` each and L over `notifications` notifications.
pub async fn measure(pg: &mut Postgres, scratch: &Path, seconds: u32, notifications: usize) -> Baselines {
    pg.create_database(BASELINE_DB).await;
    let url = pg.url(BASELINE_DB);
    let mut db = PgConnection::connect(&url).await.expect("connect to the baseline database");
    db.execute(
        "create table chunks (sequence_number bigserial primary key, stream_id text not null,
           chunk jsonb not null, created_at timestamptz not null default now());
         create index chunks_stream_idx on chunks (stream_id, sequence_number);",
    )
    .await
    .expect("the scratch chunks table");
    std::fs::create_dir_all(scratch).expect("a scratch directory");
    let bench = Pgbench { port: pg.port(), scratch, seconds };

    let a = bench.run(&mut db, "a_insert.sql", &insert_one()).await;
    let c = bench.run(&mut db, "c_unnest100.sql", &insert_hundred(false)).await * 100.0;
    let listener = tokio::spawn(drain(url.clone()));
    let (cn_tps, cn_busy_s) = bench.run_metered(&mut db, "c_unnest100_notify.sql", &insert_hundred(true)).await;
    let cn = cn_tps * 100.0;
    let cn_cpu_us_per_row = cn_busy_s * 1e6 / (cn * f64::from(seconds));
    listener.abort();
    let latencies = notify_latency(&url, notifications).await;
    drop(db);
    // Millions of rows left here would keep autovacuum busy during the broker's phases.
    pg.drop_database(BASELINE_DB).await;
    Baselines {
        a,
        c,
        cn,
        cn_cpu_us_per_row,
        l_p50: quantile_ms(&latencies, 0.5),
        l_p99: quantile_ms(&latencies, 0.99),
        l_max: quantile_ms(&latencies, 1.0),
    }
}

fn insert_one() -> String {
    format!(
        "\\set s random(1, 1000)\nINSERT INTO chunks(stream_id, chunk) VALUES ('stream-' || :s, '{CHUNK}'::jsonb);\n"
    )
}

fn insert_hundred(notify: bool) -> String {
    let element = format!("\"{}\"", CHUNK.replace('\\', "\\\\").replace('"', "\\\""));
    let array = vec![element; 100].join(",");
    let insert = format!(
        "INSERT INTO chunks(stream_id, chunk) SELECT 'stream-' || :s, c FROM unnest('{{{array}}}'::jsonb[]) AS t(c)"
    );
    let sql = if notify {
        format!(
            "WITH ins AS ({insert} RETURNING sequence_number) \
             SELECT pg_notify('ark_chunks', 'stream-' || :s || ':' || max(sequence_number)) FROM ins;"
        )
    } else {
        format!("{insert};")
    };
    format!("\\set s random(1, 1000)\n{sql}\n")
}

pub struct Pgbench<'a> {
    pub port: u16,
    pub scratch: &'a Path,
    pub seconds: u32,
}

impl Pgbench<'_> {
    /// `CHECKPOINT`, then `pgbench -n -M prepared -T seconds -c 16 -j 2 -f script`; returns its tps.
    async fn run(&self, db: &mut PgConnection, name: &str, script: &str) -> f64 {
        self.run_metered(db, name, script).await.0
    }

    /// [`Pgbench::run`], also returning the machine's busy CPU seconds while pgbench ran.
    pub async fn run_metered(&self, db: &mut PgConnection, name: &str, script: &str) -> (f64, f64) {
        db.execute("checkpoint").await.expect("checkpoint");
        let busy_before = machine_busy_seconds();
        let path = self.scratch.join(name);
        std::fs::write(&path, script).expect("write a pgbench script");
        let output = tokio::process::Command::new(client_program("pgbench"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", "-n", "-M", "prepared"])
            .args(["-T", &self.seconds.to_string(), "-c", &CLIENTS.to_string(), "-j", "2", "-f"])
            .arg(&path)
            .arg(BASELINE_DB)
            .stdin(Stdio::null())
            .output()
            .await
            .expect("run pgbench");
        let busy_s = machine_busy_seconds() - busy_before;
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "pgbench {name} failed: {text}{}", String::from_utf8_lossy(&output.stderr));
        let tps = text
            .lines()
            .find_map(|line| line.strip_prefix("tps = "))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no tps in pgbench's output: {text}"));
        (tps, busy_s)
    }
}

/// Drains `ark_chunks` notifications while CN runs, as a broker's listener would.
async fn drain(url: String) {
    let mut listener = PgListener::connect(&url).await.expect("connect the listener");
    listener.listen("ark_chunks").await.expect("LISTEN");
    let mut notifications = listener.into_stream();
    while let Some(Ok(_)) = notifications.next().await {}
}

/// Sends `count` notifications 2 ms apart, each carrying its send time, and returns the sorted latencies
/// (µs) one listener saw.
async fn notify_latency(url: &str, count: usize) -> Vec<u64> {
    let mut listener = PgListener::connect(url).await.expect("connect the listener");
    listener.listen("bench_latency").await.expect("LISTEN");
    let receiver = tokio::spawn(async move {
        let mut latencies = Vec::with_capacity(count);
        while latencies.len() < count {
            let Ok(Ok(notification)) = tokio::time::timeout(Duration::from_secs(5), listener.recv()).await else {
                break;
            };
            let received = unix_micros();
            if let Ok(sent) = notification.payload().parse::<u64>() {
                latencies.push(received.saturating_sub(sent));
            }
        }
        latencies
    });
    let mut sender = PgConnection::connect(url).await.expect("connect the sender");
    let mut pace = tokio::time::interval(Duration::from_millis(2));
    pace.set_missed_tick_behavior(MissedTickBehavior::Delay);
    for _ in 0..count {
        pace.tick().await;
        let sql = format!("select pg_notify('bench_latency', '{}')", unix_micros());
        sender.execute(AssertSqlSafe(sql)).await.expect("pg_notify");
    }
    let mut latencies = receiver.await.expect("the listener");
    latencies.sort_unstable();
    latencies
}
