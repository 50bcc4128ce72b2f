//! Files the broker re-reads when they change (a mounted Secret or ConfigMap is updated in place): the tokens
//! file, the teams and identities files. Each is read again every second; a change in its bytes calls the
//! owner's reload. Reading a file blocks its thread for as long as the volume takes (a network volume can
//! hang), so the reads and the reload (which reads the file once more) run on tokio's blocking pool, never on
//! an async worker that requests share.

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
        let mut last = tokio::fs::read(&path).await.ok();
        let mut tick = tokio::time::interval(RELOAD_INTERVAL);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = shutdown.cancelled() => return,
            }
            let now = tokio::fs::read(&path).await.ok();
            if now.is_none() || now == last {
                continue;
            }
            last = now;
            // The reload goes to the blocking pool and comes back, so the next change calls it again.
            let reloaded = path.clone();
            let reload = tokio::task::spawn_blocking(move || {
                changed(&reloaded);
                changed
            });
            changed = match reload.await {
                Ok(changed) => changed,
                // A reload that panics ends the watch with its panic, as it did when it ran on this task.
                Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                // Cancelled: the runtime is shutting down.
                Err(_) => return,
            };
        }
    })
}

#[cfg(test)]
mod tests {
    use std::{
        io::Write,
        os::unix::{ffi::OsStrExt, fs::OpenOptionsExt},
        sync::mpsc,
        thread::{self, ThreadId},
    };

    use super::*;

    /// Each reload: the path it was called with, and the thread it ran on.
    type Reloads = tokio::sync::mpsc::UnboundedReceiver<(std::path::PathBuf, ThreadId)>;

    fn temp_dir() -> tempfile::TempDir {
        tempfile::Builder::new().prefix("ark-file-watch-").tempdir().unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_in_its_bytes_reloads_and_an_unchanged_or_missing_file_does_not() {
        let dir = temp_dir();
        let path: Arc<Path> = dir.path().join("tokens").into();
        let (tx, mut reloads) = tokio::sync::mpsc::unbounded_channel();
        let shutdown = CancellationToken::new();
        let watch = on_change(path.clone(), shutdown.clone(), move |path| {
            tx.send((path.to_owned(), thread::current().id())).unwrap();
        });
        // Paused time runs on by itself, each tick's read done before the clock moves again.
        let a_few_reads = || tokio::time::sleep(3 * RELOAD_INTERVAL);
        let next_reload = async |reloads: &mut Reloads| tokio::time::timeout(2 * RELOAD_INTERVAL, reloads.recv()).await;

        a_few_reads().await;
        std::fs::write(&path, "a").unwrap();
        let (reloaded, on) = next_reload(&mut reloads).await.expect("a file that appears reloads").unwrap();
        assert_eq!(reloaded, *path);
        assert_ne!(on, thread::current().id(), "the reload ran on the async worker");

        std::fs::write(&path, "a").unwrap();
        a_few_reads().await;
        assert!(reloads.try_recv().is_err(), "the same bytes written again reload nothing");

        std::fs::remove_file(&path).unwrap();
        a_few_reads().await;
        std::fs::write(&path, "a").unwrap();
        a_few_reads().await;
        assert!(reloads.try_recv().is_err(), "a file gone for a while and back as it was reloads nothing");

        std::fs::write(&path, "b").unwrap();
        next_reload(&mut reloads).await.expect("new bytes reload").unwrap();
        shutdown.cancel();
        watch.await.unwrap();
    }

    /// A FIFO that no one writes blocks whoever opens it to read, as a hung network volume would: a runtime
    /// with one worker thread still runs its other tasks while the watch waits on it.
    #[test]
    fn a_read_that_blocks_leaves_the_async_worker_free() {
        let dir = temp_dir();
        let fifo: Arc<Path> = dir.path().join("tokens").into();
        let name = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "{}", std::io::Error::last_os_error());
        let shutdown = CancellationToken::new();
        let (ready, answered) = mpsc::channel();
        let runtime = thread::spawn({
            let (fifo, shutdown) = (fifo.clone(), shutdown.clone());
            move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
                runtime.block_on(async move {
                    let watch = on_change(fifo, shutdown, |_| {});
                    // The watch runs first and starts its read; a timer firing shows the worker is free.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    ready.send(()).unwrap();
                    watch.await.unwrap();
                });
            }
        });
        let free = answered.recv_timeout(Duration::from_secs(10));
        shutdown.cancel();
        // Each read ends once a writer has come and gone; opened without blocking, a writer only gets in
        // while the watch has the FIFO open.
        while !runtime.is_finished() {
            if let Ok(mut writer) = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(&fifo) {
                let _ = writer.write_all(b"x");
            }
            thread::sleep(Duration::from_millis(10));
        }
        runtime.join().unwrap();
        assert!(free.is_ok(), "the watch's read of a FIFO held the runtime's one worker for 10 s");
    }
}
