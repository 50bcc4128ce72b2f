//! Group commit of chunk ingest, one writer task per replica: whatever all open `POST /stream/{id}` requests
//! handed over since the last flush goes into one transaction with one NOTIFY. Per-row INSERT+NOTIFY would
//! serialise on Postgres' global notify lock at about a quarter of plain INSERT speed; batching amortises it.
//! A request learns its chunks are stored only after the commit.
//!
//! Two rules keep each request's stored lines a prefix of what it sent: hand-overs of one stream are
//! written in the order they came, and once a hand-over of a request fails, no later one of that request is
//! written. A stream another transaction holds right now (another replica's flush, or a frozen one) is left
//! for the next flush instead of making the whole flush wait.

use crate::telemetry::chain;
use std::{
    collections::{HashSet, VecDeque},
    sync::Arc,
    time::Duration,
};

use tokio::{
    sync::{mpsc, oneshot},
    task::JoinHandle,
    time::Instant,
};
use tokio_util::sync::CancellationToken;

use super::{
    model::Line,
    store::{Append, ChunkStore},
};
use crate::{
    db::{StoreError, StoreResult, outage::Outage},
    idempotency::IdempotencyKey,
    telemetry::metrics,
};

/// Hand-overs waiting for the writer; a full queue slows producers down instead of growing memory.
const QUEUE_DEPTH: usize = 1024;
/// How long to wait before trying streams other transactions held again.
const HELD_RETRY: Duration = Duration::from_millis(5);
/// How long a stream may stay held by another transaction before its hand-overs fail.
const HELD_LIMIT: Duration = Duration::from_secs(10);
/// Stream ids known to exist, remembered so a flush need not ask; forgotten when there are more.
const KNOWN_STREAMS: usize = 100_000;

/// The chunks were not stored; the producer should retry them.
#[derive(Debug, Clone, Copy)]
pub struct NotStored;

/// One request's standing with the writer: once a hand-over of it failed, its later ones are not written.
/// A request with an idempotency key is written apart from the group (see [`ChunkStore::append_keyed`]).
#[derive(Debug)]
pub struct Request {
    failed: CancellationToken,
    key: Option<IdempotencyKey>,
}

impl Request {
    /// A request, with its idempotency key if it has one.
    pub fn new(key: Option<IdempotencyKey>) -> Self {
        Request { failed: CancellationToken::new(), key }
    }

    /// Resolves once a hand-over of this request failed: nothing more of it will be stored.
    pub async fn failure(&self) {
        self.failed.cancelled().await
    }

    fn has_failed(&self) -> bool {
        self.failed.is_cancelled()
    }
}

struct HandOver {
    append: Append,
    ack: oneshot::Sender<Result<(), NotStored>>,
    request: Arc<Request>,
    /// How many lines of the request came before this hand-over.
    offset: i64,
    /// When a flush first found its stream held by another transaction.
    held_since: Option<Instant>,
}

impl HandOver {
    fn finish(self, result: Result<(), NotStored>) {
        if result.is_err() {
            self.request.failed.cancel();
        }
        let _ = self.ack.send(result);
    }
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
        let writer = Writer {
            store,
            max_rows: max_rows.max(1),
            known: HashSet::new(),
            held: VecDeque::new(),
            outage: Outage::new(),
        };
        (ChunkWriter { queue }, tokio::spawn(writer.run(receiver)))
    }

    /// Queues `chunks` of `stream_id` for `request`, in order after anything this stream queued before;
    /// `offset` is how many lines of the request came before them.
    pub async fn write(
        &self,
        request: &Arc<Request>,
        stream_id: Arc<str>,
        chunks: Vec<Line>,
        offset: usize,
    ) -> StoreResult<Ack> {
        let (ack, acked) = oneshot::channel();
        let append = Append { stream_id, chunks };
        let hand_over = HandOver { append, ack, request: request.clone(), offset: offset as i64, held_since: None };
        self.queue.send(hand_over).await.map_err(|_| StoreError::ShuttingDown)?;
        Ok(acked)
    }
}

struct Writer {
    store: ChunkStore,
    max_rows: usize,
    known: HashSet<Arc<str>>,
    /// Hand-overs whose streams were held by another transaction, or that wait out an outage, oldest first.
    held: VecDeque<HandOver>,
    /// The outage being ridden through, if a flush failed for want of a database.
    outage: Outage,
}

impl Writer {
    async fn run(mut self, mut receiver: mpsc::Receiver<HandOver>) {
        loop {
            let mut batch: Vec<HandOver> = self.held.drain(..).collect();
            let first = if batch.is_empty() {
                match receiver.recv().await {
                    Some(first) => Some(first),
                    None => return,
                }
            } else if self.outage.started() {
                // Riding through an outage: only what is held is tried again (the pause was taken).
                None
            } else {
                // Held streams are retried soon, or as soon as something new arrives.
                tokio::time::timeout(HELD_RETRY, receiver.recv()).await.ok().flatten()
            };
            batch.extend(first);
            let mut rows: usize = batch.iter().map(|h| h.append.chunks.len()).sum();
            // Take whatever else is already waiting: this is the group in group commit.
            while rows < self.max_rows && !self.outage.started() {
                match receiver.try_recv() {
                    Ok(next) => {
                        rows += next.append.chunks.len();
                        batch.push(next);
                    }
                    Err(_) => break,
                }
            }
            self.flush(batch).await;
        }
    }

    async fn flush(&mut self, batch: Vec<HandOver>) {
        let (batch, abandoned): (Vec<_>, Vec<_>) = batch.into_iter().partition(|h| !h.request.has_failed());
        for hand_over in abandoned {
            hand_over.finish(Err(NotStored));
        }
        if batch.is_empty() {
            return;
        }
        let mut waiting = Waiting::default();
        metrics::ingested(batch.iter().map(|h| h.append.chunks.len()).sum());
        if let Err(error) = self.create_streams(&batch).await {
            waiting.or_fail(error, batch, "chunk flush failed");
            return self.ride_through(waiting).await;
        }
        let (keyed, batch): (Vec<_>, Vec<_>) = batch.into_iter().partition(|h| h.request.key.is_some());
        let mut held_streams: HashSet<Arc<str>> = HashSet::new();
        for hand_over in keyed {
            // Once a hand-over is held, the later ones of its stream wait too: a request's lines stay in order.
            // Once the database is found gone, the rest of the flush waits for it in its order.
            if waiting.is_waiting() {
                waiting.hand_overs.push(hand_over);
            } else if held_streams.contains(&hand_over.append.stream_id) {
                self.settle(vec![hand_over], &[]);
            } else if let Some(held) = self.write_keyed(hand_over, &mut waiting).await {
                held_streams.insert(held);
            }
        }
        if waiting.is_waiting() {
            waiting.hand_overs.extend(batch);
        } else if !batch.is_empty() {
            self.append(batch, &mut waiting).await;
        }
        self.ride_through(waiting).await;
    }

    /// Appends the hand-overs without an idempotency key in one transaction (each alone, if that fails).
    async fn append(&mut self, batch: Vec<HandOver>, waiting: &mut Waiting) {
        let appends: Vec<&Append> = batch.iter().map(|h| &h.append).collect();
        let (rows, started) = (appends.iter().map(|a| a.chunks.len()).sum(), Instant::now());
        match self.store.append(&appends).await {
            Ok(written) => {
                metrics::flushed(rows, started.elapsed());
                self.settle(batch, &written);
            }
            Err(StoreError::Database(error)) if batch.len() > 1 => {
                // One request's bad data must not fail everyone else's chunks: retry each hand-over alone.
                tracing::warn!(error = %chain(&error), "group commit failed; retrying requests one by one");
                for hand_over in batch {
                    if hand_over.request.has_failed() {
                        hand_over.finish(Err(NotStored));
                        continue;
                    }
                    if waiting.is_waiting() {
                        waiting.hand_overs.push(hand_over);
                        continue;
                    }
                    match self.store.append(&[&hand_over.append]).await {
                        Ok(written) => self.settle(vec![hand_over], &written),
                        Err(error) => {
                            waiting.or_fail(error, vec![hand_over], "chunks not stored");
                        }
                    }
                }
            }
            Err(error) => {
                waiting.or_fail(error, batch, "chunk flush failed");
            }
        }
    }

    /// Holds what failed for want of a database for the next flush, after a pause, while the ride-through
    /// window lasts; past it, those hand-overs fail. A flush that met no outage ends the one ridden through.
    async fn ride_through(&mut self, waiting: Waiting) {
        let Some(error) = waiting.error else {
            self.outage = Outage::new();
            return;
        };
        if self.outage.again(&error).await {
            self.held.extend(waiting.hand_overs);
        } else {
            tracing::warn!(error = %chain(&error), requests = waiting.hand_overs.len(), "chunks not stored: the database did not answer within the ride-through window");
            waiting.hand_overs.into_iter().for_each(|h| h.finish(Err(NotStored)));
            self.outage = Outage::new();
        }
    }

    /// Writes a hand-over of a request with an idempotency key, unless an earlier one of it failed. Returns
    /// its stream if another transaction held it (the hand-over is then held for the next flush).
    async fn write_keyed(&mut self, hand_over: HandOver, waiting: &mut Waiting) -> Option<Arc<str>> {
        let Some(key) = hand_over.request.key.as_ref().filter(|_| !hand_over.request.has_failed()) else {
            hand_over.finish(Err(NotStored));
            return None;
        };
        match self.store.append_keyed(&hand_over.append, key, hand_over.offset).await {
            Ok(true) => hand_over.finish(Ok(())),
            Ok(false) => {
                let stream_id = hand_over.append.stream_id.clone();
                self.settle(vec![hand_over], &[]);
                return Some(stream_id);
            }
            Err(error) => {
                let stream_id = hand_over.append.stream_id.clone();
                if waiting.or_fail(error, vec![hand_over], "chunks not stored") {
                    return Some(stream_id);
                }
            }
        }
        None
    }

    async fn create_streams(&mut self, batch: &[HandOver]) -> StoreResult<()> {
        if self.known.len() > KNOWN_STREAMS {
            self.known.clear();
        }
        let mut new: Vec<&str> = batch
            .iter()
            .map(|h| &*h.append.stream_id)
            .filter(|id| !self.known.contains(*id))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        new.sort_unstable();
        self.store.create_streams(&new).await?;
        self.known.extend(batch.iter().map(|h| h.append.stream_id.clone()));
        Ok(())
    }

    /// Acks the hand-overs of written streams and holds the others back for the next flush.
    fn settle(&mut self, batch: Vec<HandOver>, written: &[String]) {
        let written: HashSet<&str> = written.iter().map(String::as_str).collect();
        for mut hand_over in batch {
            if written.contains(&*hand_over.append.stream_id) {
                hand_over.finish(Ok(()));
                continue;
            }
            // Not written: held by another writer, or gone (the reaper deleted the finished stream since it
            // was remembered). Either way the next flush makes sure the stream exists again.
            self.known.remove(&hand_over.append.stream_id);
            let since = *hand_over.held_since.get_or_insert_with(Instant::now);
            if since.elapsed() > HELD_LIMIT {
                tracing::warn!(stream.id = %hand_over.append.stream_id, "stream held by another transaction too long");
                hand_over.finish(Err(NotStored));
            } else {
                self.held.push_back(hand_over);
            }
        }
    }
}

/// What one flush holds back for want of a database.
#[derive(Default)]
struct Waiting {
    /// The first such error.
    error: Option<StoreError>,
    hand_overs: Vec<HandOver>,
}

impl Waiting {
    /// Whether the database was found gone in this flush: nothing more of it is tried.
    fn is_waiting(&self) -> bool {
        self.error.is_some()
    }

    /// Keeps `hand_overs` for the ride-through if `error` is an outage (returns true); fails them otherwise.
    fn or_fail(&mut self, error: StoreError, hand_overs: Vec<HandOver>, what: &'static str) -> bool {
        if matches!(error, StoreError::Unavailable(_)) {
            self.error.get_or_insert(error);
            self.hand_overs.extend(hand_overs);
            return true;
        }
        tracing::warn!(error = %chain(&error), requests = hand_overs.len(), "{what}");
        hand_overs.into_iter().for_each(|h| h.finish(Err(NotStored)));
        false
    }
}
