//! Retrying a feed write in a new transaction: a key's claim lost to a writer whose transaction began later
//! (the per-key rule in [`super::feed`]), or a question change whose Query stream another transaction holds.
//! [`in_feed_tx!`] is the one loop every store's write goes through; it also rides through an outage.

use std::time::Duration;

/// What one attempt of a write came to.
#[derive(Debug)]
pub enum Attempt<T> {
    /// Done: commit (with the transaction's NOTIFY) and answer `T`.
    Commit(T),
    /// Done without a change to keep: roll back and answer `T`.
    Rollback(T),
    /// Lost to another writer: roll back and try again in a new transaction.
    Retry,
}

/// How often, and how patiently, a write is tried.
#[derive(Debug, Clone, Copy)]
pub struct Retries {
    /// Most transactions tried.
    pub attempts: usize,
    /// The pause after the first lost attempt; later pauses grow to twenty times it.
    pub first_pause: Duration,
    /// What the writers contend for, for [`super::StoreError::Contended`] when every attempt lost.
    pub contended: &'static str,
}

impl Retries {
    /// A key's claim: lost only to a writer whose transaction began after ours and wrote the key first, so
    /// it is tried again at once, and twenty losses in a row mean the key is truly contended.
    pub const fn claim(contended: &'static str) -> Self {
        Retries { attempts: 20, first_pause: Duration::ZERO, contended }
    }

    /// The pause after lost attempt `round` (counted from 0).
    pub fn pause(&self, round: usize) -> Duration {
        self.first_pause * (round as u32 + 1).min(20)
    }
}

/// Runs a write to `$feed` in a transaction of its own until an attempt is done: the attempt (an async block
/// using `$tx`, a `&mut FeedTx`) answers an [`Attempt`]; `Retry` rolls back, pauses as `$retries` says and
/// begins again. Every attempt lost gives [`super::StoreError::Contended`]. An attempt that failed for want
/// of a database, or whose COMMIT was settled as not committed, is tried again within the ride-through
/// window ([`super::outage`]). (A macro, not a function taking an async closure: such a closure's future
/// cannot be proven `Send`.)
macro_rules! in_feed_tx {
    ($pool:expr, $feed:expr, $retries:expr, |$tx:ident| $attempt:expr) => {{
        let retries: $crate::db::retry::Retries = $retries;
        let mut outage = $crate::db::outage::Outage::new();
        let mut lost = 0;
        loop {
            let round: $crate::db::StoreResult<Option<_>> = async {
                let mut transaction = $crate::db::feed::FeedTx::begin($pool, $feed).await?;
                let attempt: $crate::db::StoreResult<$crate::db::retry::Attempt<_>> = {
                    let $tx = &mut transaction;
                    $attempt.await
                };
                match attempt? {
                    $crate::db::retry::Attempt::Commit(done) => {
                        transaction.commit().await?;
                        Ok(Some(done))
                    }
                    $crate::db::retry::Attempt::Rollback(done) => {
                        transaction.rollback().await?;
                        Ok(Some(done))
                    }
                    $crate::db::retry::Attempt::Retry => {
                        transaction.rollback().await?;
                        Ok(None)
                    }
                }
            }
            .await;
            match round {
                Ok(Some(done)) => break Ok(done),
                Ok(None) => {
                    lost += 1;
                    if lost >= retries.attempts {
                        break Err($crate::db::StoreError::Contended(retries.contended));
                    }
                    let pause = retries.pause(lost - 1);
                    if !pause.is_zero() {
                        tokio::time::sleep(pause).await;
                    }
                }
                Err(error) => {
                    if !outage.again(&error).await {
                        break Err(error);
                    }
                }
            }
        }
    }};
}
pub(crate) use in_feed_tx;
