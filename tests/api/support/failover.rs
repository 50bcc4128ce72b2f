//! The failover lab: a PostgreSQL primary with a streaming standby (synchronous or not), a TCP proxy standing in
//! for CloudNativePG's `-rw` Service, and the switchover and failover that promote the standby behind it; and,
//! optionally, a replication link (a proxy the standby streams through) to cut, so a failover loses commits.

use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use ark_broker::db::embedded::{EmbeddedOptions, EmbeddedPostgres};
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection};
use tokio::{
    net::{TcpListener, TcpStream},
    process::Command,
    sync::watch,
};

use super::within;

/// How the primary waits for its standby.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// `synchronous_standby_names = '*'`: a commit returns once the standby has flushed it (CloudNativePG's
    /// `synchronous` stanza, the chart's default).
    Sync,
    /// A commit returns once the primary has it; the standby may be behind.
    Async,
}

/// How long each step of a promotion took.
#[derive(Debug, Clone, Copy)]
pub struct Steps {
    /// Stopping the primary (`pg_ctl stop -m fast` or `-m immediate`).
    pub stop: Duration,
    /// Promoting the standby (`pg_ctl promote -w`).
    pub promote: Duration,
    /// Pointing the Service at the new primary (and dropping what it carried).
    pub switch: Duration,
}

impl Steps {
    /// The whole promotion.
    pub fn total(&self) -> Duration {
        self.stop + self.promote + self.switch
    }
}

impl std::fmt::Display for Steps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (stop, promote, switch) = (self.stop.as_secs_f64(), self.promote.as_secs_f64(), self.switch.as_secs_f64());
        write!(f, "stop {stop:.2}s, promote {promote:.2}s, switch {switch:.3}s")
    }
}

/// A primary and its streaming standby behind a [`ServiceProxy`]. Dropping it stops both servers (`-m
/// immediate`) and removes their directories.
pub struct PrimaryStandby {
    dir: LabDir,
    /// The first primary, then its standby.
    servers: [EmbeddedPostgres; 2],
    /// Which of `servers` is the primary now.
    primary: usize,
    proxy: ServiceProxy,
    replication: Replication,
    /// The proxy the standby streams through, if the lab has one ([`PrimaryStandby::cut_replication`]).
    link: Option<ServiceProxy>,
    /// Whether the link was cut: the promotion then checks that the new primary lacks what came after.
    cut: bool,
}

/// The servers' settings beyond the embedded defaults: a throwaway cluster (no fsync) whose commits still wait
/// for what `synchronous_commit` promises (the embedded non-durable default turns it off; a later `-c` wins).
fn options() -> EmbeddedOptions {
    let settings = ["synchronous_commit=on", "wal_level=replica", "max_wal_senders=10", "hot_standby=on"];
    EmbeddedOptions {
        durable: false,
        max_connections: 200,
        extra_settings: settings.iter().map(|s| s.to_string()).collect(),
    }
}

impl PrimaryStandby {
    /// Starts a primary with a database `broker`, a standby streaming from it, and the proxy in front of the
    /// primary; with [`Replication::Sync`], returns once the standby is the primary's synchronous one.
    pub async fn start(replication: Replication) -> Self {
        Self::launch(replication, false).await
    }

    /// Like [`PrimaryStandby::start`], with the standby streaming through a replication link of its own (a proxy
    /// in front of the primary), which [`PrimaryStandby::cut_replication`] cuts.
    pub async fn start_with_replication_link(replication: Replication) -> Self {
        Self::launch(replication, true).await
    }

    async fn launch(replication: Replication, with_link: bool) -> Self {
        super::install_tls_provider();
        static LABS: AtomicUsize = AtomicUsize::new(0);
        let name = format!("ark-failover-{}-{}", std::process::id(), LABS.fetch_add(1, Ordering::Relaxed));
        let dir = LabDir(std::env::temp_dir().join(name));
        let primary = EmbeddedPostgres::start(&dir.0.join("primary"), options()).await.expect("start the primary");
        let mut admin = PgConnection::connect(&primary.url()).await.expect("connect to the primary");
        admin.execute("create database broker").await.unwrap();
        let standby_dir = dir.0.join("standby");
        std::fs::create_dir_all(&standby_dir).unwrap();
        as_postgres_owner(&standby_dir);
        // `-R` writes the connection the backup used into the standby's `primary_conninfo`: through the link.
        let link = if with_link { Some(ServiceProxy::start(port_of(&primary)).await) } else { None };
        let port = link.as_ref().map_or(port_of(&primary), |link| link.port).to_string();
        let backup = ["-h", "127.0.0.1", "-p", &port, "-U", "postgres", "-R", "-X", "stream", "-c", "fast", "-N"];
        run(pg("pg_basebackup").args(backup).arg("-D").arg(standby_dir.join("data"))).await;
        let conninfo = std::fs::read_to_string(standby_dir.join("data/postgresql.auto.conf")).unwrap();
        assert!(conninfo.contains(&format!("port={port}")), "the standby streams from port {port}: {conninfo}");
        // Its own port: the embedded start finds the data directory initialised and only starts it.
        let standby = EmbeddedPostgres::start(&standby_dir, options()).await.expect("start the standby");
        replication_is(&mut admin, "streaming async").await;
        if replication == Replication::Sync {
            admin.execute("alter system set synchronous_standby_names = '*'").await.unwrap();
            admin.execute("select pg_reload_conf()").await.unwrap();
            replication_is(&mut admin, "streaming sync").await;
        }
        let commit: String = sqlx::query_scalar("show synchronous_commit").fetch_one(&mut admin).await.unwrap();
        assert_eq!(commit, "on", "commits wait for what synchronous_commit promises");
        let proxy = ServiceProxy::start(port_of(&primary)).await;
        PrimaryStandby { dir, servers: [primary, standby], primary: 0, proxy, replication, link, cut: false }
    }

    /// Cuts the standby off from the primary, asynchronous replication only (a synchronous primary would wait
    /// for it forever). Once the standby has replayed what the primary has written so far, the link resets the
    /// connection it carries and refuses new ones, so nothing the primary commits from now on reaches the
    /// standby: a failover loses it. Checked: a row the primary commits after the cut is not on the standby,
    /// and [`PrimaryStandby::failover`] checks that the promoted standby lacks it.
    pub async fn cut_replication(&mut self) {
        assert_eq!(self.replication, Replication::Async, "a synchronous primary would wait for a cut standby");
        let link = self.link.as_ref().expect("a lab started with a replication link");
        let mut primary = PgConnection::connect(&self.servers[0].url()).await.expect("connect to the primary");
        let mut standby = PgConnection::connect(&self.servers[1].url()).await.expect("connect to the standby");
        primary.execute("create table lab_cut (probe text)").await.unwrap();
        let written: String =
            sqlx::query_scalar("select pg_current_wal_lsn()::text").fetch_one(&mut primary).await.unwrap();
        let replayed = format!("select pg_last_wal_replay_lsn() >= '{written}'::pg_lsn");
        until(&mut standby, "the standby to replay what the primary wrote", replayed).await;
        link.cut();
        let stopped = "select not exists (select 1 from pg_stat_wal_receiver where status = 'streaming')";
        until(&mut standby, "the standby to stop streaming", stopped.into()).await;
        primary.execute("insert into lab_cut values ('after the cut')").await.unwrap();
        assert_eq!(probes(&mut standby).await, 0, "a row committed after the cut reached the standby");
        self.cut = true;
    }

    /// The database through the Service, for the brokers: `postgres://postgres@127.0.0.1:<proxy>/broker`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/broker", self.proxy.port)
    }

    /// The database on the current primary, bypassing the Service (to verify what it holds).
    pub fn primary_url(&self) -> String {
        self.servers[self.primary].database_url("broker")
    }

    /// A planned switchover: the primary stops cleanly (`-m fast`: its standby gets all its WAL first), the
    /// standby is promoted, the Service points at it.
    pub async fn switchover(&mut self) -> Steps {
        self.promote("fast").await
    }

    /// A failover: the primary dies (`-m immediate`: what its standby has not received is lost), the standby
    /// is promoted, the Service points at it. After [`PrimaryStandby::cut_replication`], checks first that the
    /// new primary lacks what the old one committed after the cut.
    pub async fn failover(&mut self) -> Steps {
        self.promote("immediate").await
    }

    async fn promote(&mut self, mode: &str) -> Steps {
        assert_eq!(self.primary, 0, "a lab promotes its standby once");
        let started = Instant::now();
        let stop = ["-w", "-t", "60", "-m", mode, "stop", "-D"];
        run(pg("pg_ctl").args(stop).arg(self.data_dir(0))).await;
        let stopped = Instant::now();
        run(pg("pg_ctl").args(["-w", "-t", "60", "promote", "-D"]).arg(self.data_dir(1))).await;
        self.primary = 1;
        // Alone now, the new primary must not wait for a standby (pg_basebackup copied the configuration from
        // before the primary's was made synchronous, so there is nothing to clear unless that changes).
        let mut admin = PgConnection::connect(&self.servers[1].url()).await.expect("connect to the new primary");
        if self.cut {
            assert_eq!(probes(&mut admin).await, 0, "the new primary has a row committed after the cut");
        }
        let names: String = sqlx::query_scalar("show synchronous_standby_names").fetch_one(&mut admin).await.unwrap();
        if !names.is_empty() {
            admin.execute("alter system reset synchronous_standby_names").await.unwrap();
            admin.execute("select pg_reload_conf()").await.unwrap();
        }
        let promoted = Instant::now();
        self.proxy.switch_to(port_of(&self.servers[1]));
        Steps { stop: stopped - started, promote: promoted - stopped, switch: promoted.elapsed() }
    }

    fn data_dir(&self, server: usize) -> PathBuf {
        self.dir.0.join(["primary", "standby"][server]).join("data")
    }

    /// The last `lines` lines of each server's log, to explain a failure.
    pub fn logs_tail(&self, lines: usize) -> String {
        ["primary", "standby"]
            .iter()
            .map(|name| {
                let log = std::fs::read_to_string(self.dir.0.join(name).join("postgres.log")).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(lines).collect();
                format!("--- {name}'s log:\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The lab's directory. Dropping it stops whatever server still runs in it (`-m immediate`) and removes it, also
/// when the lab's start failed half-way.
struct LabDir(PathBuf);

impl Drop for LabDir {
    fn drop(&mut self) {
        for server in ["primary", "standby"] {
            let mut stop = pg("pg_ctl");
            stop.args(["-m", "immediate", "-w", "stop", "-D"]).arg(self.0.join(server).join("data"));
            let _ = stop.as_std_mut().stdout(Stdio::null()).stderr(Stdio::null()).status();
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Waits until the primary's standby is in `state` (`pg_stat_replication`'s `state` and `sync_state`).
async fn replication_is(primary: &mut PgConnection, state: &'static str) {
    let query = "select coalesce(max(state || ' ' || sync_state), '') from pg_stat_replication";
    within(state, async {
        while sqlx::query_scalar::<_, String>(query).fetch_one(&mut *primary).await.unwrap() != state {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// Waits until `query` (one boolean) is true on `server`.
async fn until(server: &mut PgConnection, what: &'static str, query: String) {
    within(what, async {
        while !sqlx::query_scalar::<_, bool>(AssertSqlSafe(query.as_str())).fetch_one(&mut *server).await.unwrap() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// The rows [`PrimaryStandby::cut_replication`] committed on the primary after the cut that `server` has.
async fn probes(server: &mut PgConnection) -> i64 {
    sqlx::query_scalar("select count(*) from lab_cut").fetch_one(server).await.unwrap()
}

/// The port a server listens on, from its URL.
fn port_of(server: &EmbeddedPostgres) -> u16 {
    let url = server.url();
    let port = url.rsplit_once(':').and_then(|(_, rest)| rest.split('/').next()).expect("host:port in the URL");
    port.parse().expect("a port")
}

/// Running as root, as the embedded server does: PostgreSQL's own tools run as `postgres`.
fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `program` from the directory of PostgreSQL's server binaries (where `pg_ctl` on PATH leads, through its
/// symbolic link, or Debian's newest `/usr/lib/postgresql/<n>/bin`), run as `postgres` when the tests run as root.
fn pg(program: &str) -> Command {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut candidates: Vec<PathBuf> = std::env::split_paths(&path).map(|dir| dir.join("pg_ctl")).collect();
    let mut debian: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path().join("bin/pg_ctl"))).collect())
        .unwrap_or_default();
    debian.sort_by_key(|ctl| ctl.ancestors().nth(2)?.file_name()?.to_str()?.parse::<u32>().ok());
    candidates.extend(debian.into_iter().rev());
    let ctl = candidates.iter().find_map(|ctl| std::fs::canonicalize(ctl).ok()).expect("PostgreSQL's pg_ctl");
    let dir = ctl.parent().expect("pg_ctl's directory");
    let mut command = if is_root() { Command::new("runuser") } else { Command::new(dir.join(program)) };
    if is_root() {
        command.args([OsStr::new("-u"), OsStr::new("postgres"), OsStr::new("--"), dir.join(program).as_os_str()]);
    }
    command.stdin(Stdio::null()).kill_on_drop(true);
    command
}

/// Runs `command`, failing the test with what it printed if it fails.
async fn run(command: &mut Command) {
    let output = within("a PostgreSQL tool", command.output()).await.expect("run a PostgreSQL tool");
    let printed = || format!("{}{}", String::from_utf8_lossy(&output.stderr), String::from_utf8_lossy(&output.stdout));
    assert!(output.status.success(), "{command:?} failed: {}", printed());
}

/// Hands `dir` to the `postgres` user when the tests run as root (its tools write into it).
fn as_postgres_owner(dir: &Path) {
    if !is_root() {
        return;
    }
    let status = std::process::Command::new("chown").arg("postgres:").arg(dir).status().expect("run chown");
    assert!(status.success(), "chown {} to postgres", dir.display());
}

/// A stand-in for the `-rw` Service: forwards each new connection to the current primary's port; a switch
/// points new connections at another port and drops every connection it carries, at once (a reset both ways).
/// While the old primary is down and the switch has not happened, a new connection is closed at once (the
/// old port refuses it), as a Service with no ready endpoint does. [`ServiceProxy::cut`] leaves it with none.
pub struct ServiceProxy {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    /// The port connections go to; every change also drops the connections open at that moment.
    route: Arc<watch::Sender<u16>>,
    accept: tokio::task::JoinHandle<()>,
}

impl ServiceProxy {
    /// Starts the proxy in front of `127.0.0.1:<target>`.
    pub async fn start(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let port = listener.local_addr().unwrap().port();
        let route = Arc::new(watch::channel(target).0);
        let routes = route.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                // Subscribed before reading the target: a switch after this point drops this connection too.
                let mut switched = routes.subscribe();
                let target = *switched.borrow_and_update();
                tokio::spawn(async move {
                    if target == NOWHERE {
                        return;
                    }
                    let Ok(server) = TcpStream::connect(("127.0.0.1", target)).await else { return };
                    carry(client, server, switched).await;
                });
            }
        });
        ServiceProxy { port, route, accept }
    }

    /// Sends new connections to `127.0.0.1:<port>` and drops every connection carried now.
    pub fn switch_to(&self, port: u16) {
        self.route.send_replace(port);
    }

    /// Drops every connection carried now and closes each new one at once: nothing goes through any more.
    pub fn cut(&self) {
        self.switch_to(NOWHERE);
    }
}

/// The route of a cut proxy.
const NOWHERE: u16 = 0;

impl Drop for ServiceProxy {
    fn drop(&mut self) {
        self.accept.abort();
        // Drops every carried connection (and, once the accept task is gone, closes the channel).
        self.route.send_modify(|_| {});
    }
}

/// Copies bytes both ways until either side closes or the route changes; then resets both connections.
async fn carry(mut client: TcpStream, mut server: TcpStream, mut switched: watch::Receiver<u16>) {
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
        _ = switched.changed() => {
            let _ = client.set_zero_linger();
            let _ = server.set_zero_linger();
        }
    }
}
