//! A broker replica as a real process of the built binary, on a given database.

use std::{
    process::Stdio,
    sync::{Arc, Mutex},
};

use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
    sync::oneshot,
};

use super::within;

/// A running `ark-broker` process.
pub struct Replica {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// `http://127.0.0.1:<port>/mcp`.
    pub mcp_url: String,
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
    /// How many lines `log` holds, for [`Replica::logged`] to wait on.
    logged_lines: tokio::sync::watch::Receiver<usize>,
}

impl Replica {
    /// Starts a replica on `database_url` and waits until it logs that it listens (it is ready by then).
    pub async fn start(database_url: &str) -> Self {
        Self::start_with(database_url, &[]).await
    }

    /// Like [`Replica::start`], with extra flags.
    pub async fn start_with(database_url: &str, args: &[&str]) -> Self {
        Self::start_with_env(database_url, args, &[]).await
    }

    /// Three replicas of one database, each started with `args`.
    pub async fn three(database_url: &str, args: &[&str]) -> (Self, Self, Self) {
        let start = || Self::start_with(database_url, args);
        tokio::join!(start(), start(), start())
    }

    /// Like [`Replica::start_with`], with variables added to its environment.
    pub async fn start_with_env(database_url: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::spawn(&[&["--database-url", database_url], args].concat(), env).await
    }

    /// Starts a broker on its embedded PostgreSQL in `data_dir` (no `DATABASE_URL`), as a newcomer runs it.
    pub async fn start_embedded(data_dir: &std::path::Path) -> Self {
        Self::spawn(&["--data-dir", data_dir.to_str().expect("a UTF-8 path")], &[]).await
    }

    /// Starts a replica inside the network namespace `namespace`, listening on `host`
    /// ([`super::netns::Lab`]).
    pub async fn start_in_namespace(namespace: &str, host: &str, database_url: &str, args: &[&str]) -> Self {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", namespace, env!("CARGO_BIN_EXE_ark-broker")]);
        Self::spawn_command(command, host, &[&["--database-url", database_url], args].concat(), &[]).await
    }

    async fn spawn(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::spawn_command(Command::new(env!("CARGO_BIN_EXE_ark-broker")), "127.0.0.1", args, env).await
    }

    async fn spawn_command(mut command: Command, host: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        super::install_tls_provider();
        let mut child = command
            .env_remove("DATABASE_URL")
            .args(["--host", host, "--port", "0", "--mcp-port", "0"])
            .args(["--log-format", "json"])
            .args(args)
            .env("LOG_LEVEL", "info")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start ark-broker");
        let stdout = child.stdout.take().expect("piped stdout");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (address_tx, address_rx) = oneshot::channel();
        let lines = log.clone();
        let (line_count, logged_lines) = tokio::sync::watch::channel(0usize);
        // Drains stdout for the whole life of the process (a full pipe would block the broker).
        tokio::spawn(async move {
            let mut address_tx = Some(address_tx);
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if let Some(address) = listening_address(&line)
                    && let Some(tx) = address_tx.take()
                {
                    let _ = tx.send(address);
                }
                let count = {
                    let mut lines = lines.lock().unwrap();
                    lines.push(line);
                    lines.len()
                };
                line_count.send_replace(count);
            }
        });
        let (http, mcp) = match within("the replica to listen", address_rx).await {
            Ok(addresses) => addresses,
            Err(_) => panic!("the replica exited before listening; its log:\n{}", log.lock().unwrap().join("\n")),
        };
        Replica { base: format!("http://{http}"), mcp_url: format!("http://{mcp}/mcp"), child, log, logged_lines }
    }

    /// The absolute URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("still running")
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        self.signal(libc::SIGTERM);
    }

    /// Sends `signal`.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill with a valid pid and signal number has no memory-safety preconditions.
        unsafe { libc::kill(self.pid() as i32, signal) };
    }

    /// Freezes the process (SIGSTOP), as a long pause, a frozen VM or a partition would.
    pub fn freeze(&self) {
        // SAFETY: kill with a valid pid and signal number has no memory-safety preconditions.
        unsafe { libc::kill(self.pid() as i32, libc::SIGSTOP) };
    }

    /// Lets a frozen process run again (SIGCONT).
    pub fn thaw(&self) {
        // SAFETY: as above.
        unsafe { libc::kill(self.pid() as i32, libc::SIGCONT) };
    }

    /// Sends SIGKILL and waits until the process is gone.
    pub async fn kill(&mut self) {
        self.child.start_kill().expect("SIGKILL");
        within("the killed replica to exit", self.child.wait()).await.expect("wait");
    }

    /// Waits for the process to exit and returns whether it exited successfully.
    pub async fn wait(&mut self) -> bool {
        within("the replica to exit", self.child.wait()).await.expect("wait").success()
    }

    /// What the replica has logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Waits until the replica has logged a line `wanted` accepts (the broker writes a line before the change
    /// it reports is seen elsewhere, but this process reads its output a little later) and returns the log.
    pub async fn logged(&self, what: &'static str, wanted: impl Fn(&str) -> bool) -> String {
        let mut lines = self.logged_lines.clone();
        let found = within(what, lines.wait_for(|_| self.log.lock().unwrap().iter().any(|line| wanted(line)))).await;
        found.unwrap_or_else(|_| panic!("the replica's output ended before {what}; its log:\n{}", self.log()));
        self.log()
    }
}

/// The HTTP and MCP addresses from the "listening" log line.
fn listening_address(line: &str) -> Option<(String, String)> {
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    if value.get("message")?.as_str()? != "listening" {
        return None;
    }
    let address = |field: &str| value.get(field)?.as_str().map(str::to_owned);
    Some((address("http.addr")?, address("mcp.addr")?))
}

/// Runs a broker on the embedded PostgreSQL in `data_dir` with `env` set, which must refuse to start; returns
/// what it printed on stdout (its JSON log lines).
pub async fn refused_start(data_dir: &std::path::Path, env: &[(&str, &str)]) -> String {
    let refused = within(
        "the broker to refuse to start",
        Command::new(env!("CARGO_BIN_EXE_ark-broker"))
            .env_remove("DATABASE_URL")
            .envs(env.iter().copied())
            .args(["--data-dir", data_dir.to_str().expect("a UTF-8 path"), "--port", "0", "--mcp-port", "0"])
            .args(["--log-format", "json"])
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("run ark-broker");
    assert!(!refused.status.success(), "the broker started");
    String::from_utf8_lossy(&refused.stdout).into_owned()
}
