//! Group commit of Durable Streams appends, per replica: a few flush workers share one queue, and each takes
//! whatever the open `POST`s handed over while it was busy and runs it as one transaction
//! ([`DurableStore::append_all`]). One transaction per append would cost a commit's fsync, a NOTIFY and five
//! round trips each; a group pays them once. More than one worker, so a group waiting for a stream another
//! replica holds does not stop this replica's other appends.
//!
//! A group that fails for a reason of its own (a deadlock with another replica's pull-wake, say) is tried
//! again one append at a time, so one append's failure is never another's; a database that cannot be
//! reached fails the group as a whole, after the ride-through every write gets.

use std::sync::Arc;

use tokio::sync::{Mutex, mpsc, oneshot};

use super::{DurableStore, appends::Appended, model::Append};
use crate::db::{StoreError, StoreResult};

/// Appends waiting for a worker; a full queue slows the `POST`s down instead of growing memory.
const QUEUE_DEPTH: usize = 1024;
/// Workers flushing at once (each holds one connection while it does).
const WORKERS: usize = 2;
/// Most appends in one group.
const MOST_APPENDS: usize = 256;
/// About the most body bytes in one group (a group holds at least one append, however large).
const MOST_BYTES: usize = 4 << 20;

struct Queued {
    path: String,
    request: Append,
    answer: oneshot::Sender<StoreResult<Appended>>,
}

/// The sending side of this replica's appends writer; cheap to clone. The workers end when every clone
/// is dropped and the queue is drained.
#[derive(Debug, Clone)]
pub struct AppendWriter {
    queue: mpsc::Sender<Queued>,
}

impl AppendWriter {
    /// Starts the workers.
    pub fn spawn(store: DurableStore) -> Self {
        let (queue, receiver) = mpsc::channel(QUEUE_DEPTH);
        let receiver = Arc::new(Mutex::new(receiver));
        for _ in 0..WORKERS {
            tokio::spawn(work(store.clone(), receiver.clone()));
        }
        AppendWriter { queue }
    }

    /// Appends `request` to the stream at `path` with whatever else is waiting; answers once it committed.
    pub async fn append(&self, path: String, request: Append) -> StoreResult<Appended> {
        let (answer, answered) = oneshot::channel();
        self.queue.send(Queued { path, request, answer }).await.map_err(|_| StoreError::ShuttingDown)?;
        answered.await.map_err(|_| StoreError::ShuttingDown)?
    }
}

async fn work(store: DurableStore, receiver: Arc<Mutex<mpsc::Receiver<Queued>>>) {
    while let Some(group) = next_group(&receiver).await {
        flush(&store, group).await;
    }
}

/// The next append to come and whatever else is waiting behind it, within the group's limits; `None` once
/// the queue is closed and drained.
async fn next_group(receiver: &Mutex<mpsc::Receiver<Queued>>) -> Option<Vec<Queued>> {
    let mut receiver = receiver.lock().await;
    let first = receiver.recv().await?;
    let mut bytes = first.request.body.len();
    let mut group = vec![first];
    while group.len() < MOST_APPENDS && bytes < MOST_BYTES {
        match receiver.try_recv() {
            Ok(next) => {
                bytes += next.request.body.len();
                group.push(next);
            }
            Err(_) => break,
        }
    }
    Some(group)
}

async fn flush(store: &DurableStore, group: Vec<Queued>) {
    let appends: Vec<(&str, &Append)> = group.iter().map(|q| (q.path.as_str(), &q.request)).collect();
    match store.append_all(&appends).await {
        Ok(answers) => {
            for (queued, answer) in group.into_iter().zip(answers) {
                let _ = queued.answer.send(Ok(answer));
            }
        }
        Err(StoreError::Database(_)) if group.len() > 1 => {
            // In order: two appends of one stream keep theirs.
            for queued in group {
                let answer = store.append(&queued.path, &queued.request).await;
                let _ = queued.answer.send(answer);
            }
        }
        Err(error) => {
            let mut group = group.into_iter();
            let first = group.next();
            for queued in group {
                let _ = queued.answer.send(Err(error.for_another()));
            }
            if let Some(first) = first {
                let _ = first.answer.send(Err(error));
            }
        }
    }
}
