//! What the outbox workers share (Query status patches, channel deliveries): how many jobs a claim takes and
//! for how long, when a job is worked off (at once, after any question change on any replica, and at least
//! every second), and how long a job that failed for a passing reason waits before its next attempt.

use std::{future::Future, time::Duration};

use tokio_util::sync::CancellationToken;

use super::wakeup::{Wakeup, Wakeups};

/// How long a claimed job is reserved for the replica that claimed it.
pub const LEASE_SECONDS: i64 = 30;
/// Jobs claimed per round trip.
pub const CLAIM: i64 = 8;
/// Attempts before a job that keeps failing is given up (about half an hour of backoff).
pub const MAX_ATTEMPTS: i32 = 60;
/// How often due retries are looked for when nothing wakes the worker.
const TICK: Duration = Duration::from_secs(1);

/// Milliseconds before the next attempt of a job that failed on its `attempts`th: 0.5 s, 1 s, 2 s, … up to 30 s.
pub fn backoff_ms(attempts: i32) -> i64 {
    (250i64 << attempts.clamp(1, 7)).min(30_000)
}

/// Calls `drain` now, after every question change (the jobs are queued with question changes, on any replica),
/// and every [`TICK`], until `shutdown`.
pub async fn work_off<F: Future<Output = ()>>(
    wakeups: Wakeups,
    shutdown: CancellationToken,
    mut drain: impl FnMut() -> F,
) {
    let mut changes = wakeups.subscribe(Wakeup::Questions);
    let mut tick = tokio::time::interval(TICK);
    loop {
        drain().await;
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = changes.woken() => {}
            _ = tick.tick() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::backoff_ms;

    #[test]
    fn the_backoff_doubles_from_half_a_second_to_thirty() {
        let waits: Vec<i64> = (1..=9).map(backoff_ms).collect();
        assert_eq!(waits, [500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
        assert_eq!(backoff_ms(0), 500);
    }
}
