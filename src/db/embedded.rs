//! The embedded default: a private PostgreSQL server started from the machine's own binaries (`initdb`,
//! `pg_ctl`) in a data directory the broker owns, stopped again on exit. Used by the binary when no
//! `DATABASE_URL` is given, and by the test suite.
//!
//! PostgreSQL refuses to run as root, so when the broker runs as root the server runs as the `postgres`
//! user (through `runuser`) and the directory is handed to that user.

use std::{
    ffi::OsString,
    net::TcpListener,
    path::{Path, PathBuf},
    process::Stdio,
};

use tokio::process::Command;

/// Why the embedded server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    /// `initdb`/`pg_ctl` are neither on PATH nor under `/usr/lib/postgresql/*/bin`.
    #[error(
        "PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or in /usr/lib/postgresql/*/bin: install the \
         PostgreSQL server package (Debian: postgresql) or set DATABASE_URL to a server you run"
    )]
    BinariesNotFound,
    /// Another live broker runs the embedded server of this data directory.
    #[error(
        "another ark-broker (pid {pid}) runs the embedded PostgreSQL in {dir}: stop it, or give this one its own --data-dir"
    )]
    InUse {
        /// The other broker's process id.
        pid: i32,
        /// The directory.
        dir: String,
    },
    /// Running as root but there is no `postgres` user to run the server as.
    #[error("running as root needs a `postgres` system user to run PostgreSQL as")]
    NoPostgresUser,
    /// A file-system step failed.
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    /// `initdb` or `pg_ctl` exited with an error.
    #[error("{command} failed: {output}{hint}")]
    Command {
        /// Which program.
        command: String,
        /// What it printed.
        output: String,
        /// What to do about it.
        hint: String,
    },
}

/// Tuning of the embedded server.
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    /// Keep fsync on. Off is only for throwaway test clusters, where speed matters more than crashes.
    pub durable: bool,
    /// `max_connections` of the server.
    pub max_connections: u32,
    /// More server settings, each `name=value` (no spaces), passed as `-c name=value`.
    pub extra_settings: Vec<String>,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        EmbeddedOptions { durable: true, max_connections: 200, extra_settings: Vec::new() }
    }
}

/// A running embedded server. Call [`EmbeddedPostgres::stop`] to shut it down.
#[derive(Debug)]
pub struct EmbeddedPostgres {
    data_dir: PathBuf,
    bin_dir: PathBuf,
    port: u16,
    run_as_postgres: bool,
    /// The server's command-line settings (`pg_ctl -o`), kept to start it again.
    settings: String,
}

impl EmbeddedPostgres {
    /// Initialises `dir/data` if needed and starts a server on a free loopback port.
    pub async fn start(dir: &Path, options: EmbeddedOptions) -> Result<Self, EmbeddedError> {
        let bin_dir = find_bin_dir().ok_or(EmbeddedError::BinariesNotFound)?;
        let run_as_postgres = is_root();
        let dir = absolute(dir)?;
        std::fs::create_dir_all(&dir).map_err(|e| EmbeddedError::Io(format!("create {}", dir.display()), e))?;
        if run_as_postgres {
            chown_to_postgres(&dir)?;
        }
        let data_dir = dir.join("data");
        let port = free_port()?;
        let mut settings = format!(
            "-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories= -c max_connections={}",
            options.max_connections
        );
        if !options.durable {
            settings.push_str(" -c fsync=off -c synchronous_commit=off -c full_page_writes=off");
        }
        for setting in &options.extra_settings {
            settings.push_str(" -c ");
            settings.push_str(setting);
        }
        let server = EmbeddedPostgres { data_dir, bin_dir, port, run_as_postgres, settings };
        server.stop_leftover().await?;
        if !server.data_dir.join("PG_VERSION").exists() {
            let mut args: Vec<OsString> = vec![
                "-D".into(),
                server.data_dir.clone().into(),
                "-A".into(),
                "trust".into(),
                "-U".into(),
                "postgres".into(),
                "-E".into(),
                "UTF8".into(),
                "--locale=C".into(),
            ];
            if !options.durable {
                args.push("--no-sync".into());
            }
            server.run(&dir, "initdb", args).await?;
        }
        server.start_server().await?;
        let owner = dir.join(OWNER_FILE);
        std::fs::write(&owner, std::process::id().to_string())
            .map_err(|e| EmbeddedError::Io(format!("write {}", owner.display()), e))?;
        Ok(server)
    }

    /// Starts the (initialised, stopped) server with its settings and waits until it accepts connections.
    pub async fn start_server(&self) -> Result<(), EmbeddedError> {
        let dir = self.dir();
        let args: Vec<OsString> = vec![
            "-D".into(),
            self.data_dir.clone().into(),
            "-l".into(),
            dir.join("postgres.log").into(),
            "-o".into(),
            self.settings.clone().into(),
            "-w".into(),
            "-t".into(),
            "60".into(),
            "start".into(),
        ];
        self.run(dir, "pg_ctl", args).await
    }

    /// Stops the server and keeps this handle, so [`EmbeddedPostgres::start_server`] can start it again (a
    /// database outage, for tests).
    pub async fn stop_server(&self) -> Result<(), EmbeddedError> {
        let dir = self.dir();
        let args: Vec<OsString> =
            vec!["-D".into(), self.data_dir.clone().into(), "-m".into(), "fast".into(), "-w".into(), "stop".into()];
        self.run(dir, "pg_ctl", args).await
    }

    /// Stops a server that a broker killed before it could stop it left running in this data directory
    /// (it would hold the directory, and `pg_ctl start` would fail). A server whose broker still runs is
    /// left alone, and this start fails saying so.
    async fn stop_leftover(&self) -> Result<(), EmbeddedError> {
        let dir = self.dir();
        if !self.data_dir.join("postmaster.pid").exists() {
            return Ok(());
        }
        let owner = std::fs::read_to_string(dir.join(OWNER_FILE)).ok().and_then(|pid| pid.trim().parse::<i32>().ok());
        if let Some(pid) = owner.filter(|pid| *pid != std::process::id() as i32 && process_is_alive(*pid)) {
            return Err(EmbeddedError::InUse { pid, dir: dir.display().to_string() });
        }
        let status = self.command("pg_ctl").arg("status").arg("-D").arg(&self.data_dir).current_dir(dir).output().await;
        if status.is_ok_and(|status| status.status.success()) {
            tracing::warn!(dir = %dir.display(), "stopping the PostgreSQL a killed broker left running");
            self.stop_server().await?;
        }
        Ok(())
    }

    /// The directory the server lives in (its data directory's parent, holding its log and owner file).
    fn dir(&self) -> &Path {
        self.data_dir.parent().unwrap_or(&self.data_dir)
    }

    /// The URL of the server's `postgres` database.
    pub fn url(&self) -> String {
        self.database_url("postgres")
    }

    /// The URL of database `name` on this server.
    pub fn database_url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Stops the server (fast shutdown: open connections are closed, data is kept).
    pub async fn stop(self) -> Result<(), EmbeddedError> {
        self.stop_server().await?;
        let _ = std::fs::remove_file(self.dir().join(OWNER_FILE));
        Ok(())
    }

    /// Restarts the server the way a crash would (`-m immediate`: connections are cut, nothing is flushed,
    /// the WAL is replayed on start), with the settings it was started with.
    pub async fn crash_restart(&self) -> Result<(), EmbeddedError> {
        let dir = self.dir();
        // Without `-l` the restarted server would write to pg_ctl's stdout, which `run` reads to its end.
        let args: Vec<OsString> = vec![
            "-D".into(),
            self.data_dir.clone().into(),
            "-l".into(),
            dir.join("postgres.log").into(),
            "-m".into(),
            "immediate".into(),
            "-w".into(),
            "-t".into(),
            "60".into(),
            "restart".into(),
        ];
        self.run(dir, "pg_ctl", args).await
    }

    /// The blocking form of [`EmbeddedPostgres::stop`], for process-exit hooks where no runtime is left.
    pub fn stop_blocking(&self) {
        let mut command = self.command("pg_ctl");
        command.args(["-m", "immediate", "-w", "stop", "-D"]).arg(&self.data_dir);
        let _ = command.as_std_mut().stdout(Stdio::null()).stderr(Stdio::null()).status();
    }

    fn command(&self, program: &str) -> Command {
        let program = self.bin_dir.join(program);
        if self.run_as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        }
    }

    async fn run(&self, cwd: &Path, program: &str, args: Vec<OsString>) -> Result<(), EmbeddedError> {
        let output = self
            .command(program)
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|e| EmbeddedError::Io(format!("run {program}"), e))?;
        if output.status.success() {
            return Ok(());
        }
        let mut text = String::from_utf8_lossy(&output.stderr).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stdout));
        let hint = if text.contains("Permission denied") && self.run_as_postgres {
            format!(
                "; the postgres user cannot reach {}: give the broker a --data-dir it can reach (e.g. under /var/tmp)",
                cwd.display()
            )
        } else if program == "pg_ctl" {
            format!("; the server's log is {}", cwd.join("postgres.log").display())
        } else {
            String::new()
        };
        Err(EmbeddedError::Command { command: program.to_owned(), output: text.trim().to_owned(), hint })
    }
}

/// The file in the embedded server's directory naming the broker process that runs it.
const OWNER_FILE: &str = "ark-broker.pid";

/// Whether a process with this id runs (it may belong to another user). A killed process whose parent has
/// not reaped it yet (a zombie, common in containers without an init) does not count.
fn process_is_alive(pid: i32) -> bool {
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) state …`: the state follows the last `)`.
        return stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']));
    }
    // SAFETY: kill with signal 0 only checks that the process exists and may be signalled.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Whether this machine has the PostgreSQL server binaries the embedded default starts.
pub fn server_binaries_available() -> bool {
    find_bin_dir().is_some()
}

fn find_bin_dir() -> Option<PathBuf> {
    let has_tools = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(path) = std::env::var_os("PATH")
        && let Some(dir) = std::env::split_paths(&path).find(|dir| has_tools(dir))
    {
        return Some(dir);
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path().join("bin")))
        .filter(|dir| has_tools(dir))
        .collect();
    versions.sort_by_key(|dir| {
        let version = dir.parent().and_then(|p| p.file_name()).and_then(|n| n.to_str()).unwrap_or("0");
        version.parse::<u32>().unwrap_or(0)
    });
    versions.pop()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn absolute(dir: &Path) -> Result<PathBuf, EmbeddedError> {
    std::path::absolute(dir).map_err(|e| EmbeddedError::Io(format!("resolve {}", dir.display()), e))
}

fn chown_to_postgres(dir: &Path) -> Result<(), EmbeddedError> {
    let name = c"postgres";
    // SAFETY: getpwnam takes a NUL-terminated name and returns null or a pointer to static storage,
    // which we read at once, before any other call could overwrite it.
    let (uid, gid) = unsafe {
        let entry = libc::getpwnam(name.as_ptr());
        if entry.is_null() {
            return Err(EmbeddedError::NoPostgresUser);
        }
        ((*entry).pw_uid, (*entry).pw_gid)
    };
    std::os::unix::fs::chown(dir, Some(uid), Some(gid))
        .map_err(|e| EmbeddedError::Io(format!("chown {} to postgres", dir.display()), e))
}

fn free_port() -> Result<u16, EmbeddedError> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| EmbeddedError::Io("pick a free port".into(), e))?;
    listener.local_addr().map(|a| a.port()).map_err(|e| EmbeddedError::Io("pick a free port".into(), e))
}
