//! Jittered exponential backoff between tries of a write.

use std::time::Duration;

/// The first delay's upper bound.
const BASE: Duration = Duration::from_millis(4);
/// The largest delay's upper bound.
const CAP: Duration = Duration::from_millis(250);

/// Full-jitter exponential backoff: the n-th wait is uniform in `[0, min(CAP, BASE * 2^n))`.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    tries: u32,
}

impl Backoff {
    /// A backoff before its first wait.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The bound of the next wait.
    fn bound(&self) -> Duration {
        BASE.saturating_mul(1 << self.tries.min(16)).min(CAP)
    }

    /// Sleeps for the next jittered delay.
    pub(crate) async fn wait(&mut self) {
        let bound = self.bound().as_micros() as u64;
        self.tries += 1;
        let micros = rand::random_range(0..bound.max(1));
        tokio::time::sleep(Duration::from_micros(micros)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_grow_then_cap() {
        let mut backoff = Backoff::new();
        assert_eq!(backoff.bound(), BASE);
        backoff.tries = 3;
        assert_eq!(backoff.bound(), BASE * 8);
        backoff.tries = 40;
        assert_eq!(backoff.bound(), CAP);
    }
}
