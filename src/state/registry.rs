//! Where everything a replica serves is registered, once, at start-up: a feed's store gets its readers'
//! fan-out and its tail (started here, handed to the listener) and comes back as a [`LiveFeed`]; every table
//! names its reaper duties. Adding a feed is a registration here plus its domain folder.

use crate::db::pool::Pool;
use tokio::{sync::mpsc::UnboundedSender, task::JoinHandle};

use crate::{
    channels::store::DeliveryStore,
    db::{
        fanout::Fanout,
        feed::Feed,
        listener::Tails,
        live::LiveFeed,
        receipt,
        tail::{self, FeedSource, TailEvent},
        wakeup::Wakeups,
    },
    events::store::EventStore,
    idempotency::{self, store::KeyStore},
    messages::store::MessageStore,
    query_status::store::PatchStore,
    questions::{store::QuestionStore, tail as question_tail},
    retention::{DONE_KEEP_SECONDS, Duties, Duty},
    sessions::SessionStore,
    streams::store::ChunkStore,
    traces::store::SpanStore,
};

/// What has been registered so far.
#[derive(Debug, Default)]
pub struct Registry {
    tails: Tails,
    tasks: Vec<JoinHandle<()>>,
    duties: Vec<Duty>,
}

impl Registry {
    /// Registers `feed`, read from `store`, with the reaper duties `duties(&store)` gives: starts its tail,
    /// which hands each committed row to the feed's readers on this replica.
    pub fn feed<S: FeedSource + Clone>(
        &mut self,
        feed: Feed,
        store: S,
        duties: impl FnOnce(&S) -> Vec<Duty>,
    ) -> LiveFeed<S> {
        let fanout = Fanout::default();
        self.tail(feed, tail::spawn(feed, store.clone(), fanout.clone()));
        self.reaped(duties(&store));
        LiveFeed { store, fanout }
    }

    /// Registers a feed's own tail (questions wake their readers instead of handing rows out).
    pub fn tail(&mut self, feed: Feed, (sender, task): (UnboundedSender<TailEvent>, JoinHandle<()>)) {
        assert!(self.tails.insert(feed, sender).is_none(), "feed {} is registered once", feed.name());
        self.tasks.push(task);
    }

    /// Registers reaper duties of a table that is no feed (or not only one).
    pub fn reaped(&mut self, duties: impl IntoIterator<Item = Duty>) {
        for duty in duties {
            assert!(self.duties.iter().all(|d| d.kind != duty.kind), "reaper kind {} is registered once", duty.kind);
            self.duties.push(duty);
        }
    }

    /// The tails (for the listener, which holds their senders: they end when it ends), their tasks, and the
    /// reaper's duties in registration order.
    pub fn finish(self) -> (Tails, Vec<JoinHandle<()>>, Duties) {
        (self.tails, self.tasks, self.duties.into())
    }
}

/// Every table this replica serves, registered.
#[derive(Debug)]
pub struct Tables {
    pub chunks: LiveFeed<ChunkStore>,
    pub messages: LiveFeed<MessageStore>,
    pub events: LiveFeed<EventStore>,
    pub sessions: LiveFeed<SessionStore>,
    pub spans: LiveFeed<SpanStore>,
    pub questions: QuestionStore,
}

/// Registers every table on `pool`: the feeds (store, fan-out, tail) and each table's reaper duties, in the
/// order a reaper pass takes them (a session expires after its messages and events; questions expire before
/// the watch log of their changes is pruned). This is the one list of the duties: their `kind` labels are
/// exported from it, and a test checks the README lists them in this order.
pub fn register(pool: &Pool, replica_key: i64, wakeups: &Wakeups, deliveries: &DeliveryStore) -> (Tables, Registry) {
    let mut registry = Registry::default();
    let messages = registry.feed(Feed::Messages, MessageStore::new(pool.clone()), |store| {
        vec![Duty::new("messages", "messages", store.clone(), |s, keep| async move {
            let over = match keep.max_bytes.messages {
                0 => 0,
                budget => s.delete_over_budget(budget, keep.batch).await?,
            };
            Ok((s.delete_expired(keep.batch).await? + over) as usize)
        })]
    });
    let events = registry.feed(Feed::Events, EventStore::new(pool.clone()), |store| {
        vec![Duty::new("events", "events", store.clone(), |s, keep| async move {
            let over = match keep.max_bytes.events {
                0 => 0,
                budget => s.delete_over_budget(budget, keep.batch).await?,
            };
            Ok(s.reap(keep.max_events, keep.batch).await? + over as usize)
        })]
    });
    let sessions = registry.feed(Feed::Sessions, SessionStore::new(pool.clone()), |store| {
        vec![Duty::new("sessions", "sessions", store.clone(), |s, keep| async move {
            Ok(s.delete_expired(keep.batch).await? as usize)
        })]
    });
    let spans = registry.feed(Feed::Spans, SpanStore::new(pool.clone()), |store| {
        vec![Duty::new("spans", "spans", store.clone(), |s, keep| async move {
            let over = match keep.max_bytes.spans {
                0 => 0,
                budget => s.delete_over_budget(budget, keep.batch).await?,
            };
            Ok(s.reap(keep.max_spans, keep.batch).await? + over as usize)
        })]
    });
    let questions = QuestionStore::new(pool.clone());
    registry.tail(Feed::Questions, question_tail::spawn(questions.clone(), wakeups.clone()));
    registry.reaped([
        Duty::new("questions_expired", "expiring questions", questions.clone(), |s, keep| async move {
            s.act_on_due_timeouts(keep.batch).await
        }),
        Duty::new(
            "questions_of_ended_queries",
            "questions of ended Queries",
            questions.clone(),
            |s, keep| async move { s.cancel_for_ended_streams(None, keep.batch).await },
        ),
        Duty::new("idempotency_keys", "idempotency keys", KeyStore::new(pool.clone()), |s, keep| async move {
            Ok(s.delete_expired(idempotency::KEEP_SECONDS, keep.batch).await? as usize)
        }),
        Duty::new("question_events", "the question watch log", questions.clone(), |s, keep| async move {
            s.prune_watch_log(keep.question_log_seconds, keep.batch).await
        }),
        Duty::new("question_history", "the questions' history", questions.clone(), |s, keep| async move {
            s.prune_history(keep.question_history_seconds, keep.batch).await
        }),
    ]);
    let chunks = registry.feed(Feed::Chunks, ChunkStore::new(pool.clone(), replica_key), |store| {
        vec![Duty::new("streams", "finished streams", store.clone(), |s, keep| async move {
            s.reap_finished(keep.stream_seconds, keep.batch).await
        })]
    });
    registry.reaped([
        Duty::new(
            "status_patches",
            "done or stale status patches",
            PatchStore::new(pool.clone()),
            |s, keep| async move { s.delete_done_or_stale(DONE_KEEP_SECONDS, keep.batch).await },
        ),
        Duty::new("inbound_deliveries", "inbound delivery ids", deliveries.clone(), |s, keep| async move {
            s.forget_inbound(DONE_KEEP_SECONDS, keep.batch).await
        }),
        Duty::new("commit_receipts", "commit receipts", pool.clone(), |pool, keep| async move {
            receipt::reap(&pool, receipt::KEEP, keep.batch).await
        }),
    ]);
    (Tables { chunks, messages, events, sessions, spans, questions }, registry)
}
