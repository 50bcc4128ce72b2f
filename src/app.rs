//! The application: [`app`] (the router, with upstream's cross-cutting behaviour, and the OpenAPI document
//! its REST routes register) and [`serve`] (run the HTTP and MCP listeners until shutdown, then drain). The
//! shared state is in [`crate::state`].

use std::{future::Future, time::Duration};

use axum::{
    Extension, Router,
    extract::{DefaultBodyLimit, FromRef},
    http::{HeaderValue, Method},
    middleware,
};
use tokio::net::TcpListener;
use tower::util::option_layer;
use tower_http::{
    cors::{AllowHeaders, AllowOrigin, CorsLayer},
    request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer},
    trace::TraceLayer,
};
use utoipa::OpenApi;
use utoipa_axum::{router::OpenApiRouter, routes};

pub use crate::state::{AppState, StartError, build_state};
use crate::{
    auth, channels, connections,
    error::{self, ApiError},
    http::{
        access_log,
        extract::BodyDeadline,
        nul,
        openapi::{self, ApiDoc},
        same_origin::{self, TrustedOrigins},
        unreachable,
    },
    messages,
    operations::{health, index, metrics, relay},
    queries, questions, streams, ui,
};

/// How long before the end of the shutdown timeout chunk POSTs still open are answered (503 with
/// `chunks_stored`), so the answer reaches them before their connections close.
const DRAIN_ANSWER_MARGIN: Duration = Duration::from_secs(2);
/// How long shutdown waits for the database connections to close.
const POOL_CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long shutdown waits for the replica's own background tasks (the chunk writer commits what it holds).
const LOCAL_DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
/// How long it waits, meanwhile, for the outbox workers: a channel send in flight (two calls of at most 5 s)
/// finishes and is recorded — cut short, another replica would send it again once its lease ran out.
const OUTBOUND_DRAIN_TIMEOUT: Duration = Duration::from_secs(11);

/// The HTTP API with upstream's cross-cutting behaviour: CORS, `X-Request-ID`, body limits, error bodies.
pub fn app(state: AppState) -> Router {
    // CORS is off unless origins are allowed: Ark's dashboard reaches the broker through ark-api, not the browser.
    let origins: Vec<HeaderValue> =
        state.config.cors_allowed_origins.iter().filter_map(|origin| origin.trim().parse().ok()).collect();
    let cors = (!origins.is_empty()).then(|| {
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([Method::GET, Method::HEAD, Method::PUT, Method::PATCH, Method::POST, Method::DELETE])
            .allow_headers(AllowHeaders::mirror_request())
    });
    let trusted = TrustedOrigins::new(&state.config.cors_allowed_origins, &state.config.allowed_hosts);
    // Failures are logged once, by `error::render_error_body` (5xx) and the request line, not by tower-http too.
    let trace = TraceLayer::new_for_http().on_failure(()).make_span_with(access_log::request_span);
    let (rest, document) = rest_routes(&state).split_for_parts();
    Router::new()
        .merge(rest)
        .merge(state.registered_routes.undocumented())
        .merge(ui::router())
        .merge(relay::router(state.relay.clone()))
        .layer(Extension(openapi::finish(document, auth::OPEN_PATHS)))
        .route_layer(middleware::from_fn_with_state(state.listener.clone(), unreachable::fail_fast))
        .route_layer(middleware::from_fn(nul::refuse_nul))
        .route_layer(middleware::from_fn(move |request, next| {
            same_origin::refuse_cross_site(trusted.clone(), request, next)
        }))
        .fallback(|| async { ApiError::NotFound("Not found".into()) })
        .layer(middleware::from_fn_with_state(state.auth.clone(), auth::require_credentials))
        .layer(middleware::from_fn(ui::errors_as_html))
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(Extension(BodyDeadline(state.config.body_deadline())))
        .layer(middleware::from_fn(error::render_error_body))
        .layer(middleware::from_fn(access_log::record))
        .layer(trace)
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(option_layer(cors))
        .with_state(state)
}

/// The REST routes, each registered with its OpenAPI description (the page, `/ui`, is HTML and not in it).
/// Each domain's routes get their part of `state`.
pub fn rest_routes(state: &AppState) -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(index::router())
        .merge(health::router())
        .merge(metrics::router())
        .routes(routes!(openapi::document))
        .merge(messages::router().with_state(FromRef::from_ref(state)))
        .merge(state.registered_routes.router())
        .merge(streams::router().with_state(FromRef::from_ref(state)))
        .merge(questions::router().with_state(FromRef::from_ref(state)))
        .merge(queries::router().with_state(FromRef::from_ref(state)))
        .merge(channels::router().with_state(FromRef::from_ref(state)))
}

/// Where a replica listens: the HTTP API, and the MCP endpoint when it has one.
#[derive(Debug)]
pub struct Listeners {
    /// REST, SSE and the page.
    pub http: TcpListener,
    /// MCP (`/mcp`).
    pub mcp: Option<TcpListener>,
}

impl From<TcpListener> for Listeners {
    fn from(http: TcpListener) -> Self {
        Listeners { http, mcp: None }
    }
}

/// Serves `state` until `shutdown` resolves; then readiness fails, new connections are refused, SSE
/// responses and waiting MCP calls end (their questions stay), open requests — chunk POSTs included — get
/// `shutdown_timeout` to finish, buffered chunks are committed, and it returns. Connections are held to the
/// limits of [`connections`].
pub async fn serve(
    listeners: impl Into<Listeners>,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listeners = listeners.into();
    let draining = state.shutdown.clone();
    let limits = connections::Limits::new(&state.config);
    let mut servers = tokio::task::JoinSet::new();
    let (router, probes) = (app(state.clone()), connections::probes(state.clone()));
    servers.spawn(connections::serve(listeners.http, router, probes, limits.clone(), draining.clone()));
    if let Some(mcp) = listeners.mcp {
        let router = crate::mcp::router(state.clone());
        servers.spawn(connections::serve(mcp, router, connections::refuse_all(), limits, draining.clone()));
    }
    let first = tokio::select! {
        Some(result) = servers.join_next() => flatten(result),
        () = shutdown => Ok(()),
    };
    draining.cancel();
    // Open chunk POSTs are let finish (Ark's executors never reopen one); those still open near the end of
    // the shutdown timeout are answered with what they stored, before their connections are closed.
    let deadline = state.drain_deadline.clone();
    let ending = state.config.shutdown_timeout().saturating_sub(DRAIN_ANSWER_MARGIN);
    let deadline_timer = tokio::spawn(async move {
        tokio::time::sleep(ending).await;
        deadline.cancel();
    });
    let rest = tokio::time::timeout(state.config.shutdown_timeout(), async {
        let mut outcome = Ok(());
        while let Some(result) = servers.join_next().await {
            outcome = outcome.and(flatten(result));
        }
        outcome
    })
    .await
    .unwrap_or_else(|_| {
        tracing::warn!("open requests did not finish in time; exiting anyway");
        Ok(())
    });
    servers.abort_all();
    deadline_timer.abort();
    finish_background(state).await;
    first.and(rest)
}

fn flatten(result: Result<std::io::Result<()>, tokio::task::JoinError>) -> std::io::Result<()> {
    result.unwrap_or_else(|join| Err(std::io::Error::other(join)))
}

async fn finish_background(state: AppState) {
    let tasks = state.take_background().await;
    tasks.drained.cancel();
    let pool = state.pool.clone();
    // Dropping our handle lets the writer see its queue close once the last request is gone.
    drop(state);
    let local = tokio::time::timeout(LOCAL_DRAIN_TIMEOUT, futures::future::join_all(tasks.local));
    let outbound = tokio::time::timeout(OUTBOUND_DRAIN_TIMEOUT, futures::future::join_all(tasks.outbound));
    let (local, outbound) = tokio::join!(local, outbound);
    if local.is_err() || outbound.is_err() {
        tracing::warn!("a background task did not finish in time");
    }
    if tokio::time::timeout(POOL_CLOSE_TIMEOUT, pool.close()).await.is_err() {
        tracing::warn!("database connections still in use at exit");
    }
}
