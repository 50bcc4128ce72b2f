//! The Postgres half of fan-out: exactly one LISTEN connection per replica. Each notification names a feed
//! and the sequence it reached; the listener works out which topics that touches and wakes them in the hub.
//!
//! Notifications are hints and can be lost (they are not replayed after a reconnect), so the listener also
//! resyncs every reader after it reconnects, and polls the feeds' high-water marks while anyone waits.

use std::{sync::Arc, time::Duration};

use futures::{StreamExt, stream};
use sqlx::{PgPool, postgres::PgListener};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{
    StoreResult,
    feeds::{self, CHANNEL, Feed},
    hub::{Hub, Topic},
};

/// The LISTEN connection's name in `pg_stat_activity`: `ark-broker-listener <pid>`, so an operator (or a
/// test) can tell which replica's connection is which.
pub fn application_name() -> String {
    format!("ark-broker-listener {}", std::process::id())
}

const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Whether this replica's LISTEN connection is up; `/readyz` and start-up read it.
#[derive(Debug, Clone)]
pub struct ListenerStatus(Arc<watch::Sender<bool>>);

impl Default for ListenerStatus {
    fn default() -> Self {
        ListenerStatus(Arc::new(watch::channel(false).0))
    }
}

impl ListenerStatus {
    /// Whether the connection is up now.
    pub fn is_up(&self) -> bool {
        *self.0.borrow()
    }

    /// Waits until the connection is up.
    pub async fn wait_up(&self) {
        let mut receiver = self.0.subscribe();
        let _ = receiver.wait_for(|up| *up).await;
    }

    fn set(&self, up: bool) {
        self.0.send_replace(up);
    }
}

/// Runs the listener until `cancel` fires. `listen_pool` should be a one-connection pool used for nothing
/// else; `pool` serves the catch-up queries.
pub async fn run(
    listen_pool: PgPool,
    pool: PgPool,
    hub: Hub,
    status: ListenerStatus,
    poll_interval: Duration,
    cancel: CancellationToken,
) {
    let mut fanout = Fanout { pool, hub, cursors: None };
    let mut backoff = Duration::from_millis(50);
    while !cancel.is_cancelled() {
        let listener = match connect(&listen_pool).await {
            Ok(listener) => listener,
            Err(error) => {
                tracing::warn!(%error, retry_ms = backoff.as_millis() as u64, "LISTEN connection failed");
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = Duration::from_millis(50);
        status.set(true);
        tracing::info!(channel = CHANNEL, "listening for notifications");
        // Notifications sent while we were away are gone: every reader re-reads what it may have missed.
        if let Err(error) = fanout.resync().await {
            tracing::warn!(%error, "resync after connecting failed; the poll will catch up");
        }
        let ended = pump(listener, &mut fanout, poll_interval, &cancel).await;
        status.set(false);
        if let Some(reason) = ended {
            tracing::warn!(reason, "LISTEN connection lost; reconnecting");
        }
    }
    status.set(false);
}

async fn connect(listen_pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(listen_pool).await?;
    // We reconnect ourselves, so that a lost connection is always seen and followed by a resync.
    listener.eager_reconnect(false);
    listener.listen(CHANNEL).await?;
    Ok(listener)
}

/// Delivers notifications and polls until the connection is lost (returns why) or `cancel` fires (None).
async fn pump(
    listener: PgListener,
    fanout: &mut Fanout,
    poll_interval: Duration,
    cancel: &CancellationToken,
) -> Option<String> {
    // The stream owns the in-flight `try_recv`, so a poll tick winning the select never drops a
    // half-read message.
    let notifications = stream::unfold(listener, |mut listener| async move {
        let next = listener.try_recv().await;
        Some((next, listener))
    });
    let mut notifications = std::pin::pin!(notifications);
    let mut poll = tokio::time::interval(poll_interval);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return None,
            next = notifications.next() => match next {
                Some(Ok(Some(notification))) => match Feed::parse(notification.payload()) {
                    Some((feed, sequence)) => {
                        if let Err(error) = fanout.advance(feed, sequence).await {
                            tracing::warn!(%error, "fan-out query failed; the poll will catch up");
                        }
                    }
                    None => tracing::debug!(payload = notification.payload(), "ignoring unknown notification"),
                },
                Some(Ok(None)) | None => return Some("connection closed".to_owned()),
                Some(Err(error)) => return Some(error.to_string()),
            },
            _ = poll.tick() => {
                if !fanout.hub.is_empty()
                    && let Err(error) = fanout.poll().await
                {
                    tracing::warn!(%error, "fallback poll failed");
                }
            }
        }
    }
}

/// Makes the per-key topic (a stream's, a question's) of a feed from the key.
type KeyedTopic = fn(String) -> Topic;

/// Turns "feed F reached sequence N" into wake-ups of the topics it touches.
struct Fanout {
    pool: PgPool,
    hub: Hub,
    /// The highest sequence already fanned out per feed; `None` until read from the tables, and again
    /// after a reconnect.
    cursors: Option<[(Feed, i64); 3]>,
}

impl Fanout {
    /// Loads the cursors if they are unknown; then every reader is woken, because anything up to the
    /// loaded marks may not have been fanned out. Returns false when it did that, so the caller stops.
    async fn ensure_cursors(&mut self) -> StoreResult<bool> {
        if self.cursors.is_some() {
            return Ok(true);
        }
        self.cursors = Some(feeds::high_water(&self.pool).await?);
        self.hub.wake_all();
        Ok(false)
    }

    fn cursor_mut(&mut self, feed: Feed) -> &mut i64 {
        let cursors = self.cursors.as_mut().expect("ensure_cursors ran first");
        &mut cursors.iter_mut().find(|(f, _)| *f == feed).expect("every feed has a cursor").1
    }

    async fn advance(&mut self, feed: Feed, sequence: i64) -> StoreResult<()> {
        if !self.ensure_cursors().await? {
            return Ok(());
        }
        let cursor = *self.cursor_mut(feed);
        if sequence <= cursor {
            return Ok(());
        }
        // Each feed has one topic for all of it, and chunks and questions also one per key.
        let (whole, per_key): (Topic, Option<KeyedTopic>) = match feed {
            Feed::Messages => (Topic::Messages, None),
            Feed::Chunks => (Topic::AllChunks, Some(Topic::Stream)),
            Feed::Questions => (Topic::Questions, Some(Topic::Question)),
        };
        let mut reached = sequence;
        if let Some(per_key) = per_key
            && self.hub.has_any_like(&per_key(String::new()))
        {
            let (keys, last) = feeds::keys_changed_since(&self.pool, feed, cursor).await?;
            for key in keys {
                self.hub.wake(&per_key(key));
            }
            reached = reached.max(last);
        }
        self.hub.wake(&whole);
        *self.cursor_mut(feed) = reached;
        Ok(())
    }

    async fn poll(&mut self) -> StoreResult<()> {
        if !self.ensure_cursors().await? {
            return Ok(());
        }
        for (feed, sequence) in feeds::high_water(&self.pool).await? {
            self.advance(feed, sequence).await?;
        }
        Ok(())
    }

    /// After a (re)connect: forget the cursors, so the next step reloads them and wakes every reader.
    async fn resync(&mut self) -> StoreResult<()> {
        self.cursors = None;
        self.ensure_cursors().await.map(|_| ())
    }
}
