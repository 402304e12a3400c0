//! Freeing what the change log's retention lets go, off the writers' path.
//!
//! Every write into a full log pushes its oldest entry out, and that entry may hold a whole
//! document (a put's or a delete's `previous`, `docs/contract.md`, "Change feed") written
//! long ago: freeing it is a few dozen cold frees, as much as the write itself. The log
//! gathers evicted entries into batches of [`BATCH`] and each batch goes to one thread of the
//! process, which frees them while the writers go on. The queue is short ([`QUEUED`]
//! batches): a writer finding it full frees its batch itself, so what waits to be freed is
//! bounded, and a process where the thread cannot start frees everything inline as before.
//!
//! One thread serves every store of the process and starts with the first batch, so making a
//! store still costs no more than an empty map (property tests make one per case).

use std::any::Any;
use std::sync::OnceLock;
use std::sync::mpsc::{SyncSender, sync_channel};

/// How many evicted log entries make one batch: one hand-off (a channel send, at most one
/// wake-up of the thread) per this many writes.
pub(crate) const BATCH: usize = 32;

/// How many batches may wait for the thread; past that the writer frees its batch itself.
/// With the batch being gathered, at most `(QUEUED + 1) * BATCH` evicted entries are alive.
pub(crate) const QUEUED: usize = 16;

/// Anything to free.
type Garbage = Box<dyn Any + Send>;

/// The queue of the process's reclaiming thread, started on first use; `None` when the
/// thread could not start.
fn queue() -> Option<&'static SyncSender<Garbage>> {
    static QUEUE: OnceLock<Option<SyncSender<Garbage>>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let (sender, receiver) = sync_channel::<Garbage>(QUEUED);
            let spawned = std::thread::Builder::new()
                .name("docstore-memory-reclaim".into())
                .spawn(move || receiver.into_iter().for_each(drop));
            spawned.ok().map(|_| sender)
        })
        .as_ref()
}

/// Frees `garbage` on the reclaiming thread, or here when its queue is full (or it could not
/// start). Never blocks on the thread.
pub(crate) fn drop_later(garbage: Garbage) {
    if let Some(queue) = queue() {
        // A full queue hands the batch back in the error, dropped here.
        let _ = queue.try_send(garbage);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// What is handed off is freed by the thread; with the queue full, at once by the caller.
    #[test]
    fn handed_off_garbage_is_freed() {
        let tracked = Arc::new(());
        for _ in 0..10 * QUEUED {
            drop_later(Box::new(Arc::clone(&tracked)));
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Arc::strong_count(&tracked) > 1 {
            assert!(Instant::now() < deadline, "never freed");
            std::thread::yield_now();
        }
    }
}
