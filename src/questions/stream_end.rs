//! Cancels the questions a Query left open when its stream ends on this replica (the names come from the
//! streams domain as they end); the reaper's pass does the same on every replica for ends this missed.

use tokio::{sync::mpsc::UnboundedReceiver, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use super::store::QuestionStore;
use crate::telemetry::chain;

/// Questions cancelled per ended stream in one go (a Query asks a handful).
const BATCH: i64 = 1_000;

/// Starts cancelling the open questions of each stream named on `ends`, until `shutdown`.
pub fn spawn(
    questions: QuestionStore,
    mut ends: UnboundedReceiver<String>,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(name) = tokio::select! {
            name = ends.recv() => name,
            () = shutdown.cancelled() => None,
        } {
            match questions.cancel_for_ended_streams(Some(&name), BATCH).await {
                Ok(0) => {}
                Ok(cancelled) => {
                    tracing::info!(query = %name, cancelled, "cancelled the open questions of an ended Query")
                }
                Err(error) => {
                    tracing::warn!(query = %name, error = %chain(&error), "cannot cancel an ended Query's questions; the reaper will")
                }
            }
        }
    })
}
