//! Where a replica's notifications go and what it says about hearing them: the feeds' tails and the
//! completion requests ([`dispatch`], [`broadcast`]), the listener's status ([`ListenerStatus`]), and the
//! settings its connection and the relay run with. Shared by the listener ([`super::listener`]) and the
//! ways it hears commits ([`super::listen_session`], [`super::following`]).

use std::{collections::HashMap, sync::Arc, time::Duration};

use tokio::sync::{mpsc, watch};

use super::{
    feed::{self, CHANNEL, Feed},
    relay::Relay,
    tail::TailEvent,
};

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

    /// Records whether Postgres is known to be unreachable now.
    pub(super) fn set_unreachable(&self, now: bool) {
        self.1.send_if_modified(|unreachable| std::mem::replace(unreachable, now) != now);
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

/// A ticker every `period` that, after a late tick, keeps the period from then on instead of catching up in a
/// burst (the poll and the connection checks of the listening and the following pumps).
pub(super) fn every(period: Duration) -> tokio::time::Interval {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks
}

pub(super) fn broadcast(tails: &Tails, event: TailEvent) {
    for tail in tails.values() {
        let _ = tail.send(event.clone());
    }
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
