//! Waking a store's watchers at its commits, for backends whose feed lives in the database
//! (SQLite, PostgreSQL): this process's commits wake a wait at once, other processes' are
//! seen by reading the feed's head again at each poll.

use crate::Result;
use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;

/// The commits of one store in this process, and the waits for its feed to move.
///
/// ```
/// use docstore::feed::Commits;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> docstore::Result<()> {
/// let commits = Commits::default();
/// let head = AtomicU64::new(7);
/// // Already past position 5: returns at once.
/// commits
///     .wait_past(5, Duration::from_secs(1), || async { Ok(head.load(Ordering::Relaxed)) })
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Commits(watch::Sender<u64>);

impl Default for Commits {
    fn default() -> Self {
        Commits(watch::Sender::new(0))
    }
}

impl Commits {
    /// Wakes every wait: a commit of this process, or one of another process the backend
    /// was told of (PostgreSQL's `NOTIFY`). A wait woken for nothing reads the head again.
    pub fn committed(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Returns once `head()` (the feed's last position, read anew each time) is past
    /// `position`. Between reads it waits for a commit of this process or `poll`, whichever
    /// comes first: the poll is how another process's commits are seen.
    pub async fn wait_past<F, Fut>(&self, position: u64, poll: Duration, mut head: F) -> Result<()>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<u64>>,
    {
        // Subscribed before the head is read, so a commit in between still wakes the wait.
        let mut commits = self.0.subscribe();
        loop {
            if head().await? > position {
                return Ok(());
            }
            let _ = tokio::time::timeout(poll, commits.changed()).await;
        }
    }
}
