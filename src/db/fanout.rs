//! In-process fan-out of rows a replica read once. The replica's tail of a feed reads each committed
//! transaction's rows once and hands them, reference-counted, to every local reader of the keys they touch
//! (a stream, a conversation) and to the feed's global readers. A reader never queries Postgres for rows it
//! can get here; it does so only to catch up (a replay, a resume, or after it fell out of its window).
//!
//! Each reader has a window bounded by bytes, not rows. A reader that falls that far behind (a slow client)
//! has its window dropped and is told it lagged; it then catches up from Postgres by its own cursor and
//! rejoins, so nothing is lost or repeated and memory stays bounded.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use tokio::sync::Notify;

use super::feed::GlobalCursor;

/// How many bytes of rows one reader may have waiting before it is switched to catching up from Postgres.
pub const WINDOW_BYTES: usize = 8 << 20;

/// A row of a feed, as fan-out sees it.
pub trait FeedRow: Send + Sync + 'static {
    /// The key whose readers get it (stream id, conversation id).
    fn key(&self) -> &str;
    /// Its position within its key (1, 2, 3, …; commit-ordered).
    fn position(&self) -> i64;
    /// Its place in the global feed.
    fn global(&self) -> GlobalCursor;
    /// Its size in bytes, for windows and catch-up budgets.
    fn size(&self) -> usize;
}

/// Implements [`FeedRow`] for a row type with `position`, `tx`, `sequence` and `bytes` fields, keyed by
/// `$key` (a `String` field).
#[macro_export]
macro_rules! feed_row {
    ($row:ty, $key:ident) => {
        impl $crate::db::fanout::FeedRow for $row {
            fn key(&self) -> &str {
                &self.$key
            }

            fn position(&self) -> i64 {
                self.position
            }

            fn global(&self) -> $crate::db::feed::GlobalCursor {
                $crate::db::feed::GlobalCursor { tx: self.tx, sequence: self.sequence }
            }

            fn size(&self) -> usize {
                self.bytes.max(0) as usize
            }
        }
    };
}

/// Rows that are exactly everything in `(from, to]` of some order (a key's positions, or the global feed).
#[derive(Debug)]
pub struct Batch<R, C> {
    /// The cursor before the first row.
    pub from: C,
    /// The cursor after the last row.
    pub to: C,
    /// The rows, in order.
    pub rows: Arc<[Arc<R>]>,
    /// A global feed's: the first transaction of the primary epoch it was read in.
    pub epoch: Option<i64>,
    bytes: usize,
}

impl<R, C: Copy> Clone for Batch<R, C> {
    fn clone(&self) -> Self {
        Batch { from: self.from, to: self.to, rows: self.rows.clone(), epoch: self.epoch, bytes: self.bytes }
    }
}

impl<R: FeedRow, C> Batch<R, C> {
    /// A batch of `rows`, which must be exactly what lies in `(from, to]`.
    pub fn new(from: C, to: C, rows: Vec<Arc<R>>) -> Self {
        let bytes = rows.iter().map(|row| row.size()).sum();
        Batch { from, to, rows: rows.into(), epoch: None, bytes }
    }

    /// The batch as read in the epoch beginning with transaction `epoch`.
    pub fn in_epoch(self, epoch: Option<i64>) -> Self {
        Batch { epoch, ..self }
    }
}

/// What a reader gets next.
#[derive(Debug)]
pub enum Delivery<R, C> {
    /// Rows in order.
    Batch(Batch<R, C>),
    /// Rows were dropped (its window overflowed, or the replica may have missed a notification): catch up.
    Lagged,
}

struct Window<R, C> {
    batches: VecDeque<Batch<R, C>>,
    bytes: usize,
    lagged: bool,
}

/// One reader's bounded queue; the fan-out side pushes, the reader pops.
struct Inbox<R, C> {
    window: Mutex<Window<R, C>>,
    ready: Notify,
    /// How far the reader has delivered, as it last said; the poll compares it with Postgres.
    delivered: Mutex<Option<C>>,
}

impl<R, C> Inbox<R, C> {
    fn new() -> Self {
        Inbox {
            window: Mutex::new(Window { batches: VecDeque::new(), bytes: 0, lagged: false }),
            ready: Notify::new(),
            delivered: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Window<R, C>> {
        self.window.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, batch: Batch<R, C>) {
        {
            let mut window = self.lock();
            if window.lagged {
                return;
            }
            // One batch is always accepted, so a single large row can still be delivered from memory.
            if !window.batches.is_empty() && window.bytes + batch.bytes > WINDOW_BYTES {
                window.batches.clear();
                window.bytes = 0;
                window.lagged = true;
            } else {
                window.bytes += batch.bytes;
                window.batches.push_back(batch);
            }
        }
        self.ready.notify_one();
    }

    fn lag(&self) {
        {
            let mut window = self.lock();
            window.batches.clear();
            window.bytes = 0;
            window.lagged = true;
        }
        self.ready.notify_one();
    }

    async fn next(&self) -> Delivery<R, C> {
        loop {
            {
                let mut window = self.lock();
                if window.lagged {
                    window.lagged = false;
                    return Delivery::Lagged;
                }
                if let Some(batch) = window.batches.pop_front() {
                    window.bytes -= batch.bytes;
                    return Delivery::Batch(batch);
                }
            }
            self.ready.notified().await;
        }
    }
}

type Readers<R, C> = Vec<(u64, Arc<Inbox<R, C>>)>;

struct Registry<R> {
    keyed: HashMap<String, Readers<R, i64>>,
    global: Readers<R, GlobalCursor>,
    next_id: u64,
}

/// One feed's readers on this replica; cheap to clone.
pub struct Fanout<R> {
    registry: Arc<Mutex<Registry<R>>>,
}

impl<R> Clone for Fanout<R> {
    fn clone(&self) -> Self {
        Fanout { registry: self.registry.clone() }
    }
}

impl<R> Default for Fanout<R> {
    fn default() -> Self {
        let registry = Registry { keyed: HashMap::new(), global: Vec::new(), next_id: 0 };
        Fanout { registry: Arc::new(Mutex::new(registry)) }
    }
}

impl<R: FeedRow> std::fmt::Debug for Fanout<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let registry = self.lock();
        f.debug_struct("Fanout").field("keys", &registry.keyed.len()).field("global", &registry.global.len()).finish()
    }
}

impl<R: FeedRow> Fanout<R> {
    fn lock(&self) -> MutexGuard<'_, Registry<R>> {
        // Every critical section leaves the maps consistent, so a panic elsewhere cannot corrupt them.
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts receiving `key`'s rows. Subscribe before the first catch-up read, so nothing committed in
    /// between is missed.
    pub fn subscribe_key(&self, key: &str) -> Subscription<R, i64> {
        let inbox = Arc::new(Inbox::new());
        let mut registry = self.lock();
        let id = registry.next_id;
        registry.next_id += 1;
        registry.keyed.entry(key.to_owned()).or_default().push((id, inbox.clone()));
        Subscription { inbox, _guard: Unsubscribe { fanout: self.clone(), key: Some(key.to_owned()), id } }
    }

    /// Starts receiving every row of the feed, in global order.
    pub fn subscribe_global(&self) -> Subscription<R, GlobalCursor> {
        let inbox = Arc::new(Inbox::new());
        let mut registry = self.lock();
        let id = registry.next_id;
        registry.next_id += 1;
        registry.global.push((id, inbox.clone()));
        Subscription { inbox, _guard: Unsubscribe { fanout: self.clone(), key: None, id } }
    }

    fn unsubscribe(&self, key: Option<&str>, id: u64) {
        let mut registry = self.lock();
        match key {
            Some(key) => {
                if let Some(readers) = registry.keyed.get_mut(key) {
                    readers.retain(|(reader, _)| *reader != id);
                    if readers.is_empty() {
                        registry.keyed.remove(key);
                    }
                }
            }
            None => registry.global.retain(|(reader, _)| *reader != id),
        }
    }

    /// Whether any reader follows a key.
    pub fn has_keyed(&self) -> bool {
        !self.lock().keyed.is_empty()
    }

    /// Keeps the items whose key a reader here follows.
    pub fn retain_followed<T>(&self, items: &mut Vec<T>, key: impl Fn(&T) -> &str) {
        let registry = self.lock();
        items.retain(|item| registry.keyed.contains_key(key(item)));
    }

    /// The keys readers follow, each with the position its slowest reader has delivered.
    pub fn delivered_per_key(&self) -> Vec<(String, i64)> {
        let registry = self.lock();
        registry
            .keyed
            .iter()
            .map(|(key, readers)| {
                let slowest = readers
                    .iter()
                    .map(|(_, inbox)| inbox.delivered.lock().unwrap_or_else(PoisonError::into_inner).unwrap_or(0))
                    .min()
                    .unwrap_or(0);
                (key.clone(), slowest)
            })
            .collect()
    }

    /// Whether any reader follows the whole feed.
    pub fn has_global(&self) -> bool {
        !self.lock().global.is_empty()
    }

    /// Hands rows (ordered by transaction, then sequence) to the readers of their keys. Each key's rows go
    /// out as runs of consecutive positions, so a reader can tell when a row it did not get lies between.
    pub fn dispatch_keyed(&self, rows: Vec<R>) {
        let mut runs: HashMap<String, Vec<Vec<Arc<R>>>> = HashMap::new();
        {
            let registry = self.lock();
            for row in rows {
                if !registry.keyed.contains_key(row.key()) {
                    continue;
                }
                let key_runs = runs.entry(row.key().to_owned()).or_default();
                match key_runs.last_mut() {
                    Some(run) if run.last().is_some_and(|last| last.position() + 1 == row.position()) => {
                        run.push(Arc::new(row))
                    }
                    _ => key_runs.push(vec![Arc::new(row)]),
                }
            }
        }
        let registry = self.lock();
        for (key, key_runs) in runs {
            for run in key_runs {
                let (first, last) = (run[0].position(), run[run.len() - 1].position());
                let batch = Batch::new(first - 1, last, run);
                for (_, inbox) in registry.keyed.get(&key).into_iter().flatten() {
                    inbox.push(batch.clone());
                }
            }
        }
    }

    /// Hands a batch of the global feed to every global reader.
    pub fn dispatch_global(&self, batch: Batch<R, GlobalCursor>) {
        for (_, inbox) in &self.lock().global {
            inbox.push(batch.clone());
        }
    }

    /// Tells the readers of `keys` to catch up from Postgres.
    pub fn lag_keys(&self, keys: &[String]) {
        let registry = self.lock();
        for key in keys {
            for (_, inbox) in registry.keyed.get(key).into_iter().flatten() {
                inbox.lag();
            }
        }
    }

    /// Tells every reader of a key to catch up from Postgres (after notifications may have been lost).
    pub fn lag_all_keyed(&self) {
        for (_, inbox) in self.lock().keyed.values().flatten() {
            inbox.lag();
        }
    }
}

/// One reader's place in the fan-out; dropping it unsubscribes.
pub struct Subscription<R: FeedRow, C> {
    inbox: Arc<Inbox<R, C>>,
    _guard: Unsubscribe<R>,
}

impl<R: FeedRow, C> Subscription<R, C> {
    /// The next batch, or word that the reader lagged.
    pub async fn next(&mut self) -> Delivery<R, C> {
        self.inbox.next().await
    }

    /// Records how far the reader has delivered (for the poll that backs notifications).
    pub fn delivered(&self, cursor: C) {
        *self.inbox.delivered.lock().unwrap_or_else(PoisonError::into_inner) = Some(cursor);
    }
}

struct Unsubscribe<R: FeedRow> {
    fanout: Fanout<R>,
    key: Option<String>,
    id: u64,
}

impl<R: FeedRow> Drop for Unsubscribe<R> {
    fn drop(&mut self) {
        self.fanout.unsubscribe(self.key.as_deref(), self.id);
    }
}
