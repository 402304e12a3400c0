//! Where stores take the time from.

use std::fmt::Debug;
use std::sync::atomic::{AtomicI64, Ordering};

/// A source of wall-clock time in unix nanoseconds (UTC).
///
/// Stores are built with one; [`SystemClock`] is the default and [`ManualClock`] makes tests and
/// property runs reproducible. A clock may step backwards: stores never let a document's
/// `updated_at` decrease because of that.
pub trait Clock: Send + Sync + Debug {
    /// The current time in unix nanoseconds.
    fn now(&self) -> i64;
}

/// The operating system's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        i64::try_from(since_epoch.as_nanos()).unwrap_or(i64::MAX)
    }
}

/// A clock that only moves when told to.
///
/// ```
/// use docstore::{Clock, ManualClock};
///
/// let clock = ManualClock::new(1_000);
/// clock.advance(5);
/// assert_eq!(clock.now(), 1_005);
/// clock.set(10); // stepping back is allowed
/// assert_eq!(clock.now(), 10);
/// ```
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock standing at `now` (unix nanoseconds).
    pub fn new(now: i64) -> Self {
        ManualClock(AtomicI64::new(now))
    }

    /// Sets the time, forwards or backwards.
    pub fn set(&self, now: i64) {
        self.0.store(now, Ordering::SeqCst);
    }

    /// Moves the time forward by `nanos` (backward when negative).
    pub fn advance(&self, nanos: i64) {
        self.0.fetch_add(nanos, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The timestamps for a write at `now` to a document last written at `previous_updated_at`
/// (`None` for a new document): `updated_at` never goes backwards.
pub fn next_updated_at(now: i64, previous_updated_at: Option<i64>) -> i64 {
    match previous_updated_at {
        Some(previous) => now.max(previous),
        None => now,
    }
}
