//! The change feed in SQLite (schema version 4; the `previous` column, version 6, holds
//! the document a write replaced or removed when [`SqliteOptions::feed_previous`] is on):
//! table `changes`, one row per committed
//! write, inserted by the write itself inside its transaction (or its group commit's
//! savepoint), so a committed write always has its change and a refused or rolled-back one
//! never does, whichever process wrote it.
//!
//! - **Positions** are the rows' rowids: SQLite serializes writers (across processes too), so
//!   a later commit always gets a higher position, and a reader that sees position `p` has
//!   seen every position below it. Pruning never removes the newest row, so the next rowid
//!   (the highest plus one) is never one handed out before.
//! - **Cursors** are `sqlite:FILE.POSITION`: `FILE` is the random id migration 4 stored in
//!   table `feed`. A cursor of another file (another store, or a database deleted and
//!   created again) is [`Error::InvalidArgument`] saying it belongs to another store: a
//!   consumer told `CursorExpired` would resync against the wrong database. A copy of a file (a
//!   backup restored with `cp`) keeps its id: consumers of the original should resync after
//!   such a restore, since positions past the copy's end are handed out again.
//! - **Retention**: rows older than [`SqliteOptions::feed_retention`] by the store clock at
//!   their write are pruned in chunks, never inside a write's transaction: by the writes
//!   themselves (right after the commit of a store's first write and of every
//!   [`PRUNE_EVERY_WRITES`]th, one chunk: bounded work, and a file written only by short
//!   processes such as CLI commands stays small) and by a thread of their own ([`Pruner`])
//!   in a long-running process. `feed.pruned_through` records the highest pruned position,
//!   so a cursor before it is told [`Error::CursorExpired`] exactly.
//!
//! [`SqliteOptions::feed_retention`]: crate::SqliteOptions::feed_retention
//! [`SqliteOptions::feed_previous`]: crate::SqliteOptions::feed_previous

use crate::error::{Fail, corrupt};
use docstore::feed::{
    Change, ChangeCursor, ChangeKind, ChangePage, FeedBounds, FeedScope, FeedStart, NumberedFeed,
    StoredChange,
};
use docstore::{Clock, Data, Error, Key};
use parking_lot::Mutex;
use rusqlite::{Connection, Row, TransactionBehavior, params};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

/// The driver tag of SQLite cursors.
pub(crate) const DRIVER: &str = "sqlite";

/// The most positions one read looks at before it answers (with `caught_up: false` when it
/// stopped early): bounds a scoped read in a feed full of other scopes' changes, without an
/// index by site (which measured +13 µs per write).
const MAX_SCANNED: u64 = 10_000;

/// The most changes one pruning transaction removes, so that it holds the write lock for
/// milliseconds, not seconds, however far behind pruning is.
const PRUNE_CHUNK: i64 = 1_000;

/// How often a store's writes prune one chunk of expired changes after their commit: the
/// first write of a store, then every this many. Amortized over the writes between, a
/// chunk's few milliseconds cost microseconds a write; and since every process writing a
/// file prunes at its first write, pruning keeps up with any pace of writes (at most
/// [`PRUNE_CHUNK`] expired changes per this many writes).
pub(crate) const PRUNE_EVERY_WRITES: u64 = 64;

/// One store's feed: whether it is on, the file's id, and how often watchers look for other
/// processes' commits (this process's wake them: [`crate::conn::Connections::subscribe_commits`]).
#[derive(Debug)]
pub(crate) struct Feed {
    pub(crate) enabled: bool,
    /// Whether changes record the document a write replaced or removed (the feed on and
    /// [`SqliteOptions::feed_previous`](crate::SqliteOptions::feed_previous)).
    pub(crate) previous: bool,
    /// Cursors and bounds under the file's id (table `feed`), read at open.
    numbered: NumberedFeed,
    pub(crate) poll_interval: Duration,
    /// Set once, after open (pruning needs the writer connection).
    pruning: OnceLock<Pruning>,
}

/// Pruning for a writable store with the feed on: the settings, the thread, and the count
/// of writes that decides when a write prunes.
#[derive(Debug)]
struct Pruning {
    settings: Arc<PruneSettings>,
    writes: AtomicU64,
    _thread: Pruner,
}

impl Feed {
    pub(crate) fn new(
        (enabled, previous): (bool, bool),
        file_id: String,
        poll_interval: Duration,
    ) -> Self {
        Feed {
            enabled,
            previous: enabled && previous,
            numbered: NumberedFeed::new(DRIVER, "SQLite", file_id),
            poll_interval,
            pruning: OnceLock::new(),
        }
    }

    /// Starts pruning (a writable store with the feed on): the thread, and the writes'.
    pub(crate) fn start_pruning(&self, settings: PruneSettings) {
        let settings = Arc::new(settings);
        let _ = self.pruning.set(Pruning {
            _thread: Pruner::start(Arc::clone(&settings)),
            settings,
            writes: AtomicU64::new(0),
        });
    }

    /// Counts a committed write; on the first and every [`PRUNE_EVERY_WRITES`]th, what to
    /// prune with ([`prune_after_write`]).
    pub(crate) fn write_committed(&self) -> Option<Arc<PruneSettings>> {
        let pruning = self.pruning.get()?;
        let written = pruning.writes.fetch_add(1, Ordering::Relaxed);
        (written % PRUNE_EVERY_WRITES == 0).then(|| Arc::clone(&pruning.settings))
    }

    /// The error of a feed read on a store with the feed off.
    pub(crate) fn off() -> Error {
        Error::Backend {
            message: "the change feed is off for this SQLite store (SqliteOptions::feed, \
                      database.sqlite.feed = false)"
                .into(),
            source: None,
        }
    }

    /// The position `cursor` stands after: [`Error::InvalidArgument`] for a cursor of another
    /// file (another store's: resyncing this one would not help its consumer) or one no
    /// SQLite store wrote.
    pub(crate) fn position(&self, cursor: &ChangeCursor) -> Result<u64, Error> {
        self.numbered.position(cursor)
    }

    /// A page of `scope`'s changes after `start`, in one read transaction (one snapshot).
    pub(crate) fn page(
        &self,
        conn: &Connection,
        scope: &FeedScope,
        start: &FeedStart,
        limit: usize,
    ) -> Result<ChangePage, Fail> {
        // Dropped without commit: a read transaction has nothing to keep.
        let _snapshot = conn.unchecked_transaction()?;
        let bounds = bounds(conn)?;
        let after = self.numbered.start(start, bounds)?;
        let window_end = after.saturating_add(MAX_SCANNED).min(bounds.head);
        let changes = self.read_window(conn, scope, after, window_end, limit)?;
        Ok(self
            .numbered
            .page(changes, limit, window_end, bounds.head)?)
    }

    /// The changes of `scope` in positions `(after, end]`, at most `limit`.
    fn read_window(
        &self,
        conn: &Connection,
        scope: &FeedScope,
        after: u64,
        end: u64,
        limit: usize,
    ) -> Result<Vec<Change>, Fail> {
        let mut stmt = conn.prepare_cached(
            "SELECT position, site, collection, id, kind, version, json(data), created_at, \
             created_by, time, actor, json(previous), expires_at FROM changes \
             WHERE position > ?1 AND position <= ?2 \
             AND (?3 IS NULL OR site = ?3) AND (?4 IS NULL OR collection = ?4) \
             ORDER BY position LIMIT ?5",
        )?;
        let mut rows = stmt.query(params![
            sql_position(after),
            sql_position(end),
            scope.site_name(),
            scope.collection_name(),
            i64::try_from(limit).unwrap_or(i64::MAX),
        ])?;
        let mut changes = Vec::new();
        while let Some(row) = rows.next()? {
            changes.push(self.change(row)?);
        }
        Ok(changes)
    }

    /// A change from a row of [`Feed::read_window`]'s columns.
    fn change(&self, row: &Row<'_>) -> Result<Change, Fail> {
        let position = u64::try_from(row.get::<_, i64>(0)?)
            .map_err(|_| corrupt("negative change position"))?;
        let (site, collection, id): (String, String, String) =
            (row.get(1)?, row.get(2)?, row.get(3)?);
        let previous: Option<String> = row.get(11)?;
        let previous = previous
            .map(|text| docstore::feed::parse_previous(&id, &text))
            .transpose()?;
        let key =
            Key::new(site, collection, id).map_err(|err| corrupt(format!("change key: {err}")))?;
        let kind: String = row.get(4)?;
        let text: Option<String> = row.get(6)?;
        let data: Option<Data> = text
            .map(|text| serde_json::from_str(&text))
            .transpose()
            .map_err(|err| corrupt(format!("change data: {err}")))?;
        let stored = StoredChange {
            key,
            kind: &kind,
            version: u64::try_from(row.get::<_, i64>(5)?)
                .map_err(|_| corrupt("negative change version"))?,
            time: row.get(9)?,
            actor: row.get(10)?,
            data,
            created_at: row.get(7)?,
            created_by: row.get(8)?,
            expires_at: row.get(12)?,
            previous,
        };
        Ok(stored.into_change(self.numbered.cursor(position))?)
    }
}

/// The document at `key` as a change's `previous` column holds it
/// ([`docstore::feed::parse_previous`]'s object, built by SQLite from the row), read inside the write's transaction just
/// before the write replaces or removes it; `None` when there is none.
pub(crate) fn previous(conn: &Connection, key: &Key) -> Result<Option<Vec<u8>>, Fail> {
    let mut stmt = conn.prepare_cached(
        "SELECT jsonb_object('data', data, 'created_at', created_at, 'created_by', \
         created_by, 'updated_at', updated_at, 'updated_by', updated_by, 'version', version, \
         'expires_at', expires_at) \
         FROM documents WHERE site = ?1 AND collection = ?2 AND id = ?3",
    )?;
    let mut rows = stmt.query(params![key.site(), key.collection(), key.id()])?;
    match rows.next()? {
        Some(row) => Ok(Some(row.get(0)?)),
        None => Ok(None),
    }
}

/// A position as SQLite's INTEGER (positions are rowids, so they fit).
fn sql_position(position: u64) -> i64 {
    i64::try_from(position).unwrap_or(i64::MAX)
}

/// The file's feed id (table `feed`).
pub(crate) fn file_id(conn: &Connection) -> Result<String, Fail> {
    Ok(
        conn.query_row("SELECT file_id FROM feed WHERE singleton = 1", [], |row| {
            row.get(0)
        })?,
    )
}

/// The highest pruned position and the highest position written (at least the pruned one).
fn bounds(conn: &Connection) -> Result<FeedBounds, Fail> {
    let mut stmt = conn.prepare_cached(
        "SELECT pruned_through, (SELECT max(position) FROM changes) FROM feed \
         WHERE singleton = 1",
    )?;
    let (pruned, newest): (i64, Option<i64>) =
        stmt.query_row([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    let pruned = u64::try_from(pruned).map_err(|_| corrupt("negative pruned position"))?;
    let newest = u64::try_from(newest.unwrap_or(0)).unwrap_or(0);
    Ok(FeedBounds {
        pruned,
        head: newest.max(pruned),
    })
}

/// The highest position written: what a watcher compares its cursor with.
pub(crate) fn head(conn: &Connection) -> Result<u64, Fail> {
    Ok(bounds(conn)?.head)
}

/// Records the change of the write that just left the document at `key` in place of
/// `previous` ([`previous`]'s value; `None` for a create or with the option off). Its row
/// holds the document as written: copied, data as JSONB, without parsing it again. Inside
/// the write's transaction.
pub(crate) fn log_stored(
    conn: &Connection,
    key: &Key,
    kind: ChangeKind,
    logged_at: i64,
    previous: Option<&[u8]>,
) -> Result<(), Fail> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO changes (site, collection, id, kind, version, data, created_at, \
         created_by, time, actor, logged_at, previous, expires_at) \
         SELECT site, collection, id, ?4, version, data, created_at, created_by, updated_at, \
         updated_by, ?5, ?6, expires_at FROM documents \
         WHERE site = ?1 AND collection = ?2 AND id = ?3",
    )?;
    stmt.execute(params![
        key.site(),
        key.collection(),
        key.id(),
        kind.as_str(),
        logged_at,
        previous
    ])?;
    Ok(())
}

/// The change a delete records: the removed version, the delete's time and actor, and the
/// removed document ([`previous`]'s value) when the option is on.
pub(crate) struct Deletion<'a> {
    pub(crate) version: i64,
    pub(crate) time: i64,
    pub(crate) actor: &'a str,
    pub(crate) previous: Option<&'a [u8]>,
}

/// Records the delete of `key`. Inside the delete's transaction.
pub(crate) fn log_deleted(
    conn: &Connection,
    key: &Key,
    deletion: &Deletion<'_>,
) -> Result<(), Fail> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO changes (site, collection, id, kind, version, time, actor, logged_at, \
         previous) VALUES (?1, ?2, ?3, 'deleted', ?4, ?5, ?6, ?5, ?7)",
    )?;
    stmt.execute(params![
        key.site(),
        key.collection(),
        key.id(),
        deletion.version,
        deletion.time,
        deletion.actor,
        deletion.previous
    ])?;
    Ok(())
}

/// Records the expiry of the document at `key` that a write or the sweep removed at `now`:
/// at its expiry instant, by nobody (`docs/contract.md`, "Expiry"). Inside that
/// transaction.
pub(crate) fn log_expired(
    conn: &Connection,
    key: &Key,
    expired: &crate::rows::Expired,
    now: i64,
) -> Result<(), Fail> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO changes (site, collection, id, kind, version, time, actor, logged_at) \
         VALUES (?1, ?2, ?3, 'expired', ?4, ?5, '', ?6)",
    )?;
    stmt.execute(params![
        key.site(),
        key.collection(),
        key.id(),
        expired.version,
        expired.expires_at,
        now
    ])?;
    Ok(())
}

/// Removes up to [`PRUNE_CHUNK`] of the oldest changes logged before `cutoff`, never the
/// newest change (its rowid keeps positions growing), in one immediate transaction that
/// also records the highest pruned position. Whether a full chunk went (more may be due).
fn prune_chunk(conn: &mut Connection, cutoff: i64) -> Result<bool, Fail> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let last_old: Option<i64> = {
        let mut stmt = tx.prepare_cached(
            "SELECT position, logged_at FROM changes \
             WHERE position < (SELECT max(position) FROM changes) ORDER BY position LIMIT ?1",
        )?;
        let mut rows = stmt.query([PRUNE_CHUNK])?;
        let mut last = None;
        // Stop at the first young change: clocks of different processes may disagree a
        // little, and a gap in the middle of the feed would break "every later change".
        while let Some(row) = rows.next()? {
            if row.get::<_, i64>(1)? >= cutoff {
                break;
            }
            last = Some(row.get::<_, i64>(0)?);
        }
        last
    };
    let Some(last) = last_old else {
        return Ok(false);
    };
    let removed = tx
        .prepare_cached("DELETE FROM changes WHERE position <= ?1")?
        .execute([last])?;
    tx.prepare_cached(
        "UPDATE feed SET pruned_through = max(pruned_through, ?1) WHERE singleton = 1",
    )?
    .execute([last])?;
    tx.commit()?;
    Ok(removed as i64 >= PRUNE_CHUNK)
}

/// The pruning thread: every interval, removes the changes older than the retention, chunk
/// by chunk, through the writer connection (taken for one chunk at a time, so writes wait
/// for a chunk at most). Stopped and joined when dropped.
#[derive(Debug)]
struct Pruner {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// What pruning needs.
pub(crate) struct PruneSettings {
    pub(crate) writer: Arc<Mutex<Connection>>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) retention: Duration,
    pub(crate) interval: Duration,
}

impl std::fmt::Debug for PruneSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PruneSettings")
            .field("retention", &self.retention)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl Pruner {
    fn start(settings: Arc<PruneSettings>) -> Self {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("docstore-sqlite-feed-prune".into())
            .spawn(move || {
                // Disconnected (the store is dropped) ends the loop.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(settings.interval) {
                    prune(&settings, usize::MAX);
                }
            })
            .expect("spawning the sqlite feed pruning thread");
        Pruner {
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

/// What a write whose commit [`Feed::write_committed`] chose does after it: one chunk of
/// pruning (blocking: run it off the async runtime).
pub(crate) fn prune_after_write(settings: &PruneSettings) {
    prune(settings, 1);
}

/// One round of pruning, at most `max_chunks` chunks. Another process holding the write
/// lock skips the round (the writer connection is not held for a busy timeout: this
/// store's writes wait for it).
fn prune(settings: &PruneSettings, max_chunks: usize) {
    let retention = i64::try_from(settings.retention.as_nanos()).unwrap_or(i64::MAX);
    let cutoff = settings.clock.now().saturating_sub(retention);
    for _ in 0..max_chunks {
        let mut conn = settings.writer.lock();
        let impatient = crate::busy::Impatient::start();
        let outcome = prune_chunk(&mut conn, cutoff);
        drop(impatient);
        match outcome {
            Ok(true) => continue,
            Ok(false) => return,
            Err(fail) => {
                tracing::debug!(?fail, "feed pruning skipped a round");
                return;
            }
        }
    }
}

impl Drop for Pruner {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(thread) = self.thread.take()
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
        }
    }
}
