//! What a phase cost: broker CPU seconds (utime + stime of all three processes), PostgreSQL and bench
//! CPU seconds, broker memory, the brokers' statements (`pg_stat_statements`, filtered to their database)
//! and the WARN/ERROR lines they logged.

use crate::{
    postgres::Postgres,
    replicas::{Replica, cpu_seconds, memory_mib, postgres_cpu_seconds},
};

/// Counters at the start of a phase.
pub struct Meter {
    broker_cpu: f64,
    postgres_cpu: f64,
    own_cpu: f64,
    warnings: u64,
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
        }
    }
}
