//! SQLite-specific settings.

use std::time::Duration;

/// How hard a commit works to survive a crash (SQLite's `PRAGMA synchronous` in WAL mode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// `synchronous = FULL`: every commit is flushed to stable storage before the write
    /// returns; an acknowledged write survives a process crash, an OS crash and a power loss.
    #[default]
    Full,
    /// `synchronous = NORMAL`: commits reach the operating system, and the WAL is flushed at
    /// checkpoints. An acknowledged write survives a crash of the process (SIGKILL included),
    /// but the last commits may be lost on an OS crash or power loss. The database is never
    /// corrupted either way. Much faster on slow disks.
    Normal,
}

/// Settings only the SQLite backend has; the backend-independent ones are
/// [`docstore::StoreOptions`].
///
/// ```
/// use std::time::Duration;
/// use docstore_sqlite::{Durability, SqliteOptions};
///
/// let options = SqliteOptions::default()
///     .with_durability(Durability::Normal)
///     .with_busy_timeout(Duration::from_secs(30));
/// assert_eq!(options.durability, Durability::Normal);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// Commit durability (default [`Durability::Full`]).
    pub durability: Durability,
    /// How long one statement waits for a lock another connection or process holds, before
    /// the store retries the whole operation (default 5 s). A write gives up with
    /// [`docstore::Error::Unavailable`] only after four such waits in a row.
    pub busy_timeout: Duration,
    /// Idle read connections kept open for reuse (default 4). Reads never wait for the
    /// writer; more concurrent reads than this open extra connections that are closed after
    /// use.
    pub max_idle_readers: usize,
    /// Open the file read-only (default false): reads work, every write is
    /// [`docstore::Error::Backend`] saying the store is read-only, and nothing is ever
    /// locked or created beside the file. A file or directory this process cannot write
    /// opens read-only anyway, and the write error names the cause.
    pub read_only: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            durability: Durability::Full,
            busy_timeout: Duration::from_secs(5),
            max_idle_readers: 4,
            read_only: false,
        }
    }
}

impl SqliteOptions {
    /// Sets the commit durability.
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Sets the busy timeout.
    pub fn with_busy_timeout(mut self, busy_timeout: Duration) -> Self {
        self.busy_timeout = busy_timeout;
        self
    }

    /// Opens the file read-only (see [`SqliteOptions::read_only`]).
    pub fn with_read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Sets the number of idle read connections kept.
    pub fn with_max_idle_readers(mut self, max_idle_readers: usize) -> Self {
        self.max_idle_readers = max_idle_readers;
        self
    }
}
