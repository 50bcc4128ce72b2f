//! The Postgres half of fan-out: exactly one session connection per replica, which holds the replica's
//! liveness lock and LISTENs (or, with many replicas, follows the one that does: [`super::relay`],
//! [`super::listen_session`]). Each notification names a feed and the transaction that committed to it; the
//! listener passes it to that feed's tail, which reads the rows once for every reader on this replica.
//!
//! Notifications are hints and can be lost (they are not replayed after a reconnect), so after every
//! (re)connect, and whenever the replica starts hearing commits another way, the tails are told to resync, and
//! a poll tick reaches them every interval. A connection the network lost is noticed by keepalive
//! ([`super::keepalive`]), one that stopped answering otherwise by the heartbeat ([`super::heartbeat`]).

use crate::telemetry::chain;
use std::time::Duration;

use sqlx::{PgPool, postgres::PgListener};
use tokio_util::sync::CancellationToken;

pub use super::hearing::{CompletionRequests, Connections, ListenerStatus, Relaying, Tails};
use super::listen_session::{Listening, Session};

/// The LISTEN connection's name in `pg_stat_activity`: `ark-broker-listener <pid>`, so an operator (or a
/// test) can tell which replica's connection is which.
pub fn application_name() -> String {
    format!("ark-broker-listener {}", std::process::id())
}

/// The longest pause between attempts to connect again; also how long an unreachable Postgres that came
/// back may go unnoticed.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Runs the listener until `cancel` fires.
pub async fn run(
    connections: Connections,
    tails: Tails,
    completions: CompletionRequests,
    status: ListenerStatus,
    poll_interval: Duration,
    cancel: CancellationToken,
) {
    let mut backoff = Duration::from_millis(50);
    let relay = &connections.relaying.relay;
    while !cancel.is_cancelled() {
        let listen_pool = connections.listen_pools.fresh();
        let listener = match connect(&listen_pool, status.replica_key()).await {
            Ok(listener) => listener,
            Err(error) => {
                status.set_unreachable(super::is_unreachable(&error));
                tracing::warn!(error = %chain(&error), retry_ms = backoff.as_millis() as u64, "LISTEN connection failed");
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = Duration::from_millis(50);
        status.set_unreachable(false);
        let session = Session { connections: &connections, tails: &tails, completions: &completions, status: &status };
        let ended = session.run(Listening::new(listener), poll_interval, &cancel).await;
        relay.close();
        status.set(false);
        crate::telemetry::metrics::listen_mode(None);
        if let Some(reason) = ended {
            tracing::warn!(reason, "LISTEN connection lost; reconnecting");
            crate::telemetry::metrics::listener_reconnected();
        }
    }
    status.set(false);
}

async fn connect(listen_pool: &PgPool, replica_key: i64) -> Result<PgListener, sqlx::Error> {
    let mut connection = PgListener::connect_with(listen_pool).await?;
    // We reconnect ourselves, so that a lost connection is always seen and followed by a resync.
    connection.eager_reconnect(false);
    take_liveness_lock(&mut connection, replica_key).await?;
    Ok(connection)
}

/// How long a new LISTEN connection waits for this replica's liveness lock.
const LIVENESS_LOCK_WAIT: Duration = Duration::from_secs(5);

/// Takes the replica's liveness lock on the new connection. The session that held it before may still be
/// there when this replica lost its connection but the server has not noticed (a partition, a connection a
/// proxy forgot): that session is this replica's own and useless, so it is ended rather than waited out.
async fn take_liveness_lock(listener: &mut PgListener, replica_key: i64) -> Result<(), sqlx::Error> {
    let taken = sqlx::query_scalar!(r#"select pg_try_advisory_lock($1) as "taken!""#, replica_key)
        .fetch_one(&mut *listener)
        .await?;
    if taken {
        return Ok(());
    }
    let ended = sqlx::query_scalar!(
        r#"select count(*) filter (where pg_terminate_backend(pid)) as "ended!"
           from live_replicas where replica_key = $1 and pid <> pg_backend_pid()"#,
        replica_key
    )
    .fetch_one(&mut *listener)
    .await?;
    tracing::warn!(ended, "this replica's previous LISTEN session was still open: ended it");
    let wait = format!("{}ms", LIVENESS_LOCK_WAIT.as_millis());
    sqlx::query!("select set_config('lock_timeout', $1, false)", wait).fetch_one(&mut *listener).await?;
    sqlx::query!("select pg_advisory_lock($1)", replica_key).execute(&mut *listener).await?;
    sqlx::query!("select set_config('lock_timeout', '0', false)").fetch_one(&mut *listener).await?;
    Ok(())
}
