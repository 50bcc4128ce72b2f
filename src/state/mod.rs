//! The state every replica shares among its handlers ([`AppState`]), and [`build_state`]: connect, migrate,
//! and start the background tasks (listener, chunk writer, reaper, Query status worker, Slack's Socket Mode). It stands above
//! the domains: each domain's handlers take only their domain's `RouteState`, which the whole hands out
//! (`FromRef`) or the registry gives with the domain's feed ([`registry`]), so no domain depends on the whole.

use crate::db::pool::Pool;
pub mod registry;

use std::{sync::Arc, time::Duration};

use axum::extract::FromRef;

use self::registry::{Routes, Shared, Tables};
use tokio::{sync::Mutex, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use crate::{
    auth::{AuthSetupError, Authenticator},
    channels::{self, outbound::Channels, slack, worker as channel_worker},
    config::Config,
    db::{
        self,
        feed::Feed,
        listener::{self, ListenerStatus},
        live::LiveFeed,
        relay::{self, Relay},
        wakeup::Wakeups,
    },
    http::sse_end::{self, StreamsEnd},
    messages::store::MessageStore,
    queries::store::QueryStore,
    query_status,
    questions::{
        policy::{AnswerPolicy, PolicySetupError},
        store::QuestionStore,
    },
    retention::{Duties, Reaper, Retention},
    streams::{
        abort,
        budget::NdjsonBudget,
        completion::{self, OpenWriters},
        ends::StreamEnds,
        store::ChunkStore,
        writer::ChunkWriter,
    },
};

/// How long start-up waits for the LISTEN connection before giving up.
const LISTENER_START_TIMEOUT: Duration = Duration::from_secs(30);

/// Everything a handler needs; cheap to clone: one pointer to the replica's [`SharedState`]. Every request
/// clones it into each layer that takes it (some several times over, as each middleware's `Next` holds a copy
/// of the layers under it), and an MCP call or an SSE reader keeps those copies for hours.
#[derive(Debug, Clone)]
pub struct AppState(Arc<SharedState>);

impl std::ops::Deref for AppState {
    type Target = SharedState;

    fn deref(&self) -> &SharedState {
        &self.0
    }
}

/// What [`AppState`] points to.
#[derive(Debug)]
pub struct SharedState {
    /// The settings this replica runs with.
    pub config: Arc<Config>,
    /// The request pool.
    pub pool: Pool,
    /// Who may call, and who they are.
    pub auth: Authenticator,
    /// The channels questions are delivered to (Slack, GitHub).
    pub channels: Channels,
    /// Wake-ups for question readers (waiters, watchers, the Query status worker).
    pub wakeups: Wakeups,
    /// Whether the LISTEN connection is up.
    pub listener: ListenerStatus,
    /// This replica's side of the LISTEN relay, when it is the relay.
    pub relay: Relay,
    /// Conversation memory.
    pub messages: LiveFeed<MessageStore>,
    /// Chunk streams.
    pub chunks: LiveFeed<ChunkStore>,
    /// Questions.
    pub questions: QuestionStore,
    /// The routes the registry wired whole (domains whose feed only their own routes read).
    pub registered_routes: Routes,
    /// Queries' resume state.
    pub query_state: QueryStore,
    /// This replica's group-commit writer.
    pub writer: ChunkWriter,
    /// The reaper's duties, as registered (a test's reaper takes them with a retention of its own).
    pub reaping: Duties,
    /// Who may answer questions.
    pub answer_policy: AnswerPolicy,
    /// Cancelled when the replica starts shutting down: readiness fails and SSE responses end.
    pub shutdown: CancellationToken,
    /// When this replica's SSE responses end: at shutdown, or when PostgreSQL is lost for a while.
    pub streams_end: StreamsEnd,
    /// Cancelled when a draining replica may wait no longer for open chunk POSTs.
    pub drain_deadline: CancellationToken,
    /// This replica's open chunk POSTs, which completion requests reach.
    pub open_writers: OpenWriters,
    /// Who hears that a stream was completed (its Query's open questions are cancelled).
    pub stream_ends: StreamEnds,
    /// The bytes all open chunk POSTs may hold in partly received NDJSON lines.
    pub ndjson_budget: NdjsonBudget,
    background: Mutex<Background>,
}

/// The replica's background tasks, for the end of the shutdown sequence.
#[derive(Debug, Default)]
pub struct Background {
    /// Tasks that end as soon as shutdown begins (or their input closes).
    pub local: Vec<JoinHandle<()>>,
    /// Ends the tasks a draining replica still needs while its open chunk POSTs finish: the LISTEN connection
    /// (it holds the replica's liveness lock, and brings completion requests) and the abort and completion
    /// sweep. Cancelled once the last request is answered.
    pub drained: CancellationToken,
    /// The outbox workers, which call other services: a call in flight is let finish and recorded, or another
    /// replica would make it again.
    pub outbound: Vec<JoinHandle<()>>,
}

/// Why the broker could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Postgres refused or could not be reached.
    #[error("cannot connect to PostgreSQL: {0}")]
    Connect(#[from] sqlx::Error),
    /// The CA certificate for PostgreSQL's TLS cannot be read.
    #[error(transparent)]
    RootCert(#[from] db::RootCertError),
    /// A migration failed.
    #[error("cannot migrate the database: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// Authentication could not be set up.
    #[error("authentication: {0}")]
    Auth(#[from] AuthSetupError),
    /// The answer policy could not be set up.
    #[error("the answer policy: {0}")]
    Policy(#[from] PolicySetupError),
    /// The LISTEN connection did not come up in time.
    #[error("the LISTEN connection did not come up within {0:?}")]
    Listener(Duration),
}

/// Connects to `database_url`, applies migrations and starts the writer and the listener; returns once the
/// replica is ready to serve.
pub async fn build_state(config: Config, database_url: &str) -> Result<AppState, StartError> {
    // The recorder first, so everything the start-up does is counted.
    crate::telemetry::metrics::start_at_zero(&Feed::ALL.map(Feed::name));
    let shutdown = CancellationToken::new();
    let drained = CancellationToken::new();
    let (auth, auth_task) = Authenticator::from_config(&config, &shutdown).await?;
    let (answer_policy, policy_tasks) = AnswerPolicy::from_config(&config, auth.is_on(), &shutdown).await?;
    let database = db::Database::of(&config, database_url);
    database.check()?;
    // Session-level work (LISTEN, the liveness lock, the migrations' lock) needs a connection of its own
    // on the server, never one a pooler shares out per transaction.
    let direct = match &config.database_listen_url {
        Some(url) => db::Database::of(&config, url.expose()),
        None => database.clone(),
    };
    // Connecting first, on its own, so an unreachable server or a refused certificate is said as such.
    db::migrate_on(direct.connect_one("ark-broker-migrate").await?).await?;
    let through_pooler = config.database_listen_url.as_ref().map(|_| &direct);
    let pool = db::connect(&database, through_pooler, config.database_pool_max, db::Timeouts::of(&config)).await?;
    let listen_pools = db::ListenPools::new(&direct, &listener::application_name())?;
    let wakeups = Wakeups::default();
    let status = ListenerStatus::default();
    let channels = Channels::new(&config, pool.clone());
    let config = Arc::new(config);
    let streams_end = StreamsEnd::new(&shutdown);
    // Every table is registered there, once: a feed's tail starts and joins the listener's.
    let shared = Shared { config: config.clone(), pool: pool.clone(), streams_end: streams_end.clone() };
    let (tables, registry) = registry::register(&shared, status.replica_key(), &wakeups, channels.deliveries());
    let Tables { chunks, messages, questions } = tables;
    let (tails, tail_tasks, reaping, registered_routes) = registry.finish();
    let (writer, writer_task) = ChunkWriter::spawn(chunks.store.clone(), config.flush_max_rows as usize);
    let open_writers = OpenWriters::default();
    let (completion_requests, requests) = tokio::sync::mpsc::unbounded_channel();
    let completion_task = completion::spawn_requests(chunks.store.clone(), open_writers.clone(), requests);
    let relay = Relay::default();
    let relaying = listener::Relaying {
        relay: relay.clone(),
        from: config.listen_relay_from,
        port: (config.port != 0).then_some(config.port),
        address: config.relay_address.clone(),
        client: relay::client(database.network_timeout()),
    };
    let heartbeat_deadline = database.network_timeout();
    let connections = listener::Connections { listen_pools, pool: pool.clone(), heartbeat_deadline, relaying };
    let listener_task = tokio::spawn(listener::run(
        connections,
        tails,
        completion_requests,
        status.clone(),
        config.poll_interval(),
        drained.clone(),
    ));
    if tokio::time::timeout(LISTENER_START_TIMEOUT, status.wait_up()).await.is_err() {
        shutdown.cancel();
        drained.cancel();
        return Err(StartError::Listener(LISTENER_START_TIMEOUT));
    }
    let mover =
        sse_end::spawn_mover(status.clone(), streams_end.clone(), sse_end::READERS_MOVE_AFTER, shutdown.clone());
    let reaper = Reaper::new(pool.clone(), Retention::of(&config), reaping.clone());
    let abort_grace = Duration::from_secs(config.stream_abort_grace_seconds);
    let (ends, ended) = tokio::sync::mpsc::unbounded_channel();
    let stream_ends = StreamEnds::new(ends);
    let abort_task =
        abort::spawn(chunks.store.clone(), open_writers.clone(), stream_ends.clone(), abort_grace, drained.clone());
    let stream_end_task = crate::questions::stream_end::spawn(questions.clone(), ended, drained.clone());
    // The tails end when the listener, which holds their senders, ends.
    let mut background = vec![listener_task, writer_task, abort_task, completion_task, mover, stream_end_task];
    // A draining replica stops relaying at once and gives the relay lock up: another replica takes over, and
    // the drain does not wait for the followers' streams.
    background.push(tokio::spawn({
        let (relay, shutdown) = (relay.clone(), shutdown.clone());
        async move {
            shutdown.cancelled().await;
            relay.retire();
        }
    }));
    background.extend(tail_tasks);
    background.push(
        crate::streams::retention::keep_buckets_ready(chunks.store.clone(), reaper.retention.streams, shutdown.clone())
            .await,
    );
    background.push(tokio::spawn(db::refusal::run(database.clone(), drained.clone())));
    background.extend(auth_task);
    background.extend(policy_tasks);
    // Interval 0 (upstream's `ROW_REAP_INTERVAL_SECONDS=0`): this replica never reaps.
    if config.reap_interval_seconds > 0 {
        background.push(tokio::spawn(reaper.run(Duration::from_secs(config.reap_interval_seconds), shutdown.clone())));
    }
    let mut outbound: Vec<JoinHandle<()>> =
        channel_worker::spawn(&channels, wakeups.clone(), shutdown.clone()).into_iter().collect();
    if let Some(client) = query_status::client(&config).await {
        outbound.push(query_status::spawn(client, &config, pool.clone(), wakeups.clone(), shutdown.clone()));
    }
    let ndjson_budget = NdjsonBudget::new(usize::try_from(config.ndjson_buffer_budget_bytes).unwrap_or(usize::MAX));
    // Socket Mode ends with shutdown: an envelope not yet acknowledged, Slack sends again (to another replica).
    let inbound = channels::RouteState {
        config: config.clone(),
        channels: channels.clone(),
        questions: questions.clone(),
        policy: answer_policy.clone(),
    };
    background.extend(slack::socket::spawn(inbound, shutdown.clone()));
    Ok(AppState(Arc::new(SharedState {
        config,
        messages,
        query_state: QueryStore::new(pool.clone()),
        questions,
        registered_routes,
        pool,
        auth,
        channels,
        wakeups,
        listener: status,
        relay,
        chunks,
        writer,
        reaping,
        answer_policy,
        streams_end,
        shutdown,
        drain_deadline: CancellationToken::new(),
        open_writers,
        stream_ends,
        ndjson_budget,
        background: Mutex::new(Background { local: background, outbound, drained }),
    })))
}

impl AppState {
    /// Takes the background tasks, for the end of the shutdown sequence.
    pub(crate) async fn take_background(&self) -> Background {
        std::mem::take(&mut *self.background.lock().await)
    }
}

/// Hands each domain the part of the state its handlers reach (`field`, or `field = path` for a part of a
/// field). A field left out of a list fails to compile (the struct literal must be whole), so a list cannot
/// drift from its `RouteState`.
macro_rules! route_states {
    ($($domain:ident { $($field:ident $(= $($path:ident).+)?),* $(,)? })*) => {$(
        impl FromRef<AppState> for crate::$domain::RouteState {
            fn from_ref(state: &AppState) -> Self {
                crate::$domain::RouteState { $($field: route_states!(@part state, $field $(, $($path).+)?)),* }
            }
        }
    )*};
    (@part $state:ident, $field:ident) => { $state.$field.clone() };
    (@part $state:ident, $field:ident, $($path:ident).+) => { $state.$($path).+.clone() };
}

route_states! {
    messages { config, pool, messages, questions, streams_end }
    streams { config, pool, chunks, writer, ndjson_budget, streams_end, drain_deadline, open_writers, stream_ends }
    questions { config, auth, wakeups, questions, policy = answer_policy, streams_end }
    queries { query_state, chunks = chunks.store, questions }
    channels { config, channels, questions, policy = answer_policy }
}
