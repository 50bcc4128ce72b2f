//! Where the broker's PostgreSQL connections go and how each is made: the URL, TLS checked against an
//! operator's CA (`--database-ssl-root-cert`, upstream's `DATABASE_SSL_ROOT_CERT_PATH`), how long a new
//! connection may take (`--db-connect-timeout-ms`), and how long one may go unanswered by the network before
//! it counts as lost (`--db-network-timeout-ms`, [`super::keepalive`]). Every connection — the pool's, the LISTEN one, the
//! migration's — is made from here, so none reaches the server another way.

use std::{path::PathBuf, str::FromStr, time::Duration};

use sqlx::{
    ConnectOptions, PgConnection,
    postgres::{PgConnectOptions, PgSslMode},
};

use crate::config::Config;

/// How long a new connection may take when nothing says otherwise (upstream's default).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection may go unanswered by the network when nothing says otherwise.
const NETWORK_TIMEOUT: Duration = Duration::from_secs(4);

/// A PostgreSQL server to connect to, and how.
#[derive(Clone)]
pub struct Database {
    url: String,
    root_cert: Option<PathBuf>,
    connect_timeout: Duration,
    network_timeout: Duration,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may hold a password: shown as the configuration shows it.
        f.debug_struct("Database")
            .field("url", &crate::config::DatabaseUrl::from_str(&self.url).unwrap_or_else(|never| match never {}))
            .field("root_cert", &self.root_cert)
            .field("connect_timeout", &self.connect_timeout)
            .field("network_timeout", &self.network_timeout)
            .finish()
    }
}

/// The CA certificate named by `--database-ssl-root-cert` cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the PostgreSQL CA certificate {} (--database-ssl-root-cert, DATABASE_SSL_ROOT_CERT_PATH): {error}", path.display())]
pub struct RootCertError {
    /// The file.
    pub path: PathBuf,
    /// Why.
    pub error: std::io::Error,
}

impl Database {
    /// The server at `url`, connected as its URL says (no CA of ours, upstream's connect timeout).
    pub fn new(url: &str) -> Self {
        Database {
            url: url.to_owned(),
            root_cert: None,
            connect_timeout: CONNECT_TIMEOUT,
            network_timeout: NETWORK_TIMEOUT,
        }
    }

    /// The server at `url`, connected as `config` says.
    pub fn of(config: &Config, url: &str) -> Self {
        Database {
            url: url.to_owned(),
            root_cert: config.database_ssl_root_cert.clone(),
            connect_timeout: Duration::from_millis(config.db_connect_timeout_ms),
            network_timeout: Duration::from_millis(config.db_network_timeout_ms),
        }
    }

    /// How long a new connection may take.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// How long a connection may go unanswered by the network before it counts as lost.
    pub fn network_timeout(&self) -> Duration {
        self.network_timeout
    }

    /// The server's TCP port, or `None` when it is reached over a Unix socket (a host that is a path), which
    /// has no network to lose.
    pub fn tcp_port(&self) -> Option<u16> {
        let options = PgConnectOptions::from_str(&self.url).ok()?;
        (!options.get_host().starts_with('/')).then(|| options.get_port())
    }

    /// Checks that the CA certificate can be read, so a wrong path stops start-up naming the file instead of
    /// failing every connection later. The file is read again for each new connection (sqlx does), so a
    /// rotated certificate (a renewed Secret) applies without a restart.
    pub fn check(&self) -> Result<(), RootCertError> {
        match &self.root_cert {
            Some(path) => std::fs::read(path).map(drop).map_err(|error| RootCertError { path: path.clone(), error }),
            None => Ok(()),
        }
    }

    /// Connect options, named `application_name` so connections can be told apart in `pg_stat_activity`.
    pub fn options(&self, application_name: &str) -> Result<PgConnectOptions, sqlx::Error> {
        // Not `plan_cache_mode=force_custom_plan` for the whole session: it re-planned the hot statements (the
        // flush CTE, the tail reads) on every execution, which halved the saturation ingest
        // (docs/performance.md). The request pool plans generically ([`super::connect`]); the list queries
        // that need a plan for their values ask for it: [`super::plan_per_execution`].
        let options = PgConnectOptions::from_str(&self.url)?
            .application_name(application_name)
            .options(super::keepalive::server_settings(self.network_timeout));
        Ok(self.with_root_cert(options))
    }

    /// Connect options for connections through a pooler in transaction mode (PgBouncer before 1.21): no
    /// startup setting it does not track (`options`, `extra_float_digits`; it refuses them) and no statement
    /// cache (a named statement would meet another client's of the same name on a shared server connection).
    pub fn pooled_options(&self, application_name: &str) -> Result<PgConnectOptions, sqlx::Error> {
        let options = PgConnectOptions::from_str(&self.url)?
            .application_name(application_name)
            .extra_float_digits(None)
            .statement_cache_capacity(0);
        Ok(self.with_root_cert(options))
    }

    /// `options` checking the server's certificate against the operator's CA, when one is given.
    fn with_root_cert(&self, options: PgConnectOptions) -> PgConnectOptions {
        let Some(cert) = &self.root_cert else { return options };
        // Upstream hands the CA to Node's TLS, which then insists on TLS and checks the chain and the host
        // name: `verify-full`. A URL that asks for `verify-ca` keeps it (the operator chose not to check the
        // name); any weaker `sslmode` would not use the CA at all, so it is raised.
        let mode = match options.get_ssl_mode() {
            PgSslMode::VerifyCa => PgSslMode::VerifyCa,
            _ => PgSslMode::VerifyFull,
        };
        options.ssl_mode(mode).ssl_root_cert(cert)
    }

    /// One connection of its own (not pooled), within the connect timeout.
    pub async fn connect_one(&self, application_name: &str) -> Result<PgConnection, sqlx::Error> {
        let options = self.options(application_name)?;
        match tokio::time::timeout(self.connect_timeout, options.connect()).await {
            Ok(connected) => connected,
            Err(_) => Err(sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("PostgreSQL accepted no connection within {} ms", self.connect_timeout.as_millis()),
            ))),
        }
    }
}
