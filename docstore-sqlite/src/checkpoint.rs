//! WAL checkpoints off the writer's commits, with `synchronous = NORMAL`.
//!
//! SQLite's default (`wal_autocheckpoint = 1000`) runs a checkpoint inside the commit that
//! takes the log past 1 000 frames: that write copies the logged pages into the database file
//! and syncs it while holding the write lock, and every caller queued behind it waits. Here
//! the writer connection's WAL hook instead wakes a checkpointer thread with its own
//! connection, which runs `PASSIVE` checkpoints (never waiting for, nor blocking, readers or
//! writers) beside the writes.
//!
//! A checkpoint running beside writes may never catch up with the end of the log, and SQLite
//! starts the log over only when a write begins with every frame copied; so once the log
//! holds [`WRITER_FRAMES`] frames, the writer checkpoints itself after its commit (cheap: the
//! checkpointer copied most frames already), as SQLite would, and the log starts over. If the
//! checkpointer cannot open its connection, that limit is all that remains: checkpoints as
//! SQLite's default makes them, only less often.
//!
//! Only for [`Durability::Normal`](crate::Durability::Normal), where a commit costs no fsync
//! and the checkpoint (which syncs the log and the database file) is most of the disk work:
//! single-document writes measured 1.4–1.6x as fast with it (`docs/benchmarks.md`). With
//! `Full` every commit waits for an fsync of the log, and a checkpoint writing pages and
//! syncing beside it made those waits longer: single writes measured 0.54–0.66x as fast, so
//! `Full` keeps SQLite's own checkpoints.

use rusqlite::Connection;
use rusqlite::hooks::Wal;
use rusqlite::wal::CheckpointMode;
use std::ffi::c_int;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::thread::JoinHandle;

/// Log frames after a commit that wake the checkpointer (SQLite's default auto-checkpoint).
pub(crate) const BACKGROUND_FRAMES: c_int = 1_000;

/// Log frames after a commit from which the writer checkpoints itself (about 32 MB of 4 KiB
/// pages).
pub(crate) const WRITER_FRAMES: c_int = 8_000;

/// The checkpointer thread; stopped and joined when dropped.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    wake: SyncSender<()>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the checkpointer (its connection opened by `open`, on its own thread) and
    /// hooks `writer`'s commits to it.
    pub(crate) fn start(
        writer: &mut Connection,
        open: impl FnOnce() -> docstore::Result<Connection> + Send + 'static,
    ) -> rusqlite::Result<Self> {
        let (wake, woken) = mpsc::sync_channel::<()>(1);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("docstore-sqlite-checkpoint".into())
            .spawn(move || {
                let conn = match open() {
                    Ok(conn) => conn,
                    Err(err) => {
                        tracing::warn!(%err, "no checkpointer connection; the writer checkpoints");
                        return;
                    }
                };
                while woken.recv().is_ok() && !stopped.load(Ordering::Acquire) {
                    if let Err(err) = conn.wal_checkpoint_v2(None::<&str>, CheckpointMode::PASSIVE)
                    {
                        // Another process's checkpoint, say; the next wake tries again.
                        tracing::debug!(%err, "background checkpoint");
                    }
                }
            })
            .expect("spawning the sqlite checkpointer thread");
        let hook_wake = wake.clone();
        // The log's length at which the checkpointer is woken next: once per
        // BACKGROUND_FRAMES frames logged, not after every commit past the mark, so that
        // it runs (and syncs the database file) as often as SQLite's own checkpoints would,
        // never chasing the log's end commit by commit.
        let mut next_wake = BACKGROUND_FRAMES;
        writer.wal_hook(Some(move |wal: &mut Wal, frames: c_int| {
            if frames < next_wake - BACKGROUND_FRAMES {
                // The log started over.
                next_wake = BACKGROUND_FRAMES;
            }
            if frames >= WRITER_FRAMES {
                // Busy when a checkpoint is running: the next commit tries again.
                if let Err(err) = wal.checkpoint() {
                    tracing::debug!(%err, "writer checkpoint");
                }
            } else if frames >= next_wake {
                next_wake = frames + BACKGROUND_FRAMES;
                // Full: a wake is pending already.
                let _ = hook_wake.try_send(());
            }
            // The commit happened whatever the checkpoint did.
            Ok(())
        }))?;
        Ok(Checkpointer {
            wake,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Full: the pending wake makes the thread see `stop`.
        let _ = self.wake.try_send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
