//! Work one replica at a time does for all, such as the reaper's passes. A turn is a session advisory lock
//! taken with a try-lock (the other replicas skip rather than wait) on a pooled connection. Ending the turn
//! unlocks and gives the connection back; a turn dropped without ending (the work was cut short, the unlock
//! failed) closes its connection instead, which releases the lock too — never back into the pool locked.

use super::pool::Pool;
use sqlx::{Postgres, pool::PoolConnection};

use super::StoreResult;

/// The reaper's lock key: "ark" in ASCII, then 0x10 (the feeds use 0x01…).
pub const REAPER: i64 = 0x61_72_6b_10;

/// A turn held.
#[derive(Debug)]
pub struct Turn {
    connection: PoolConnection<Postgres>,
    key: i64,
    ended: bool,
}

/// Takes the turn `key` if no replica holds it.
pub async fn try_take(pool: &Pool, key: i64) -> StoreResult<Option<Turn>> {
    let mut connection = pool.sessions().acquire().await?;
    let taken =
        sqlx::query_scalar!(r#"select pg_try_advisory_lock($1) as "taken!""#, key).fetch_one(&mut *connection).await;
    match taken {
        Ok(true) => Ok(Some(Turn { connection, key, ended: false })),
        Ok(false) => Ok(None),
        Err(error) => {
            // Whether the lock was taken is unknown: the connection is not reused.
            connection.close_on_drop();
            Err(error.into())
        }
    }
}

impl Turn {
    /// Ends the turn: once this returns, another replica can take it.
    pub async fn end(mut self) {
        let unlocked = sqlx::query_scalar!(r#"select pg_advisory_unlock($1) as "unlocked!""#, self.key)
            .fetch_one(&mut *self.connection)
            .await;
        self.ended = matches!(unlocked, Ok(true));
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if !self.ended {
            self.connection.close_on_drop();
        }
    }
}
