//! Group commit of chunk ingest, one writer task per replica: whatever all open `POST /stream/{id}` requests
//! handed over since the last flush goes into one transaction with one NOTIFY. Per-row INSERT+NOTIFY would
//! serialise on Postgres' global notify lock at about a quarter of plain INSERT speed; batching amortises it.
//! A request learns its chunks are stored only after the commit.

use std::sync::Arc;

use tokio::{
    sync::{mpsc, oneshot},
    task::JoinHandle,
};

use super::store::{Append, ChunkStore};
use crate::db::{StoreError, StoreResult};

/// Hand-overs waiting for the writer; a full queue slows producers down instead of growing memory.
const QUEUE_DEPTH: usize = 1024;

/// The chunks were not stored; the producer should retry them.
#[derive(Debug, Clone, Copy)]
pub struct NotStored;

struct HandOver {
    append: Append,
    ack: oneshot::Sender<Result<(), NotStored>>,
}

/// The sending side of this replica's writer; cheap to clone.
#[derive(Debug, Clone)]
pub struct ChunkWriter {
    queue: mpsc::Sender<HandOver>,
}

/// Resolves once the chunks it stands for are committed (or failed).
pub type Ack = oneshot::Receiver<Result<(), NotStored>>;

impl ChunkWriter {
    /// Starts the writer task. It runs until every `ChunkWriter` clone is dropped, then drains and ends.
    pub fn spawn(store: ChunkStore, max_rows: usize) -> (Self, JoinHandle<()>) {
        let (queue, receiver) = mpsc::channel(QUEUE_DEPTH);
        let task = tokio::spawn(run(store, receiver, max_rows.max(1)));
        (ChunkWriter { queue }, task)
    }

    /// Queues `chunks` of `stream_id`, in order after anything this stream queued before.
    pub async fn write(&self, stream_id: Arc<str>, chunks: Vec<String>) -> StoreResult<Ack> {
        let (ack, acked) = oneshot::channel();
        let hand_over = HandOver { append: Append { stream_id, chunks }, ack };
        self.queue.send(hand_over).await.map_err(|_| StoreError::ShuttingDown)?;
        Ok(acked)
    }
}

async fn run(store: ChunkStore, mut receiver: mpsc::Receiver<HandOver>, max_rows: usize) {
    let mut batch: Vec<HandOver> = Vec::new();
    while let Some(first) = receiver.recv().await {
        let mut rows = first.append.chunks.len();
        batch.push(first);
        // Take whatever else is already waiting: this is the group in group commit.
        while rows < max_rows {
            match receiver.try_recv() {
                Ok(next) => {
                    rows += next.append.chunks.len();
                    batch.push(next);
                }
                Err(_) => break,
            }
        }
        flush(&store, &mut batch).await;
    }
}

async fn flush(store: &ChunkStore, batch: &mut Vec<HandOver>) {
    let (appends, acks): (Vec<Append>, Vec<_>) = batch.drain(..).map(|h| (h.append, h.ack)).unzip();
    match store.append(&appends).await {
        Ok(()) => {
            for ack in acks {
                let _ = ack.send(Ok(()));
            }
        }
        Err(StoreError::Database(error)) if appends.len() > 1 => {
            // One request's bad data must not fail everyone else's chunks: retry each hand-over alone.
            tracing::warn!(%error, "group commit failed; retrying requests one by one");
            for (append, ack) in appends.iter().zip(acks) {
                let result = store.append(std::slice::from_ref(append)).await;
                if let Err(error) = &result {
                    tracing::warn!(%error, stream.id = %append.stream_id, "chunks not stored");
                }
                let _ = ack.send(result.map_err(|_| NotStored));
            }
        }
        Err(error) => {
            tracing::warn!(%error, requests = acks.len(), "chunk flush failed");
            for ack in acks {
                let _ = ack.send(Err(NotStored));
            }
        }
    }
}
