//! The reaper: deletes rows whose TTL has passed, so tables do not grow forever. Reads already hide them;
//! this only reclaims the space. Every replica runs it; `skip locked` keeps them out of each other's way.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::messages::MessageStore;

/// Rows deleted per statement, so one pass never holds many locks or a long transaction.
const BATCH: i64 = 1000;

/// Reaps every `interval` until `cancel` fires.
pub async fn run(messages: MessageStore, interval: Duration, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => reap_expired(&messages).await,
        }
    }
}

/// One pass: deletes expired messages batch by batch until none are left.
pub async fn reap_expired(messages: &MessageStore) {
    let mut total = 0;
    loop {
        match messages.delete_expired(BATCH).await {
            Ok(deleted) => {
                total += deleted;
                if deleted < BATCH as u64 {
                    break;
                }
            }
            Err(error) => {
                tracing::warn!(%error, "reaping expired messages failed");
                break;
            }
        }
    }
    if total > 0 {
        tracing::info!(rows = total, "reaped expired messages");
    }
}
