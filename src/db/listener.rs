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
use std::{collections::HashMap, sync::Arc, time::Duration};

use sqlx::{PgPool, postgres::PgListener};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::{
    feed::{self, CHANNEL, Feed},
    listen_session::{Listening, Session},
    relay::Relay,
    tail::TailEvent,
};

/// The LISTEN connection's name in `pg_stat_activity`: `ark-broker-listener <pid>`, so an operator (or a
/// test) can tell which replica's connection is which.
pub fn application_name() -> String {
    format!("ark-broker-listener {}", std::process::id())
}

/// The longest pause between attempts to connect again; also how long an unreachable Postgres that came
/// back may go unnoticed.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Where each feed's notifications go.
pub type Tails = HashMap<Feed, mpsc::UnboundedSender<TailEvent>>;

/// Where completion requests go (`streams::completion`): a stream id, or `None` for "check every open
/// chunk POST" (a request naming no stream, or a reconnect after which requests may have been missed).
pub type CompletionRequests = mpsc::UnboundedSender<Option<String>>;

/// Whether this replica's LISTEN connection is up (`/readyz` and start-up read it), and whether Postgres is
/// known to be unreachable (requests then fail at once instead of waiting for the pool). The connection also
/// holds the replica's liveness lock ([`ListenerStatus::replica_key`]).
#[derive(Debug, Clone)]
pub struct ListenerStatus(Arc<watch::Sender<bool>>, Arc<watch::Sender<bool>>, i64);

impl Default for ListenerStatus {
    fn default() -> Self {
        let key = i64::from_le_bytes(uuid::Uuid::new_v4().as_bytes()[..8].try_into().expect("8 bytes"));
        ListenerStatus(Arc::new(watch::channel(false).0), Arc::new(watch::channel(false).0), key)
    }
}

impl ListenerStatus {
    /// This process's liveness key: a session advisory lock the LISTEN connection holds while it is up, so
    /// other replicas can tell from `pg_locks` that this one is alive (PostgreSQL releases the lock when the
    /// process dies and its connection closes). Rows a replica leaves for as long as it lives (open chunk
    /// POSTs) carry it.
    pub fn replica_key(&self) -> i64 {
        self.2
    }

    /// Whether the connection is up now.
    pub fn is_up(&self) -> bool {
        *self.0.borrow()
    }

    /// Whether this replica knows Postgres cannot be reached right now: the LISTEN connection was lost and
    /// connecting again failed for want of a connection (not for a Postgres error). Cleared once it is back.
    pub fn database_unreachable(&self) -> bool {
        *self.1.borrow()
    }

    /// Waits up to `window` for Postgres to be reachable again (at once when it is); whether it is.
    pub async fn reachable_within(&self, window: Duration) -> bool {
        let mut receiver = self.1.subscribe();
        tokio::time::timeout(window, receiver.wait_for(|unreachable| !*unreachable)).await.is_ok_and(|r| r.is_ok())
    }

    /// The channel this replica's heartbeat pings go to ([`heartbeat`]).
    pub(super) fn heartbeat_channel(&self) -> String {
        format!("{CHANNEL}_alive_{:016x}", self.2 as u64)
    }

    /// Waits until the connection is up.
    pub async fn wait_up(&self) {
        let mut receiver = self.0.subscribe();
        let _ = receiver.wait_for(|up| *up).await;
    }

    /// Waits until the connection is down (at once when it is).
    pub async fn wait_down(&self) {
        let mut receiver = self.0.subscribe();
        let _ = receiver.wait_for(|up| !*up).await;
    }

    pub(super) fn set(&self, up: bool) {
        self.0.send_replace(up);
    }
}

/// Where the listener connects and what it watches for.
#[derive(Debug, Clone)]
pub struct Connections {
    /// Where each LISTEN connection comes from.
    pub listen_pools: super::ListenPools,
    /// The request pool, which sends the heartbeat's pings.
    pub pool: super::Pool,
    /// How long a heartbeat ping may go unheard before the LISTEN connection counts as lost.
    pub heartbeat_deadline: Duration,
    /// Whether and how this replica relays notifications or follows a relay.
    pub relaying: Relaying,
}

/// The LISTEN relay's settings ([`relay`]).
#[derive(Debug, Clone)]
pub struct Relaying {
    /// This replica's side when it is the relay.
    pub relay: Relay,
    /// Replicas follow a relay once at least this many are live; 0: never (every replica listens itself).
    pub from: u32,
    /// The HTTP port the relay serves on (`None`: this replica cannot serve, so never relays).
    pub port: Option<u16>,
    /// The address the others reach this replica at; unset, the one PostgreSQL sees it connect from.
    pub address: Option<String>,
    /// What a follower connects to the relay with.
    pub client: reqwest::Client,
}

impl Relaying {
    pub(super) fn enabled(&self) -> bool {
        self.from > 0
    }
}

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
                status.1.send_if_modified(|unreachable| {
                    let now = super::is_unreachable(&error);
                    std::mem::replace(unreachable, now) != now
                });
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
        status.1.send_if_modified(|unreachable| std::mem::replace(unreachable, false));
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

pub(super) fn broadcast(tails: &Tails, event: TailEvent) {
    for tail in tails.values() {
        let _ = tail.send(event.clone());
    }
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

/// Hands a notification to the feed's tail or to the completion requests.
pub(super) fn dispatch(payload: &str, tails: &Tails, completions: &CompletionRequests) {
    match feed::parse_notice(payload) {
        Some(notice) => {
            if let Some(tail) = tails.get(&notice.feed) {
                let _ = tail.send(TailEvent::Committed { tx: notice.tx, keys: notice.keys });
            }
        }
        None => match feed::parse_completion(payload) {
            Some(stream) => {
                let _ = completions.send(stream);
            }
            None => tracing::debug!(payload, "ignoring unknown notification"),
        },
    }
}
