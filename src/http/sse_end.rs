//! When this replica's server-sent event streams end, with a `retry:` hint so their clients reconnect (through
//! the Service, to another replica): at shutdown, and when the replica has lost PostgreSQL for
//! [`READERS_MOVE_AFTER`]. A replica cut off from PostgreSQL gets no notifications, so its readers would stay
//! open and silent while the other replicas serve what they miss; a short outage (a PostgreSQL restart) is
//! waited out, and the readers resume where they were.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::db::listener::ListenerStatus;

/// How long PostgreSQL may stay lost before this replica's open streams are ended.
pub const READERS_MOVE_AFTER: Duration = Duration::from_secs(5);

/// The token each new stream ends with. Ending the open streams swaps in a fresh token, so streams opened
/// afterwards run until the next end.
#[derive(Debug, Clone)]
pub struct StreamsEnd {
    shutdown: CancellationToken,
    current: Arc<Mutex<CancellationToken>>,
}

impl StreamsEnd {
    /// Streams that end when `shutdown` fires, or when [`StreamsEnd::end_open_streams`] is called.
    pub fn new(shutdown: &CancellationToken) -> Self {
        StreamsEnd { shutdown: shutdown.clone(), current: Arc::new(Mutex::new(shutdown.child_token())) }
    }

    /// The token a stream opened now ends with.
    pub fn token(&self) -> CancellationToken {
        self.current.lock().expect("never poisoned: nothing panics while holding it").clone()
    }

    /// Ends every stream open now; later ones run on.
    pub fn end_open_streams(&self) {
        let fresh = self.shutdown.child_token();
        let open = std::mem::replace(&mut *self.current.lock().expect("never poisoned"), fresh);
        open.cancel();
    }
}

/// Ends the open streams each time PostgreSQL has been lost for `after` (again every `after` while it stays
/// lost, for streams opened meanwhile), until `shutdown`.
pub fn spawn_mover(
    listener: ListenerStatus,
    streams: StreamsEnd,
    after: Duration,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = listener.wait_down() => {}
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = listener.wait_up() => continue,
                () = tokio::time::sleep(after) => {}
            }
            tracing::warn!(
                lost_for_ms = after.as_millis() as u64,
                "PostgreSQL is lost: ending this replica's event streams so their readers reconnect elsewhere"
            );
            streams.end_open_streams();
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ending_the_open_streams_spares_later_ones_and_shutdown_ends_all() {
        let shutdown = CancellationToken::new();
        let streams = StreamsEnd::new(&shutdown);
        let open = streams.token();
        streams.end_open_streams();
        assert!(open.is_cancelled());
        let later = streams.token();
        assert!(!later.is_cancelled());
        shutdown.cancel();
        assert!(later.is_cancelled() && streams.token().is_cancelled());
    }
}
