//! One connection's clock: whether it is waiting for a request's headers, sitting idle between requests, or
//! busy with one, and when it has overstayed. hyper 1.12's own `header_read_timeout` restarts whenever a
//! kept-alive connection goes idle, so it would close idle connections after the (short) header timeout; the
//! broker keeps the two apart here, with a wrapper around the socket (bytes received), one around each
//! response (a request in flight until its body is done), and a watchdog per connection.

use std::{
    io,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::Duration,
};

use axum::body::Body;
use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
    sync::Notify,
    time::Instant,
};

/// The two limits on a connection without a request in flight.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// From accepting the connection, or from the first byte of the next request, to its complete headers.
    pub header: Duration,
    /// From the end of the last request, with no byte received since.
    pub idle: Duration,
}

/// What one connection is doing, shared by its socket, its service and its watchdog.
#[derive(Debug)]
pub struct Activity {
    timeouts: Timeouts,
    clock: Mutex<Clock>,
    changed: Notify,
}

#[derive(Debug)]
struct Clock {
    /// Requests whose response is not finished (an SSE response or a chunk POST can be open for hours).
    in_flight: usize,
    /// When the last request ended (or the connection was accepted).
    idle_since: Instant,
    /// Since when headers are awaited: the connection's start, or the first byte after the last request.
    headers_since: Option<Instant>,
}

impl Clock {
    fn deadline(&self, timeouts: Timeouts) -> Option<Instant> {
        if self.in_flight > 0 {
            return None;
        }
        Some(match self.headers_since {
            Some(since) => since + timeouts.header,
            None => self.idle_since + timeouts.idle,
        })
    }
}

impl Activity {
    /// The clock of a connection accepted now: its first request's headers are awaited from this moment.
    pub fn new(timeouts: Timeouts) -> Arc<Self> {
        let now = Instant::now();
        let clock = Clock { in_flight: 0, idle_since: now, headers_since: Some(now) };
        Arc::new(Activity { timeouts, clock: Mutex::new(clock), changed: Notify::new() })
    }

    /// A request's headers arrived; it is in flight until the returned guard is dropped.
    pub fn request_started(self: &Arc<Self>) -> InFlight {
        let mut clock = self.clock.lock().expect("the clock lock is never poisoned");
        clock.in_flight += 1;
        clock.headers_since = None;
        InFlight(self.clone())
    }

    /// Whether a request is in flight.
    pub fn busy(&self) -> bool {
        self.clock.lock().expect("the clock lock is never poisoned").in_flight > 0
    }

    /// Bytes arrived: on a connection without a request in flight, they start the next request's headers.
    fn received(&self) {
        let mut clock = self.clock.lock().expect("the clock lock is never poisoned");
        if clock.in_flight == 0 && clock.headers_since.is_none() {
            clock.headers_since = Some(Instant::now());
            // The deadline moved earlier (the header timeout is usually the shorter one).
            self.changed.notify_one();
        }
    }

    /// Resolves once the connection has overstayed: its headers took too long, or it sat idle too long.
    /// Never while a request is in flight.
    pub async fn expired(&self) {
        loop {
            // `notify_one` keeps a permit when nobody waits, so a change between here and the await is seen.
            let changed = self.changed.notified();
            let deadline = self.clock.lock().expect("the clock lock is never poisoned").deadline(self.timeouts);
            match deadline {
                None => changed.await,
                Some(at) if at <= Instant::now() => return,
                Some(at) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at) => {}
                        () = changed => {}
                    }
                }
            }
        }
    }
}

/// A request in flight; dropping it (its response finished, or the connection gone) may make the
/// connection idle.
#[derive(Debug)]
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut clock = self.0.clock.lock().expect("the clock lock is never poisoned");
        clock.in_flight -= 1;
        if clock.in_flight == 0 {
            clock.idle_since = Instant::now();
            clock.headers_since = None;
            self.0.changed.notify_one();
        }
    }
}

/// A response body that keeps its request in flight until hyper has sent it (or dropped it).
#[derive(Debug)]
pub struct TrackedBody {
    body: Body,
    _in_flight: InFlight,
}

impl TrackedBody {
    /// `body`, holding `in_flight` until it is dropped.
    pub fn new(body: Body, in_flight: InFlight) -> Self {
        TrackedBody { body, _in_flight: in_flight }
    }
}

impl HttpBody for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The socket, telling the clock when bytes arrive.
#[derive(Debug)]
pub struct TrackedIo {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl TrackedIo {
    /// `stream`, reporting to `activity`.
    pub fn new(stream: TcpStream, activity: Arc<Activity>) -> Self {
        TrackedIo { stream, activity }
    }
}

impl AsyncRead for TrackedIo {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let result = Pin::new(&mut this.stream).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.received();
        }
        result
    }
}

impl AsyncWrite for TrackedIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUTS: Timeouts = Timeouts { header: Duration::from_secs(10), idle: Duration::from_secs(60) };

    fn deadline(activity: &Activity) -> Option<Instant> {
        activity.clock.lock().unwrap().deadline(TIMEOUTS)
    }

    #[tokio::test(start_paused = true)]
    async fn headers_are_timed_from_the_start_then_idle_time_from_the_last_response() {
        let activity = Activity::new(TIMEOUTS);
        let start = Instant::now();
        assert_eq!(deadline(&activity), Some(start + TIMEOUTS.header), "a new connection owes its first headers");
        tokio::time::advance(Duration::from_secs(3)).await;
        activity.received();
        assert_eq!(deadline(&activity), Some(start + TIMEOUTS.header), "bytes do not extend the first headers'");
        let request = activity.request_started();
        assert_eq!(deadline(&activity), None, "never while a request is in flight");
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert_eq!(deadline(&activity), None);
        drop(request);
        let idle = Instant::now();
        assert_eq!(deadline(&activity), Some(idle + TIMEOUTS.idle), "kept alive with nothing received");
        tokio::time::advance(Duration::from_secs(5)).await;
        activity.received();
        assert_eq!(deadline(&activity), Some(idle + Duration::from_secs(5) + TIMEOUTS.header), "next headers begun");
    }

    #[tokio::test(start_paused = true)]
    async fn the_watchdog_fires_only_when_the_deadline_passes_with_nothing_in_flight() {
        let activity = Activity::new(TIMEOUTS);
        let request = activity.request_started();
        let watchdog = tokio::spawn({
            let activity = activity.clone();
            async move { activity.expired().await }
        });
        tokio::time::advance(Duration::from_secs(3600)).await;
        tokio::task::yield_now().await;
        assert!(!watchdog.is_finished(), "a long request is never cut");
        drop(request);
        tokio::time::advance(TIMEOUTS.idle - Duration::from_secs(1)).await;
        tokio::task::yield_now().await;
        assert!(!watchdog.is_finished());
        tokio::time::advance(Duration::from_secs(2)).await;
        tokio::time::timeout(Duration::from_secs(1), watchdog).await.expect("expired").unwrap();
    }
}
