//! The in-process change log: every committed write appended under the store's write lock
//! (so its order is commit order), the oldest dropped past the retention, watchers woken by
//! a `tokio::sync::watch` channel on each append.
//!
//! An entry holds the document it logs by [`Arc`], the very value the store's map holds (a
//! write replaces a document with a new one rather than changing it in place), so the log
//! costs an entry's few fields per change, not a copy of the document; a read copies what it
//! returns. An entry also holds the version its write replaced or removed (again the `Arc`
//! the map held, so [`Change::previous`] costs no copy and no time on the write path). Its
//! memory is bounded by the retention: the documents of the last `retention` changes, most
//! of them the stored ones. Keeping previous versions adds at most one document per key
//! changed within the window (the version before that key's oldest logged change: every
//! later previous version is an earlier entry's document anyway), so at most `retention`
//! more documents, each within the document size limit.
//!
//! A cursor is `memory:INSTANCE.POSITION`: positions count from 1 in one store's log, and the
//! instance (random per store) tells a cursor of another store — of an earlier process, say —
//! which is [`Error::CursorExpired`]: that log is gone.

use docstore::feed::{Change, ChangeCursor, ChangeKind, ChangePage, FeedScope, FeedStart};
use docstore::{Document, Error, Key, Result};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::watch;

/// How many changes a store keeps by default ([`MemoryStore::with_feed_retention`]).
///
/// [`MemoryStore::with_feed_retention`]: crate::MemoryStore::with_feed_retention
pub const DEFAULT_FEED_RETENTION: usize = 100_000;

/// The most log entries one read looks at before it answers (with `caught_up: false` when it
/// stopped early): bounds a scoped read in a log full of other scopes' changes.
const MAX_SCANNED: usize = 10_000;

const DRIVER: &str = "memory";

/// A committed write as the log keeps it: a [`Change`] without its cursor, which a read
/// derives from the position.
#[derive(Debug)]
struct Entry {
    position: u64,
    key: Key,
    kind: ChangeKind,
    version: u64,
    /// Shared with the store's map while it is the stored version.
    document: Option<Arc<Document>>,
    /// The version the write replaced or removed (`None` for a create): the same `Arc` the
    /// map held until this write, so keeping it copies nothing.
    previous: Option<Arc<Document>>,
    time: i64,
    /// The writer of a delete or an expiry (empty); `None` for a write that stored
    /// `document`, whose `updated_by` it is (not copied under the write lock).
    actor: Option<String>,
}

/// An entry the retention pushed out of the log: handed back to the writer so that it is
/// dropped (possibly freeing the document) after the store's write lock is released.
#[derive(Debug)]
pub(crate) struct Evicted {
    _entry: Entry,
}

#[derive(Debug)]
struct Log {
    entries: VecDeque<Entry>,
    /// The position the next change gets (the first is 1).
    next: u64,
    retention: usize,
}

/// One store's change log.
#[derive(Debug)]
pub(crate) struct Feed {
    instance: u64,
    log: Mutex<Log>,
    /// The position of the last change appended.
    head: watch::Sender<u64>,
}

impl Default for Feed {
    fn default() -> Self {
        Feed::new(DEFAULT_FEED_RETENTION)
    }
}

impl Feed {
    pub(crate) fn new(retention: usize) -> Self {
        Feed {
            instance: rand::random(),
            log: Mutex::new(Log {
                entries: VecDeque::new(),
                next: 1,
                retention: retention.max(1),
            }),
            head: watch::Sender::new(0),
        }
    }

    /// Appends the change of a write that left `document` at `key` in place of `previous`
    /// (both shared, not copied). Called under the store's write lock; what fell out of the
    /// log is the caller's to drop after it.
    #[must_use = "drop the evicted entry after releasing the write lock"]
    pub(crate) fn stored(
        &self,
        key: &Key,
        kind: ChangeKind,
        document: &Arc<Document>,
        previous: Option<&Arc<Document>>,
    ) -> Option<Evicted> {
        self.append(Entry {
            position: 0,
            key: key.clone(),
            kind,
            version: document.version,
            time: document.updated_at,
            actor: None,
            document: Some(Arc::clone(document)),
            previous: previous.cloned(),
        })
    }

    /// Appends the change of a delete of `key` that removed `removed` (shared, not copied).
    /// Called under the write lock.
    #[must_use = "drop the evicted entry after releasing the write lock"]
    pub(crate) fn deleted(
        &self,
        key: &Key,
        removed: &Arc<Document>,
        time: i64,
        actor: &str,
    ) -> Option<Evicted> {
        self.append(Entry {
            position: 0,
            key: key.clone(),
            kind: ChangeKind::Deleted,
            version: removed.version,
            document: None,
            previous: Some(Arc::clone(removed)),
            time,
            actor: Some(actor.to_owned()),
        })
    }

    /// Appends the removal of the expired document `removed` at `key`: at its expiry
    /// instant, by nobody. Called under the write lock.
    #[must_use = "drop the evicted entry after releasing the write lock"]
    pub(crate) fn expired(&self, key: &Key, removed: &Arc<Document>) -> Option<Evicted> {
        self.append(Entry {
            position: 0,
            key: key.clone(),
            kind: ChangeKind::Expired,
            version: removed.version,
            document: None,
            previous: Some(Arc::clone(removed)),
            time: removed.expires_at.unwrap_or(removed.updated_at),
            actor: Some(String::new()),
        })
    }

    fn append(&self, mut entry: Entry) -> Option<Evicted> {
        let mut log = self.log.lock();
        entry.position = log.next;
        log.next += 1;
        log.entries.push_back(entry);
        let evicted = if log.entries.len() > log.retention {
            log.entries
                .pop_front()
                .map(|entry| Evicted { _entry: entry })
        } else {
            None
        };
        self.head.send_replace(log.next - 1);
        evicted
    }

    /// A page of `scope`'s changes after `start`.
    pub(crate) fn page(
        &self,
        scope: &FeedScope,
        start: &FeedStart,
        limit: usize,
    ) -> Result<ChangePage> {
        let log = self.log.lock();
        let pruned_through = log.entries.front().map_or(log.next - 1, |e| e.position - 1);
        let after = match start {
            FeedStart::Oldest => pruned_through,
            FeedStart::Now => log.next - 1,
            FeedStart::After(cursor) => self.position(cursor, log.next - 1)?,
            FeedStart::Snapshot => return Err(FeedStart::snapshot_refused()),
        };
        if after < pruned_through {
            return Err(Error::CursorExpired(format!(
                "the memory store keeps its last {} changes; position {after} is older",
                log.retention
            )));
        }
        let first = usize::try_from(after - pruned_through).unwrap_or(usize::MAX);
        let mut changes = Vec::new();
        let mut last = after;
        for entry in log.entries.iter().skip(first).take(MAX_SCANNED) {
            if changes.len() == limit {
                break;
            }
            last = entry.position;
            if scope.contains(&entry.key) {
                changes.push(self.change(entry));
            }
        }
        Ok(ChangePage {
            changes,
            next: self.cursor(last),
            caught_up: last == log.next - 1,
        })
    }

    /// Returns once a change after `after` is in the log (at once for a cursor of another
    /// store: the read that follows reports it).
    pub(crate) async fn wait(&self, after: &ChangeCursor) -> Result<()> {
        let mut head = self.head.subscribe();
        let Ok(position) = self.position(after, u64::MAX) else {
            return Ok(());
        };
        // The sender lives as long as the store, which the caller borrows.
        let _ = head.wait_for(|&last| last > position).await;
        Ok(())
    }

    fn change(&self, entry: &Entry) -> Change {
        Change {
            key: entry.key.clone(),
            kind: entry.kind,
            version: entry.version,
            document: entry.document.as_deref().cloned(),
            time: entry.time,
            actor: match (&entry.actor, &entry.document) {
                (None, Some(document)) => document.updated_by.clone(),
                (actor, _) => actor.clone().unwrap_or_default(),
            },
            cursor: self.cursor(entry.position),
            previous: entry.previous.as_deref().cloned(),
        }
    }

    /// The documents the log holds, oldest first (`None` for a delete).
    #[cfg(test)]
    pub(crate) fn documents(&self) -> Vec<Option<Arc<Document>>> {
        let log = self.log.lock();
        log.entries.iter().map(|e| e.document.clone()).collect()
    }

    /// The previous versions the log holds, oldest first (`None` for a create).
    #[cfg(test)]
    pub(crate) fn previous_documents(&self) -> Vec<Option<Arc<Document>>> {
        let log = self.log.lock();
        log.entries.iter().map(|e| e.previous.clone()).collect()
    }

    fn cursor(&self, position: u64) -> ChangeCursor {
        ChangeCursor::new(DRIVER, format!("{:016x}.{position}", self.instance))
    }

    /// The position a cursor of this store stands after, at most `head`.
    fn position(&self, cursor: &ChangeCursor, head: u64) -> Result<u64> {
        let text = cursor.position_for(DRIVER)?;
        let malformed = || Error::invalid("change cursor: not a cursor a memory store wrote");
        let (instance, position) = text.split_once('.').ok_or_else(malformed)?;
        let instance = u64::from_str_radix(instance, 16).map_err(|_| malformed())?;
        let position: u64 = position.parse().map_err(|_| malformed())?;
        if instance != self.instance {
            return Err(Error::CursorExpired(
                "the cursor is of another memory store: its log is gone".into(),
            ));
        }
        if position > head {
            return Err(Error::invalid(format!(
                "change cursor at position {position}: the log ends at {head}"
            )));
        }
        Ok(position)
    }
}
