//! One chunk POST on its way to the writer: NDJSON lines read as they arrive and handed to the replica's
//! group commit ([`super::writer`]), the count of what is stored, the POST's registration as an open writer
//! of its stream (sealed when a completion is requested: [`super::completion`]), and what happens when the
//! connection breaks ([`super::abort`]) or the replica drains.

use crate::telemetry::chain;
use std::{collections::VecDeque, sync::Arc};

use axum::body::Body;
use futures::StreamExt;
use tokio::time::Instant;

use super::{
    RouteState,
    budget::BudgetShare,
    completion::{MAX_SEAL, OpenWriter, QUIET},
    completion_store::Release,
    model::Line,
    ndjson::NdjsonLines,
    writer::{Ack, Request},
};
use crate::{error::ApiError, idempotency::IdempotencyKey};

/// Acks a request may have outstanding before it waits for the oldest; bounds memory per request.
const MAX_PENDING_ACKS: usize = 64;

/// One chunk POST on its way to the writer.
pub struct Ingest<'a> {
    state: &'a RouteState,
    stream_id: Arc<str>,
    request: Arc<Request>,
    /// The POST as an open writer of its stream; registered in Postgres by [`Ingest::register`].
    writer: OpenWriter,
    /// Whether its registration stands (released once sealed for a completion, or at the end).
    registered: bool,
    /// Since when it is sealing: reading what arrived before a requested completion.
    sealing: Option<Instant>,
    /// When the whole request must have arrived (`REQUEST_TIMEOUT_MS`), if it is bounded.
    arrive_by: Option<Instant>,
    /// The NDJSON lines read so far.
    pub lines: NdjsonLines,
    /// What `lines` holds of the replica's budget; given back when the request ends, however it ends.
    budget: BudgetShare,
    /// Hand-overs not yet known to be stored, oldest first, with their line counts.
    pending: VecDeque<(Ack, usize)>,
    /// Lines handed over.
    pub received: usize,
    /// Lines known to be stored: always the first `stored` of the request.
    pub stored: usize,
    /// Whether the body was read to its end (or the broker ended the request). A request dropped, or whose
    /// body failed, before that lost its writer: the connection broke mid-body (see [`super::abort`]).
    body_ended: bool,
}

impl Drop for Ingest<'_> {
    fn drop(&mut self) {
        if self.body_ended {
            return;
        }
        // Marked once what was handed over is stored, so those chunks' own commit does not clear the mark.
        let pending = std::mem::take(&mut self.pending);
        let (store, stream_id) = (self.state.chunks.clone(), self.stream_id.clone());
        let writer = self.registered.then_some(self.writer.id);
        tokio::spawn(async move {
            for (ack, _) in pending {
                let _ = ack.await;
            }
            // A completion already requested ends the stream after what was stored, rather than aborting it.
            if let Some(writer) = writer
                && let Err(error) = store.release_writer(writer, &stream_id, false).await
            {
                tracing::warn!(error = %chain(&error), stream.id = %stream_id, "cannot release a broken chunk POST");
            }
            if let Err(error) = store.writer_lost(&stream_id).await {
                tracing::warn!(error = %chain(&error), stream.id = %stream_id, "cannot record that a stream's writer disconnected");
            }
        });
    }
}

impl<'a> Ingest<'a> {
    /// A POST to `stream_id`, known to this replica's completion requests from now on.
    pub fn new(state: &'a RouteState, stream_id: &str, key: Option<IdempotencyKey>, budget: BudgetShare) -> Self {
        let stream_id: Arc<str> = Arc::from(stream_id);
        Ingest {
            state,
            writer: state.open_writers.open(stream_id.clone()),
            stream_id,
            request: Arc::new(Request::new(key)),
            registered: false,
            sealing: None,
            arrive_by: state.config.request_timeout().map(|timeout| Instant::now() + timeout),
            lines: NdjsonLines::new(state.config.max_chunk_bytes),
            budget,
            pending: VecDeque::new(),
            received: 0,
            stored: 0,
            body_ended: false,
        }
    }

    /// Registers the POST as an open writer of its stream, before any of its body is read: a `/complete`
    /// on any replica from now on waits for the lines it receives.
    pub async fn register(&mut self) -> Result<(), ApiError> {
        let requested = match self.state.chunks.register_writer(self.writer.id, &self.stream_id).await {
            Ok(requested) => requested,
            Err(error) => {
                // The broker refuses the request before reading it: no writer was lost.
                self.body_ended = true;
                return Err(error.into());
            }
        };
        self.registered = true;
        if requested {
            self.writer.request_seal();
        }
        Ok(())
    }

    /// Releases the registration once the POST ended and its lines are settled; the stream's end, if
    /// requested, is appended here when this was the last writer it waited for.
    pub async fn release(&mut self) {
        if !self.registered {
            return;
        }
        match self.state.chunks.release_writer(self.writer.id, &self.stream_id, false).await {
            Ok(_) => self.registered = false,
            Err(error) => {
                tracing::warn!(error = %chain(&error), stream.id = %self.stream_id, "cannot release a chunk POST")
            }
        }
    }

    /// Reads the body to its end, handing lines over as they complete; stops at the first failure.
    pub async fn feed(&mut self, body: Body) -> Result<(), ApiError> {
        let mut body = body.into_data_stream();
        let request = self.request.clone();
        let deadline = self.state.drain_deadline.clone();
        let seal = self.writer.seal_signal();
        loop {
            let quiet = self.sealing.map(|since| (Instant::now() + QUIET).min(since + MAX_SEAL));
            // A failed write ends the request at once, even if the client keeps sending.
            let piece = tokio::select! {
                piece = body.next() => piece,
                () = request.failure() => {
                    // The broker ended the request, not the writer: the stream keeps its writer.
                    self.body_ended = true;
                    return Err(not_stored());
                }
                () = deadline.cancelled() => {
                    // The replica drained as long as it may: what was read is stored and the reply says how
                    // much; the writer sends the rest to another replica. A line cut off mid-way is not stored.
                    self.body_ended = true;
                    return Err(ApiError::Draining(
                        "the broker is shutting down: send the lines after chunks_stored to another replica".into(),
                    ));
                }
                () = sleep_until(self.arrive_by), if self.arrive_by.is_some() => {
                    // As upstream's Node server: the request took too long to arrive. What was read is stored
                    // and the reply says how much; the broker ended the request, the stream keeps its writer.
                    self.body_ended = true;
                    return Err(ApiError::RequestTimeout(format!(
                        "the request did not arrive within REQUEST_TIMEOUT_MS ({} ms): send the lines after \
                         chunks_stored again",
                        self.state.config.request_timeout_ms
                    )));
                }
                () = seal.notified(), if self.sealing.is_none() && self.registered => {
                    self.sealing = Some(Instant::now());
                    continue;
                }
                () = sleep_until(quiet), if quiet.is_some() => {
                    self.seal().await?;
                    continue;
                }
            };
            let Some(piece) = piece else { break };
            let piece = piece.map_err(|e| ApiError::BadRequest(format!("reading the request body failed: {e}")))?;
            let chunks = self.lines.push(&piece);
            // The complete lines are handed over either way; a refused hold then ends the request.
            let held = self.budget.hold(self.lines.buffered());
            self.submit(chunks).await?;
            if let Err(refused) = held {
                // The broker ends the request, not the writer: the stream keeps its writer.
                self.body_ended = true;
                return Err(refused);
            }
        }
        self.body_ended = true;
        let rest = self.lines.finish();
        // Finishing only gives bytes back.
        let _ = self.budget.hold(self.lines.buffered());
        self.submit(rest).await
    }

    /// Everything that arrived before the completion request is read: once it is stored, the registration is
    /// released (the marker appended if this was the last writer). A stale request keeps the registration.
    async fn seal(&mut self) -> Result<(), ApiError> {
        self.sealing = None;
        self.settle().await?;
        if self.state.chunks.release_writer(self.writer.id, &self.stream_id, true).await? != Release::Kept {
            self.registered = false;
        }
        Ok(())
    }

    async fn submit(&mut self, chunks: Vec<Line>) -> Result<(), ApiError> {
        let count = chunks.len();
        if count == 0 {
            return Ok(());
        }
        let ack = self.state.writer.write(&self.request, self.stream_id.clone(), chunks, self.received).await?;
        self.received += count;
        self.pending.push_back((ack, count));
        if self.pending.len() > MAX_PENDING_ACKS
            && let Some((oldest, lines)) = self.pending.pop_front()
        {
            self.wait_stored(oldest, lines).await?;
        }
        Ok(())
    }

    /// Waits for every outstanding hand-over, in order; stops at the first that was not stored (the writer
    /// stores none after it).
    pub async fn settle(&mut self) -> Result<(), ApiError> {
        while let Some((ack, lines)) = self.pending.pop_front() {
            self.wait_stored(ack, lines).await?;
        }
        Ok(())
    }

    async fn wait_stored(&mut self, ack: Ack, lines: usize) -> Result<(), ApiError> {
        match ack.await {
            Ok(Ok(())) => {
                self.stored += lines;
                Ok(())
            }
            _ => Err(not_stored()),
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

fn not_stored() -> ApiError {
    ApiError::Unavailable("chunks could not be stored; retry".into())
}
