//! Wake-ups for readers that re-read Postgres when woken (question readers, durable streams' live readers): a map from what a reader waits on to a wake-up channel, shared by every
//! reader on this replica (watchers, MCP calls waiting for an answer, the outbox workers). Entries are
//! created by the first subscriber and removed when the last one leaves. (Feeds whose rows readers take from
//! memory use [`super::fanout`] instead; questions change rarely, and each reader reads its own changes.)
//!
//! A wake-up carries no data. It only says "rows may have been added after what you delivered"; the
//! reader then reads `sequence > last_delivered` from Postgres. That is why a `watch` channel (latest value
//! wins) serves better than `broadcast`: a slow reader can never lag and lose a wake-up, it only coalesces
//! several into one read.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use tokio::sync::watch;

/// What a reader waits on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Wakeup {
    /// Any change to any question (watchers, the outbox workers).
    Questions,
    /// Changes to one question (MCP calls waiting for its answer).
    Question(String),
    /// Writes to one durable stream, by its id (long-poll and SSE readers).
    Durable(i64),
}

/// A cheap, cloneable handle to this replica's topic map.
#[derive(Debug, Clone, Default)]
pub struct Wakeups {
    topics: Arc<Mutex<HashMap<Wakeup, watch::Sender<u64>>>>,
}

impl Wakeups {
    /// Starts waiting on `topic`. Subscribe *before* reading rows, so nothing committed in between is missed.
    pub fn subscribe(&self, topic: Wakeup) -> Subscription {
        let mut topics = self.lock();
        let sender = topics.entry(topic.clone()).or_insert_with(|| watch::channel(0).0);
        let mut receiver = sender.subscribe();
        receiver.mark_unchanged();
        Subscription { wakeups: self.clone(), topic, receiver }
    }

    /// Wakes the readers of `topic`, if any.
    pub fn wake(&self, topic: &Wakeup) {
        if let Some(sender) = self.lock().get(topic) {
            sender.send_modify(|generation| *generation = generation.wrapping_add(1));
        }
    }

    /// Wakes every reader on this replica: after the LISTEN connection was lost, any of them may have missed
    /// a notification.
    pub fn wake_all(&self) {
        for sender in self.lock().values() {
            sender.send_modify(|generation| *generation = generation.wrapping_add(1));
        }
    }

    /// Wakes the readers of every topic `which` picks.
    pub fn wake_where(&self, which: impl Fn(&Wakeup) -> bool) {
        for (topic, sender) in self.lock().iter() {
            if which(topic) {
                sender.send_modify(|generation| *generation = generation.wrapping_add(1));
            }
        }
    }

    /// Whether anyone waits on `topic`.
    pub fn has(&self, topic: &Wakeup) -> bool {
        self.lock().contains_key(topic)
    }

    /// Whether anyone waits at all (the fallback poll only runs then).
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// How many topics have readers; for tests and metrics.
    pub fn topic_count(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Wakeup, watch::Sender<u64>>> {
        // The map stays consistent even if a holder panicked: every critical section is a single map call.
        self.topics.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One reader's interest in a topic; dropping it unsubscribes.
#[derive(Debug)]
pub struct Subscription {
    wakeups: Wakeups,
    topic: Wakeup,
    receiver: watch::Receiver<u64>,
}

impl Subscription {
    /// Waits until the topic is woken after the last call (or after subscribing).
    pub async fn woken(&mut self) {
        if self.receiver.changed().await.is_err() {
            // The sender lives in the map for as long as this subscription does; never reached, but
            // never spin either.
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut topics = self.wakeups.lock();
        // Under the map lock no one can subscribe meanwhile; `1` is this subscription's own receiver.
        if topics.get(&self.topic).is_some_and(|sender| sender.receiver_count() <= 1) {
            topics.remove(&self.topic);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wake_reaches_subscribers_of_that_topic_only() {
        let wakeups = Wakeups::default();
        let mut a = wakeups.subscribe(Wakeup::Question("a".into()));
        let mut b = wakeups.subscribe(Wakeup::Question("b".into()));
        wakeups.wake(&Wakeup::Question("a".into()));
        a.woken().await;
        let not_woken = tokio::time::timeout(std::time::Duration::from_millis(20), b.woken()).await;
        assert!(not_woken.is_err(), "b must not be woken by a wake on a");
    }

    #[tokio::test]
    async fn a_wake_before_waiting_is_not_lost() {
        let wakeups = Wakeups::default();
        let mut sub = wakeups.subscribe(Wakeup::Questions);
        wakeups.wake(&Wakeup::Questions);
        sub.woken().await;
    }

    #[test]
    fn entries_disappear_with_their_last_subscriber() {
        let wakeups = Wakeups::default();
        let first = wakeups.subscribe(Wakeup::Question("s".into()));
        let second = wakeups.subscribe(Wakeup::Question("s".into()));
        assert_eq!(wakeups.topic_count(), 1);
        drop(first);
        assert!(wakeups.has(&Wakeup::Question("s".into())), "one subscriber is left");
        drop(second);
        assert!(wakeups.is_empty(), "the entry must be removed with its last subscriber");
    }
}
