//! The in-process change log: every committed write appended under the store's write lock
//! (so its order is commit order), the oldest dropped past the retention, watchers woken by
//! a `tokio::sync::watch` channel on each append.
//!
//! The log does not keep the versions its changes wrote: the store's map holds the current
//! one and an update merges into it in place. An entry keeps what rebuilds the version
//! *before* its write from the version after it ([`Before`]): nothing for a create; for a
//! merge patch, the patch's keys and the values it displaced, moved out of the stored map
//! and written as one short text by the merge (a reverse patch, [`crate::reverse`]), with
//! the metadata it replaced; for a write that replaced or removed
//! the whole document (put, replace, a batch's write, delete, expiry), that document itself,
//! moved out of the map. Every [`KEYFRAME_EVERY`]th update of a document keeps the whole
//! version too (that update copies the document, as every update did before), so a read
//! never undoes more than that many patches of one document.
//!
//! A read rebuilds each change's document and `previous` (`docs/contract.md`, "Change
//! feed"): each entry links to the next change of its key, so the document an entry left is
//! the version before that next change, or the stored document when there is none; a page
//! walks its changes newest first, so each version is rebuilt from the one after it: one
//! copy of the data per version a page hands out, and per key at most [`KEYFRAME_EVERY`]
//! patches undone to reach the newest. The log's memory is bounded by the retention: per
//! entry a few dozen bytes plus what its write displaced or replaced (at most one document).
//!
//! A cursor is `memory:INSTANCE.POSITION`: positions count from 1 in one store's log, and the
//! instance (random per store) tells a cursor of another store — of an earlier process, say —
//! which is [`Error::CursorExpired`]: that log is gone.

use crate::reverse;
use docstore::feed::{Change, ChangeCursor, ChangeKind, ChangePage, FeedScope, FeedStart};
use docstore::{Data, Document, Error, Key, Result};
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use tokio::sync::watch;

/// How many changes a store keeps by default ([`MemoryStore::with_feed_retention`]).
///
/// [`MemoryStore::with_feed_retention`]: crate::MemoryStore::with_feed_retention
pub const DEFAULT_FEED_RETENTION: usize = 100_000;

/// Every how many updates of a document the log keeps the whole version the update replaced
/// instead of a reverse patch: bounds the patches a read undoes to rebuild one version, at
/// the cost of one copy of the document per this many updates.
pub(crate) const KEYFRAME_EVERY: u32 = 64;

/// The most log entries one read looks at before it answers (with `caught_up: false` when it
/// stopped early): bounds a scoped read in a log full of other scopes' changes.
const MAX_SCANNED: usize = 10_000;

const DRIVER: &str = "memory";

#[cfg(test)]
mod tests;

/// A committed write as the log keeps it: what makes a [`Change`] with the version after it
/// (the stored one, or rebuilt from later entries).
#[derive(Debug)]
struct Entry {
    position: u64,
    key: Key,
    kind: ChangeKind,
    version: u64,
    time: i64,
    /// The writer of a delete or an expiry (empty); `None` for a write that stored a
    /// document, whose `updated_by` it is.
    actor: Option<String>,
    before: Before,
    /// The position of the key's next change (0: none yet). A create starts a key's chain
    /// and a removal ends it, so the chain from an entry leads to the stored document or to
    /// the removal that took it.
    next_of_key: u64,
}

/// What an entry keeps of the version its write replaced or removed.
#[derive(Debug)]
pub(crate) enum Before {
    /// Nothing was there: a create.
    Nothing,
    /// The whole version, moved out of the store's map.
    Whole(Arc<Document>),
    /// A merge in place: how to undo it.
    Patched(Box<Reversal>),
}

/// How to make a document written in place the version it was before the write: what the
/// write did to the data ([`DataUndo`]) and the metadata it replaced (the version is one
/// less; the id and the creation's fields never change).
#[derive(Debug)]
pub(crate) struct Reversal {
    pub(crate) data: DataUndo,
    pub(crate) updated_at: i64,
    /// `None` when the write's actor was the previous one too.
    pub(crate) updated_by: Option<String>,
    pub(crate) expires_at: Option<i64>,
}

/// What a write in place did to a document's data, kept so that it can be taken back.
#[derive(Debug)]
pub(crate) enum DataUndo {
    /// A merge: the patch's keys and what it displaced as one text ([`reverse::recorded`]),
    /// empty for an empty patch (which changed nothing).
    Recorded(Vec<u8>),
    /// A put: the data it replaced whole.
    Replaced(Data),
}

impl DataUndo {
    /// Makes `data`, as the write left it, the data before the write, copying it first if
    /// it is shared.
    fn undo(&self, data: &mut Data) {
        match self {
            // Nothing to undo, and the data stays shared.
            DataUndo::Recorded(record) if record.is_empty() => {}
            DataUndo::Recorded(record) => reverse::undo_recorded(data, record),
            DataUndo::Replaced(before) => *data = before.clone(),
        }
    }

    /// [`DataUndo::undo`], moving the replaced data back rather than copying it.
    pub(crate) fn restore(self, data: &mut Data) {
        match self {
            DataUndo::Recorded(_) => self.undo(data),
            DataUndo::Replaced(before) => *data = before,
        }
    }
}

impl Reversal {
    /// Makes `doc`, the version this reversal's write left, the version before it, copying
    /// its data first if it is shared.
    fn undo(&self, doc: &mut Document) {
        self.undo_stamp(doc);
        if let Some(actor) = &self.updated_by {
            doc.updated_by.clone_from(actor);
        }
        self.data.undo(&mut doc.data);
    }

    /// [`Reversal::undo`] of a write refused after it was made (the actor and a put's
    /// replaced data moved back rather than copied).
    pub(crate) fn restore(self, doc: &mut Document) {
        self.undo_stamp(doc);
        if let Some(actor) = self.updated_by {
            doc.updated_by = actor;
        }
        self.data.restore(&mut doc.data);
    }

    /// The version, write time and expiry back to the version before (the actor is moved
    /// or copied by the caller).
    fn undo_stamp(&self, doc: &mut Document) {
        doc.version -= 1;
        doc.updated_at = self.updated_at;
        doc.expires_at = self.expires_at;
    }
}

/// An entry the retention pushed out of the log: handed back to the writer so that it is
/// dropped (possibly freeing a document or what a patch displaced) after the store's write
/// lock is released.
#[derive(Debug)]
pub(crate) struct Evicted {
    _entry: Entry,
}

/// A change just logged: its position (the key's chain goes on from there) and what the
/// retention pushed out.
#[derive(Debug)]
#[must_use = "keep the position on the document; drop the evicted entry after the write lock"]
pub(crate) struct Appended {
    pub(crate) position: u64,
    pub(crate) evicted: Option<Evicted>,
}

/// What the log needs of a write that stored a document: the key, its kind, the document
/// it left, what it keeps of the one it replaced, and the position of the key's last change
/// (0: none).
pub(crate) struct Logged<'a> {
    pub(crate) key: &'a Key,
    pub(crate) kind: ChangeKind,
    pub(crate) after: &'a Document,
    pub(crate) before: Before,
    pub(crate) chain: u64,
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
    /// Wakes the readers waiting for a change: the position of the last change appended,
    /// sent only while someone waits ([`Feed::wait`] reads the log itself first).
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

    /// Appends the change of a write that stored `document` at `key`, keeping `before`.
    /// Called under the store's write lock.
    pub(crate) fn stored(&self, logged: Logged<'_>) -> Appended {
        let after = logged.after;
        self.append(
            Entry {
                position: 0,
                key: logged.key.clone(),
                kind: logged.kind,
                version: after.version,
                time: after.updated_at,
                actor: None,
                before: logged.before,
                next_of_key: 0,
            },
            logged.chain,
        )
    }

    /// Appends the removal of `removed` (moved into the log) from `key`, at `time` by
    /// `actor`: a delete, or an expiry (at its instant, by nobody). Called under the write
    /// lock.
    pub(crate) fn removed(
        &self,
        (key, kind, chain): (&Key, ChangeKind, u64),
        removed: Arc<Document>,
        time: i64,
        actor: &str,
    ) -> Appended {
        self.append(
            Entry {
                position: 0,
                key: key.clone(),
                kind,
                version: removed.version,
                time,
                actor: Some(actor.to_owned()),
                before: Before::Whole(removed),
                next_of_key: 0,
            },
            chain,
        )
    }

    /// Appends `entry`, the change after the key's change at position `chain`.
    fn append(&self, mut entry: Entry, chain: u64) -> Appended {
        let mut log = self.log.lock();
        let position = log.next;
        entry.position = position;
        log.next += 1;
        if let Some(index) = log.index(chain) {
            log.entries[index].next_of_key = position;
        }
        log.entries.push_back(entry);
        let evicted = if log.entries.len() > log.retention {
            log.entries
                .pop_front()
                .map(|entry| Evicted { _entry: entry })
        } else {
            None
        };
        // Under the log's lock, as `wait` reads the log: a waiter that subscribed after this
        // check reads this change there, one that subscribed before is woken.
        if self.head.receiver_count() > 0 {
            self.head.send_replace(position);
        }
        Appended { position, evicted }
    }

    /// A page of `scope`'s changes after `start`; `current` answers the document stored at
    /// a key (the caller holds the store's read lock, so no write is between the map and
    /// the log).
    pub(crate) fn page(
        &self,
        (scope, start, limit): (&FeedScope, &FeedStart, usize),
        current: &dyn Fn(&Key) -> Option<Document>,
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
        let mut chosen = Vec::new();
        let mut last = after;
        for (index, entry) in log.entries.iter().enumerate().skip(first).take(MAX_SCANNED) {
            if chosen.len() == limit {
                break;
            }
            last = entry.position;
            if scope.contains(&entry.key) {
                chosen.push(index);
            }
        }
        Ok(ChangePage {
            changes: self.rebuild(&log, &chosen, current),
            next: self.cursor(last),
            caught_up: last == log.next - 1,
        })
    }

    /// The changes of the entries at `chosen` (indexes, ascending), rebuilt newest first:
    /// every change of a key in a scope's page is in `chosen` from its first on, so the
    /// version before one is the version the key's previous chosen change left.
    fn rebuild(
        &self,
        log: &Log,
        chosen: &[usize],
        current: &dyn Fn(&Key) -> Option<Document>,
    ) -> Vec<Change> {
        let mut earlier: HashMap<&Key, Option<Document>> = HashMap::new();
        let mut changes: Vec<Change> = chosen
            .iter()
            .rev()
            .map(|&index| {
                let entry = &log.entries[index];
                let after = match earlier.remove(&entry.key) {
                    Some(after) => after,
                    None => log.after(index, current),
                };
                let before = entry.before.rebuild(entry.version, after.as_ref());
                let change = self.change(entry, after, before.clone());
                earlier.insert(&entry.key, before);
                change
            })
            .collect();
        changes.reverse();
        changes
    }

    /// Returns once a change after `after` is in the log (at once for a cursor of another
    /// store: the read that follows reports it).
    pub(crate) async fn wait(&self, after: &ChangeCursor) -> Result<()> {
        let mut head = self.head.subscribe();
        let Ok(position) = self.position(after, u64::MAX) else {
            return Ok(());
        };
        // Subscribed first: a change appended from now on is sent (`append`), and one
        // appended before is in the log; the channel's own value may be older than both.
        if self.log.lock().next - 1 > position {
            return Ok(());
        }
        // The sender lives as long as the store, which the caller borrows.
        let _ = head.wait_for(|&last| last > position).await;
        Ok(())
    }

    fn change(&self, entry: &Entry, after: Option<Document>, previous: Option<Document>) -> Change {
        Change {
            key: entry.key.clone(),
            kind: entry.kind,
            version: entry.version,
            time: entry.time,
            actor: match (&entry.actor, &after) {
                (None, Some(document)) => document.updated_by.clone(),
                (actor, _) => actor.clone().unwrap_or_default(),
            },
            document: after,
            cursor: self.cursor(entry.position),
            previous,
        }
    }

    /// How the log keeps the version each change replaced, oldest first: `None` for a
    /// create, `Some(true)` for a whole version, `Some(false)` for a reverse patch.
    #[cfg(test)]
    pub(crate) fn kept_whole(&self) -> Vec<Option<bool>> {
        let log = self.log.lock();
        let kept = |entry: &Entry| match entry.before {
            Before::Nothing => None,
            Before::Whole(_) => Some(true),
            Before::Patched(_) => Some(false),
        };
        log.entries.iter().map(kept).collect()
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

impl Log {
    /// The index of the entry at `position`, if the log still holds it.
    fn index(&self, position: u64) -> Option<usize> {
        let first = self.entries.front()?.position;
        if position < first {
            return None;
        }
        let index = usize::try_from(position - first).ok()?;
        (index < self.entries.len()).then_some(index)
    }

    /// The document as the change at `index` left it (`None` for a removal): the version
    /// before the key's next change if that change kept it whole, else rebuilt from the
    /// next one by undoing its patch, and so on up to a whole version or the stored document.
    fn after(&self, index: usize, current: &dyn Fn(&Key) -> Option<Document>) -> Option<Document> {
        let mut entry = &self.entries[index];
        if entry.kind.removes() {
            return None;
        }
        let mut later = Vec::new();
        let mut base = loop {
            let Some(next) = self.index(entry.next_of_key).map(|i| &self.entries[i]) else {
                let stored = current(&entry.key);
                debug_assert_eq!(stored.as_ref().map(|d| d.version), Some(entry.version));
                break stored;
            };
            match &next.before {
                Before::Patched(reversal) => later.push(reversal),
                Before::Whole(doc) => break Some(Document::clone(doc)),
                // A create starts a chain: no entry links to one.
                Before::Nothing => break None,
            }
            entry = next;
        };
        for reversal in later.iter().rev() {
            if let Some(doc) = &mut base {
                reversal.undo(doc);
            }
        }
        base
    }
}

impl Before {
    /// The version before the write of version `version`, given `after`, the one it left.
    fn rebuild(&self, version: u64, after: Option<&Document>) -> Option<Document> {
        match self {
            Before::Nothing => None,
            Before::Whole(doc) => Some(Document::clone(doc)),
            Before::Patched(reversal) => after.map(|after| {
                debug_assert_eq!(after.version, version);
                let mut before = after.clone();
                reversal.undo(&mut before);
                before
            }),
        }
    }
}
