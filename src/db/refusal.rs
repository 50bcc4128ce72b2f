//! Why the request pool could not open a connection, when PostgreSQL refuses new ones for want of slots.
//!
//! sqlx keeps retrying a connection refused with `too many clients` (SQLSTATE 53300) until the pool's acquire
//! timeout and then answers only "pool timed out", which says nothing of the cause. When that happens, one
//! direct connection attempt ([`run`]) asks PostgreSQL why; a refusal for want of slots is remembered for a
//! while, logged once a minute naming `max_connections`, and turns the 503's message into one that says so.

use std::{
    sync::{
        LazyLock,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::Database;

/// SQLSTATE `too_many_connections`.
const TOO_MANY_CONNECTIONS: &str = "53300";
/// How long a refusal colours the answers after it was last seen.
const REMEMBERED: Duration = Duration::from_secs(10);
/// Least time between two probes, and between two log lines.
const PROBE_EVERY: Duration = Duration::from_secs(1);
const LOG_EVERY: Duration = Duration::from_secs(60);

/// What the 503 says while PostgreSQL refuses connections for want of slots.
pub const MESSAGE: &str = "PostgreSQL refuses new connections: too many clients (its max_connections is reached); \
                           retry later";

static SUSPECTED: LazyLock<Notify> = LazyLock::new(Notify::new);
/// When a refusal for want of slots was last seen, in ms since the epoch (0: not lately).
static REFUSED_AT: AtomicU64 = AtomicU64::new(0);
static LOGGED_AT: AtomicU64 = AtomicU64::new(0);

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Whether `error` is PostgreSQL saying it has no connection slot left.
pub fn is_too_many_clients(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(e) if e.code().as_deref() == Some(TOO_MANY_CONNECTIONS))
}

/// Records what a failed acquire says: a refusal seen directly, or a pool timeout whose cause [`run`] asks.
pub fn observe(error: &sqlx::Error) {
    if is_too_many_clients(error) {
        refused(error);
    } else if matches!(error, sqlx::Error::PoolTimedOut) {
        SUSPECTED.notify_one();
    }
}

/// Whether PostgreSQL refused a connection for want of slots lately.
pub fn too_many_clients() -> bool {
    let at = REFUSED_AT.load(Ordering::Relaxed);
    at != 0 && now_ms().saturating_sub(at) < REMEMBERED.as_millis() as u64
}

fn refused(error: &sqlx::Error) {
    let now = now_ms();
    REFUSED_AT.store(now, Ordering::Relaxed);
    let logged = LOGGED_AT.load(Ordering::Relaxed);
    if now.saturating_sub(logged) >= LOG_EVERY.as_millis() as u64
        && LOGGED_AT.compare_exchange(logged, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    {
        tracing::error!(
            %error,
            "PostgreSQL refuses new connections: too many clients, its max_connections is reached. Every replica \
             holds up to DATABASE_POOL_MAX + 2 connections: lower DATABASE_POOL_MAX or the replica count, raise \
             max_connections, or put a pooler in front (docs/deploying.md: PostgreSQL connections)"
        );
    }
}

/// Asks PostgreSQL, with one direct connection at most once a second, why the pool timed out, until `cancel`.
pub async fn run(database: Database, cancel: CancellationToken) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = SUSPECTED.notified() => {}
        }
        match database.connect_one("ark-broker-probe").await {
            Err(error) if is_too_many_clients(&error) => refused(&error),
            Err(_) => {}
            Ok(connection) => {
                REFUSED_AT.store(0, Ordering::Relaxed);
                let _ = sqlx::Connection::close(connection).await;
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(PROBE_EVERY) => {}
        }
    }
}
