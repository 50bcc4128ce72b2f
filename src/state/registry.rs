//! Where everything a replica serves is registered, once, at start-up: a feed's store gets its readers'
//! fan-out and its tail (started here, handed to the listener) and comes back as a [`LiveFeed`]; every table
//! names its reaper duties; a domain whose feed only its own routes read gets its routes here too. Adding a
//! feed is a registration here plus its domain folder.

use std::{fmt, sync::Arc};

use tokio::{sync::mpsc::UnboundedSender, task::JoinHandle};
use utoipa_axum::router::OpenApiRouter;

use super::AppState;
use crate::{
    channels::store::DeliveryStore,
    config::Config,
    db::pool::Pool,
    db::{
        fanout::Fanout,
        feed::Feed,
        listener::Tails,
        live::LiveFeed,
        receipt,
        tail::{self, FeedSource, TailEvent},
        wakeup::Wakeups,
    },
    durable::{self, DurableStore},
    events::{self, store::EventStore},
    http::sse_end::StreamsEnd,
    idempotency::{self, store::KeyStore},
    messages::store::MessageStore,
    query_status::store::PatchStore,
    questions::{store::QuestionStore, tail as question_tail},
    retention::{DONE_KEEP_SECONDS, Duties, Duty},
    sessions::{self, SessionStore},
    streams::store::ChunkStore,
    traces::{self, store::SpanStore},
};

/// What every domain's routes may take from the replica besides its own tables.
#[derive(Debug, Clone)]
pub struct Shared {
    /// The settings this replica runs with.
    pub config: Arc<Config>,
    /// The request pool.
    pub pool: Pool,
    /// When this replica's SSE responses end.
    pub streams_end: StreamsEnd,
}

/// The routes registered here, with their domains' states already given; `app` merges them. The second
/// part holds routes outside the OpenAPI document (the Durable Streams protocol, specified by its own text).
#[derive(Clone, Default)]
pub struct Routes(OpenApiRouter<AppState>, axum::Router<AppState>);

impl Routes {
    /// The routes, to merge into the application's.
    pub fn router(&self) -> OpenApiRouter<AppState> {
        self.0.clone()
    }

    /// The routes the OpenAPI document leaves out.
    pub fn undocumented(&self) -> axum::Router<AppState> {
        self.1.clone()
    }
}

impl fmt::Debug for Routes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Routes")
    }
}

/// What has been registered so far.
#[derive(Debug, Default)]
pub struct Registry {
    tails: Tails,
    tasks: Vec<JoinHandle<()>>,
    duties: Vec<Duty>,
    routes: Routes,
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

    /// Registers a domain's routes, given their state (`router().with_state(RouteState { .. })`).
    pub fn routes(&mut self, routes: OpenApiRouter<AppState>) {
        self.routes.0 = std::mem::take(&mut self.routes.0).merge(routes);
    }

    /// Registers routes the OpenAPI document leaves out, their state given.
    pub fn protocol_routes(&mut self, routes: axum::Router<AppState>) {
        self.routes.1 = std::mem::take(&mut self.routes.1).merge(routes);
    }

    /// The tails (for the listener, which holds their senders: they end when it ends), their tasks, the
    /// reaper's duties in registration order, and the routes registered.
    pub fn finish(self) -> (Tails, Vec<JoinHandle<()>>, Duties, Routes) {
        (self.tails, self.tasks, self.duties.into(), self.routes)
    }
}

/// The tables other domains read too (the state hands them out); a feed only its own routes read is not
/// here: its routes are registered with it.
#[derive(Debug)]
pub struct Tables {
    pub chunks: LiveFeed<ChunkStore>,
    pub messages: LiveFeed<MessageStore>,
    pub questions: QuestionStore,
}

/// Registers every table on `pool`: the feeds (store, fan-out, tail) and each table's reaper duties, in the
/// order a reaper pass takes them (a session expires after its messages and events; questions expire before
/// the watch log of their changes is pruned). This is the one list of the duties: their `kind` labels are
/// exported from it, and a test checks docs/operating.md lists them in this order.
pub fn register(
    shared: &Shared,
    replica_key: i64,
    wakeups: &Wakeups,
    deliveries: &DeliveryStore,
) -> (Tables, Registry) {
    let Shared { config, pool, streams_end } = shared.clone();
    let mut registry = Registry::default();
    let messages = registry.feed(Feed::Messages, MessageStore::new(pool.clone()), |store| {
        vec![Duty::new("messages", "messages", store.clone(), |s, keep| async move {
            let over = match keep.max_bytes.messages {
                // No budget: the pass only folds the table's byte changes into one row (no row is read).
                0 => s.delete_over_budget(i64::MAX, 0).await?,
                budget => s.delete_over_budget(budget, keep.batch).await?,
            };
            Ok((s.delete_expired(keep.batch).await? + over) as usize)
        })]
    });
    let events = registry.feed(Feed::Events, EventStore::new(pool.clone()), |store| {
        vec![Duty::new("events", "events", store.clone(), |s, keep| async move {
            let over = match keep.max_bytes.events {
                // No budget: the pass only folds the table's byte changes into one row (no row is read).
                0 => s.delete_over_budget(i64::MAX, 0).await?,
                budget => s.delete_over_budget(budget, keep.batch).await?,
            };
            Ok(s.reap(keep.max_events, keep.batch).await? + over as usize)
        })]
    });
    let state =
        events::RouteState { config: config.clone(), pool: pool.clone(), events, streams_end: streams_end.clone() };
    registry.routes(events::router().with_state(state));
    let sessions = registry.feed(Feed::Sessions, SessionStore::new(pool.clone()), |store| {
        vec![Duty::new("sessions", "sessions", store.clone(), |s, keep| async move {
            Ok(s.delete_expired(keep.batch).await? as usize)
        })]
    });
    let spans = registry.feed(Feed::Spans, SpanStore::new(pool.clone()), |store| {
        vec![Duty::new("spans", "spans", store.clone(), |s, keep| async move {
            let over = match keep.max_bytes.spans {
                // No budget: the pass only folds the table's byte changes into one row (no row is read).
                0 => s.delete_over_budget(i64::MAX, 0).await?,
                budget => s.delete_over_budget(budget, keep.batch).await?,
            };
            Ok(s.reap(keep.max_spans, keep.batch).await? + over as usize)
        })]
    });
    let state =
        traces::RouteState { config: config.clone(), pool: pool.clone(), spans, streams_end: streams_end.clone() };
    registry.routes(traces::router().with_state(state));
    let questions = QuestionStore::new(pool.clone());
    let state = sessions::RouteState {
        config: config.clone(),
        sessions,
        questions: questions.clone(),
        streams_end: streams_end.clone(),
    };
    registry.routes(sessions::router().with_state(state));
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
            s.reap_finished(keep.streams, keep.batch).await
        })]
    });
    let durable_streams = DurableStore::new(pool.clone());
    let subscriptions = durable::subs::Subscriptions::new(durable_streams.clone());
    registry.tail(Feed::Durable, durable::tail::spawn(wakeups.clone(), subscriptions.clone()));
    registry.reaped([Duty::new(
        "durable_streams",
        "expired durable streams",
        durable_streams.clone(),
        |s, keep| async move { s.reap(keep.batch).await },
    )]);
    registry.protocol_routes(durable::router(durable::RouteState {
        config: config.clone(),
        appends: durable::writer::AppendWriter::spawn(durable_streams.clone()),
        store: durable_streams,
        chunks: chunks.clone(),
        wakeups: wakeups.clone(),
        streams_end: streams_end.clone(),
        subscriptions,
        private_reads: config.access.auth != crate::config::AuthMode::None,
    }));
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
    (Tables { chunks, messages, questions }, registry)
}
