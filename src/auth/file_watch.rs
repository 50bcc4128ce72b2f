//! Files the broker re-reads when they change (a mounted Secret or ConfigMap is updated in place): the tokens
//! file, the teams and identities files. Each is read again every second; a change in its bytes calls the
//! owner's reload.

use std::{path::Path, sync::Arc, time::Duration};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How often a file is read again to see whether it changed.
const RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// Calls `changed` each time `path`'s bytes differ from the last read, until `shutdown` (a file that cannot be
/// read is skipped until it can be).
pub fn on_change(
    path: Arc<Path>,
    shutdown: CancellationToken,
    mut changed: impl FnMut(&Path) + Send + 'static,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut last = std::fs::read(&path).ok();
        let mut tick = tokio::time::interval(RELOAD_INTERVAL);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = shutdown.cancelled() => return,
            }
            let now = std::fs::read(&path).ok();
            if now.is_none() || now == last {
                continue;
            }
            last = now;
            changed(&path);
        }
    })
}
