//! Retries: the policy every call of a [`Store`](crate::Store) follows when it ends
//! [`Error::Unavailable`](crate::Error::Unavailable) ([`RetryPolicy`]), and the one jittered
//! backoff ([`Backoff`]) behind it and behind a backend's own waits (DynamoDB's throttling and
//! transaction conflicts).
//!
//! The front end retries every call — reads, writes, `modify`, batches, the pages of streams
//! and feeds — itself, in one place, under the store's policy (`docs/contract.md`, "Retries"):
//! after each `Unavailable` it waits a full-jitter delay and tries again, until the call
//! succeeds, fails otherwise, has retried [`max_retries`](RetryPolicy::max_retries) times, or
//! the next wait would end past its [`budget`](RetryPolicy::budget), counted from the call's
//! start. A write keeps one write identity for the whole call, so a try whose answer was lost
//! is recognised by the next one instead of applied twice; when the budget ends, the error
//! carries that identity ([`Error::write_id`](crate::Error::write_id)).
//!
//! ```
//! use std::time::Duration;
//! use docstore::StoreOptions;
//! use docstore::retry::{BackoffConfig, RetryPolicy};
//!
//! // A batch job may wait longer than a web request.
//! let patient = RetryPolicy::default()
//!     .with_max_retries(30)
//!     .with_budget(Duration::from_secs(120))
//!     .with_backoff(BackoffConfig::default().with_max_backoff(Duration::from_secs(10)));
//! let options = StoreOptions::default().with_retry(patient);
//! assert_eq!(options.retry.max_retries, 30);
//! // No retries at all: every `Unavailable` is handed on at once.
//! assert_eq!(RetryPolicy::NONE.max_retries, 0);
//! ```

use std::time::Duration;
use tokio::time::Instant;

/// The default [`RetryPolicy::max_retries`].
pub const DEFAULT_MAX_RETRIES: u32 = 10;
/// The default [`RetryPolicy::budget`]: what a web request can spend waiting for a backend
/// that is briefly unavailable, and still answer in time.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(5);
/// The default [`BackoffConfig::init_backoff`].
pub const DEFAULT_INIT_BACKOFF: Duration = Duration::from_millis(50);
/// The default [`BackoffConfig::max_backoff`].
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(1);
/// The default [`BackoffConfig::base`].
pub const DEFAULT_BASE: f64 = 2.0;

/// How the waits between tries grow: the `n`-th wait (from 0) is drawn uniformly from
/// `[0, min(max_backoff, init_backoff × base^n))` — "full jitter", so that callers that
/// failed together do not try again together.
///
/// ```
/// use std::time::Duration;
/// use docstore::retry::BackoffConfig;
///
/// let config = BackoffConfig::default();
/// assert_eq!(config.bound(0), Duration::from_millis(50));
/// assert_eq!(config.bound(2), Duration::from_millis(200));
/// assert_eq!(config.bound(40), Duration::from_secs(1)); // capped at max_backoff
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct BackoffConfig {
    /// The bound of the first wait (default 50 ms).
    pub init_backoff: Duration,
    /// The largest bound of any wait (default 1 s).
    pub max_backoff: Duration,
    /// How much each bound grows over the previous one (default 2; at least 1).
    pub base: f64,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            init_backoff: DEFAULT_INIT_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
            base: DEFAULT_BASE,
        }
    }
}

impl BackoffConfig {
    /// Bounds from `init_backoff` up to `max_backoff`, growing by `base`.
    pub const fn new(init_backoff: Duration, max_backoff: Duration, base: f64) -> Self {
        BackoffConfig {
            init_backoff,
            max_backoff,
            base,
        }
    }

    /// Sets [`init_backoff`](Self::init_backoff).
    pub fn with_init_backoff(mut self, init_backoff: Duration) -> Self {
        self.init_backoff = init_backoff;
        self
    }

    /// Sets [`max_backoff`](Self::max_backoff).
    pub fn with_max_backoff(mut self, max_backoff: Duration) -> Self {
        self.max_backoff = max_backoff;
        self
    }

    /// Sets [`base`](Self::base).
    pub fn with_base(mut self, base: f64) -> Self {
        self.base = base;
        self
    }

    /// The bound of wait `n` (from 0): `min(max_backoff, init_backoff × base^n)`.
    pub fn bound(&self, n: u32) -> Duration {
        let grown = self.init_backoff.as_nanos() as f64 * self.base.powi(n.min(1024) as i32);
        if !grown.is_finite() || grown >= self.max_backoff.as_nanos() as f64 {
            return self.max_backoff;
        }
        Duration::from_nanos(grown.round() as u64)
    }

    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming the setting (as
    /// `what.init_backoff`, ...) when these bounds cannot be followed: a `base` below 1 or
    /// not a number, or a first bound above the largest.
    pub fn check(&self, what: &str) -> crate::Result<()> {
        if !(self.base.is_finite() && self.base >= 1.0) {
            return Err(crate::Error::invalid(format!(
                "{what}.base is how much each wait grows: a number of at least 1, not {}",
                self.base
            )));
        }
        if self.init_backoff > self.max_backoff {
            return Err(crate::Error::invalid(format!(
                "{what}.init_backoff ({:?}) is above {what}.max_backoff ({:?})",
                self.init_backoff, self.max_backoff
            )));
        }
        Ok(())
    }
}

/// The jittered waits of one call: each [`wait_until`](Self::wait_until) sleeps the next
/// delay of its [`BackoffConfig`], unless that would end past the call's deadline.
///
/// The one backoff of the library: the front end's retries use it, and so do backends that
/// wait on their own (DynamoDB between throttled or conflicting tries, with bounds of its own).
#[derive(Debug)]
pub struct Backoff {
    config: BackoffConfig,
    waits: u32,
}

impl Backoff {
    /// A backoff before its first wait.
    pub fn new(config: BackoffConfig) -> Self {
        Backoff { config, waits: 0 }
    }

    /// How many waits were drawn so far.
    pub fn waits(&self) -> u32 {
        self.waits
    }

    /// Draws the next delay (uniform in `[0, bound)`), counting it as a wait.
    pub fn next_delay(&mut self) -> Duration {
        let bound = self.config.bound(self.waits).as_micros() as u64;
        self.waits = self.waits.saturating_add(1);
        Duration::from_micros(rand::random_range(0..bound.max(1)))
    }

    /// Sleeps the next delay and says whether the call may try again: `false` at once,
    /// without sleeping, when the delay would end at or past `deadline`.
    pub async fn wait_until(&mut self, deadline: Instant) -> bool {
        let delay = self.next_delay();
        if Instant::now() + delay >= deadline {
            return false;
        }
        tokio::time::sleep(delay).await;
        true
    }
}

/// How a [`Store`](crate::Store) retries a call that ended
/// [`Error::Unavailable`](crate::Error::Unavailable): at most [`max_retries`](Self::max_retries)
/// times, never starting a wait that would end past [`budget`](Self::budget) after the call
/// began, each wait drawn by [`Backoff`] from [`backoff`](Self::backoff).
///
/// The default serves a web request: up to 10 retries within 5 seconds, waits from 50 ms
/// growing twofold up to 1 s. Set it in [`StoreOptions`](crate::StoreOptions::with_retry) or
/// in configuration (`[database.retry]`, see [`config::RetryConfig`](crate::config::RetryConfig)).
/// The budget bounds when the last try may start, not how long a try takes: a backend's own
/// deadlines bound that (DynamoDB's `operation_timeout_ms`, SQLite's `busy_timeout_ms`).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Retries after the first try, at most (default 10; 0 turns retrying off).
    pub max_retries: u32,
    /// The time from the call's start within which every wait must end (default 5 s).
    pub budget: Duration,
    /// The bounds of the waits.
    pub backoff: BackoffConfig,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: DEFAULT_MAX_RETRIES,
            budget: DEFAULT_BUDGET,
            backoff: BackoffConfig::default(),
        }
    }
}

impl RetryPolicy {
    /// No retries: every `Unavailable` is handed on as it comes (still carrying the write
    /// identity of a write).
    pub const NONE: RetryPolicy = RetryPolicy {
        max_retries: 0,
        budget: Duration::ZERO,
        backoff: BackoffConfig::new(DEFAULT_INIT_BACKOFF, DEFAULT_MAX_BACKOFF, DEFAULT_BASE),
    };

    /// Sets [`max_retries`](Self::max_retries).
    pub fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Sets [`budget`](Self::budget).
    pub fn with_budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    /// Sets [`backoff`](Self::backoff).
    pub fn with_backoff(mut self, backoff: BackoffConfig) -> Self {
        self.backoff = backoff;
        self
    }

    /// Whether a call may be tried more than once.
    pub fn retries(&self) -> bool {
        self.max_retries > 0 && !self.budget.is_zero()
    }

    /// The retries of one call starting now.
    pub fn start(&self) -> Retries {
        Retries {
            max_retries: self.max_retries,
            deadline: Instant::now() + self.budget,
            backoff: Backoff::new(self.backoff),
        }
    }
}

/// The retries left to one call under a [`RetryPolicy`]: its deadline and its backoff.
#[derive(Debug)]
pub struct Retries {
    max_retries: u32,
    deadline: Instant,
    backoff: Backoff,
}

impl Retries {
    /// Waits before the next try and says whether there is one: `false` at once when the
    /// call has retried `max_retries` times or the wait would end past its budget.
    pub async fn wait(&mut self) -> bool {
        self.backoff.waits() < self.max_retries && self.backoff.wait_until(self.deadline).await
    }

    /// How many retries the call has made (waits it slept or refused).
    pub fn retried(&self) -> u32 {
        self.backoff.waits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_grow_by_the_base_then_cap() {
        let config = BackoffConfig::new(Duration::from_millis(4), Duration::from_millis(250), 2.0);
        assert_eq!(config.bound(0), Duration::from_millis(4));
        assert_eq!(config.bound(3), Duration::from_millis(32));
        assert_eq!(config.bound(6), Duration::from_millis(250));
        assert_eq!(config.bound(u32::MAX), Duration::from_millis(250));
        let flat = config.with_base(1.0);
        assert_eq!(flat.bound(100), Duration::from_millis(4));
        let slow = config.with_base(1.5);
        assert_eq!(slow.bound(2), Duration::from_millis(9));
    }

    #[test]
    fn every_delay_is_below_its_bound() {
        let config = BackoffConfig::default();
        let mut backoff = Backoff::new(config);
        for n in 0..50 {
            assert!(backoff.next_delay() < config.bound(n).max(Duration::from_micros(1)));
        }
        assert_eq!(backoff.waits(), 50);
        let mut zero = Backoff::new(config.with_init_backoff(Duration::ZERO));
        assert_eq!(zero.next_delay(), Duration::ZERO);
    }

    #[test]
    fn bad_bounds_are_named() {
        let err = BackoffConfig::default().with_base(0.5).check("retry");
        assert!(err.unwrap_err().to_string().contains("retry.base"));
        let err = BackoffConfig::default().with_base(f64::NAN).check("retry");
        assert!(err.is_err());
        let err = BackoffConfig::default()
            .with_init_backoff(Duration::from_secs(2))
            .check("retry");
        assert!(err.unwrap_err().to_string().contains("retry.init_backoff"));
        assert!(BackoffConfig::default().check("retry").is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn retries_stop_at_the_count() {
        let mut retries = RetryPolicy::default()
            .with_max_retries(3)
            .with_budget(Duration::from_secs(3600))
            .start();
        let mut waited = 0;
        while retries.wait().await {
            waited += 1;
        }
        assert_eq!(waited, 3);
        assert!(!RetryPolicy::NONE.start().wait().await);
        assert!(!RetryPolicy::NONE.retries());
        assert!(RetryPolicy::default().retries());
    }

    #[tokio::test(start_paused = true)]
    async fn retries_stop_at_the_budget_without_sleeping_past_it() {
        let policy = RetryPolicy::default()
            .with_max_retries(u32::MAX)
            .with_budget(Duration::from_secs(10));
        let start = Instant::now();
        let mut retries = policy.start();
        while retries.wait().await {}
        // Paused time moves only by the waits slept: every one ended within the budget.
        assert!(start.elapsed() < policy.budget, "{:?}", start.elapsed());
        // The waits grow up to 1 s, so 10 s hold at least 10 of them.
        assert!(retries.retried() >= 10, "{}", retries.retried());
        let mut ended = policy.with_budget(Duration::ZERO).start();
        assert!(!ended.wait().await);
    }
}
