//! Primary epochs: what a connection does first, so that a promoted standby never hands out again a sequence
//! number a reader may have seen from the old primary.
//!
//! With asynchronous replication a failover may lose the old primary's last commits (PostgreSQL's own rule),
//! and their sequence numbers with them; the new primary would number the next rows the same. Readers resume
//! by those numbers (`cursor`, a question's `resourceVersion`), so one that saw a lost row would take a new,
//! different row for one it had. `ark_broker_enter_epoch()` (migration 0028) records each timeline the first
//! time a broker connects to it and, from the second one on, moves every sequence a billion past where it
//! stood; every other connection waits for that transaction. A crash restart keeps its timeline and loses
//! nothing acknowledged or seen (rows are visible only once their commit is flushed), so it moves nothing.

use sqlx::PgConnection;

/// Enters the server's current timeline on a new connection. Before the migrations have made the function
/// (a replica's first connections at start), there is nothing to do.
pub async fn enter(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    match sqlx::query_scalar!(r#"select ark_broker_enter_epoch() as "timeline!""#).fetch_one(conn).await {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(error)) if error.code().as_deref() == Some(UNDEFINED_FUNCTION) => Ok(()),
        Err(error) => Err(error),
    }
}

/// SQLSTATE of a function that does not exist.
const UNDEFINED_FUNCTION: &str = "42883";
