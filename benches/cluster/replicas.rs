//! Three `ark-broker` processes (the release binary cargo built for this bench) on one database, found by
//! the `"listening"` JSON log line as the test suite does; and what they cost, read from `/proc`.

use std::{
    process::Stdio,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
    sync::oneshot,
};

/// One running replica.
pub struct Replica {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// `http://127.0.0.1:<port>/mcp`.
    pub mcp_url: String,
    child: Child,
    /// WARN and ERROR lines logged so far.
    warnings: Arc<AtomicU64>,
    /// The first few of them, for the report.
    samples: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Replica {
    /// Starts a replica on `database_url` and waits for its "listening" line.
    pub async fn start(database_url: &str) -> Self {
        Self::start_with(database_url, &[]).await
    }

    /// Like [`Replica::start`], with extra flags (the soak's short retentions).
    pub async fn start_with(database_url: &str, flags: &[&str]) -> Self {
        Self::start_env(database_url, flags, &[]).await
    }

    /// Like [`Replica::start_with`], with extra environment variables (the replica-scale phase's pool size).
    pub async fn start_env(database_url: &str, flags: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ark-broker"))
            .args(["--database-url", database_url, "--host", "127.0.0.1", "--port", "0", "--mcp-port", "0"])
            .args(["--log-format", "json"])
            .args(flags)
            .env("LOG_LEVEL", "info")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start ark-broker");
        let stdout = child.stdout.take().expect("piped stdout");
        let (address_tx, address_rx) = oneshot::channel();
        let warnings = Arc::new(AtomicU64::new(0));
        let samples = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (counter, kept) = (warnings.clone(), samples.clone());
        // Drains stdout for the whole life of the process (a full pipe would block the broker).
        tokio::spawn(async move {
            let mut address_tx = Some(address_tx);
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(entry) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
                if let Some(address) = listening_address(&entry)
                    && let Some(tx) = address_tx.take()
                {
                    let _ = tx.send(address);
                }
                if matches!(entry["level"].as_str(), Some("WARN" | "ERROR")) {
                    counter.fetch_add(1, Ordering::Relaxed);
                    let mut kept = kept.lock().expect("samples lock");
                    if kept.len() < 5 {
                        kept.push(line);
                    }
                }
            }
        });
        let (http, mcp) = tokio::time::timeout(Duration::from_secs(60), address_rx)
            .await
            .expect("the replica to listen within a minute")
            .expect("the replica exited before listening");
        Replica { base: format!("http://{http}"), mcp_url: format!("http://{mcp}/mcp"), child, warnings, samples }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("still running")
    }

    /// The replica's `/metrics` scrape (empty if it did not answer).
    pub async fn metrics(&self, client: &reqwest::Client) -> String {
        match client.get(format!("{}/metrics", self.base)).send().await {
            Ok(response) => response.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// WARN/ERROR lines logged since start.
    pub fn warnings(&self) -> u64 {
        self.warnings.load(Ordering::Relaxed)
    }

    /// The first WARN/ERROR lines.
    pub fn warning_samples(&self) -> Vec<String> {
        self.samples.lock().expect("samples lock").clone()
    }

    /// SIGTERM, then waits for the exit (SIGKILL after 15 s).
    pub async fn stop(mut self) {
        // SAFETY: kill with a valid pid and signal number has no memory-safety preconditions.
        unsafe { libc::kill(self.pid() as i32, libc::SIGTERM) };
        if tokio::time::timeout(Duration::from_secs(15), self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }
}

/// The value of `series` (a metric's name with its labels, exactly as exported) in a `/metrics` scrape.
pub fn sample(scrape: &str, series: &str) -> Option<f64> {
    scrape
        .lines()
        .find(|line| line.strip_prefix(series).is_some_and(|rest| rest.starts_with(' ')))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
}

/// The HTTP and MCP addresses from the "listening" log line.
fn listening_address(entry: &serde_json::Value) -> Option<(String, String)> {
    if entry.get("message")?.as_str()? != "listening" {
        return None;
    }
    let address = |field: &str| entry.get(field)?.as_str().map(str::to_owned);
    Some((address("http.addr")?, address("mcp.addr")?))
}

/// CPU seconds (user + system) a process has used, from `/proc/<pid>/stat`.
pub fn cpu_seconds(pid: u32) -> f64 {
    // utime and stime are fields 14 and 15 of the whole line.
    stat_fields(pid).map_or(0.0, |f| (f[14] + f[15]) as f64 / clock_ticks_per_second())
}

/// CPU seconds of process `root` and its children: the utime + stime of `root` and of every live child,
/// plus `root`'s cutime + cstime (what the children it has already reaped used), so a child that exited in
/// between still counts. For the postmaster: the server, its backends and its background processes.
pub fn tree_cpu_seconds(root: u32) -> f64 {
    let Some(own) = stat_fields(root) else { return 0.0 };
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0.0 };
    let children: u64 = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(stat_fields)
        // Field 4 is the parent's pid.
        .filter(|f| f[4] == u64::from(root))
        .map(|f| f[14] + f[15])
        .sum();
    (own[14] + own[15] + own[16] + own[17] + children) as f64 / clock_ticks_per_second()
}

/// The parent of process `pid`.
pub fn parent_pid(pid: u32) -> Option<u32> {
    stat_fields(pid).and_then(|f| u32::try_from(f[4]).ok())
}

/// The numeric fields of `/proc/<pid>/stat`, numbered as in proc(5) from 1 (the pid); fields 2 (the name)
/// and 3 (the state) are 0.
fn stat_fields(pid: u32) -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces; fields after it are plain.
    let after_name = &stat[stat.rfind(')')? + 2..];
    let rest = after_name.split(' ').skip(1).map(|v| v.trim().parse::<u64>().unwrap_or(0));
    let fields: Vec<u64> = [0, u64::from(pid), 0, 0].into_iter().chain(rest).collect();
    (fields.len() > 17).then_some(fields)
}

/// CPU seconds of every `postgres` process (the server and its backends) alive now.
pub fn postgres_cpu_seconds() -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0.0 };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|comm| comm.trim() == "postgres"))
        .map(cpu_seconds)
        .sum()
}

/// Open file descriptors of a process (entries of `/proc/<pid>/fd`).
pub fn open_files(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |entries| entries.count() as u64)
}

/// `VmRSS` and `VmHWM` (peak) of a process in MiB, from `/proc/<pid>/status`.
pub fn memory_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kib| kib / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Busy CPU seconds of the whole machine since boot, all cores (`/proc/stat`: everything but idle and
/// iowait), for what a baseline cost when its clients and backends come and go.
pub fn machine_busy_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(total) = stat.lines().find(|line| line.starts_with("cpu ")) else { return 0.0 };
    let ticks: Vec<u64> = total.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    let (idle, iowait) = (ticks.get(3).copied().unwrap_or(0), ticks.get(4).copied().unwrap_or(0));
    // Guest time is already inside user time; count the first eight fields only.
    let busy: u64 = ticks.iter().take(8).sum::<u64>() - idle - iowait;
    busy as f64 / clock_ticks_per_second()
}

/// The machine's CPU seconds since boot, all cores (`/proc/stat`): `[user + nice + system, irq + softirq,
/// steal]`: what processes ran, interrupt handling (loopback networking among it), and what the hypervisor
/// gave to other guests.
pub fn machine_cpu_split() -> [f64; 3] {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat
        .lines()
        .find(|line| line.starts_with("cpu "))
        .map_or_else(Vec::new, |line| line.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect());
    let seconds = |i: usize| ticks.get(i).copied().unwrap_or(0) as f64 / clock_ticks_per_second();
    [seconds(0) + seconds(1) + seconds(2), seconds(5) + seconds(6), seconds(7)]
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}
