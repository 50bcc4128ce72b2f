//! How a replica holds its TCP connections (in place of `axum::serve`, which has neither timeouts nor a cap):
//! the accept loop of each port, the cap on open connections with a small overflow pool that still answers
//! probes, the header and idle timeouts ([`activity`]), and draining on shutdown.
//!
//! Each connection holds a slot of [`Limits`], shared by the HTTP and MCP ports. While slots are free a
//! connection is served in full. Beyond `--max-connections`, up to [`OVERFLOW_CONNECTIONS`] more are served
//! one request each, with keep-alive off and a short header timeout, by [`overflow::probes`]: `/health` and
//! `/readyz` answer as usual, everything else gets a quick 503. Beyond those, a new connection is closed at
//! once. Open connections are the resource an attacker (or a reconnect storm) exhausts first: each costs a
//! file descriptor and buffers whether or not it ever sends a request.

mod activity;
mod overflow;

use crate::telemetry::chain;
use std::{convert::Infallible, io, pin::pin, sync::Arc, time::Duration};

use axum::{Router, extract::Request};
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use socket2::TcpKeepalive;
use tokio::{
    net::{TcpListener, TcpStream},
    sync::{OwnedSemaphorePermit, Semaphore},
    task::JoinSet,
    time::Instant,
};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

pub use activity::Timeouts;
pub use overflow::{probes, refuse_all};

use crate::config::Config;
use activity::{Activity, TrackedBody, TrackedIo};

/// Connections let in beyond `--max-connections` to answer probes; beyond these a connection is closed at
/// once. Enough for every kubelet probe and a few people looking, small enough to cost nothing.
pub const OVERFLOW_CONNECTIONS: usize = 256;

/// The whole life of an overflow connection: one request, which must arrive this fast.
const OVERFLOW_TIMEOUT: Duration = Duration::from_secs(2);

/// The pause after an accept error that is not one connection's own (EMFILE: out of file descriptors);
/// retrying at once would spin a core while nothing frees up.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_secs(1);

/// At most one warning per this period about refused or overflowing connections; a flood must not become a
/// flood of log lines.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// What every connection of a replica shares: the timeouts and the slots of both ports.
#[derive(Debug, Clone)]
pub struct Limits {
    timeouts: Timeouts,
    keepalive: ClientKeepalive,
    slots: Arc<Semaphore>,
    overflow: Arc<Semaphore>,
}

impl Limits {
    /// The limits `config` sets.
    pub fn new(config: &Config) -> Self {
        Limits {
            timeouts: Timeouts {
                header: Duration::from_secs(config.header_read_timeout_seconds),
                idle: Duration::from_secs(config.idle_timeout_seconds),
            },
            keepalive: ClientKeepalive::after(Duration::from_secs(config.client_keepalive_seconds)),
            slots: Arc::new(Semaphore::new(config.max_connections as usize)),
            overflow: Arc::new(Semaphore::new(OVERFLOW_CONNECTIONS)),
        }
    }
}

/// How one accepted connection is served.
struct Admission {
    router: Router,
    timeouts: Timeouts,
    keep_alive: bool,
    slot: OwnedSemaphorePermit,
}

/// Serves `router` on `listener` until `draining` is cancelled; then stops accepting, lets open requests
/// finish (idle connections close at once) and returns when the last connection has closed. Connections
/// beyond the cap get `probes` (see the module docs). Dropping the future closes every connection.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    probes: Router,
    limits: Limits,
    draining: CancellationToken,
) -> io::Result<()> {
    let mut connections = JoinSet::new();
    let mut warnings = Warnings::default();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next() => continue,
            () = draining.cancelled() => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                pause_after(&error, &draining).await;
                continue;
            }
        };
        tune(&stream, &limits.keepalive);
        let admission = if let Ok(slot) = limits.slots.clone().try_acquire_owned() {
            Admission { router: router.clone(), timeouts: limits.timeouts, keep_alive: true, slot }
        } else if let Ok(slot) = limits.overflow.clone().try_acquire_owned() {
            warnings.at_capacity();
            let timeouts = Timeouts { header: OVERFLOW_TIMEOUT, idle: OVERFLOW_TIMEOUT };
            Admission { router: probes.clone(), timeouts, keep_alive: false, slot }
        } else {
            warnings.refused();
            drop(stream);
            continue;
        };
        connections.spawn(serve_connection(stream, admission, draining.clone()));
    }
    // Connections the kernel completed before the drain began are queued on the listening socket; their
    // clients sent their requests to a replica that was still in rotation, so they are served rather than
    // reset when the socket closes.
    match listener.into_std() {
        Ok(listener) => serve_queued(&listener, &router, &limits, &draining, &mut connections),
        Err(error) => {
            tracing::warn!(error = %chain(&error), "cannot take the connections queued on the listening socket")
        }
    }
    // The listening socket is closed by now: the kernel refuses new connections instead of queueing them.
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// How long a queued connection's request may take to show up once the drain has begun.
const QUEUED_REQUEST_WAIT: Duration = Duration::from_secs(1);

/// Accepts what is queued on `listener`, with the socket's own call (which asks the kernel every time; tokio's
/// answers from the readiness it last saw, and would miss a connection queued since), and serves each one's
/// first request: it is awaited for [`QUEUED_REQUEST_WAIT`], since a socket new to tokio knows no readiness
/// yet and would otherwise be judged idle before its request is read. The socket closes when this returns.
fn serve_queued(
    listener: &std::net::TcpListener,
    router: &Router,
    limits: &Limits,
    draining: &CancellationToken,
    connections: &mut JoinSet<()>,
) {
    loop {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => return,
            // One client's own trouble (it gave up while queued): the ones behind it are still served.
            Err(error) if matches!(error.kind(), io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset) => {
                continue;
            }
            Err(error) => {
                tracing::warn!(error = %chain(&error), "accepting the queued connections failed");
                return;
            }
        };
        let Ok(stream) = stream.set_nonblocking(true).and_then(|()| TcpStream::from_std(stream)) else { continue };
        tune(&stream, &limits.keepalive);
        let Ok(slot) = limits.slots.clone().try_acquire_owned() else { continue };
        let admission = Admission { router: router.clone(), timeouts: limits.timeouts, keep_alive: false, slot };
        let draining = draining.clone();
        connections.spawn(async move {
            let _ = tokio::time::timeout(QUEUED_REQUEST_WAIT, stream.readable()).await;
            serve_connection(stream, admission, draining).await;
        });
    }
}

/// Serves one connection until it closes, overstays its timeouts, or (once draining) finishes its request.
async fn serve_connection(stream: TcpStream, admission: Admission, draining: CancellationToken) {
    let Admission { router, timeouts, keep_alive, slot: _slot } = admission;
    let activity = Activity::new(timeouts);
    let io = TokioIo::new(TrackedIo::new(stream, activity.clone()));
    let service = service_fn(|request: Request<Incoming>| {
        let in_flight = activity.request_started();
        let response = router.clone().oneshot(request);
        async move {
            let response = response.await?;
            Ok::<_, Infallible>(response.map(|body| TrackedBody::new(body, in_flight)))
        }
    });
    let mut builder = http1::Builder::new();
    // Timeouts are the watchdog's ([`activity`]): hyper's would close idle connections at the header timeout.
    builder.keep_alive(keep_alive).header_read_timeout(None);
    let mut connection = pin!(builder.serve_connection(io, service));
    let mut expired = pin!(activity.expired());
    let mut told_to_drain = false;
    loop {
        tokio::select! {
            // The connection first: a request whose bytes are already here is read (and so counts as in
            // flight) before the drain decides the connection is idle.
            biased;
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(error = %chain(&error), "connection ended with an error");
                }
                return;
            }
            () = draining.cancelled(), if !told_to_drain => {
                // Nothing in flight (idle, or headers still on their way): nothing to finish, close now
                // rather than wait up to the header timeout for a request the replica would not serve. (A
                // request whose head is already here was read above, and is in flight.)
                if !activity.busy() {
                    return;
                }
                told_to_drain = true;
                connection.as_mut().graceful_shutdown();
            }
            () = &mut expired => {
                tracing::debug!("closing a connection that sent no request in time");
                return;
            }
        }
    }
}

/// How a client that vanished without closing (its node gone, a partition) is found: keepalive probes after
/// `--client-keepalive-seconds` of silence, three of them a third of that apart (at least a second), for a
/// connection that is receiving (an open chunk POST); and `TCP_USER_TIMEOUT` at twice that for one that is
/// sending (an SSE reader), where the kernel sends no probes while data waits to be acknowledged.
#[derive(Debug, Clone)]
struct ClientKeepalive {
    probes: TcpKeepalive,
    unacknowledged: Duration,
}

impl ClientKeepalive {
    fn after(silent: Duration) -> Self {
        let interval = (silent / 3).max(Duration::from_secs(1));
        ClientKeepalive {
            probes: TcpKeepalive::new().with_time(silent).with_interval(interval).with_retries(3),
            unacknowledged: silent * 2,
        }
    }
}

/// Small writes (an SSE event, a short reply) go out at once: with Nagle's algorithm a reply could wait for
/// the peer's delayed ACK, which measured as ~40 ms of extra latency on an answered question's wake. And a
/// peer that vanished is found ([`ClientKeepalive`]).
fn tune(socket: &TcpStream, keepalive: &ClientKeepalive) {
    if let Err(error) = socket.set_nodelay(true) {
        tracing::debug!(error = %chain(&error), "setting TCP_NODELAY failed");
    }
    let socket = socket2::SockRef::from(socket);
    let set = socket
        .set_tcp_keepalive(&keepalive.probes)
        .and_then(|()| socket.set_tcp_user_timeout(Some(keepalive.unacknowledged)));
    if let Err(error) = set {
        tracing::debug!(error = %chain(&error), "setting TCP keepalive failed");
    }
}

/// A failed accept: one connection's own trouble is skipped; anything else (EMFILE, ENFILE, ENOMEM) is
/// logged and waited out, so the loop does not spin while nothing frees up.
async fn pause_after(error: &io::Error, draining: &CancellationToken) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(error.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset) {
        tracing::debug!(error = %chain(&error), "a connection failed before it was accepted");
        return;
    }
    tracing::error!(error = %chain(&error), pause_ms = ACCEPT_ERROR_PAUSE.as_millis() as u64, "accepting connections failed");
    tokio::select! {
        () = tokio::time::sleep(ACCEPT_ERROR_PAUSE) => {}
        () = draining.cancelled() => {}
    }
}

/// Throttled warnings about the connection cap.
#[derive(Debug, Default)]
struct Warnings {
    overflowed: u64,
    refused: u64,
    last: Option<Instant>,
}

impl Warnings {
    fn at_capacity(&mut self) {
        self.overflowed += 1;
        self.maybe_warn();
    }

    fn refused(&mut self) {
        self.refused += 1;
        self.maybe_warn();
    }

    fn maybe_warn(&mut self) {
        if self.last.is_some_and(|last| last.elapsed() < WARN_EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        tracing::warn!(
            connections.probes_only = std::mem::take(&mut self.overflowed),
            connections.refused = std::mem::take(&mut self.refused),
            "at the connection cap (--max-connections): new connections are served probes only, or closed"
        );
    }
}

/// Raises this process's soft limit on open files toward what `config` lets connections use (a container's
/// soft limit is often 1024, far below `--max-connections`), and warns when the hard limit is lower still:
/// accepts would then fail with EMFILE before the cap is reached.
pub fn raise_open_files_limit(config: &Config) {
    // Connections of both tiers, plus the database pool, the listeners and the process's own files.
    let wanted = config.max_connections + OVERFLOW_CONNECTIONS as u64 + u64::from(config.database_pool_max) + 256;
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes a plain struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 || limit.rlim_cur >= wanted {
        return;
    }
    let raised = libc::rlimit { rlim_cur: wanted.min(limit.rlim_max), rlim_max: limit.rlim_max };
    // SAFETY: setrlimit reads a plain struct; lowering or raising the soft limit up to the hard one is allowed.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        tracing::warn!(soft = limit.rlim_cur, wanted, "cannot raise the open-files limit");
    } else if raised.rlim_cur < wanted {
        tracing::warn!(
            limit = raised.rlim_cur,
            wanted,
            "the open-files limit is below --max-connections; accepts will fail (EMFILE) before the cap"
        );
    }
}
