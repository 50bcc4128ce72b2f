//! One LISTEN connection's life ([`Session`]): the replica listens itself (and relays what it hears when it
//! holds the relay lock), or follows the relay ([`super::relay`]) while there is one to follow, switching
//! in place as that changes, so the connection (and the liveness lock on it) stays. Whenever it starts to
//! hear commits a new way, every reader re-reads what it may have missed.

use std::{future::Future, pin::Pin, time::Duration};

use sqlx::postgres::PgListener;
use tokio_util::sync::CancellationToken;

use super::{
    feed::CHANNEL,
    following,
    hearing::{self, CompletionRequests, Connections, ListenerStatus, Relaying, Tails},
    heartbeat::{self, Heartbeat},
    relay::{self, Advertised, Following, Relay},
    tail::TailEvent,
};
use crate::telemetry::metrics;

/// How often a replica that listens itself looks whether it should follow a relay (or be one) instead.
const RECHECK: Duration = Duration::from_secs(2);

/// A LISTEN connection with the replica's liveness lock, and whether it holds the relay lock too.
pub struct Listening {
    connection: PgListener,
    is_relay: bool,
}

impl Listening {
    /// A connection that holds the liveness lock.
    pub fn new(connection: PgListener) -> Self {
        Listening { connection, is_relay: false }
    }

    /// Becomes the relay when nobody is: takes the relay lock and says where it serves. A draining replica
    /// does not.
    async fn try_relay(&mut self, relaying: &Relaying, replica_key: i64) -> Result<(), sqlx::Error> {
        let can = relaying.enabled() && !self.is_relay && !relaying.relay.is_retired();
        let Some(port) = relaying.port.filter(|_| can) else {
            return Ok(());
        };
        if relay::try_lock(&mut self.connection).await? {
            let Some(token) = relaying.relay.open() else {
                // The replica started draining meanwhile.
                return relay::unlock(&mut self.connection).await;
            };
            let address = relaying.address.as_deref();
            let advertised = relay::advertise(&mut self.connection, replica_key, port, &token, address).await?;
            tracing::info!(address = %advertised.address, "this replica is the LISTEN relay");
            self.is_relay = true;
        }
        Ok(())
    }
}

/// What the session does next.
enum Next {
    /// Listen itself (it may also be, or become, the relay).
    Listen,
    /// Try to take the relay lock (nobody holds a live relay), then listen.
    TryRelay,
    /// Give the relay lock up (this replica is draining), then listen.
    StepDown,
    /// Follow this relay, whose stream is open.
    Follow(Box<(Advertised, Following)>),
}

/// The listener's parts one connection's life uses.
pub struct Session<'a> {
    pub connections: &'a Connections,
    pub tails: &'a Tails,
    pub completions: &'a CompletionRequests,
    pub status: &'a ListenerStatus,
}

impl Session<'_> {
    /// Until the connection is lost (returns why) or `cancel` fires.
    pub async fn run(
        &self,
        mut listener: Listening,
        poll_interval: Duration,
        cancel: &CancellationToken,
    ) -> Option<String> {
        let relaying = &self.connections.relaying;
        let deadline = self.connections.heartbeat_deadline;
        // Some while this replica listens itself; kept across rechecks, so a ping stays owed until heard.
        let mut heartbeat: Option<Heartbeat> = None;
        let mut next = Next::TryRelay;
        // The first look for a relay is at once; after a relay was lost, the replica listens a while first.
        let mut look_after = Duration::ZERO;
        loop {
            match next {
                Next::TryRelay => {
                    // Listening first: once advertised, followers may subscribe and stop listening themselves
                    // at once, and what commits meanwhile must reach the relay.
                    if heartbeat.is_none() {
                        match self.listen(&mut listener.connection).await {
                            Ok(started) => heartbeat = Some(started),
                            Err(error) => return Some(error.to_string()),
                        }
                    }
                    if let Err(error) = listener.try_relay(relaying, self.status.replica_key()).await {
                        return Some(error.to_string());
                    }
                    next = Next::Listen;
                }
                Next::StepDown => {
                    relaying.relay.retire();
                    if let Err(error) = relay::unlock(&mut listener.connection).await {
                        return Some(error.to_string());
                    }
                    tracing::info!("draining: no longer the LISTEN relay");
                    listener.is_relay = false;
                    next = Next::Listen;
                }
                Next::Follow(found) => {
                    let (target, stream) = *found;
                    if heartbeat.take().is_some()
                        && let Err(error) = listener.connection.unlisten_all().await
                    {
                        return Some(error.to_string());
                    }
                    tracing::info!(relay = %target.address, "following the LISTEN relay");
                    self.up("following");
                    let pump = following::Pump { tails: self.tails, completions: self.completions, poll_interval };
                    match pump.run(&mut listener.connection, stream, deadline, cancel).await {
                        following::Ended::Cancelled => return None,
                        following::Ended::Session(reason) => return Some(reason),
                        following::Ended::Relay(reason) => {
                            tracing::warn!(reason, "the LISTEN relay was lost; listening here");
                        }
                    }
                    look_after = RECHECK;
                    next = Next::Listen;
                }
                Next::Listen => {
                    let heartbeat = match &mut heartbeat {
                        Some(heartbeat) => heartbeat,
                        None => match self.listen(&mut listener.connection).await {
                            Ok(started) => heartbeat.insert(started),
                            Err(error) => return Some(error.to_string()),
                        },
                    };
                    metrics::listen_mode(Some(if listener.is_relay { "relay" } else { "listening" }));
                    // Looking for a relay runs beside the pump, so a relay that does not answer delays nothing;
                    // the relay instead watches for its replica starting to drain.
                    let look: Option<Pin<Box<dyn Future<Output = Next> + Send>>> = if listener.is_relay {
                        let relay = relaying.relay.clone();
                        Some(Box::pin(async move {
                            relay.retired().await;
                            Next::StepDown
                        }))
                    } else if relaying.enabled() {
                        Some(Box::pin(self.look_for_relay(look_after)))
                    } else {
                        None
                    };
                    look_after = RECHECK;
                    let forward = listener.is_relay.then_some(&relaying.relay);
                    let pump = Pump { tails: self.tails, completions: self.completions, forward, poll_interval };
                    match pump.run(&mut listener.connection, heartbeat, look, cancel).await {
                        Pumped::Lost(reason) => return reason,
                        Pumped::Next(found) => next = found,
                    }
                }
            }
        }
    }

    /// After `after`, and every [`RECHECK`] until it finds one: a relay to follow, whose stream opened, or
    /// word that no live relay is advertised (this replica may become it).
    fn look_for_relay(&self, after: Duration) -> impl Future<Output = Next> + Send + 'static {
        let (pool, relaying) = (self.connections.pool.clone(), self.connections.relaying.clone());
        let deadline = self.connections.heartbeat_deadline;
        async move {
            tokio::time::sleep(after).await;
            loop {
                match relay::to_follow(&pool, relaying.from).await {
                    Ok(Some(target)) => match following::start(&relaying.client, &target, deadline).await {
                        Ok(stream) => return Next::Follow(Box::new((target, stream))),
                        Err(error) => tracing::info!(error = %error, "could not follow the LISTEN relay"),
                    },
                    Ok(None)
                        if relaying.port.is_some()
                            && !relaying.relay.is_retired()
                            && relay::none_live(&pool).await.unwrap_or(false) =>
                    {
                        return Next::TryRelay;
                    }
                    Ok(None) | Err(_) => {}
                }
                tokio::time::sleep(RECHECK).await;
            }
        }
    }

    /// LISTENs on the connection, with a new heartbeat.
    async fn listen(&self, connection: &mut PgListener) -> Result<Heartbeat, sqlx::Error> {
        let channel = self.status.heartbeat_channel();
        let heartbeat = Heartbeat::new(self.connections.pool.clone(), channel, self.connections.heartbeat_deadline);
        connection.listen_all([CHANNEL, heartbeat.channel()]).await?;
        tracing::info!(channel = CHANNEL, "listening for notifications");
        self.up("listening");
        Ok(heartbeat)
    }

    /// The session hears commits a new way: every reader re-reads what it may have missed meanwhile.
    fn up(&self, mode: &str) {
        self.status.set(true);
        metrics::listen_mode(Some(mode));
        hearing::broadcast(self.tails, TailEvent::Resync);
        let _ = self.completions.send(None);
    }
}

/// How a pump of notifications ended.
enum Pumped {
    /// The connection was lost (why), or `cancel` fired (`None`).
    Lost(Option<String>),
    /// The look for a relay found what to do next.
    Next(Next),
}

/// Where the listening connection's notifications go.
struct Pump<'a> {
    tails: &'a Tails,
    completions: &'a CompletionRequests,
    /// The relay's followers, when this replica is the relay.
    forward: Option<&'a Relay>,
    poll_interval: Duration,
}

impl Pump<'_> {
    /// Passes notifications on and ticks the poll until the connection is lost, `cancel` fires, or `look`
    /// says what to do next.
    async fn run(
        &self,
        listener: &mut PgListener,
        heartbeat: &mut Heartbeat,
        look: Option<Pin<Box<dyn Future<Output = Next> + Send>>>,
        cancel: &CancellationToken,
    ) -> Pumped {
        let mut poll = hearing::every(self.poll_interval);
        let mut pings = hearing::every(heartbeat::EVERY);
        let mut look = look.unwrap_or_else(|| Box::pin(std::future::pending()));
        loop {
            // One receive spans the poll ticks and pings that win the select meanwhile. Dropping it between
            // messages loses nothing (sqlx reads a message whole or leaves it buffered), so a look may end it.
            let next = {
                let receive = listener.try_recv();
                let mut receive = std::pin::pin!(receive);
                loop {
                    tokio::select! {
                        _ = cancel.cancelled() => return Pumped::Lost(None),
                        next = &mut receive => break next,
                        _ = poll.tick() => hearing::broadcast(self.tails, TailEvent::Poll),
                        _ = pings.tick() => {
                            if let Err(unheard) = heartbeat.tick() {
                                let reason = format!("heartbeat not heard back for {} ms", unheard.as_millis());
                                return Pumped::Lost(Some(reason));
                            }
                        }
                        sent = heartbeat.sent() => heartbeat.record_sent(sent),
                        found = &mut look => return Pumped::Next(found),
                    }
                }
            };
            match next {
                Ok(Some(notification)) if notification.channel() == heartbeat.channel() => {
                    heartbeat.heard(notification.payload());
                }
                Ok(Some(notification)) => {
                    heartbeat.other_traffic();
                    if let Some(relay) = self.forward {
                        relay.forward(notification.payload());
                    }
                    hearing::dispatch(notification.payload(), self.tails, self.completions)
                }
                Ok(None) => return Pumped::Lost(Some("connection closed".to_owned())),
                Err(error) => return Pumped::Lost(Some(error.to_string())),
            }
        }
    }
}
