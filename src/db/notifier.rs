//! Notifications sent after the commit they announce: the chunk flush's. PostgreSQL 15 serialises notifying
//! commits on one lock held until the commit's WAL is flushed, and wakes every listening backend for each
//! of them; a notification in the flush's own transaction put both on the path to the writers' ack. Here
//! the flush commits without one, its writers are answered, and this replica's notifier sends it: several
//! flushes' notifications in one statement when they queue up (one notifying commit, one wake-up of each
//! listener for all of them), in a transaction that does not wait for its WAL flush — a notification is a
//! hint, lost anyway if the server crashes, and the tails' resync and poll stand behind it.

use std::time::Duration;

use tokio::sync::mpsc;

use super::{feed::CHANNEL, pool::Pool};
use crate::telemetry::chain;

/// Most notifications one statement sends.
const MOST_PER_COMMIT: usize = 256;

/// How long a failed send waits before the next one, so a database that is gone is not asked in a loop.
const PAUSE_AFTER_FAILURE: Duration = Duration::from_millis(100);

/// Where a replica's after-commit notifications go; cloning it shares the one sender.
#[derive(Debug, Clone)]
pub struct Notifier {
    payloads: mpsc::UnboundedSender<String>,
}

impl Notifier {
    /// Starts sending notifications through `pool`; the task ends once every handle is dropped.
    pub fn spawn(pool: Pool) -> Self {
        let (payloads, queued) = mpsc::unbounded_channel();
        tokio::spawn(run(pool, queued));
        Notifier { payloads }
    }

    /// Queues the notification `payload` (for [`CHANNEL`]) of a transaction that committed.
    pub fn notify(&self, payload: String) {
        // The task ends only when every handle is gone: a send cannot fail while this one exists.
        let _ = self.payloads.send(payload);
    }
}

async fn run(pool: Pool, mut queued: mpsc::UnboundedReceiver<String>) {
    let mut batch = Vec::new();
    while queued.recv_many(&mut batch, MOST_PER_COMMIT).await > 0 {
        if let Err(error) = send(&pool, &batch).await {
            tracing::warn!(error = %chain(&error), notifications = batch.len(), "sending notifications failed; readers catch up by the poll");
            tokio::time::sleep(PAUSE_AFTER_FAILURE).await;
        }
        batch.clear();
    }
}

/// One statement, so one transaction and one notifying commit for all of `payloads`, in their order.
async fn send(pool: &Pool, payloads: &[String]) -> Result<(), sqlx::Error> {
    sqlx::query!(
        r#"select count(pg_notify($1, n.p)) as "sent!"
           from (select set_config('synchronous_commit', 'off', true) as off) c, unnest($2::text[]) as n(p)
           where c.off is not null"#,
        CHANNEL,
        payloads,
    )
    .fetch_one(pool)
    .await?;
    Ok(())
}
