//! Taking the writer connection's mutex under concurrent short writes: spin briefly before
//! sleeping.
//!
//! With `synchronous = NORMAL` a write holds the writer connection for tens of µs, on the
//! calling thread (`Connections::write_on_this_thread`). A writer that finds it held and goes to sleep at once (`parking_lot`'s `lock` spins for a
//! few µs only) has to be woken by the holder's unlock — a `futex` wake-up on the holder's
//! side and a reschedule on its own, during which the connection sits idle while the
//! holder's thread goes on to its next call's work outside the lock. Measured with 16
//! tasks updating through a two-thread runtime (`docs/benchmarks.md`, "SQLite writes
//! under 16 tasks"): the connection was idle a third of the time, and the writes ran at
//! 0.8x hand-written `rusqlite` behind a plain mutex, whose callers come back for the lock
//! before the woken thread does. Spinning for about one write's length instead takes the
//! connection the moment it is released, and then sleeps as before.

use parking_lot::{Mutex, MutexGuard};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

/// How long a writer spins for a held connection before it sleeps: a few short writes'
/// worth, so a waiter behind one write never sleeps, and one behind a long write (a group
/// commit, a checkpoint by the writer) stops burning its core soon.
const SPIN_BEFORE_SLEEPING: Duration = Duration::from_micros(100);

/// Tries between two looks at the clock.
const TRIES_PER_CLOCK_READ: usize = 64;

/// Whether spinning can help: with one CPU, the holder cannot release the lock while the
/// waiter spins on the only core.
static SEVERAL_CPUS: LazyLock<bool> =
    LazyLock::new(|| std::thread::available_parallelism().is_ok_and(|cpus| cpus.get() > 1));

/// Locks `mutex`, spinning up to [`SPIN_BEFORE_SLEEPING`] while it is held (with more than
/// one CPU) and then sleeping until it is released.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    if let Some(guard) = mutex.try_lock() {
        return guard;
    }
    if *SEVERAL_CPUS {
        let started = Instant::now();
        while started.elapsed() < SPIN_BEFORE_SLEEPING {
            for _ in 0..TRIES_PER_CLOCK_READ {
                std::hint::spin_loop();
                if let Some(guard) = mutex.try_lock() {
                    return guard;
                }
            }
        }
    }
    mutex.lock()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    #[test]
    fn a_free_mutex_is_taken_at_once() {
        let mutex = Mutex::new(1);
        *lock(&mutex) += 1;
        assert_eq!(*mutex.lock(), 2);
    }

    #[test]
    fn a_mutex_held_past_the_spin_is_waited_for_and_excludes() {
        let mutex = Arc::new(Mutex::new(0usize));
        let released = Arc::new(AtomicBool::new(false));
        let held = mutex.lock();
        let waiter = {
            let (mutex, released) = (Arc::clone(&mutex), Arc::clone(&released));
            std::thread::spawn(move || {
                let mut guard = lock(&mutex);
                // Taken only once the holder let go: the flag is set before the release.
                let after_release = released.load(Ordering::SeqCst);
                *guard += 1;
                after_release
            })
        };
        // Held well past the spin, so the waiter goes to sleep on it.
        std::thread::sleep(SPIN_BEFORE_SLEEPING * 20);
        released.store(true, Ordering::SeqCst);
        drop(held);
        assert!(waiter.join().unwrap(), "the waiter took a held mutex");
        assert_eq!(*mutex.lock(), 1);
    }

    #[test]
    fn spinning_writers_lose_no_increment() {
        let mutex = Arc::new(Mutex::new(0usize));
        let inside = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (mutex, inside) = (Arc::clone(&mutex), Arc::clone(&inside));
                std::thread::spawn(move || {
                    for _ in 0..2_000 {
                        let mut guard = lock(&mutex);
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                        *guard += 1;
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(*mutex.lock(), 8_000);
    }
}
