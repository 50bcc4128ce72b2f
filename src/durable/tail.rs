//! This replica's tail of the durable streams feed: each notification names the streams a transaction
//! wrote, and their live readers here are woken to read what is new. A notification that names none, or a
//! resync after the LISTEN connection was lost, wakes every durable stream reader. A transaction that made a
//! webhook wake due rings this replica's delivery worker ([`super::subs::delivery`]), which the tail runs
//! and stops with itself.

use std::time::Instant;

use tokio::{sync::mpsc, task::JoinHandle};

use super::subs::{Subscriptions, delivery, wakes::WEBHOOK_DUE_KEY};
use crate::{
    db::{
        feed::Feed,
        tail::TailEvent,
        wakeup::{Wakeup, Wakeups},
    },
    telemetry::metrics,
};

/// Starts the tail (and the webhook worker); it runs until the sender is dropped.
pub fn spawn(wakeups: Wakeups, subscriptions: Subscriptions) -> (mpsc::UnboundedSender<TailEvent>, JoinHandle<()>) {
    let (sender, mut events) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let due = subscriptions.due.clone();
        let worker = tokio::spawn(delivery::run(subscriptions));
        while let Some(event) = events.recv().await {
            let notified = Instant::now();
            match event {
                TailEvent::Committed { keys: Some(keys), .. } => {
                    for range in keys {
                        if let Ok(id) = range.key.parse::<i64>() {
                            wakeups.wake(&Wakeup::Durable(id));
                        } else if range.key == WEBHOOK_DUE_KEY {
                            due.notify_one();
                        }
                    }
                    metrics::delivered(Feed::Durable.name(), notified.elapsed());
                }
                TailEvent::Committed { keys: None, .. } | TailEvent::Resync => {
                    wakeups.wake_where(|topic| matches!(topic, Wakeup::Durable(_)));
                    due.notify_one();
                }
                // A connected LISTEN loses no notification, and a reconnect resyncs: waking every reader each
                // poll tick would cost one read per reader per second for nothing.
                TailEvent::Poll => {}
            }
        }
        worker.abort();
    });
    (sender, task)
}
