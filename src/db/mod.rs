//! PostgreSQL, the broker's only state: the pool, migrations, the store error, how feeds are written
//! ([`feed`]) and the fan-out machinery (one LISTEN connection per replica, or one relaying for many
//! ([`relay`]), a tail per feed that reads each commit once, and the in-process fan-out readers take rows
//! from), and what the outbox workers share ([`outbox`]).

pub mod buckets;
pub mod embedded;
pub mod epoch;
pub mod fanout;
pub mod feed;
pub mod follow;
pub mod following;
pub mod hearing;
pub mod heartbeat;
pub mod keepalive;
pub mod listen_session;
pub mod listener;
pub mod live;
mod migrate;
pub mod notice;
pub mod notifier;
pub mod wakeup;

pub use migrate::{migrate, migrate_on, migrate_until};
pub mod outage;
pub mod outbox;
pub mod pool;
pub mod receipt;
pub mod refusal;
pub mod relay;
pub mod retry;
pub mod sizes;
pub mod tail;
mod target;
pub mod turn;
pub mod watch;

pub use target::{Database, RootCertError};

use std::time::Duration;

use sqlx::{PgConnection, postgres::PgPoolOptions};

pub use pool::Pool;

use crate::config::Config;

/// What a store call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Postgres could not be reached (connection refused, pool timed out, connection lost).
    #[error("database unavailable")]
    Unavailable(#[source] sqlx::Error),
    /// Postgres answered with an error.
    #[error("database error")]
    Database(#[source] sqlx::Error),
    /// Writers kept overtaking this one on the same key (a stream, a conversation); the client may retry.
    #[error("too many concurrent writers of one {0}")]
    Contended(&'static str),
    /// The replica is shutting down and takes no more writes.
    #[error("shutting down")]
    ShuttingDown,
    /// A write's COMMIT went unanswered and no server could say, within the ride-through window, whether it
    /// committed ([`receipt::settle`]): it is not counted as stored.
    #[error("whether the write committed could not be learnt")]
    Unsettled,
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        refusal::observe(&error);
        if is_unreachable(&error) || refusal::is_too_many_clients(&error) {
            StoreError::Unavailable(error)
        } else {
            StoreError::Database(error)
        }
    }
}

/// Whether an error means Postgres cannot be reached or is going away (not that it refused the statement):
/// no connection, a lost one, or the server shutting down, starting up or cutting sessions
/// (SQLSTATE classes 08 and 57, but not 57014, a statement cancelled by its timeout).
pub fn is_unreachable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Tls(_) => true,
        sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(error) => {
            error.code().is_some_and(|code| code.starts_with("08") || (code.starts_with("57") && code != "57014"))
        }
        _ => false,
    }
}

impl StoreError {
    /// The same failure for another write of one transaction (a group commit's), which shared its fate: the
    /// same variant, and the same message where it carries the database's.
    pub fn for_another(&self) -> StoreError {
        let copied = |error: &sqlx::Error| sqlx::Error::Protocol(error.to_string());
        match self {
            StoreError::Unavailable(error) => StoreError::Unavailable(copied(error)),
            StoreError::Database(error) => StoreError::Database(copied(error)),
            StoreError::Contended(what) => StoreError::Contended(what),
            StoreError::ShuttingDown => StoreError::ShuttingDown,
            StoreError::Unsettled => StoreError::Unsettled,
        }
    }
}

/// Result of a store call.
pub type StoreResult<T> = Result<T, StoreError>;

/// JSON text read from Postgres (`jsonb::text`), kept as it is to be sent on unchanged.
pub fn raw_json(text: String) -> StoreResult<Box<serde_json::value::RawValue>> {
    serde_json::value::RawValue::from_string(text).map_err(|e| StoreError::Database(sqlx::Error::Decode(Box::new(e))))
}

/// Makes the rest of the caller's transaction plan each statement for its parameters. Lists with optional
/// filters (`$1::text is null or column = $1`) need it: a cached generic plan keeps the null test and walks
/// the primary key, where a plan for the given values uses the filter's index.
pub async fn plan_per_execution(conn: &mut PgConnection) -> StoreResult<()> {
    sqlx::query!("set local plan_cache_mode = force_custom_plan").execute(conn).await?;
    Ok(())
}

/// How long Postgres lets a request connection wait or idle before it ends the statement or the session.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// `statement_timeout`: no statement of the request path runs longer.
    pub statement: Duration,
    /// `lock_timeout`: no statement waits longer for a lock (a key another replica writes).
    pub lock: Duration,
    /// `idle_in_transaction_session_timeout`: a replica that stops mid-transaction (frozen, partitioned) has
    /// its session ended, and its locks released, after this long.
    pub idle_in_transaction: Duration,
    /// How long a write waits for a primary to answer before it fails ([`outage`]).
    pub ride_through: Duration,
}

impl Timeouts {
    /// The timeouts `config` sets (`--db-*-timeout-ms`).
    pub fn of(config: &Config) -> Self {
        Timeouts {
            statement: Duration::from_millis(config.db_statement_timeout_ms),
            lock: Duration::from_millis(config.db_lock_timeout_ms),
            idle_in_transaction: Duration::from_millis(config.db_idle_in_transaction_timeout_ms),
            ride_through: Duration::from_millis(config.db_ride_through_ms),
        }
    }
}

/// Each statement of a request connection is planned once, when the connection first runs it. PostgreSQL's
/// default re-plans a statement whose plan for the given values looks cheaper than its generic one, which
/// the hot statements' small arrays always do: the tails' keyed read was planned on 5,928 of 7,132
/// executions at 24 replicas (half its time; docs/performance.md). The statements whose best plan depends
/// on their values ask for one per execution ([`plan_per_execution`]). Through a pooler statements are
/// unnamed and planned each time anyway.
const GENERIC_PLANS: (&str, &str) = ("plan_cache_mode", "force_generic_plan");

/// How long a pooled connection may sit idle before it is pinged when handed out again.
const IDLE_BEFORE_PING: Duration = Duration::from_secs(1);
/// The longest a request waits for a pooled connection (making one included) before it gets 503: shorter
/// than any client's patience, so a replica that cannot reach PostgreSQL says so fast.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long start-up waits for the request pool's connections to open; those still opening are left to
/// open on demand.
const OPEN_POOL_WITHIN: Duration = Duration::from_secs(2);

/// The request pool of one replica. Its connections carry `timeouts`, so a replica frozen mid-transaction
/// harms only itself: Postgres ends its session and releases what it held. The LISTEN connection and
/// migrations use their own connections without them (LISTEN idles forever; a migration may take long).
///
/// With `direct` (`DATABASE_LISTEN_URL`), `database` is a pooler in transaction mode: the timeouts then go
/// into every transaction's first statement instead ([`pool`]), and the reaper's turns, which are session
/// locks, are taken on a direct connection of their own.
pub async fn connect(
    database: &Database,
    direct: Option<&Database>,
    max_connections: u32,
    timeouts: Timeouts,
) -> Result<Pool, sqlx::Error> {
    outage::set_window(timeouts.ride_through);
    let ms = |d: Duration| format!("{}ms", d.as_millis());
    let settings = [
        ("statement_timeout", ms(timeouts.statement)),
        ("lock_timeout", ms(timeouts.lock)),
        ("idle_in_transaction_session_timeout", ms(timeouts.idle_in_transaction)),
    ];
    let Some(direct) = direct else {
        let options = database.options("ark-broker")?.options(settings).options([GENERIC_PLANS]);
        let pool = request_pool(database, max_connections).after_connect(guard_connection(database, true));
        let pool = pool.connect_with(options).await?;
        open_all(&pool).await;
        return Ok(Pool::from(pool));
    };
    let pooled = request_pool(database, max_connections)
        .after_connect(guard_connection(database, false))
        .connect_with(database.pooled_options("ark-broker")?)
        .await?;
    open_all(&pooled).await;
    // The turns' connection: one, made when a turn is first taken.
    let sessions = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(ACQUIRE_TIMEOUT.min(direct.connect_timeout()))
        .after_connect(guard_connection(direct, true))
        .connect_lazy_with(direct.options("ark-broker-turns")?);
    let set_local: String = settings.iter().map(|(name, value)| format!("set local {name} = '{value}'; ")).collect();
    Ok(Pool::through_pooler(pooled, sessions, set_local.trim_end_matches("; "), "select ark_broker_enter_epoch()"))
}

/// Opens every connection of `pool` before the replica serves, so its first requests — a new replica's,
/// added under load — find them open. A new connection costs PostgreSQL a backend's start and the epoch
/// check (`epoch::enter`): a few ms of its CPU each, which 24 replicas' pools opening during a load made
/// about a tenth of PostgreSQL's CPU (docs/performance.md, issue 35). Connections that cannot open in time
/// (a server out of slots) open on demand, as before.
async fn open_all(pool: &sqlx::PgPool) {
    let opening = futures::future::join_all((0..pool.options().get_max_connections()).map(|_| pool.acquire()));
    match tokio::time::timeout(OPEN_POOL_WITHIN, opening).await {
        Ok(connections) => {
            let failed = connections.iter().filter(|connection| connection.is_err()).count();
            if failed > 0 {
                tracing::debug!(failed, "some request connections did not open at start; they open on demand");
            }
        }
        Err(_) => {
            tracing::debug!("the request pool did not open within {OPEN_POOL_WITHIN:?}; the rest opens on demand")
        }
    }
}

/// The request pool's options but its connections' setup.
fn request_pool(database: &Database, max_connections: u32) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections.max(2))
        .acquire_timeout(ACQUIRE_TIMEOUT.min(database.connect_timeout()))
        // sqlx pings every connection it hands out by default: one more round trip per flush and per read.
        // Only a connection that sat idle may have died with the server meanwhile; a busy one was just used.
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for > IDLE_BEFORE_PING {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
}

/// Where LISTEN connections come from: a pool of one connection, used for nothing else, made afresh for each
/// connection. A lost LISTEN connection is not reused: sqlx hands it back to its pool with `UNLISTEN *` and a
/// ping, which one that stopped answering never replies to, and the pool's one slot would stay taken.
#[derive(Debug, Clone)]
pub struct ListenPools {
    database: Database,
    options: sqlx::postgres::PgConnectOptions,
}

impl ListenPools {
    /// LISTEN connections to `database`, named `application_name`.
    pub fn new(database: &Database, application_name: &str) -> Result<Self, sqlx::Error> {
        Ok(ListenPools { database: database.clone(), options: database.options(application_name)? })
    }

    /// A new pool for the next LISTEN connection. A failed connect surfaces within a second, so the replica
    /// soon knows when Postgres is unreachable.
    pub fn fresh(&self) -> sqlx::PgPool {
        PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(1))
            .after_connect(guard_connection(&self.database, true))
            .connect_lazy_with(self.options.clone())
    }
}

type AfterConnect = dyn Fn(&mut PgConnection, sqlx::pool::PoolConnectionMetadata) -> futures::future::BoxFuture<'_, Result<(), sqlx::Error>>
    + Send
    + Sync;

/// Sets keepalive on each connection a pool makes, once it is made ([`keepalive`]), and, on a connection of
/// its own on the server (`session`), enters the server's timeline ([`epoch`]) before it is used (through a
/// pooler each write transaction does); the server's port is read once, here.
fn guard_connection(database: &Database, session: bool) -> Box<AfterConnect> {
    let (port, timeout) = (database.tcp_port(), database.network_timeout());
    Box::new(move |conn, _| {
        Box::pin(async move {
            if let Some(port) = port {
                // A scan of the process's descriptors: off the async workers.
                let _ = tokio::task::spawn_blocking(move || keepalive::guard_sockets_to(port, timeout)).await;
            }
            if session { epoch::enter(conn).await } else { Ok(()) }
        })
    })
}

/// The visibility horizon: the oldest transaction id still in flight (every lower one has ended).
pub async fn horizon(pool: &Pool) -> StoreResult<i64> {
    Ok(sqlx::query_scalar!(r#"select pg_snapshot_xmin(pg_current_snapshot())::text::bigint as "horizon!""#)
        .fetch_one(pool)
        .await?)
}

/// Which transactions had committed when a live-only reader of a global feed connected. Its cursor starts at
/// the horizon, but transactions above the horizon may have committed already (another, older transaction
/// is still open): their rows are from before the reader and are skipped.
#[derive(Debug, Clone)]
pub struct StartSnapshot {
    xmin: i64,
    xmax: i64,
    in_flight: Vec<i64>,
    /// The first transaction of the primary epoch it was taken in ([`epoch`]).
    pub epoch: Option<i64>,
}

impl StartSnapshot {
    /// Where the reader starts: every transaction below the horizon had ended.
    pub fn cursor(&self) -> feed::GlobalCursor {
        feed::GlobalCursor::horizon(self.xmin)
    }

    /// Whether transaction `tx` had not committed yet when the snapshot was taken.
    pub fn is_new(&self, tx: i64) -> bool {
        tx >= self.xmax || self.in_flight.contains(&tx)
    }
}

/// The snapshot a live-only global reader starts from.
pub async fn start_snapshot(pool: &Pool) -> StoreResult<StartSnapshot> {
    let row = sqlx::query!(
        r#"select pg_snapshot_xmin(s)::text::bigint as "xmin!", pg_snapshot_xmax(s)::text::bigint as "xmax!",
                  array(select x::text::bigint from pg_snapshot_xip(s) as x) as "in_flight!",
                  ark_broker_current_epoch() as epoch
           from pg_current_snapshot() as s"#
    )
    .fetch_one(pool)
    .await?;
    Ok(StartSnapshot { xmin: row.xmin, xmax: row.xmax, in_flight: row.in_flight, epoch: row.epoch })
}
