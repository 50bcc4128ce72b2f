//! One of the soak's minute samples: per replica its RSS (`VmRSS`), open files (`/proc/<pid>/fd`) and pool
//! connections (its own `/metrics` gauge), per table of the soak's database its exact row count, the
//! database's size, and how far the workload has got.

use std::{collections::BTreeMap, time::Duration};

use serde::Serialize;
use sqlx::{AssertSqlSafe, Connection, PgConnection};

use crate::{
    replicas::{Replica, memory_mib, open_files},
    workload::Tally,
};

/// The pool gauge of `/metrics` (`src/telemetry/metrics.rs`: `POOL_CONNECTIONS`).
const POOL_GAUGE: &str = "ark_broker_db_pool_connections";

/// One replica at one minute.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicaSample {
    pub rss_mb: f64,
    pub open_files: u64,
    /// `None` when `/metrics` did not answer.
    pub pool_connections: Option<f64>,
}

/// Everything measured at one minute.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// Minutes since the workload started.
    pub minute: u32,
    pub replicas: Vec<ReplicaSample>,
    /// Rows per table (`count(*)`, exact).
    pub tables: BTreeMap<String, i64>,
    /// `pg_database_size`, MiB.
    pub database_mb: f64,
    /// Chunks acknowledged since the start, and per second since the previous sample.
    pub acknowledged: u64,
    pub chunks_per_s: f64,
    pub questions_answered: u64,
    pub errors: u64,
}

/// Takes the sample of `minute`; `previous` gives the chunk rate.
pub async fn take(
    minute: u32,
    database_url: &str,
    replicas: &[Replica],
    client: &reqwest::Client,
    tally: &Tally,
    previous: Option<&Sample>,
) -> Sample {
    let mut sampled = Vec::new();
    for replica in replicas {
        let pid = replica.pid();
        sampled.push(ReplicaSample {
            rss_mb: memory_mib(pid).0,
            open_files: open_files(pid),
            pool_connections: pool_connections(client, &replica.base).await,
        });
    }
    let (tables, database_mb) = rows(database_url).await;
    let chunks_per_s = previous.map_or(0.0, |before| {
        let seconds = Duration::from_secs(60 * u64::from(minute - before.minute)).as_secs_f64();
        (tally.acknowledged - before.acknowledged) as f64 / seconds
    });
    Sample {
        minute,
        replicas: sampled,
        tables,
        database_mb,
        acknowledged: tally.acknowledged,
        chunks_per_s,
        questions_answered: tally.questions_answered,
        errors: tally.errors,
    }
}

/// The pool gauge a replica exports.
async fn pool_connections(client: &reqwest::Client, base: &str) -> Option<f64> {
    let text = client.get(format!("{base}/metrics")).send().await.ok()?.text().await.ok()?;
    text.lines().find_map(|line| line.strip_prefix(POOL_GAUGE)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Exact row counts of every table of the database (its own migrations' bookkeeping left out), and its size.
async fn rows(database_url: &str) -> (BTreeMap<String, i64>, f64) {
    let mut db = PgConnection::connect(database_url).await.expect("connect to the soak's database");
    let names: Vec<String> = sqlx::query_scalar(
        "select c.relname::text from pg_class c join pg_namespace n on n.oid = c.relnamespace
         where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition
           and c.relname <> '_sqlx_migrations' order by 1",
    )
    .fetch_all(&mut db)
    .await
    .expect("the tables");
    let mut tables = BTreeMap::new();
    for name in names {
        let sql = format!("select count(*) from \"{name}\"");
        let rows: i64 = sqlx::query_scalar(AssertSqlSafe(sql)).fetch_one(&mut db).await.expect("a row count");
        tables.insert(name, rows);
    }
    let bytes: i64 = sqlx::query_scalar("select pg_database_size(current_database())")
        .fetch_one(&mut db)
        .await
        .expect("the database's size");
    db.close().await.expect("close");
    (tables, bytes as f64 / 1024.0 / 1024.0)
}
