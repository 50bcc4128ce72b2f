//! A real PgBouncer (Debian's `pgbouncer` package) in transaction mode in front of a test's PostgreSQL, as
//! deployments that pool the broker's request connections run it (issue 35). Its few server connections are
//! shared by all its clients: a client holds one only for the length of a transaction, so whatever a client
//! leaves on a server connection outside a transaction (a prepared statement, a `SET`, a session advisory
//! lock, a `LISTEN`) stays with that server connection, and the client's next statement outside a transaction
//! may reach another one. It is stock otherwise: startup parameters other than the ones PgBouncer tracks
//! (sqlx's default `extra_float_digits`, `options`) are refused unless a setting lists them in
//! `ignore_startup_parameters`. Started as the `postgres` user when the tests run as root (PgBouncer refuses
//! root, as PostgreSQL does); stopped and its directory removed on drop.

use std::{
    collections::BTreeMap,
    os::unix::{fs::chown, process::CommandExt},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    str::FromStr,
    time::Duration,
};

use sqlx::{AssertSqlSafe, Column, ConnectOptions, Connection, Executor, Row, ValueRef, postgres::PgConnectOptions};

use super::within;

/// What to do when the binary is missing.
const MISSING: &str = "pgbouncer is not installed: install Debian's pgbouncer package (./scripts/test does)";

/// A running PgBouncer.
pub struct PgBouncer {
    child: Child,
    /// Removed on drop (after the process is stopped), also if the start fails half-way.
    dir: tempfile::TempDir,
    port: u16,
    user: String,
}

impl PgBouncer {
    /// Starts a PgBouncer in transaction mode with two server connections in front of the database at
    /// `database_url`, and returns it with the URL of the same database, user and password through it.
    pub async fn start(database_url: &str) -> (Self, String) {
        Self::start_with(database_url, &[]).await
    }

    /// Like [`PgBouncer::start`], with more settings for its `[pgbouncer]` section, each `name = value`; a
    /// later one overrides an earlier one (e.g. `default_pool_size = 10`, `ignore_startup_parameters =
    /// extra_float_digits`, `server_reset_query_always = 1`).
    pub async fn start_with(database_url: &str, settings: &[&str]) -> (Self, String) {
        super::install_tls_provider();
        let binary = binary().unwrap_or_else(|| panic!("{MISSING}"));
        let upstream = PgConnectOptions::from_str(database_url).expect("a valid PostgreSQL URL");
        let user = upstream.get_username().to_owned();
        let guard = tempfile::Builder::new().prefix("ark-broker-pgbouncer-").tempdir().expect("create its directory");
        let dir = guard.path();
        let port = free_port();
        let upstream_host = match upstream.get_socket() {
            Some(socket) => socket.to_string_lossy().into_owned(),
            None => upstream.get_host().to_owned(),
        };
        // PgBouncer logs in to the server with the password its auth file gives the user (none for the
        // embedded server, which trusts local connections); clients are trusted.
        let password = password_of(database_url).unwrap_or_default();
        write(dir, "userlist.txt", &format!("{} {}\n", quoted(&user), quoted(&password)));
        let mut ini = format!(
            "[databases]\n* = host={upstream_host} port={upstream_port}\n\n[pgbouncer]\n\
             listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
             auth_type = trust\nauth_file = {dir}/userlist.txt\nadmin_users = {user}\n\
             pool_mode = transaction\ndefault_pool_size = 2\nmax_client_conn = 500\n\
             server_tls_sslmode = prefer\nlogfile = {dir}/pgbouncer.log\n",
            upstream_port = upstream.get_port(),
            dir = dir.display(),
        );
        for setting in settings {
            ini.push_str(setting);
            ini.push('\n');
        }
        write(dir, "pgbouncer.ini", &ini);
        let stderr = std::fs::File::create(dir.join("stderr.log")).expect("create PgBouncer's stderr file");
        let mut command = Command::new(binary);
        command
            .arg("-q")
            .arg(dir.join("pgbouncer.ini"))
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            let (uid, gid) = postgres_user();
            for path in [dir, &dir.join("userlist.txt"), &dir.join("pgbouncer.ini"), &dir.join("stderr.log")] {
                chown(path, Some(uid), Some(gid)).expect("hand PgBouncer's directory to the postgres user");
            }
            // std drops root's supplementary groups too when it sets the user.
            command.uid(uid).gid(gid);
        }
        let child = command.spawn().unwrap_or_else(|error| panic!("cannot start pgbouncer: {error}"));
        let mut bouncer = PgBouncer { child, dir: guard, port, user };
        bouncer.wait_until_listening().await;
        (bouncer, url_through(database_url, port))
    }

    async fn wait_until_listening(&mut self) {
        let address = format!("127.0.0.1:{}", self.port);
        within("PgBouncer to listen", async {
            loop {
                if let Ok(Some(status)) = self.child.try_wait() {
                    panic!("pgbouncer exited ({status}) before listening; its log:\n{}", self.log());
                }
                if tokio::net::TcpStream::connect(&address).await.is_ok() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
    }

    /// The rows of `SHOW <what>` on PgBouncer's admin console (`SERVERS`, `POOLS`, `CLIENTS`, `VERSION` …),
    /// each column as text (empty for null).
    pub async fn show(&self, what: &str) -> Vec<BTreeMap<String, String>> {
        // The console speaks the simple query protocol only, and refuses the startup parameters it does
        // not track, as the pooler does.
        let console = PgConnectOptions::new_without_pgpass()
            .host("127.0.0.1")
            .port(self.port)
            .username(&self.user)
            .database("pgbouncer")
            .ssl_mode(sqlx::postgres::PgSslMode::Disable)
            .extra_float_digits(None);
        let mut connection = console.connect().await.unwrap_or_else(|error| {
            panic!("cannot connect to PgBouncer's admin console: {error}; its log:\n{}", self.log())
        });
        let rows = connection.fetch_all(AssertSqlSafe(format!("SHOW {what}"))).await.expect("SHOW on the console");
        let _ = connection.close().await;
        rows.iter()
            .map(|row| {
                row.columns()
                    .iter()
                    .map(|column| {
                        let value = row.try_get_raw(column.ordinal()).expect("a column of the row");
                        let text = if value.is_null() { "" } else { value.as_str().unwrap_or_default() };
                        (column.name().to_owned(), text.to_owned())
                    })
                    .collect()
            })
            .collect()
    }

    /// What PgBouncer has logged so far (its log file, then what it wrote to stderr).
    pub fn log(&self) -> String {
        let read = |name: &str| std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        format!("{}{}", read("pgbouncer.log"), read("stderr.log"))
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        // SIGKILL: the test is done with it, and its clients' and server connections just close.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `pgbouncer` binary: on PATH, else where Debian puts it (`/usr/sbin`, off a non-root user's PATH).
fn binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/local/sbin".into()])
        .map(|dir| dir.join("pgbouncer"))
        .find(|candidate| candidate.is_file())
}

/// The `postgres` user's uid and gid.
fn postgres_user() -> (u32, u32) {
    // SAFETY: getpwnam takes a NUL-terminated name and returns null or a pointer to static storage, read at
    // once, before any other call could overwrite it.
    unsafe {
        let entry = libc::getpwnam(c"postgres".as_ptr());
        assert!(!entry.is_null(), "running as root needs a `postgres` system user to run PgBouncer as");
        ((*entry).pw_uid, (*entry).pw_gid)
    }
}

/// A free loopback port (the embedded PostgreSQL picks its own the same way).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("pick a free port");
    listener.local_addr().expect("local address").port()
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap_or_else(|error| panic!("write PgBouncer's {name}: {error}"));
}

/// A value quoted for PgBouncer's auth file (`"…"`, with `"` doubled).
fn quoted(value: &str) -> String {
    format!("\"{}\"", value.replace('"', "\"\""))
}

/// `database_url` with PgBouncer's address for the server's, and without its TLS settings (PgBouncer takes
/// plain connections and speaks TLS to the server when the server offers it).
fn url_through(database_url: &str, port: u16) -> String {
    let mut url = reqwest::Url::parse(database_url).expect("a valid PostgreSQL URL");
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(name, _)| !matches!(name.as_ref(), "host" | "hostaddr" | "port") && !name.starts_with("ssl"))
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
        .collect();
    url.set_host(Some("127.0.0.1")).expect("a URL with a host");
    url.set_port(Some(port)).expect("a URL with a port");
    url.set_query(None);
    if !kept.is_empty() {
        url.query_pairs_mut().extend_pairs(kept);
    }
    url.to_string()
}

/// The password in a `postgres://user:password@…` URL, percent-decoded.
fn password_of(database_url: &str) -> Option<String> {
    let url = reqwest::Url::parse(database_url).ok()?;
    let encoded = url.password()?;
    let bytes = encoded.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = (bytes[i] == b'%').then(|| bytes.get(i + 1..i + 3)).flatten();
        match hex.and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()) {
            Some(byte) => {
                decoded.push(byte);
                i += 3;
            }
            None => {
                decoded.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8(decoded).ok()
}

/// Three replicas started at once with `args` on a fresh database, their request connections through a
/// PgBouncer in transaction mode (four server connections for all of them), LISTEN and migrations direct
/// (`DATABASE_LISTEN_URL`), as a deployment behind CloudNativePG's `Pooler` runs them.
pub async fn three_replicas_through_pgbouncer(args: [&[&str]; 3]) -> (PgBouncer, [super::Replica; 3]) {
    let direct = super::fresh_database().await;
    let (bouncer, pooled) = PgBouncer::start_with(&direct, &["default_pool_size = 4"]).await;
    let env = [("DATABASE_LISTEN_URL", direct.as_str())];
    let (a, b, c) = tokio::join!(
        super::Replica::start_with_env(&pooled, args[0], &env),
        super::Replica::start_with_env(&pooled, args[1], &env),
        super::Replica::start_with_env(&pooled, args[2], &env),
    );
    let clients = bouncer.show("CLIENTS").await;
    assert!(clients.len() >= 3, "every replica's request pool goes through PgBouncer: {clients:?}");
    (bouncer, [a, b, c])
}

#[cfg(test)]
mod tests {
    use super::{password_of, quoted, url_through};

    #[test]
    fn the_auth_file_gets_the_urls_password_decoded_and_quoted() {
        assert_eq!(password_of("postgres://postgres:postgres@127.0.0.1:5432/x").as_deref(), Some("postgres"));
        assert_eq!(password_of("postgres://u:p%40ss%22w@h/x").as_deref(), Some("p@ss\"w"));
        assert_eq!(password_of("postgres://postgres@127.0.0.1:5432/x"), None);
        assert_eq!(quoted("p\"w"), "\"p\"\"w\"");
    }

    #[test]
    fn clients_reach_the_same_database_and_user_through_pgbouncer_without_tls() {
        assert_eq!(
            url_through("postgres://postgres:pw@pg.example:5432/ark?sslmode=require&application_name=t", 6432),
            "postgres://postgres:pw@127.0.0.1:6432/ark?application_name=t"
        );
        assert_eq!(
            url_through("postgres://postgres@127.0.0.1:5432/ark", 6432),
            "postgres://postgres@127.0.0.1:6432/ark"
        );
    }
}
