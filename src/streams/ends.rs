//! Who hears that a stream ended — completed through `/complete`, or aborted or completed by the sweep — so
//! that what its Query left open can be closed (the state layer cancels its questions). Streams hand the
//! names on and never import who listens.

use tokio::sync::mpsc::UnboundedSender;

/// Where the names of ended streams go.
#[derive(Debug, Clone, Default)]
pub struct StreamEnds(Option<UnboundedSender<String>>);

impl StreamEnds {
    /// Ends reported to `sender`.
    pub fn new(sender: UnboundedSender<String>) -> Self {
        StreamEnds(Some(sender))
    }

    /// Stream `id` ended (a listener that has gone is no one's loss: the reaper's pass does the same).
    pub fn ended(&self, id: &str) {
        if let Some(sender) = &self.0 {
            let _ = sender.send(id.to_owned());
        }
    }
}
