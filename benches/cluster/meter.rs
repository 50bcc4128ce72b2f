//! What a phase cost: broker CPU seconds (utime + stime of all three processes), PostgreSQL and bench
//! CPU seconds, broker memory, the brokers' statements (`pg_stat_statements`, filtered to their database),
//! the WARN/ERROR lines they logged, and from their `/metrics` how the writers' group commits and the
//! readers' tails went (where a burst's time goes).

use crate::{
    postgres::Postgres,
    replicas::{Replica, cpu_seconds, memory_mib, postgres_cpu_seconds, sample},
};

/// Counters at the start of a phase.
pub struct Meter {
    broker_cpu: f64,
    postgres_cpu: f64,
    own_cpu: f64,
    warnings: u64,
    pipeline: Pipeline,
}

/// Sums of the brokers' flush and tail histograms (all replicas), from `/metrics`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pipeline {
    /// Group commits of the chunk writers.
    pub flushes: f64,
    /// Rows they wrote.
    pub flushed_rows: f64,
    /// Seconds they took.
    pub flush_s: f64,
    /// Chunk notifications the tails handled (several queued ones count once).
    pub tail_reads: f64,
    /// Seconds from those notifications to their rows handed to the readers.
    pub tail_s: f64,
}

impl Pipeline {
    pub async fn scrape(client: &reqwest::Client, replicas: &[Replica]) -> Self {
        let mut sum = Pipeline::default();
        for replica in replicas {
            let scrape = replica.metrics(client).await;
            let value = |series: &str| sample(&scrape, series).unwrap_or(0.0);
            sum.flushes += value("ark_broker_flush_rows_count");
            sum.flushed_rows += value("ark_broker_flush_rows_sum");
            sum.flush_s += value("ark_broker_flush_duration_seconds_sum");
            sum.tail_reads += value("ark_broker_notify_delivery_lag_seconds_count{feed=\"chunks\"}");
            sum.tail_s += value("ark_broker_notify_delivery_lag_seconds_sum{feed=\"chunks\"}");
        }
        sum
    }

    pub fn since(self, start: Pipeline) -> Pipeline {
        Pipeline {
            flushes: self.flushes - start.flushes,
            flushed_rows: self.flushed_rows - start.flushed_rows,
            flush_s: self.flush_s - start.flush_s,
            tail_reads: self.tail_reads - start.tail_reads,
            tail_s: self.tail_s - start.tail_s,
        }
    }
}

/// What the phase used.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    /// Broker CPU seconds, all replicas.
    pub broker_cpu_s: f64,
    /// CPU seconds of every `postgres` process alive at both ends of the phase (backends that exited in
    /// between are not counted).
    pub postgres_cpu_s: f64,
    /// CPU seconds of the bench process itself (load generator and checker).
    pub client_cpu_s: f64,
    /// The largest `VmHWM` of a replica: its peak RSS since it started (so it never falls between phases).
    pub rss_peak_mb: f64,
    /// `VmRSS` of all replicas summed, at the end of the phase.
    pub rss_now_mb: f64,
    /// Statements the brokers' database ran.
    pub statements: i64,
    /// WARN/ERROR lines the brokers logged.
    pub warnings: u64,
    /// The writers' group commits and the readers' tails over the phase.
    pub pipeline: Pipeline,
}

impl Meter {
    /// Settles the server, resets the statement counts and reads the counters.
    pub async fn start(pg: &mut Postgres, replicas: &[Replica]) -> Self {
        pg.settle().await;
        pg.reset_statements().await;
        Meter {
            broker_cpu: replicas.iter().map(|r| cpu_seconds(r.pid())).sum(),
            postgres_cpu: postgres_cpu_seconds(),
            own_cpu: cpu_seconds(std::process::id()),
            warnings: replicas.iter().map(Replica::warnings).sum(),
            pipeline: Pipeline::scrape(&reqwest::Client::new(), replicas).await,
        }
    }

    /// Reads the counters again.
    pub async fn finish(self, pg: &mut Postgres, replicas: &[Replica]) -> Usage {
        let statements = pg.broker_statements().await;
        let memory: Vec<(f64, f64)> = replicas.iter().map(|r| memory_mib(r.pid())).collect();
        Usage {
            broker_cpu_s: replicas.iter().map(|r| cpu_seconds(r.pid())).sum::<f64>() - self.broker_cpu,
            postgres_cpu_s: (postgres_cpu_seconds() - self.postgres_cpu).max(0.0),
            client_cpu_s: cpu_seconds(std::process::id()) - self.own_cpu,
            rss_peak_mb: memory.iter().map(|m| m.1).fold(0.0, f64::max),
            rss_now_mb: memory.iter().map(|m| m.0).sum(),
            statements,
            warnings: replicas.iter().map(Replica::warnings).sum::<u64>() - self.warnings,
            pipeline: Pipeline::scrape(&reqwest::Client::new(), replicas).await.since(self.pipeline),
        }
    }
}
