//! Riding through a short outage of PostgreSQL: while no primary answers (a switchover takes under a second,
//! a failover a few), writes wait and are tried again rather than fail, for up to the ride-through window
//! (`--db-ride-through-ms`, 15 s by default). Past it, they fail as before, with 503.
//!
//! A write is tried again only when it certainly did not commit: it failed before its COMMIT, or its COMMIT
//! went unanswered and [`super::receipt::settle`] found it not committed. What a waiting write holds in
//! memory is bounded where it is kept: a request's own body, and the chunk writer's one batch (its queue
//! then fills and slows the POSTs down, see `streams::writer`).

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use tokio::time::Instant;

use super::StoreError;

/// The window's default: at least 15 s, longer than a switchover and most failovers.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(15);

static WINDOW_MS: AtomicU64 = AtomicU64::new(DEFAULT_WINDOW.as_millis() as u64);

/// The longest a write waits for a primary to answer.
pub fn window() -> Duration {
    Duration::from_millis(WINDOW_MS.load(Ordering::Relaxed))
}

/// Sets the window for this process (from `--db-ride-through-ms`, when the pool is made).
pub fn set_window(window: Duration) {
    WINDOW_MS.store(window.as_millis() as u64, Ordering::Relaxed);
}

/// The first pause after a failure; later pauses double up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(25);
/// The longest pause between attempts, so a primary that is back is used within it.
const MAX_PAUSE: Duration = Duration::from_millis(250);

/// One write's patience with an outage: [`Outage::again`] after each failed attempt.
#[derive(Debug, Default)]
pub struct Outage {
    /// When the first attempt failed for want of a database.
    since: Option<Instant>,
    pause: Duration,
}

impl Outage {
    /// A write that has not failed yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether to try again after `error`, having paused: only for an outage (the database unreachable, or a
    /// write found not committed), and only within the window.
    pub async fn again(&mut self, error: &StoreError) -> bool {
        if !matches!(error, StoreError::Unavailable(_)) || self.expired() {
            return false;
        }
        let since = *self.since.get_or_insert_with(Instant::now);
        self.pause = (self.pause * 2).clamp(FIRST_PAUSE, MAX_PAUSE);
        let pause = self.pause.min((since + window()).saturating_duration_since(Instant::now()));
        tokio::time::sleep(pause).await;
        true
    }

    /// Whether the window has passed since the first failure. A window of zero rides nothing through, not
    /// even one immediate retry: the time a lost answer took to settle would otherwise buy the database that
    /// came back meanwhile a second attempt.
    fn expired(&self) -> bool {
        window().is_zero() || self.since.is_some_and(|since| since.elapsed() >= window())
    }

    /// Whether an attempt has failed for an outage.
    pub fn started(&self) -> bool {
        self.since.is_some()
    }
}

/// Runs `write` (a write that may be repeated: idempotent, or certainly not committed when it fails) until
/// it succeeds, fails for another reason than an outage, or the window has passed.
pub async fn ride<T, F, Fut>(mut write: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let mut outage = Outage::new();
    loop {
        match write().await {
            Ok(done) => return Ok(done),
            Err(error) if outage.again(&error).await => {}
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_outage_is_ridden_through_for_the_window_and_no_longer() {
        let unavailable = || StoreError::Unavailable(sqlx::Error::PoolTimedOut);
        let mut outage = Outage::new();
        assert!(!outage.again(&StoreError::Contended("stream")).await, "only outages are waited out");
        let started = Instant::now();
        let mut attempts = 0;
        while outage.again(&unavailable()).await {
            attempts += 1;
        }
        let waited = started.elapsed();
        assert!(waited >= window() && waited < window() + MAX_PAUSE, "waited {waited:?}");
        assert!(attempts >= (window().as_millis() / MAX_PAUSE.as_millis()) as usize, "{attempts} attempts");
        assert!(outage.expired());
    }
}
