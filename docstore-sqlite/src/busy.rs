//! Waiting for another process's lock: SQLite's busy timeout (the same waits as
//! `sqlite3_busy_timeout`), saying once per process that a wait began, and calls that try a
//! lock once without waiting.

use rusqlite::Connection;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The `tracing` target of the notice that a connection waits for another process's lock.
pub const LOCK_WAIT_TARGET: &str = "docstore_sqlite::lock";

/// SQLite's own delays between tries of a busy lock, in milliseconds (then the last one).
const DELAYS_MS: [u64; 12] = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100];

/// Whether this process has said that it waits for a lock.
static SAID: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Set while a call on this thread must not wait for a lock ([`Impatient`]).
    static IMPATIENT: Cell<bool> = const { Cell::new(false) };
    /// When every lock wait of the operation running on this thread ends ([`Deadline`]).
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Makes `conn` wait up to `timeout` for a lock another connection holds, as
/// `sqlite3_busy_timeout` does; the first wait of the process is said once (info, target
/// [`LOCK_WAIT_TARGET`]).
pub(crate) fn wait_for_locks(conn: &mut Connection, timeout: Duration) -> rusqlite::Result<()> {
    let mut started = Instant::now();
    conn.busy_handler(Some(move |count: i32| {
        if IMPATIENT.with(Cell::get) {
            return false;
        }
        if count == 0 {
            started = Instant::now();
            if !timeout.is_zero() && !SAID.swap(true, Ordering::Relaxed) {
                tracing::info!(
                    target: LOCK_WAIT_TARGET,
                    "waiting for a lock another process holds on the database (busy timeout {} ms)",
                    timeout.as_millis()
                );
            }
        }
        let deadline = DEADLINE.with(Cell::get).unwrap_or(started + timeout);
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let index = usize::try_from(count).unwrap_or(usize::MAX);
        let delay = DELAYS_MS.get(index).copied().unwrap_or(100);
        std::thread::sleep(Duration::from_millis(delay).min(left));
        true
    }))
}

/// While it lives, every lock wait on this thread ends at one instant: the busy timeout
/// bounds an operation as a whole, so one retried after a busy failure (or a group commit's
/// writes run again one by one) never waits the timeout again. The outermost one counts.
pub(crate) struct Deadline {
    /// Whether this one set the thread's deadline (and clears it when dropped).
    outermost: bool,
    /// The busy timeout it stands for (said in the error of an operation that gave up).
    pub(crate) timeout: Duration,
}

impl Deadline {
    /// Lock waits on this thread end `timeout` from now, unless an outer deadline is set.
    pub(crate) fn start(timeout: Duration) -> Self {
        let outermost = DEADLINE.with(|deadline| {
            if deadline.get().is_some() {
                return false;
            }
            deadline.set(Some(Instant::now() + timeout));
            true
        });
        Deadline { outermost, timeout }
    }

    /// Whether the deadline has passed: retrying would not wait any more.
    pub(crate) fn passed(&self) -> bool {
        DEADLINE.with(|deadline| deadline.get().is_some_and(|end| Instant::now() >= end))
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        if self.outermost {
            DEADLINE.with(|deadline| deadline.set(None));
        }
    }
}

/// While it lives, calls on this thread try a lock once and do not wait for it.
pub(crate) struct Impatient(());

impl Impatient {
    /// Starts trying locks once on this thread.
    pub(crate) fn start() -> Self {
        IMPATIENT.with(|flag| flag.set(true));
        Impatient(())
    }
}

impl Drop for Impatient {
    fn drop(&mut self) {
        IMPATIENT.with(|flag| flag.set(false));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn locked_pair(timeout: Duration) -> (tempfile::TempDir, Connection, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("busy.db");
        let holder = Connection::open(&path).unwrap();
        holder
            .execute_batch("CREATE TABLE t (x); BEGIN IMMEDIATE; INSERT INTO t VALUES (1);")
            .unwrap();
        let mut waiter = Connection::open(&path).unwrap();
        wait_for_locks(&mut waiter, timeout).unwrap();
        (dir, holder, waiter)
    }

    /// A busy timeout far longer than anything these tests wait: a test that ends well
    /// within it (`NEVER_WAITED_OUT`) shows that the timeout did not bound its wait; the
    /// margin is wide, so a loaded machine does not make it fail.
    const LONG_TIMEOUT: Duration = Duration::from_secs(60);
    const NEVER_WAITED_OUT: Duration = Duration::from_secs(30);

    #[test]
    fn a_busy_lock_is_waited_for_up_to_the_timeout() {
        let (_dir, _holder, waiter) = locked_pair(Duration::from_millis(300));
        let started = Instant::now();
        assert!(waiter.execute_batch("BEGIN IMMEDIATE").is_err());
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(290), "{waited:?}");
    }

    #[test]
    fn an_impatient_call_does_not_wait_for_a_busy_lock() {
        let (_dir, _holder, waiter) = locked_pair(LONG_TIMEOUT);
        let started = Instant::now();
        let impatient = Impatient::start();
        assert!(waiter.execute_batch("BEGIN IMMEDIATE").is_err());
        drop(impatient);
        assert!(
            started.elapsed() < NEVER_WAITED_OUT,
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_deadline_bounds_every_wait_of_an_operation() {
        let (_dir, _holder, waiter) = locked_pair(LONG_TIMEOUT);
        let started = Instant::now();
        let deadline = Deadline::start(Duration::from_millis(300));
        assert!(waiter.execute_batch("BEGIN IMMEDIATE").is_err());
        assert!(deadline.passed());
        let first = started.elapsed();
        // A second try under the same deadline gives up too, instead of waiting the
        // connection's busy timeout afresh.
        assert!(waiter.execute_batch("BEGIN IMMEDIATE").is_err());
        drop(deadline);
        assert!(first >= Duration::from_millis(290), "{first:?}");
        assert!(
            started.elapsed() < NEVER_WAITED_OUT,
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_lock_released_while_waiting_is_taken() {
        let (_dir, holder, waiter) = locked_pair(Duration::from_secs(20));
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            holder.execute_batch("COMMIT").unwrap();
        });
        waiter.execute_batch("BEGIN IMMEDIATE; COMMIT").unwrap();
        release.join().unwrap();
    }
}
