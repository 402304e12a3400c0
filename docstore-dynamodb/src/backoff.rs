//! Jittered exponential backoff between tries of a call, bounded by the call's deadline.
//!
//! Throttling and transaction conflicts are DynamoDB saying "not now": a call tries again
//! after a full-jitter wait (so that writers that collided do not collide again in step)
//! until it succeeds or its deadline — the store's `operation_timeout_ms`, counted from the
//! call's start — would pass during the next wait. Only then does it give up (and the front
//! end's retry policy takes over).
//!
//! The waits are the library's one backoff ([`docstore::retry::Backoff`]), with bounds of
//! their own: a conflict clears in milliseconds, so the first wait is at most 4 ms and none
//! more than 250 ms, where the front end's retries wait for an outage to pass.

use docstore::retry::BackoffConfig;
use std::time::Duration;
use tokio::time::Instant;

/// The bounds of the waits between throttled or conflicting tries: from 4 ms, doubling, up
/// to 250 ms.
pub(crate) const CONFLICT_BACKOFF: BackoffConfig =
    BackoffConfig::new(Duration::from_millis(4), Duration::from_millis(250), 2.0);

/// The waits of one call that must end by its deadline.
#[derive(Debug)]
pub(crate) struct Backoff {
    waits: docstore::retry::Backoff,
    deadline: Instant,
}

impl Backoff {
    /// A backoff before its first wait, for a call that must end by `deadline`.
    pub(crate) fn until(deadline: Instant) -> Self {
        Backoff {
            waits: docstore::retry::Backoff::new(CONFLICT_BACKOFF),
            deadline,
        }
    }

    /// Sleeps for the next jittered delay and says whether the call may try again: `false`
    /// (at once, without sleeping) when the deadline would pass before the next try.
    pub(crate) async fn wait(&mut self) -> bool {
        self.waits.wait_until(self.deadline).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_grow_then_cap() {
        assert_eq!(CONFLICT_BACKOFF.bound(0), Duration::from_millis(4));
        assert_eq!(CONFLICT_BACKOFF.bound(3), Duration::from_millis(32));
        assert_eq!(CONFLICT_BACKOFF.bound(40), Duration::from_millis(250));
        CONFLICT_BACKOFF.check("conflict backoff").unwrap();
    }

    #[tokio::test]
    async fn a_try_is_allowed_only_while_the_deadline_is_ahead() {
        let mut passed = Backoff::until(Instant::now());
        assert!(!passed.wait().await, "the deadline has passed");
        let mut ahead = Backoff::until(Instant::now() + Duration::from_secs(60));
        assert!(ahead.wait().await, "the first wait is at most 4 ms");
        // The waits stop once the next one would end past a deadline close ahead.
        let mut close = Backoff::until(Instant::now() + Duration::from_millis(20));
        while close.wait().await {}
        assert!(!Backoff::until(Instant::now()).wait().await);
    }
}
