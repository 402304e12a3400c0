//! Jittered exponential backoff between tries of a call, bounded by the call's deadline.
//!
//! Throttling and transaction conflicts are DynamoDB saying "not now": a call tries again
//! after a full-jitter wait (so that writers that collided do not collide again in step)
//! until it succeeds or its deadline — the store's `operation_timeout_ms`, counted from the
//! call's start — would pass during the next wait. Only then does it give up.

use std::time::Duration;
use tokio::time::Instant;

/// The first delay's upper bound.
const BASE: Duration = Duration::from_millis(4);
/// The largest delay's upper bound.
const CAP: Duration = Duration::from_millis(250);

/// Full-jitter exponential backoff: the n-th wait is uniform in `[0, min(CAP, BASE * 2^n))`.
#[derive(Debug)]
pub(crate) struct Backoff {
    tries: u32,
    deadline: Instant,
}

impl Backoff {
    /// A backoff before its first wait, for a call that must end by `deadline`.
    pub(crate) fn until(deadline: Instant) -> Self {
        Backoff { tries: 0, deadline }
    }

    /// The bound of the next wait.
    fn bound(&self) -> Duration {
        BASE.saturating_mul(1 << self.tries.min(16)).min(CAP)
    }

    /// Sleeps for the next jittered delay and says whether the call may try again: `false`
    /// (at once, without sleeping) when the deadline would pass before the next try.
    pub(crate) async fn wait(&mut self) -> bool {
        let bound = self.bound().as_micros() as u64;
        self.tries += 1;
        let delay = Duration::from_micros(rand::random_range(0..bound.max(1)));
        if Instant::now() + delay >= self.deadline {
            return false;
        }
        tokio::time::sleep(delay).await;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_grow_then_cap() {
        let mut backoff = Backoff::until(Instant::now());
        assert_eq!(backoff.bound(), BASE);
        backoff.tries = 3;
        assert_eq!(backoff.bound(), BASE * 8);
        backoff.tries = 40;
        assert_eq!(backoff.bound(), CAP);
    }

    #[tokio::test]
    async fn a_try_is_allowed_only_while_the_deadline_is_ahead() {
        let mut passed = Backoff::until(Instant::now());
        assert!(!passed.wait().await, "the deadline has passed");
        let mut ahead = Backoff::until(Instant::now() + Duration::from_secs(60));
        assert!(ahead.wait().await, "the first wait is at most {BASE:?}");
        // A wait that would end past the deadline is not slept.
        let mut close = Backoff::until(Instant::now() + Duration::from_millis(50));
        close.tries = 40;
        let start = Instant::now();
        while close.wait().await {}
        assert!(start.elapsed() < Duration::from_millis(50) + CAP);
    }
}
