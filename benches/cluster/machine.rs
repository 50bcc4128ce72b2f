//! The machine a run measured: cores, CPU model, memory, kernel, PostgreSQL and rustc versions.

use serde::Serialize;

/// What the run ran on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// Online CPUs (`nproc`).
    pub nproc: usize,
    /// `model name` of `/proc/cpuinfo`.
    pub cpu_model: String,
    /// `MemTotal` in GiB.
    pub memory_gib: f64,
    /// `uname -r`.
    pub kernel: String,
    /// `select version()`.
    pub postgres: String,
    /// `rustc --version`.
    pub rustc: String,
}

impl Machine {
    /// Reads everything but the PostgreSQL version, which the caller fills in.
    pub fn record() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_kib: f64 = meminfo
            .lines()
            .find_map(|line| line.strip_prefix("MemTotal:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        Machine {
            nproc: std::thread::available_parallelism().map_or(0, usize::from),
            cpu_model: cpuinfo
                .lines()
                .find_map(|line| line.strip_prefix("model name")?.split_once(':').map(|(_, v)| v.trim().to_owned()))
                .unwrap_or_else(|| "unknown".to_owned()),
            memory_gib: (memory_kib / 1024.0 / 1024.0 * 10.0).round() / 10.0,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map_or_else(|_| "unknown".to_owned(), |v| v.trim().to_owned()),
            postgres: String::new(),
            rustc: std::process::Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned()))
                .arg("--version")
                .output()
                .ok()
                .map_or_else(|| "unknown".to_owned(), |o| String::from_utf8_lossy(&o.stdout).trim().to_owned()),
        }
    }

    /// One line for the markdown report.
    pub fn describe(&self) -> String {
        format!(
            "{} CPUs ({}), {} GiB RAM, Linux {}, {}, {}",
            self.nproc, self.cpu_model, self.memory_gib, self.kernel, self.postgres, self.rustc
        )
    }
}
