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
///
/// // The change feed: keep a day of changes, look for other processes' commits every 50 ms.
/// let options = SqliteOptions::default()
///     .with_feed_retention(Duration::from_secs(24 * 3600))
///     .with_feed_poll_interval(Duration::from_millis(50));
/// assert!(options.feed);
/// // Or no feed at all (see `SqliteOptions::feed` for what that means for other processes).
/// assert!(!SqliteOptions::default().with_feed(false).feed);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// Commit durability (default [`Durability::Full`]).
    pub durability: Durability,
    /// How long an operation waits in all for locks another connection or process holds
    /// (default 5 s), its retries included: a write still locked out when it ends is
    /// [`docstore::Error::Unavailable`].
    pub busy_timeout: Duration,
    /// Idle read connections kept open for reuse (default 4). Reads never wait for the
    /// writer; more concurrent reads than this open extra connections that are closed after
    /// use.
    pub max_idle_readers: usize,
    /// Open the file for reading only (default false): reads work, every write is
    /// [`docstore::Error::Backend`] saying the store is read-only, and nothing in the file
    /// changes — no schema, no journal mode, no index built, no file created. A file that
    /// does not exist, or one docstore never wrote (shared, see
    /// [`SqliteOptions::share_file`]), is an empty store. While the store is open SQLite
    /// keeps its `-wal` and `-shm` files beside a WAL file, as for any reader; when this
    /// process can write the directory they are gone again once the last connection
    /// closes. A file or directory this process cannot write opens read-only anyway, and
    /// the write error names the cause.
    pub read_only: bool,
    /// Whether docstore may keep its tables in a file that also holds another program's
    /// tables (default false). Without it, a file holding tables docstore does not know is
    /// refused at open with [`docstore::Error::InvalidArgument`] naming them, and nothing
    /// in it changes: docstore never quietly adopts another program's database. With it, a
    /// read-write open adds docstore's tables beside the others and switches the file to
    /// WAL (which every program using the file then shares); a read-only store of such a
    /// file without docstore's tables is an empty store.
    pub share_file: bool,
    /// Whether writes record their changes for the change feed (default true). With `false`
    /// this store writes no change rows (saving their cost) and
    /// [`Driver::changes`](docstore::driver::Driver::changes) is an error saying the feed is
    /// off. The cost: each change row holds the document as written, in the write's own
    /// transaction. With [`Durability::Full`] the commit's fsync hides it; with
    /// [`Durability::Normal`] it is a second page in the log per commit, which measured
    /// 1.2-1.4x a create and 1.6-2x a small update (`docs/benchmarks.md`, "Change feed").
    /// Every process writing a file should use the same setting: the feed of a file misses
    /// the writes of processes that have it off.
    pub feed: bool,
    /// Whether each change of a write that replaces or removes a document also records the
    /// document as it was ([`docstore::Change::previous`]; default false, and nothing
    /// without [`SqliteOptions::feed`]). The cost falls on every update, put and delete:
    /// one more indexed read of the document in the write's transaction and a change row
    /// twice the size: 1.2-1.3x a ~1 KB update with [`Durability::Normal`], within noise
    /// with [`Durability::Full`] (`docs/benchmarks.md`, "Change feed"). Changes written
    /// without it (by this store before, or by another process with it off) carry no
    /// previous value.
    pub feed_previous: bool,
    /// How long changes are kept (default [`DEFAULT_FEED_RETENTION`], 7 days): older ones are
    /// pruned right after the commit of a store's first write and of every 64th (one chunk
    /// of at most 1 000 changes: a file written only by short processes, such as CLI
    /// commands, is pruned too) and every [`SqliteOptions::feed_prune_interval`]; a cursor
    /// before a pruned change is [`docstore::Error::CursorExpired`].
    pub feed_retention: Duration,
    /// How often a thread of its own prunes (default [`DEFAULT_FEED_PRUNE_INTERVAL`],
    /// 1 minute), besides the pruning after writes; never inside a write's transaction.
    pub feed_prune_interval: Duration,
    /// How often a watcher looks for commits of other processes (default
    /// [`DEFAULT_FEED_POLL_INTERVAL`], 200 ms); this process's commits wake it at once.
    pub feed_poll_interval: Duration,
}

/// The default of [`SqliteOptions::feed_retention`]: 7 days.
pub const DEFAULT_FEED_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The default of [`SqliteOptions::feed_prune_interval`]: 1 minute.
pub const DEFAULT_FEED_PRUNE_INTERVAL: Duration = Duration::from_secs(60);

/// The default of [`SqliteOptions::feed_poll_interval`]: 200 ms, so a watcher sees another
/// process's commit within 200 ms, at the cost of one indexed read per watcher per poll.
pub const DEFAULT_FEED_POLL_INTERVAL: Duration = Duration::from_millis(200);

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            durability: Durability::Full,
            busy_timeout: Duration::from_secs(5),
            max_idle_readers: 4,
            read_only: false,
            share_file: false,
            feed: true,
            feed_previous: false,
            feed_retention: DEFAULT_FEED_RETENTION,
            feed_prune_interval: DEFAULT_FEED_PRUNE_INTERVAL,
            feed_poll_interval: DEFAULT_FEED_POLL_INTERVAL,
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

    /// Allows sharing the file with another program's tables (see
    /// [`SqliteOptions::share_file`]).
    pub fn with_share_file(mut self, share_file: bool) -> Self {
        self.share_file = share_file;
        self
    }

    /// Sets the number of idle read connections kept.
    pub fn with_max_idle_readers(mut self, max_idle_readers: usize) -> Self {
        self.max_idle_readers = max_idle_readers;
        self
    }

    /// Turns the change feed on or off (see [`SqliteOptions::feed`]).
    pub fn with_feed(mut self, feed: bool) -> Self {
        self.feed = feed;
        self
    }

    /// Records previous values in the change feed (see [`SqliteOptions::feed_previous`]).
    pub fn with_feed_previous(mut self, previous: bool) -> Self {
        self.feed_previous = previous;
        self
    }

    /// Sets how long changes are kept (see [`SqliteOptions::feed_retention`]).
    pub fn with_feed_retention(mut self, retention: Duration) -> Self {
        self.feed_retention = retention;
        self
    }

    /// Sets how often old changes are pruned (see [`SqliteOptions::feed_prune_interval`]).
    pub fn with_feed_prune_interval(mut self, interval: Duration) -> Self {
        self.feed_prune_interval = interval;
        self
    }

    /// Sets how often watchers look for other processes' commits (see
    /// [`SqliteOptions::feed_poll_interval`]).
    pub fn with_feed_poll_interval(mut self, interval: Duration) -> Self {
        self.feed_poll_interval = interval;
        self
    }
}
