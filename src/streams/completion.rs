//! Where streams are completed, and the one rule they follow:
//!
//! **A stream's `[DONE]` is stored after every line the broker received for it before the `/complete`
//! request arrived, whichever replica either reached.** Ark's Go executor writes its last chunk into its open
//! `POST /stream/{id}` (on one replica) and calls `/complete` (reaching any replica) without waiting for the
//! POST's reply, so the last lines may still be in the writer replica's socket or batch when `/complete`
//! arrives.
//!
//! How: every open chunk POST registers itself (`stream_writers`) before it reads its body. A `/complete`
//! that finds no writer appends the marker at once. One that finds writers records the request on the stream
//! and NOTIFYs; each writer's replica then *seals* its POST — reads on until the body ends or has been quiet
//! for [`QUIET`] (at most [`MAX_SEAL`]), waits until those lines are committed, and releases its
//! registration — and the last writer released appends the marker, in the same transaction. Request and
//! release both lock the stream's counter row first, so each sees the other; there is no lock wider than
//! one stream. A `/complete` for a stream nothing was written to waits [`FIRST_LINE_WAIT`] for a POST whose
//! registration is still on its way before it answers 404; one for a completed stream waits as long before
//! it answers `already_completed`, since a Query resumed after an approval writes its stream again (the
//! new run's first flush opens the stream again, and its `/complete` ends it with a marker of its own). A
//! writer replica that froze or died holds the end back for the abort grace at most: then any replica's
//! sweep ([`super::abort`]) appends the marker after what is stored.

use crate::telemetry::chain;
use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::{
    sync::{Notify, mpsc},
    task::JoinHandle,
    time::Instant,
};
use uuid::Uuid;

use super::{ChunkStore, completion_store::Step, model::Completion};
use crate::db::{StoreResult, fanout::Delivery, live::LiveFeed};

/// A sealing POST's lines are all read once nothing more arrived for this long.
pub const QUIET: Duration = Duration::from_millis(50);
/// The longest a sealing POST keeps reading (a client still streaming into it after `/complete`).
pub const MAX_SEAL: Duration = Duration::from_secs(1);
/// How long a `/complete` of a stream nothing was written to waits for a POST to register.
const FIRST_LINE_WAIT: Duration = Duration::from_millis(300);
/// How long `/complete` waits for the writers to append the marker before it answers anyway (the request
/// stands, and is finished within the abort grace whatever happens to the writers). Below Ark's executor's
/// 10 s timeout on the call.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);
/// The longest pause between re-checks while waiting (a lost notification, a writer released elsewhere).
const MAX_RECHECK: Duration = Duration::from_secs(1);

/// Each stream's open POSTs on this replica: a local number and the signal that asks it to seal.
type ByStream = HashMap<Arc<str>, Vec<(u64, Arc<Notify>)>>;

/// This replica's open chunk POSTs, by stream: how a completion request reaches the POSTs it waits for.
#[derive(Debug, Clone, Default)]
pub struct OpenWriters {
    inner: Arc<Mutex<ByStream>>,
    next: Arc<AtomicU64>,
}

impl OpenWriters {
    /// Records an open POST to `stream_id` on this replica; dropping the handle forgets it.
    pub fn open(&self, stream_id: Arc<str>) -> OpenWriter {
        let (local, seal) = (self.next.fetch_add(1, Ordering::Relaxed), Arc::new(Notify::new()));
        self.lock().entry(stream_id.clone()).or_default().push((local, seal.clone()));
        OpenWriter { id: Uuid::new_v4(), stream_id, local, seal, writers: self.clone() }
    }

    /// Asks this replica's open POSTs of `stream_id` (all of them with `None`) to seal.
    pub fn seal(&self, stream_id: Option<&str>) {
        let writers = self.lock();
        let matching: Box<dyn Iterator<Item = &Vec<(u64, Arc<Notify>)>>> = match stream_id {
            Some(id) => Box::new(writers.get(id).into_iter()),
            None => Box::new(writers.values()),
        };
        for (_, seal) in matching.flatten() {
            seal.notify_one();
        }
    }

    /// The streams this replica has open POSTs of.
    pub fn streams(&self) -> Vec<String> {
        self.lock().keys().map(|id| id.to_string()).collect()
    }

    fn lock(&self) -> MutexGuard<'_, ByStream> {
        // Every critical section is one map operation, so a panic elsewhere cannot leave it inconsistent.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One open chunk POST, as completion requests see it.
#[derive(Debug)]
pub struct OpenWriter {
    /// Its registration in `stream_writers`.
    pub id: Uuid,
    stream_id: Arc<str>,
    local: u64,
    seal: Arc<Notify>,
    writers: OpenWriters,
}

impl OpenWriter {
    /// Notified when a completion of its stream was requested (possibly a stale request: sealing checks).
    pub fn seal_signal(&self) -> Arc<Notify> {
        self.seal.clone()
    }

    /// Asks itself to seal (its registration found a completion requested already).
    pub fn request_seal(&self) {
        self.seal.notify_one();
    }
}

impl Drop for OpenWriter {
    fn drop(&mut self) {
        let mut writers = self.writers.lock();
        if let Some(list) = writers.get_mut(&self.stream_id) {
            list.retain(|(local, _)| *local != self.local);
            if list.is_empty() {
                writers.remove(&self.stream_id);
            }
        }
    }
}

/// `POST /stream/{id}/complete`: the marker is stored after every line received before this call, or
/// requested from the open POSTs that received them (see the module docs).
pub async fn complete(
    chunks: &LiveFeed<ChunkStore>,
    writers: &OpenWriters,
    stream_id: &str,
) -> StoreResult<Completion> {
    // Subscribed before the first step, so a marker appended right after it is not missed.
    let mut subscription = chunks.fanout.subscribe_key(stream_id);
    let started = Instant::now();
    // Whether the marker this call waits for answers its request (`completed`) or an earlier call's
    // (`already_completed`: one call in a stream's life says it completed it).
    let mut requested = false;
    let mut ours = false;
    let mut pause = Duration::from_millis(25);
    loop {
        let may_give_up = started.elapsed() >= FIRST_LINE_WAIT;
        let position = match chunks.request_completion(stream_id, may_give_up).await? {
            Step::Completed => return Ok(Completion::Completed),
            // Completed by the writers this call asked: for the caller, this call completed it.
            Step::AlreadyCompleted => return Ok(answer(ours)),
            Step::NotFound => return Ok(Completion::NotFound),
            Step::Settling => None,
            Step::Requested { position, first } => {
                ours |= first && !requested;
                Some(position)
            }
        };
        if let Some(position) = position
            && !requested
        {
            // This replica's own POSTs hear it at once; the others through the NOTIFY.
            writers.seal(Some(stream_id));
            subscription.delivered(position);
            requested = true;
        }
        let Some(left) = ANSWER_WITHIN.checked_sub(started.elapsed()) else {
            tracing::warn!(stream.id = %stream_id, "stream completion requested; its writers have not appended it yet");
            return Ok(answer(ours));
        };
        let until = Instant::now() + pause.min(left);
        pause = (pause * 2).min(MAX_RECHECK);
        // Wake on the stream's rows: a batch holding the marker ends the wait, anything else re-checks.
        loop {
            let delivery = tokio::select! {
                delivery = subscription.next() => delivery,
                () = tokio::time::sleep_until(until) => break,
            };
            match delivery {
                Delivery::Batch(batch) if batch.rows.iter().any(|row| row.is_done) => {
                    return Ok(answer(ours));
                }
                Delivery::Batch(batch) => subscription.delivered(batch.to),
                Delivery::Lagged => break,
            }
        }
    }
}

/// What `/complete` answers once the marker is there: `completed` to the call whose request the writers
/// answered, `already_completed` to the others.
fn answer(ours: bool) -> Completion {
    if ours { Completion::Completed } else { Completion::AlreadyCompleted }
}

/// Passes completion requests from the LISTEN connection to this replica's open POSTs. `None` (a request
/// naming no stream, or a reconnect after which requests may have been missed) asks the database which of
/// them have one.
pub fn spawn_requests(
    chunks: ChunkStore,
    writers: OpenWriters,
    mut requests: mpsc::UnboundedReceiver<Option<String>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(request) = requests.recv().await {
            match request {
                Some(stream_id) => writers.seal(Some(&stream_id)),
                None => seal_requested(&chunks, &writers).await,
            }
        }
    })
}

/// Seals this replica's open POSTs whose streams have a completion requested (after a missed notification).
pub async fn seal_requested(chunks: &ChunkStore, writers: &OpenWriters) {
    let open = writers.streams();
    if open.is_empty() {
        return;
    }
    match chunks.completion_requested(&open).await {
        Ok(requested) => requested.iter().for_each(|stream_id| writers.seal(Some(stream_id))),
        Err(error) => tracing::warn!(error = %chain(&error), "cannot check open chunk POSTs for completion requests"),
    }
}
