//! Commit receipts: how a write whose COMMIT went unanswered is settled, the same way on every write path.
//!
//! Every write transaction inserts a row with a token of its own into `commit_receipts` ([`FeedTx`] does it
//! in the statement that sends its notification, the chunk flush in its one statement). When the COMMIT's
//! answer is lost (the connection or the server died), [`settle`] asks whichever server answers now — the
//! same one, the same one after a crash, or a promoted standby — by inserting that token itself, marked
//! `fenced`:
//!
//! - the insert conflicts with a committed receipt: the write committed, and this server holds it;
//! - it waits while the transaction still runs there (a COMMIT not yet processed, or waiting for a
//!   synchronous standby), then sees which way it ended;
//! - it goes in: the write is not on this server, and now never can be, since its own receipt would conflict.
//!
//! `pg_xact_status` cannot do this: a promoted standby hands out again the transaction ids the old primary
//! had given to transactions in flight (and a crashed server those whose WAL it never flushed), so the same id
//! can read "committed" for somebody else's transaction.
//!
//! [`FeedTx`]: super::feed::FeedTx

use super::pool::Pool;
use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use super::{StoreError, StoreResult, outage};

/// A write transaction's receipt token. UUIDv7: in time order, so the reaper deletes old receipts from the
/// low end of the primary key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt(Uuid);

impl Receipt {
    /// A new token.
    pub fn new() -> Self {
        Receipt(Uuid::now_v7())
    }

    /// The receipt of `token` (a write that began elsewhere: a test, a caller that kept only the token).
    pub fn from_token(token: Uuid) -> Self {
        Receipt(token)
    }

    /// The token, for the statement that inserts the receipt.
    pub fn token(&self) -> Uuid {
        self.0
    }
}

impl Default for Receipt {
    fn default() -> Self {
        Self::new()
    }
}

/// How a write whose COMMIT went unanswered ended, as the server answering now holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// It committed, and the server answering now holds it.
    Committed,
    /// It is not on the server answering now and can no longer commit there: write it again.
    NotCommitted,
}

/// Pause between attempts while no server answers, or the transaction still runs past `lock_timeout`.
const RETRY: Duration = Duration::from_millis(100);

/// Settles the write whose receipt is `receipt`: asks until a server answers or the ride-through window
/// ([`outage::window`], at least 15 s by default) has passed, then gives up with [`StoreError::Unsettled`].
pub async fn settle(pool: &Pool, receipt: Receipt) -> StoreResult<Settled> {
    let deadline = Instant::now() + outage::window().max(Duration::from_secs(1));
    loop {
        match ask(pool, receipt).await {
            Ok(Some(settled)) => return Ok(settled),
            Ok(None) => {}
            Err(error) => tracing::debug!(error = %error, "asking for a commit receipt failed; asking again"),
        }
        if Instant::now() + RETRY > deadline {
            tracing::warn!(token = %receipt.token(), "could not learn whether a write whose COMMIT went unanswered committed");
            return Err(StoreError::Unsettled);
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Settles a write whose answer was lost with `lost`: `Ok` when it committed, [`StoreError::Unavailable`]
/// (`lost`, which a writer may try again) when it did not, [`StoreError::Unsettled`] when no server could say.
pub async fn settle_lost(pool: &Pool, receipt: Receipt, lost: sqlx::Error) -> StoreResult<()> {
    match settle(pool, receipt).await? {
        Settled::Committed => Ok(()),
        Settled::NotCommitted => Err(StoreError::Unavailable(lost)),
    }
}

/// One attempt: `None` when the answer was not conclusive yet.
async fn ask(pool: &Pool, receipt: Receipt) -> Result<Option<Settled>, sqlx::Error> {
    let token = receipt.token();
    let fenced = sqlx::query_scalar!(
        "insert into commit_receipts (token, fenced) values ($1, true) on conflict (token) do nothing returning token",
        token,
    )
    .fetch_optional(pool)
    .await?;
    if fenced.is_some() {
        return Ok(Some(Settled::NotCommitted));
    }
    // The receipt is there: the write's own, or the fence of an earlier attempt whose answer was lost. A new
    // statement sees a receipt that committed while the insert above waited for it.
    let found =
        sqlx::query_scalar!("select fenced from commit_receipts where token = $1", token).fetch_optional(pool).await?;
    Ok(found.map(|fenced| if fenced { Settled::NotCommitted } else { Settled::Committed }))
}

/// How long receipts are kept: longer than any settlement asks (the ride-through window is at most 10 min).
pub const KEEP: Duration = Duration::from_secs(15 * 60);

/// Deletes at most `limit` receipts older than `keep` (no settlement asks after that long); returns how many.
pub async fn reap(pool: &Pool, keep: Duration, limit: i64) -> StoreResult<usize> {
    let cutoff_ms = (chrono::Utc::now() - keep).timestamp_millis().max(0) as u64;
    let below = uuid::Builder::from_unix_timestamp_millis(cutoff_ms, &[0; 10]).into_uuid();
    let deleted = sqlx::query!(
        "delete from commit_receipts where token in (
           select token from commit_receipts where token < $1 order by token limit $2 for update skip locked)",
        below,
        limit,
    )
    .execute(pool)
    .await?
    .rows_affected();
    Ok(deleted as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipts_are_in_time_order() {
        let (a, b) = (Receipt::new(), Receipt::new());
        assert!(a.token() < b.token(), "a later receipt sorts after an earlier one");
        let now_ms = chrono::Utc::now().timestamp_millis() as u64;
        let bound = uuid::Builder::from_unix_timestamp_millis(now_ms - 60_000, &[0; 10]).into_uuid();
        assert!(bound < a.token(), "a receipt of now is above the bound of a minute ago");
    }
}
