//! # docstore-memory
//!
//! [`MemoryStore`]: the in-memory [`Driver`]. Every write is applied under one write lock, so
//! every operation is atomic and linearizable, counters are exact, and `update` never
//! conflicts. Queries run the reference evaluator; a query in id order reads only from its
//! cursor to the end of its page.
//!
//! An update merges its patch into the stored document in place, and the change log keeps
//! only what the merge displaced and the patch's keys, written as one short text (a reverse
//! patch; the update then frees the patch and the displaced values itself, while they are in
//! cache); a `put` over a stored document swaps its data in place, and the log keeps the data
//! it replaced; a write that replaces or removes a document otherwise (`replace_if`, a batch,
//! a delete) moves the old version into the log. A feed read rebuilds the versions its
//! changes carry from the stored document backwards (`feed`), so no write copies a document
//! for the log. Answers share the stored data ([`Data`] is copied
//! on write): `get`, a query page and every write's answer copy a document's id and actors,
//! never its data; an update copies the data only while a reader or an earlier answer still
//! holds it (and every 64th update of a document, whose whole previous version the log keeps
//! to bound what a read undoes). The lock is held only for what must be atomic: answers are
//! made, and what the log's retention let go is freed, after it is released.
//!
//! `write_all` holds the one write lock for the whole batch: every write is decided against
//! the current state first, then all are applied, so a failing write leaves nothing behind.
//! A batch of updates that nothing can refuse (its documents there at the versions expected,
//! every merge within the size limits by the size bounds, no unique index involved) is
//! checked first and then merged in place write by write, as single updates are; any other
//! batch merges copies of its documents while it is decided.
//! `get_many` reads under one read lock: its answer is one snapshot.
//!
//! Building one costs about as much as an empty `HashMap`, so property tests can make a fresh
//! store per case.
//!
//! ```
//! use docstore::{Key, Store};
//! use docstore_memory::MemoryStore;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let store = Store::new(MemoryStore::new());
//! let key = Key::new("acme", "tickets", "T-1")?;
//! store.create(&key, docstore::object(serde_json::json!({"title": "hello"}))?, "alice").await?;
//! let doc = store.get(&key).await?.expect("just created");
//! assert_eq!(doc.version, 1);
//! assert_eq!(store.count("acme").await?, 1);
//! # Ok::<(), docstore::Error>(())
//! # }).unwrap();
//! ```

use async_trait::async_trait;
use docstore::batch::{self, CheckedBatch, Decision, Write, WriteOutcome};
use docstore::driver::{Driver, Origin};
use docstore::feed::{ChangeCursor, ChangeKind, ChangePage, FeedScope, FeedStart};
use docstore::index::unique::{self, Claim};
use docstore::index::{CompiledIndex, IndexPlan, KeyRange, Step};
use docstore::query::CompiledQuery;
use docstore::request::{Answer, Call, QuotaCount, Request};
use docstore::{
    Data, Document, Error, Explain, Key, Page, Recount, RecountMode, Result, StoreOptions,
};
pub use feed::DEFAULT_FEED_RETENTION;
use feed::{Before, Evicted, Feed, Logged};
use futures_util::FutureExt;
use identities::Identities;
use indexmap::IndexMap;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::Arc;

mod feed;
mod identities;
mod reverse;
mod update;

/// The in-memory backend. See the [crate docs](crate).
#[derive(Debug, Default)]
pub struct MemoryStore {
    sites: RwLock<HashMap<String, Site>>,
    /// Taken only while `sites` is write-locked, so always after it.
    identities: Mutex<Identities>,
    /// Appended only while `sites` is write-locked, so in commit order.
    feed: Feed,
    options: StoreOptions,
}

/// A site's collections, by name; a collection is removed when its last document is.
type Site = BTreeMap<String, Collection>;

/// Who writes, and what the write does to the document's expiry.
type By<'a> = (&'a str, docstore::driver::Expiry);

/// A stored document. An update changes it in place when the store is its only holder
/// (`Arc::make_mut`); a reader or an answer still holding it gets a copy made first.
type Shared = Arc<Document>;

/// A stored document; when known, an upper bound of its data's size
/// ([`data_size_bound`](docstore::document::data_size_bound)):
/// a merge patch adds its own bound to it instead of walking the whole document to know
/// whether the result certainly fits; and where its changes stand in the log.
#[derive(Debug)]
struct Slot {
    doc: Shared,
    size_bound: Option<usize>,
    /// The log position of the document's last change, which the next one links from.
    last_change: u64,
    /// The updates logged as reverse patches since the log last kept a whole version of
    /// the document ([`feed::KEYFRAME_EVERY`]).
    patched_run: u32,
}

impl Slot {
    /// An upper bound of the document's data size: the one remembered, else measured now.
    fn data_bound(&self) -> usize {
        self.size_bound
            .unwrap_or_else(|| docstore::document::data_size_bound(&self.doc.data))
    }

    /// A document just stored whole, logged at `position`.
    fn whole(doc: Shared, size_bound: Option<usize>, position: u64) -> Self {
        Slot {
            doc,
            size_bound,
            last_change: position,
            patched_run: 0,
        }
    }
}

/// Where a document is filed in its collection: its expiry and its key in each declared
/// index (in declaration order).
struct Placement {
    expires_at: Option<i64>,
    keys: Vec<Vec<u8>>,
}

impl Placement {
    fn of(defs: &[CompiledIndex], doc: &Document) -> Self {
        Placement {
            expires_at: doc.expires_at,
            keys: defs.iter().map(|def| def.key(doc)).collect(),
        }
    }
}

/// One collection's documents by id, their ids in order, and one ordered map per declared
/// index of the collection (in declaration order): index key -> id. Every write goes through
/// [`Collection::set`] and [`Collection::remove`], under the store's one write lock, so the
/// maps always hold exactly one key per document.
///
/// The documents are hashed by id, not kept in an ordered map: every keyed read and write
/// finds its document with one hash and one comparison, where a B-tree of 50 000 ids took
/// five levels of cache misses (`docs/benchmarks.md`, "Memory: documents hashed by id"). Only
/// walks and id-order queries need the order, and read it from `ids`. The map keeps its
/// entries in one vector in the order they were added (a removal moves the last into the
/// hole), so a scan reads them about in the order their documents were allocated, as the
/// ordered map did, instead of jumping around the heap in hash order.
#[derive(Debug, Default)]
struct Collection {
    docs: IndexMap<Arc<str>, Slot>,
    /// Each id of `docs` (sharing its key's allocation), in id order, with its entry's
    /// position there: a walk reaches each document without hashing its id again.
    ids: BTreeMap<Arc<str>, usize>,
    indexes: Vec<BTreeMap<Vec<u8>, String>>,
    /// The documents that expire, by `(expires_at, id)`: what a read at a given time leaves
    /// out of counts, and what a sweep removes.
    expiring: BTreeSet<(i64, String)>,
}

impl Collection {
    fn new(defs: &[CompiledIndex]) -> Self {
        Collection {
            docs: IndexMap::new(),
            ids: BTreeMap::new(),
            indexes: vec![BTreeMap::new(); defs.len()],
            expiring: BTreeSet::new(),
        }
    }

    fn len(&self) -> usize {
        self.docs.len()
    }

    /// The documents not expired at `now`.
    fn live_len(&self, now: i64) -> usize {
        self.docs.len() - self.expired(now).count()
    }

    /// The ids of the documents expired at `now`, soonest expired first.
    fn expired(&self, now: i64) -> impl Iterator<Item = &String> {
        let end = (now.saturating_add(1), String::new());
        self.expiring.range(..end).map(|(_, id)| id)
    }

    /// The document `id` unless it expired at `now`.
    fn live(&self, id: &str, now: i64) -> Option<&Shared> {
        self.get(id).filter(|doc| !doc.is_expired(now))
    }

    fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    fn get(&self, id: &str) -> Option<&Shared> {
        self.docs.get(id).map(|slot| &slot.doc)
    }

    fn slot(&self, id: &str) -> Option<&Slot> {
        self.docs.get(id)
    }

    /// The documents, in no particular order, each reached early ([`TOUCH_AHEAD`]).
    fn documents(&self) -> impl Iterator<Item = &Document> {
        let slots = self.docs.as_slice();
        slots.values().enumerate().map(move |(position, slot)| {
            if let Some((_, ahead)) = slots.get_index(position + TOUCH_AHEAD) {
                std::hint::black_box(ahead.doc.version);
            }
            if let Some((_, ahead)) = slots.get_index(position + TOUCH_AHEAD / 2) {
                std::hint::black_box(ahead.doc.data.len());
            }
            slot.doc.as_ref()
        })
    }

    /// The documents after the id `after` (from the first without one) in id order,
    /// or before it in descending order.
    fn in_id_order<'c>(
        &'c self,
        after: Option<&str>,
        descending: bool,
    ) -> Box<dyn Iterator<Item = &'c Document> + 'c> {
        let ids = match (after, descending) {
            (None, _) => self.ids.range::<str, _>(..),
            (Some(id), false) => self
                .ids
                .range::<str, _>((Bound::Excluded(id), Bound::Unbounded)),
            (Some(id), true) => self
                .ids
                .range::<str, _>((Bound::Unbounded, Bound::Excluded(id))),
        };
        let document = |(_, &position): (_, &usize)| self.docs[position].doc.as_ref();
        match descending {
            false => Box::new(ids.map(document)),
            true => Box::new(ids.rev().map(document)),
        }
    }

    fn contains_key(&self, id: &str) -> bool {
        self.docs.contains_key(id)
    }

    /// Stores `slot`'s document (new or replacing the one with its id, whose slot is
    /// returned), moving its index keys. One hash lookup when the id is stored already
    /// (every replacing write); a new one is also filed in the id order.
    fn set(&mut self, defs: &[CompiledIndex], slot: Slot) -> Option<Slot> {
        let stored = Arc::clone(&slot.doc);
        let old = match self.docs.get_mut(stored.id.as_str()) {
            Some(current) => Some(std::mem::replace(current, slot)),
            None => {
                let id: Arc<str> = Arc::from(stored.id.as_str());
                let (position, _) = self.docs.insert_full(Arc::clone(&id), slot);
                self.ids.insert(id, position);
                None
            }
        };
        let placement = old.as_ref().map(|old| Placement::of(defs, &old.doc));
        self.reindex(defs, placement, &stored);
        old
    }

    /// Moves the expiry entry and the index keys of the document with `doc`'s id from
    /// `old` (where the version it replaced was filed, if any) to `doc`.
    fn reindex(&mut self, defs: &[CompiledIndex], old: Option<Placement>, doc: &Document) {
        let old_expiry = old.as_ref().and_then(|old| old.expires_at);
        if old.is_none() || old_expiry != doc.expires_at {
            if let Some(at) = old_expiry {
                self.expiring.remove(&(at, doc.id.clone()));
            }
            if let Some(at) = doc.expires_at {
                self.expiring.insert((at, doc.id.clone()));
            }
        }
        let old_keys = old.map(|old| old.keys);
        for (position, (def, map)) in defs.iter().zip(&mut self.indexes).enumerate() {
            let new = def.key(doc);
            if let Some(old) = old_keys.as_ref().map(|keys| &keys[position]) {
                if *old == new {
                    continue;
                }
                map.remove(old);
            }
            map.insert(new, doc.id.clone());
        }
    }

    /// The smallest id other than `except` holding `claim` (of one of `defs`, this
    /// collection's indexes): the first entry of the claim's key range in its index map.
    fn holder(
        &self,
        defs: &[CompiledIndex],
        claim: &Claim<'_>,
        except: &str,
        now: i64,
    ) -> Option<String> {
        let position = defs.iter().position(|def| std::ptr::eq(def, claim.index))?;
        let (start, end) = unique::claim_range(&claim.value);
        let bounds = (
            Bound::Included(start),
            end.map_or(Bound::Unbounded, Bound::Excluded),
        );
        self.indexes[position]
            .range::<Vec<u8>, _>(bounds)
            .map(|(_, id)| id)
            .find(|id| *id != except && self.live(id, now).is_some())
            .cloned()
    }

    fn remove(&mut self, defs: &[CompiledIndex], id: &str) -> Option<Slot> {
        let (position, _, slot) = self.docs.swap_remove_full(id)?;
        self.ids.remove(id);
        // The last entry moved into the hole.
        if let Some((moved, _)) = self.docs.get_index(position) {
            *self.ids.get_mut(moved).expect("every id is ordered") = position;
        }
        if let Some(at) = slot.doc.expires_at {
            self.expiring.remove(&(at, slot.doc.id.clone()));
        }
        for (def, map) in defs.iter().zip(&mut self.indexes) {
            map.remove(&def.key(&slot.doc));
        }
        Some(slot)
    }
}

/// How many documents ahead a scan reads one field of the document, and half as many ahead
/// one of its data: a scan's time goes into waiting for each document, then its data, to
/// come from memory (a filter of three fields over 100 000 documents spent 72 % of its time
/// in the data's lookups), and a read issued this early is loaded while the documents before
/// it are evaluated, so the waits overlap instead of following each other. Measured on the
/// bench's selective query: 53 ms without, 46 ms with (`docs/benchmarks.md`).
const TOUCH_AHEAD: usize = 16;

/// What a write took out of the store under the write lock — the log entry the retention
/// pushed out, with the document or the displaced values it kept, and a collection it
/// emptied — to be dropped once the lock is released, so that freeing them never holds up
/// the other writers. (What a write replaces or removes goes into the log, not here.)
#[derive(Debug, Default)]
struct Retired {
    entry: Option<Evicted>,
    /// Its maps' buffers are large blocks: freeing one makes glibc's allocator first sort
    /// every small block freed since, which after many deletes took tens of milliseconds.
    collection: Option<Collection>,
}

/// A document about to be stored whole and, when known, its data's size bound: data the
/// front end measured ([`Request::data_size_bound`]).
struct NewVersion {
    doc: Shared,
    size_bound: Option<usize>,
}

/// The document a write replaces whole, with the position of its last change: what the log
/// keeps of it and where the key's chain goes on.
struct Current {
    doc: Shared,
    last_change: u64,
}

impl Current {
    fn of(slot: &Slot) -> Self {
        Current {
            doc: Arc::clone(&slot.doc),
            last_change: slot.last_change,
        }
    }
}

/// A batch write's outcome with its document still shared (copied out after the lock).
enum Applied {
    Written(Shared),
    Deleted,
    Checked,
}

impl Applied {
    fn into_outcome(self) -> WriteOutcome {
        match self {
            Applied::Written(doc) => WriteOutcome::Written(Arc::unwrap_or_clone(doc)),
            Applied::Deleted => WriteOutcome::Deleted,
            Applied::Checked => WriteOutcome::Checked,
        }
    }
}

impl MemoryStore {
    /// An empty store with the default options (system clock, 390 000-byte documents, no
    /// quota).
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store with the given options.
    pub fn with_options(options: StoreOptions) -> Self {
        MemoryStore {
            sites: RwLock::default(),
            identities: Mutex::default(),
            feed: Feed::default(),
            options,
        }
    }

    /// The same store keeping its last `changes` changes for the feed (default
    /// [`DEFAULT_FEED_RETENTION`]); a cursor older than those is
    /// [`Error::CursorExpired`]. The log copies no document: per change it costs a few dozen
    /// bytes plus what the write displaced (an update's replaced values) or replaced whole
    /// (a put's or a delete's old version).
    ///
    /// ```
    /// use docstore::{Error, FeedStart, Key, Store, feed::FeedScope};
    /// use docstore_memory::MemoryStore;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let store = Store::new(MemoryStore::new().with_feed_retention(2));
    /// let all = FeedScope::whole_store();
    /// let first = store.changes(&all, &FeedStart::Now, 1).await?.next;
    /// for id in ["a", "b", "c"] {
    ///     store.create(&Key::new("acme", "notes", id)?, docstore::Data::new(), "ann").await?;
    /// }
    /// let expired = store.changes(&all, &FeedStart::After(first), 10).await;
    /// assert!(matches!(expired, Err(Error::CursorExpired(_))));
    /// assert_eq!(store.changes(&all, &FeedStart::Oldest, 10).await?.changes.len(), 2);
    /// # Ok::<(), docstore::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn with_feed_retention(mut self, changes: usize) -> Self {
        self.feed = Feed::new(changes);
        self
    }

    fn check_quota(&self, site: Option<&Site>) -> Result<()> {
        if let Some(limit) = self.options.max_docs_per_site {
            // Expired documents not yet swept take no room (`docs/contract.md`, "Expiry").
            let now = self.options.clock.now();
            let count: usize = site.map_or(0, |s| s.values().map(|c| c.live_len(now)).sum());
            if count as u64 >= limit {
                return Err(Error::QuotaExceeded { limit });
            }
        }
        Ok(())
    }

    /// Stores the new document `doc` under `key` when the id is free and the site's quota
    /// allows one more, and logs it.
    fn insert_new(
        &self,
        sites: &mut HashMap<String, Site>,
        key: &Key,
        new: NewVersion,
        retired: &mut Retired,
    ) -> Result<Shared> {
        let NewVersion { doc, size_bound } = new;
        let site = sites.get(key.site());
        if site
            .and_then(|s| s.get(key.collection()))
            .is_some_and(|c| c.contains_key(key.id()))
        {
            return Err(Error::AlreadyExists);
        }
        self.check_quota(site)?;
        self.check_unique(sites, key, &doc)?;
        let appended = self.feed.stored(Logged {
            key,
            kind: ChangeKind::Created,
            after: &doc,
            before: Before::Nothing,
            chain: 0,
        });
        retired.entry = appended.evicted;
        let slot = Slot::whole(Arc::clone(&doc), size_bound, appended.position);
        self.collection_mut(sites, key)
            .set(self.defs(key.collection()), slot);
        Ok(doc)
    }

    /// Stores `next`, the next version of the document at `key` (with its data's size bound
    /// if known), in place of `current`, and logs it, the log keeping the replaced version.
    fn replace(
        &self,
        sites: &mut HashMap<String, Site>,
        key: &Key,
        (current, next): (Current, NewVersion),
        retired: &mut Retired,
    ) -> Result<Shared> {
        self.check_unique(sites, key, &next.doc)?;
        let appended = self.feed.stored(Logged {
            key,
            kind: ChangeKind::Updated,
            after: &next.doc,
            before: Before::Whole(current.doc),
            chain: current.last_change,
        });
        retired.entry = appended.evicted;
        let slot = Slot::whole(Arc::clone(&next.doc), next.size_bound, appended.position);
        // The replaced version is the log's now: dropping the slot frees nothing.
        self.collection_mut(sites, key)
            .set(self.defs(key.collection()), slot);
        Ok(next.doc)
    }

    /// Refuses `doc`, about to be stored at `key`, when another document of its collection
    /// holds one of its unique values (`docs/contract.md`, "Unique indexes").
    fn check_unique(&self, sites: &HashMap<String, Site>, key: &Key, doc: &Document) -> Result<()> {
        let defs = self.defs(key.collection());
        if !defs.iter().any(CompiledIndex::is_unique) {
            return Ok(());
        }
        let collection = sites.get(key.site()).and_then(|s| s.get(key.collection()));
        let now = self.now();
        unique::check(defs, key, doc, |_, claim, except| {
            Ok(collection.and_then(|c| c.holder(defs, claim, except, now)))
        })
    }

    /// Refuses a batch whose decided writes leave two documents of a collection holding
    /// one unique value ([`unique::check_batch`]).
    fn check_batch_unique(
        &self,
        sites: &HashMap<String, Site>,
        writes: &[Write],
        decisions: &[Decision],
    ) -> Result<()> {
        let judged: Vec<unique::BatchWrite<'_>> = writes
            .iter()
            .zip(decisions)
            .enumerate()
            .filter(|(_, (write, _))| {
                self.defs(write.key().collection())
                    .iter()
                    .any(CompiledIndex::is_unique)
            })
            .filter_map(|(position, (write, decision))| {
                let stored = match decision {
                    Decision::Store { document, .. } => Some(document),
                    Decision::Remove => None,
                    Decision::Keep => return None,
                };
                Some(unique::BatchWrite {
                    position,
                    key: write.key(),
                    stored,
                })
            })
            .collect();
        if judged.is_empty() {
            return Ok(());
        }
        let defs_of = |collection: &str| self.defs(collection);
        let now = self.now();
        unique::check_batch(&judged, defs_of, |key, claim, except| {
            let collection = sites.get(key.site()).and_then(|s| s.get(key.collection()));
            let defs = self.defs(key.collection());
            Ok(collection.and_then(|c| c.holder(defs, claim, except, now)))
        })
    }

    /// The declared indexes of `collection`.
    fn defs(&self, collection: &str) -> &[CompiledIndex] {
        self.options.indexes.for_collection(collection)
    }

    /// The key's collection, created (with its empty index maps) when missing; the names are
    /// copied only then.
    fn collection_mut<'s>(
        &self,
        sites: &'s mut HashMap<String, Site>,
        key: &Key,
    ) -> &'s mut Collection {
        if !sites.contains_key(key.site()) {
            sites.insert(key.site().to_owned(), Site::new());
        }
        let site = sites.get_mut(key.site()).expect("just made");
        if !site.contains_key(key.collection()) {
            let collection = Collection::new(self.defs(key.collection()));
            site.insert(key.collection().to_owned(), collection);
        }
        site.get_mut(key.collection()).expect("just made")
    }

    fn now(&self) -> i64 {
        self.options.clock.now()
    }

    /// Replaces the existing document at `key` with `next(current)` under the write lock;
    /// [`Error::NotFound`] when there is none, [`Error::Conflict`] when it is not at
    /// `expected_version`.
    fn change_existing(
        &self,
        sites: &mut HashMap<String, Site>,
        key: &Key,
        expected_version: Option<u64>,
        retired: &mut Retired,
        next: impl FnOnce(&Document) -> NewVersion,
    ) -> Result<Shared> {
        let current = Self::lookup_slot(sites, key).ok_or_else(|| Error::not_found(key))?;
        if expected_version.is_some_and(|v| v != current.doc.version) {
            return Err(Error::Conflict {
                current: current.doc.version,
            });
        }
        let next = next(&current.doc);
        let current = Current::of(current);
        self.replace(sites, key, (current, next), retired)
    }

    /// An update: `patch` merged into the stored document in place under the write lock,
    /// the log keeping what it displaced ([`update`]).
    fn patch(
        &self,
        key: &Key,
        patch: &Data,
        expected_version: Option<u64>,
        origin: Origin<'_>,
    ) -> Result<Shared> {
        // Read before the write lock, as every other write does: the lock is held for the
        // write alone (the document's `updated_at` still never goes back:
        // `Document::stamp_next`).
        let (by, now) = ((origin.actor, origin.expiry), self.now());
        let edit = update::Edit::Merge {
            patch,
            bound: docstore::document::data_size_bound(patch),
        };
        let call = update::InPlace {
            key,
            edit,
            expected: expected_version,
        };
        self.write_once(key, origin, |sites, retired| {
            self.write_in_place(sites, call, (by, now), retired)
        })
    }

    /// Runs `write` under the write lock, unless `origin` repeats a write the document at
    /// `key` keeps: then the document as it stands, and nothing written. A caller identity
    /// is kept on the document `write` wrote. What the write retired is dropped after the
    /// lock is released.
    fn write_once(
        &self,
        key: &Key,
        origin: Origin<'_>,
        write: impl FnOnce(&mut HashMap<String, Site>, &mut Retired) -> Result<Shared>,
    ) -> Result<Shared> {
        let (mut retired, mut expired) = (Retired::default(), Retired::default());
        let written = self.write_locked(key, origin, &mut expired, |sites| {
            write(sites, &mut retired)
        });
        drop((retired, expired));
        written
    }

    /// Removes the document at `key` if it has expired, with its `Expired` change: a write
    /// finds the key as the readers do, empty (`docs/contract.md`, "Expiry").
    /// A collection without expiring documents answers without searching for the id.
    fn expire_due(&self, sites: &mut HashMap<String, Site>, key: &Key, retired: &mut Retired) {
        let collection = sites
            .get(key.site())
            .and_then(|site| site.get(key.collection()));
        if collection.is_none_or(|c| c.expiring.is_empty()) {
            return;
        }
        let now = self.now();
        if !Self::lookup(sites, key).is_some_and(|doc| doc.is_expired(now)) {
            return;
        }
        if let Some(removed) = self.remove_unchecked(sites, key, retired) {
            let time = removed.doc.expires_at.unwrap_or(removed.doc.updated_at);
            let chain = (key, ChangeKind::Expired, removed.last_change);
            retired.entry = self.feed.removed(chain, removed.doc, time, "").evicted;
        }
    }

    /// [`MemoryStore::write_once`] under the lock.
    fn write_locked(
        &self,
        key: &Key,
        origin: Origin<'_>,
        expired: &mut Retired,
        write: impl FnOnce(&mut HashMap<String, Site>) -> Result<Shared>,
    ) -> Result<Shared> {
        let mut sites = self.sites.write();
        self.expire_due(&mut sites, key, expired);
        let Some(id) = origin.write_id else {
            return write(&mut sites);
        };
        if self.identities.lock().written(key, id)
            && let Some(doc) = Self::lookup(&sites, key)
        {
            return Ok(Arc::clone(doc));
        }
        let doc = write(&mut sites)?;
        self.identities.lock().record_write(key, id);
        Ok(doc)
    }

    /// Deletes the document at `key` (if at `expected_version`); `Ok(false)` when there is
    /// none. A delete that `origin` repeats answers `Ok(true)` and removes nothing. The
    /// removed document is dropped after the write lock is released.
    fn remove(&self, key: &Key, expected_version: Option<u64>, origin: Origin<'_>) -> Result<bool> {
        let (mut retired, mut expired) = (Retired::default(), Retired::default());
        let removed =
            self.remove_locked(key, expected_version, origin, [&mut retired, &mut expired]);
        drop((retired, expired));
        removed
    }

    /// [`MemoryStore::remove`] under the lock.
    fn remove_locked(
        &self,
        key: &Key,
        expected_version: Option<u64>,
        origin: Origin<'_>,
        [retired, expired]: [&mut Retired; 2],
    ) -> Result<bool> {
        let mut sites = self.sites.write();
        let now = self.now();
        if let Some(id) = origin.write_id
            && self.identities.lock().deleted(key, id, now)
        {
            return Ok(true);
        }
        self.expire_due(&mut sites, key, expired);
        let Some(current) = Self::lookup(&sites, key) else {
            return Ok(false);
        };
        if let Some(expected) = expected_version
            && expected != current.version
        {
            return Err(Error::Conflict {
                current: current.version,
            });
        }
        if let Some(removed) = self.take_out(&mut sites, key, retired) {
            let chain = (key, ChangeKind::Deleted, removed.last_change);
            let appended = self.feed.removed(chain, removed.doc, now, origin.actor);
            retired.entry = appended.evicted;
        }
        self.forget_removed(key, origin.write_id, now);
        Ok(true)
    }

    /// Forgets the identities of the document just removed at `key`, recording the
    /// delete's own when it has one.
    fn forget_removed(&self, key: &Key, delete_id: Option<&docstore::WriteId>, now: i64) {
        let mut identities = self.identities.lock();
        match delete_id {
            Some(id) => identities.record_delete(key, id, now),
            None => identities.forget(key),
        }
    }
}

impl MemoryStore {
    fn lookup<'a>(sites: &'a HashMap<String, Site>, key: &Key) -> Option<&'a Shared> {
        Self::lookup_slot(sites, key).map(|slot| &slot.doc)
    }

    /// The document at `key` unless it expired at `now`.
    fn lookup_live<'a>(
        sites: &'a HashMap<String, Site>,
        key: &Key,
        now: i64,
    ) -> Option<&'a Shared> {
        Self::lookup(sites, key).filter(|doc| !doc.is_expired(now))
    }

    fn lookup_slot<'a>(sites: &'a HashMap<String, Site>, key: &Key) -> Option<&'a Slot> {
        sites
            .get(key.site())
            .and_then(|site| site.get(key.collection()))
            .and_then(|collection| collection.slot(key.id()))
    }

    /// Decides every write of a batch against `current`, the documents at its keys
    /// ([`Request::decide`]; keys are distinct, so no write sees another's effect, except
    /// through the per-site quota, counted in `sites` when given). The first write that
    /// fails fails the batch.
    fn decide_batch(
        &self,
        request: &Request<'_>,
        current: &[Option<Shared>],
        now: i64,
        sites: Option<&HashMap<String, Site>>,
    ) -> Result<Vec<Decision>> {
        let mut quota = match sites {
            Some(sites) => self.quota_count(sites),
            None => QuotaCount::unlimited(),
        };
        request.decide(current, now, self.options.max_doc_bytes, &mut quota)
    }

    /// The per-site quota over a batch's writes, starting from the documents `sites` holds
    /// (expired documents not yet swept take no room).
    fn quota_count<'s>(&self, sites: &'s HashMap<String, Site>) -> QuotaCount<'s> {
        let now = self.now();
        QuotaCount::new(self.options.max_docs_per_site, move |site| {
            sites
                .get(site)
                .map_or(0, |s| s.values().map(|c| c.live_len(now) as u64).sum())
        })
    }

    /// The documents at the batch's keys in `sites`.
    fn batch_base(sites: &HashMap<String, Site>, writes: &[Write]) -> Vec<Option<Shared>> {
        writes
            .iter()
            .map(|w| Self::lookup(sites, w.key()).cloned())
            .collect()
    }

    /// Whether every key of the batch still holds the document of `base`. Comparing pointers
    /// is enough although an update changes a document in place: `base` holds each of its
    /// documents, so an update in between copied it first (`Arc::make_mut`).
    fn batch_unchanged(
        sites: &HashMap<String, Site>,
        writes: &[Write],
        base: &[Option<Shared>],
    ) -> bool {
        writes.iter().zip(base).all(|(write, base)| {
            match (Self::lookup(sites, write.key()), base) {
                (None, None) => true,
                (Some(now), Some(then)) => Arc::ptr_eq(now, then),
                _ => false,
            }
        })
    }

    /// A batch's decisions made before the write lock, from the documents a read lock
    /// finds: the copies and merges of its patches cost the other writers nothing.
    /// `None` when a write would fail (the write lock decides then, with the error).
    fn plan_batch(&self, request: &Request<'_>, writes: &[Write], now: i64) -> Option<BatchPlan> {
        let base = Self::batch_base(&self.sites.read(), writes);
        let decisions = self.decide_batch(request, &base, now, None).ok()?;
        Some(BatchPlan { base, decisions })
    }

    /// Applies a batch's decisions (every one checked, the quota included).
    fn apply_batch(
        &self,
        sites: &mut HashMap<String, Site>,
        writes: &[Write],
        decisions: Vec<Decision>,
        (actor, now): (&str, i64),
        retired: &mut Vec<Retired>,
    ) -> Result<Vec<Applied>> {
        let mut applied = Vec::with_capacity(writes.len());
        for (write, decision) in writes.iter().zip(decisions) {
            let key = write.key();
            let mut gone = Retired::default();
            applied.push(match decision {
                Decision::Store { document, creates } => {
                    let document = Arc::new(document);
                    let current = Self::lookup_slot(sites, key).map(Current::of);
                    let (kind, before, chain) = match current {
                        Some(current) if !creates => (
                            ChangeKind::Updated,
                            Before::Whole(current.doc),
                            current.last_change,
                        ),
                        _ => (ChangeKind::Created, Before::Nothing, 0),
                    };
                    let (after, chain) = (&document, chain);
                    let logged = Logged {
                        key,
                        kind,
                        after,
                        before,
                        chain,
                    };
                    let appended = self.feed.stored(logged);
                    gone.entry = appended.evicted;
                    let slot = Slot::whole(Arc::clone(&document), None, appended.position);
                    self.collection_mut(sites, key)
                        .set(self.defs(key.collection()), slot);
                    Applied::Written(document)
                }
                Decision::Remove => {
                    if let Some(removed) = self.remove_unchecked(sites, key, &mut gone) {
                        let chain = (key, ChangeKind::Deleted, removed.last_change);
                        let appended = self.feed.removed(chain, removed.doc, now, actor);
                        gone.entry = appended.evicted;
                    }
                    Applied::Deleted
                }
                Decision::Keep => Applied::Checked,
            });
            retired.push(gone);
        }
        Ok(applied)
    }

    /// Whether a batch with identity `id` was applied: one of its keys keeps `id`.
    fn batch_repeated(&self, writes: &[Write], id: &docstore::WriteId, now: i64) -> bool {
        let identities = self.identities.lock();
        writes.iter().any(|write| {
            identities.written(write.key(), id) || identities.deleted(write.key(), id, now)
        })
    }

    /// Removes the document at `key` without checks; the removed document's slot.
    fn remove_unchecked(
        &self,
        sites: &mut HashMap<String, Site>,
        key: &Key,
        retired: &mut Retired,
    ) -> Option<Slot> {
        self.identities.lock().forget(key);
        self.take_out(sites, key, retired)
    }

    /// Takes the document at `key` out of its collection; a collection it empties is
    /// retired (dropped after the write lock) and a site it empties is dropped.
    fn take_out(
        &self,
        sites: &mut HashMap<String, Site>,
        key: &Key,
        retired: &mut Retired,
    ) -> Option<Slot> {
        let site = sites.get_mut(key.site())?;
        let collection = site.get_mut(key.collection())?;
        let removed = collection.remove(self.defs(key.collection()), key.id());
        if collection.is_empty() {
            retired.collection = site.remove(key.collection());
        }
        if site.is_empty() {
            sites.remove(key.site());
        }
        removed
    }

    /// A batch under the write lock: repeated (the documents at its keys, copied out after
    /// the lock) or applied.
    fn write_all_locked(
        &self,
        checked: &CheckedBatch<'_>,
        origin: Origin<'_>,
        retired: &mut Vec<Retired>,
    ) -> Result<BatchDone> {
        let (writes, actor, now) = (checked.writes(), origin.actor, self.now());
        let request = Request::batch(checked, origin);
        // A batch of updates is decided under the lock, merging in place; another, before it.
        let patches = self.batch_patches(writes);
        let plan = match patches {
            Some(_) => None,
            None => self.plan_batch(&request, writes, now),
        };
        let mut sites = self.sites.write();
        if let Some(id) = origin.write_id
            && self.batch_repeated(writes, id, now)
        {
            return Ok(BatchDone::Repeated(Self::batch_base(&sites, writes)));
        }
        for write in writes {
            let mut expired = Retired::default();
            self.expire_due(&mut sites, write.key(), &mut expired);
            retired.push(expired);
        }
        let in_place = patches.and_then(|calls| {
            self.patch_all_locked(&mut sites, (calls, checked), (actor, now), retired)
        });
        let applied = match in_place {
            Some(applied) => applied,
            None => self.decide_and_apply(&mut sites, (&request, checked), plan, now, retired)?,
        };
        if let Some(id) = origin.write_id {
            let mut identities = self.identities.lock();
            for (write, outcome) in writes.iter().zip(&applied) {
                match outcome {
                    Applied::Written(_) => identities.record_write(write.key(), id),
                    Applied::Deleted => identities.record_delete(write.key(), id, now),
                    Applied::Checked => {}
                }
            }
        }
        Ok(BatchDone::Applied(applied))
    }

    /// Decides a batch whole, from `plan` when its documents still stand, and applies it
    /// under the write lock.
    fn decide_and_apply(
        &self,
        sites: &mut HashMap<String, Site>,
        (request, checked): (&Request<'_>, &CheckedBatch<'_>),
        plan: Option<BatchPlan>,
        now: i64,
        retired: &mut Vec<Retired>,
    ) -> Result<Vec<Applied>> {
        let writes = checked.writes();
        let decisions = match plan {
            Some(plan) if Self::batch_unchanged(sites, writes, &plan.base) => {
                // Every write was decided without failing: a quota refusal is the first.
                let mut quota = self.quota_count(sites);
                for (index, (write, decision)) in writes.iter().zip(&plan.decisions).enumerate() {
                    quota.count(index, write.key().site(), decision)?;
                }
                plan.decisions
            }
            // Another write got in between (or a write fails): decide under the lock.
            _ => {
                let base = Self::batch_base(sites, writes);
                self.decide_batch(request, &base, now, Some(sites))?
            }
        };
        self.check_batch_unique(sites, writes, &decisions)?;
        let actor = request.actor();
        self.apply_batch(sites, writes, decisions, (actor, now), retired)
    }
}

/// A batch's decisions and the documents at its keys they were made from.
struct BatchPlan {
    base: Vec<Option<Shared>>,
    decisions: Vec<Decision>,
}

/// What a batch did under the write lock.
enum BatchDone {
    Applied(Vec<Applied>),
    /// A repeat: the documents at its keys as they stand.
    Repeated(Vec<Option<Shared>>),
}

/// Data a call stores whole, with the size bound the front end found for it, if any
/// ([`Request::data_size_bound`]).
type Whole = (Data, Option<usize>);

/// The calls [`Driver::apply`] dispatches to ([`Call`]), one function each.
impl MemoryStore {
    async fn create(&self, key: &Key, data: Whole, origin: Origin<'_>) -> Result<Document> {
        let (data, size_bound) = data;
        let mut doc = Document::first(key.id(), data, origin.actor, self.now());
        doc.expires_at = origin.expiry.apply(None, doc.updated_at);
        let new = NewVersion {
            doc: Arc::new(doc),
            size_bound,
        };
        let written = self.write_once(key, origin, |sites, retired| {
            self.insert_new(sites, key, new, retired)
        });
        written.map(Arc::unwrap_or_clone)
    }

    async fn put(&self, key: &Key, data: Whole, origin: Origin<'_>) -> Result<Document> {
        let ((data, size_bound), actor, now) = (data, origin.actor, self.now());
        let written = self.write_once(key, origin, |sites, retired| {
            if Self::lookup_slot(sites, key).is_none() {
                let mut doc = Document::first(key.id(), data, actor, now);
                doc.expires_at = origin.expiry.apply(None, doc.updated_at);
                let doc = Arc::new(doc);
                return self.insert_new(sites, key, NewVersion { doc, size_bound }, retired);
            }
            // Written over in place, as an update is: the log keeps the data it replaced.
            let call = update::InPlace {
                key,
                edit: update::Edit::Replace {
                    data,
                    bound: size_bound,
                },
                expected: None,
            };
            self.write_in_place(sites, call, ((actor, origin.expiry), now), retired)
        });
        written.map(Arc::unwrap_or_clone)
    }

    async fn update(
        &self,
        key: &Key,
        patch: &Data,
        expected_version: Option<u64>,
        origin: Origin<'_>,
    ) -> Result<Document> {
        self.patch(key, patch, expected_version, origin)
            .map(Arc::unwrap_or_clone)
    }

    async fn replace_if(
        &self,
        key: &Key,
        data: Whole,
        expected_version: u64,
        origin: Origin<'_>,
    ) -> Result<Document> {
        let ((data, size_bound), actor, now) = (data, origin.actor, self.now());
        let written = self.write_once(key, origin, |sites, retired| {
            let expected = Some(expected_version);
            self.change_existing(sites, key, expected, retired, |current| {
                let mut doc = current.next(data, actor, now);
                doc.expires_at = origin.expiry.apply(doc.expires_at, doc.updated_at);
                let doc = Arc::new(doc);
                NewVersion { doc, size_bound }
            })
        });
        written.map(Arc::unwrap_or_clone)
    }

    async fn delete(
        &self,
        key: &Key,
        expected_version: Option<u64>,
        origin: Origin<'_>,
    ) -> Result<bool> {
        let deleted = self.remove(key, expected_version, origin)?;
        docstore::driver::delete_answer(key, expected_version, deleted)
    }

    async fn restore(
        &self,
        key: &Key,
        document: &Document,
        origin: Origin<'_>,
    ) -> Result<Document> {
        let new = NewVersion {
            doc: Arc::new(document.clone()),
            size_bound: None,
        };
        let written = self.write_once(key, origin, |sites, retired| {
            self.insert_new(sites, key, new, retired)
        });
        written.map(Arc::unwrap_or_clone)
    }

    /// One write lock for the whole batch: every write is decided first, then all are
    /// applied, so a failing one leaves the store untouched. The documents are copied out
    /// after the lock is released.
    async fn write_all(
        &self,
        batch: &CheckedBatch<'_>,
        origin: Origin<'_>,
    ) -> Result<Vec<WriteOutcome>> {
        let writes = batch.writes();
        let mut retired = Vec::new();
        let done = self.write_all_locked(batch, origin, &mut retired);
        drop(retired);
        match done? {
            BatchDone::Applied(applied) => {
                Ok(applied.into_iter().map(Applied::into_outcome).collect())
            }
            BatchDone::Repeated(current) => {
                let current = current.into_iter().map(|d| d.map(Arc::unwrap_or_clone));
                batch::repeated_outcomes(writes, current.collect())
            }
        }
    }
}

#[async_trait]
impl Driver for MemoryStore {
    fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// Never: a write commits under the lock or changes nothing, and its answer is handed
    /// back in the same process.
    fn may_lose_answers(&self) -> bool {
        false
    }

    /// Never: there is nothing to wait for (no I/O, no other process), so a write's data is
    /// not copied for a retry.
    fn writes_may_be_unavailable(&self) -> bool {
        false
    }

    /// Under the one write lock, each call by its own function ([`Call`]).
    async fn apply(&self, request: Request<'_>) -> Result<Answer> {
        let (origin, bound) = (request.origin(), request.data_size_bound());
        Ok(match request.call() {
            Call::Create { key, data } => {
                Answer::written(self.create(key, (data.clone(), bound), origin).await?)
            }
            Call::Put { key, data } => {
                Answer::written(self.put(key, (data.clone(), bound), origin).await?)
            }
            Call::Update {
                key,
                patch,
                expected,
            } => Answer::written(self.update(key, patch, expected, origin).await?),
            Call::ReplaceIf {
                key,
                data,
                expected,
            } => {
                let data = (data.clone(), bound);
                Answer::written(self.replace_if(key, data, expected, origin).await?)
            }
            Call::Delete { key, expected } => {
                Answer::deleted(self.delete(key, expected, origin).await?)
            }
            Call::Restore { key, document } => {
                Answer::written(self.restore(key, document, origin).await?)
            }
            Call::Batch(batch) => Answer::Applied(self.write_all(&batch, origin).await?),
        })
    }

    /// Copied out after the read lock is released.
    async fn get(&self, key: &Key) -> Result<Option<Document>> {
        // The clock is read only for a document that expires.
        let doc = Self::lookup(&self.sites.read(), key)
            .filter(|doc| doc.expires_at.is_none() || !doc.is_expired(self.now()))
            .cloned();
        Ok(doc.map(Arc::unwrap_or_clone))
    }

    async fn query(&self, site: &str, collection: &str, compiled: &CompiledQuery) -> Result<Page> {
        let sites = self.sites.read();
        let Some(docs) = sites.get(site).and_then(|s| s.get(collection)) else {
            return Ok(Page::default());
        };
        let (defs, now) = (self.defs(collection), self.now());
        let choice = choose(&self.options.indexes, collection, compiled, Some(docs));
        if let Some(plan) = choice.plan {
            return Ok(evaluate_by_index(compiled, &plan, defs, (docs, now)));
        }
        Ok(match compiled.id_order() {
            Some(descending) => evaluate_in_id_order(compiled, (docs, now), descending),
            None => compiled.evaluate(docs.documents().filter(|doc| !doc.is_expired(now))),
        })
    }

    async fn explain(
        &self,
        site: &str,
        collection: &str,
        compiled: &CompiledQuery,
    ) -> Result<Explain> {
        let sites = self.sites.read();
        let docs = sites.get(site).and_then(|s| s.get(collection));
        let choice = choose(&self.options.indexes, collection, compiled, docs);
        let how = || match compiled.id_order() {
            Some(descending) => format!(
                "the collection in {} id order{}, until the page is full",
                if descending {
                    "descending"
                } else {
                    "ascending"
                },
                if compiled.after().is_some() {
                    " from the cursor"
                } else {
                    ""
                }
            ),
            None => "the whole collection, sorted in memory".to_owned(),
        };
        Ok(choice.explain(compiled, how, true))
    }

    async fn collections(&self, site: &str) -> Result<Vec<(String, u64)>> {
        let (sites, now) = (self.sites.read(), self.now());
        Ok(sites.get(site).map_or_else(Vec::new, |collections| {
            collections
                .iter()
                .map(|(name, docs)| (name.clone(), docs.live_len(now) as u64))
                .filter(|(_, count)| *count > 0)
                .collect()
        }))
    }

    async fn count(&self, site: &str) -> Result<u64> {
        let (sites, now) = (self.sites.read(), self.now());
        Ok(sites.get(site).map_or(0, |s| {
            s.values().map(|docs| docs.live_len(now) as u64).sum()
        }))
    }

    /// The sites with a non-empty collection, under one read lock.
    async fn sites(&self) -> Result<Vec<String>> {
        let (sites, now) = (self.sites.read(), self.now());
        let mut names: Vec<String> = sites
            .iter()
            .filter(|(_, collections)| collections.values().any(|c| c.live_len(now) > 0))
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        Ok(names)
    }

    /// One read lock: the answer is one snapshot (copied out after the lock).
    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Document>>> {
        let found: Vec<Option<Shared>> = {
            let (sites, now) = (self.sites.read(), self.now());
            keys.iter()
                .map(|key| Self::lookup_live(&sites, key, now).cloned())
                .collect()
        };
        Ok(found
            .into_iter()
            .map(|doc| doc.map(Arc::unwrap_or_clone))
            .collect())
    }

    async fn changes(
        &self,
        scope: &FeedScope,
        start: &FeedStart,
        limit: usize,
    ) -> Result<ChangePage> {
        // The read lock holds the writers off, so the map is the state after the log's last
        // entry, which the feed rebuilds each change's versions from.
        let sites = self.sites.read();
        let current = |key: &Key| Self::lookup(&sites, key).map(|doc| Document::clone(doc));
        self.feed.page((scope, start, limit), &current)
    }

    /// Woken by the next append: no polling.
    async fn wait_for_changes(&self, after: &ChangeCursor) -> Result<()> {
        self.feed.wait(after).await
    }

    fn supports_expiry(&self) -> bool {
        true
    }

    /// Under the write lock: the expired documents of every collection, soonest expired
    /// first within each, up to `limit`.
    async fn sweep_expired(&self, limit: usize) -> Result<usize> {
        let mut retired = Vec::new();
        let swept = {
            let mut sites = self.sites.write();
            let now = self.now();
            let due: Vec<Key> = sites
                .iter()
                .flat_map(|(site, collections)| {
                    collections.iter().flat_map(move |(name, docs)| {
                        docs.expired(now)
                            .filter_map(move |id| Key::new(site, name, id).ok())
                    })
                })
                .take(limit)
                .collect();
            for key in &due {
                let mut expired = Retired::default();
                self.expire_due(&mut sites, key, &mut expired);
                retired.push(expired);
            }
            due.len()
        };
        drop(retired);
        Ok(swept)
    }

    /// The memory backend counts its maps, and checks unique values under the one write
    /// lock that applies every write, so neither its counters nor its unique indexes can
    /// disagree with the documents: `changes` and `unique` are always empty.
    async fn recount(&self, site: &str, _mode: RecountMode) -> Result<Recount> {
        Ok(Recount {
            collections: self.collections(site).await?,
            changes: Vec::new(),
            unique: Vec::new(),
        })
    }
}

/// The planner's choice for `compiled` over `collection` (`None`: no document yet), with the
/// collection's size, always (it is free), and the entries of the contested indexes' key
/// ranges counted when the cost rule asks ([`Candidates::choose_measured`]).
///
/// [`Candidates::choose_measured`]: docstore::index::Candidates::choose_measured
fn choose(
    indexes: &docstore::index::IndexSet,
    collection: &str,
    compiled: &CompiledQuery,
    docs: Option<&Collection>,
) -> docstore::index::Choice {
    let candidates = docstore::index::candidates(indexes, collection, compiled);
    let size = std::future::ready(Ok(docs.map_or(0, Collection::len) as u64));
    let defs = indexes.for_collection(collection);
    let count = |plan: &IndexPlan, range: &KeyRange, at_most: u64| {
        let position = defs.iter().position(|d| d.name() == plan.index);
        let map = docs.zip(position).map(|(docs, p)| &docs.indexes[p]);
        let bounds = (
            Bound::Included(range.start.clone()),
            range.end.clone().map_or(Bound::Unbounded, Bound::Excluded),
        );
        let left = usize::try_from(at_most).unwrap_or(usize::MAX);
        let counted = map.map_or(0, |map| map.range::<Vec<u8>, _>(bounds).take(left).count());
        std::future::ready(Ok::<_, std::convert::Infallible>(counted as u64))
    };
    let choice = candidates.choose_measured(true, size, count).now_or_never();
    let Ok(choice) = choice.expect("counting in memory never waits");
    choice
}

/// Reads the plan's key ranges of the index's ordered map, each only as far as its
/// [`RangeWalk`](docstore::index::RangeWalk) needs, then cuts the page (sorted first unless
/// the plan keeps the query's order).
fn evaluate_by_index(
    query: &CompiledQuery,
    plan: &docstore::index::IndexPlan,
    defs: &[CompiledIndex],
    (collection, now): (&Collection, i64),
) -> Page {
    let Some(position) = defs.iter().position(|d| d.name() == plan.index) else {
        return query.evaluate(collection.documents().filter(|doc| !doc.is_expired(now)));
    };
    let (def, map) = (&defs[position], &collection.indexes[position]);
    let mut kept: Vec<&Document> = Vec::new();
    for range in &plan.ranges {
        let bounds = (
            Bound::Included(range.start.clone()),
            range.end.clone().map_or(Bound::Unbounded, Bound::Excluded),
        );
        let entries = map.range::<Vec<u8>, _>(bounds);
        let entries: Box<dyn Iterator<Item = (&Vec<u8>, &String)>> = if plan.reverse {
            Box::new(entries.rev())
        } else {
            Box::new(entries)
        };
        let mut walk = plan.walk(query);
        for (key, id) in entries {
            let Some(doc) = collection.get(id) else {
                continue;
            };
            let matches = !doc.is_expired(now) && query.matches(doc) && query.is_after_cursor(doc);
            match walk.offer(def, key, matches) {
                Step::Keep => kept.push(doc),
                Step::Skip => {}
                Step::Stop => break,
            }
        }
    }
    match plan.keeps_order() {
        true => page_of_matches(query, kept),
        false => query.evaluate(kept),
    }
}

/// Walks the collection in id order from the cursor and stops once one match more than the
/// page holds was seen, so a page costs what it returns plus what the filter skipped.
fn evaluate_in_id_order(
    query: &CompiledQuery,
    (docs, now): (&Collection, i64),
    descending: bool,
) -> Page {
    let after = query.after().map(|position| position.id.as_str());
    let wanted = query
        .limit()
        .map_or(usize::MAX, |limit| limit.saturating_add(1));
    let live = |doc: &&Document| !doc.is_expired(now);
    let in_order = docs.in_id_order(after, descending).filter(live);
    page_of_matches(query, walk(in_order, query, wanted))
}

/// The page of matches in the query's order: only the page's documents are copied out.
fn page_of_matches(query: &CompiledQuery, matches: Vec<&Document>) -> Page {
    let limit = query.limit().unwrap_or(usize::MAX);
    let more = matches.len() > limit;
    let page = matches.into_iter().take(limit).cloned().collect();
    query.page_in_order(page, more)
}

/// The most matches a walk makes room for before it finds them: a page's worth in one
/// allocation, capped so that a walk without a limit does not reserve for the collection.
const WALK_ROOM: usize = 1024;

fn walk<'a>(
    docs: impl Iterator<Item = &'a Document>,
    query: &CompiledQuery,
    wanted: usize,
) -> Vec<&'a Document> {
    let mut found = Vec::with_capacity(wanted.min(WALK_ROOM));
    found.extend(docs.filter(|doc| query.matches(doc)).take(wanted));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    conformance_tests::conformance_suite!(MemoryHarness);

    /// The contract's families again with indexes declared on the fields the cases query.
    mod indexed {
        use super::*;
        conformance_tests::index_suite!(MemoryHarness);
    }

    /// A collection's id order survives removals, which move the last document into the
    /// hole: every walk from every position, both ways, gives the ids left in order.
    #[test]
    fn removals_keep_the_id_order() {
        let doc = |id: String| Document::first(id, docstore::Data::default(), "", 0);
        let mut collection = Collection::new(&[]);
        let mut left = BTreeSet::new();
        // 37 is coprime with 100: the ids go in out of order.
        for n in (0..100).map(|n| n * 37 % 100) {
            let id = format!("d{n:03}");
            collection.set(&[], Slot::whole(Arc::new(doc(id.clone())), None, 0));
            left.insert(id);
        }
        for n in (0..100).filter(|n| n % 3 != 1).map(|n| n * 7 % 100) {
            let id = format!("d{n:03}");
            assert!(collection.remove(&[], &id).is_some());
            left.remove(&id);
            let walked = |after: Option<&str>, descending| -> Vec<String> {
                let docs = collection.in_id_order(after, descending);
                docs.map(|d| d.id.clone()).collect()
            };
            let ascending: Vec<String> = left.iter().cloned().collect();
            assert_eq!(walked(None, false), ascending);
            let from: Vec<String> = left
                .range::<str, _>((Bound::Excluded(id.as_str()), Bound::Unbounded))
                .cloned()
                .collect();
            assert_eq!(walked(Some(&id), false), from);
            let before: Vec<String> = left
                .range::<str, _>((Bound::Unbounded, Bound::Excluded(id.as_str())))
                .rev()
                .cloned()
                .collect();
            assert_eq!(walked(Some(&id), true), before);
        }
        assert_eq!(collection.len(), left.len());
    }

    /// Deleting the last document of a site leaves nothing of the site behind (a test suite
    /// that gives every case a site of its own would otherwise keep an empty map per case).
    #[tokio::test]
    async fn deleting_a_sites_last_document_drops_the_site() {
        let memory = Arc::new(MemoryStore::new());
        let store = docstore::Store::from_driver(memory.clone());
        for (site, delete_if) in [("plain", false), ("conditional", true)] {
            let key = Key::new(site, "c", "d").unwrap();
            let created = store
                .create(&key, docstore::Data::new(), "a")
                .await
                .unwrap();
            if delete_if {
                store.delete_if(&key, created.version).await.unwrap();
            } else {
                assert!(store.delete(&key).await.unwrap());
            }
            assert!(!memory.sites.read().contains_key(site), "{site}");
        }
    }

    /// The store's background task removes an expired document by itself, recording its
    /// expiry on the feed once (the test waits for that change; nothing calls the sweep).
    #[tokio::test]
    async fn the_background_sweep_removes_expired_documents() {
        use docstore::{ChangeKind, FeedStart, ManualClock};
        use futures_util::StreamExt;
        let clock = Arc::new(ManualClock::new(1_000));
        let options = StoreOptions::default()
            .with_clock(clock.clone())
            .with_sweep_interval(Some(std::time::Duration::from_millis(5)));
        let memory = Arc::new(MemoryStore::with_options(options));
        let store = docstore::Store::from_driver(memory.clone());
        let key = Key::new("s", "c", "a").unwrap();
        let data = docstore::object(serde_json::json!({})).unwrap();
        store
            .create(&key, data, "")
            .expires_at(2_000)
            .await
            .unwrap();
        let site = store.site("s").unwrap();
        let mut changes = site.watch(FeedStart::Now);
        clock.set(2_000);
        let expired = tokio::time::timeout(std::time::Duration::from_secs(30), changes.next())
            .await
            .expect("swept within 30 s")
            .unwrap()
            .unwrap();
        assert_eq!((expired.kind, expired.time), (ChangeKind::Expired, 2_000));
        assert!(memory.sites.read().is_empty(), "removed, not only hidden");
    }

    /// Answers share the stored data instead of copying it (`docs/contract.md`,
    /// "Documents"): a write's answer, a `get` and a query page hold the very map the store
    /// holds; a caller changing its answer copies it then, and the store keeps its own.
    #[tokio::test]
    async fn answers_share_the_stored_data() {
        let store = MemoryStore::new();
        let key = Key::new("s", "c", "a").unwrap();
        let data = docstore::object(serde_json::json!({"n": 1, "tags": ["x"]})).unwrap();
        let given = data.clone();
        let created = store
            .create(&key, (data, None), Origin::actor("ann"))
            .await
            .unwrap();
        assert!(
            Data::ptr_eq(&created.data, &given),
            "create stores the caller's map"
        );
        let stored = || {
            MemoryStore::lookup(&store.sites.read(), &key)
                .cloned()
                .unwrap()
        };
        assert!(Data::ptr_eq(&created.data, &stored().data));

        let patch = docstore::object(serde_json::json!({"n": 2})).unwrap();
        let updated = store.update(&key, &patch, None, Origin::actor("bob")).await;
        let mut updated = updated.unwrap();
        assert!(
            Data::ptr_eq(&updated.data, &stored().data),
            "update's answer"
        );
        assert!(
            !Data::ptr_eq(&updated.data, &created.data),
            "version 1 kept as it was"
        );
        assert_eq!(created.data["n"], 1);
        let got = store.get(&key).await.unwrap().unwrap();
        assert!(Data::ptr_eq(&got.data, &stored().data), "get's answer");
        let query = docstore::Query::default().compile().unwrap();
        let page = store.query("s", "c", &query).await.unwrap();
        assert!(
            Data::ptr_eq(&page.documents[0].data, &stored().data),
            "a query's"
        );

        updated.data.insert("n".into(), serde_json::json!(99));
        assert_eq!(
            stored().data["n"],
            2,
            "the caller's change stays the caller's"
        );
        assert_eq!(got.data["n"], 2);
    }

    /// A merge adds the patch's size bound to the one remembered for the document instead of
    /// walking the document again; once that sum passes the limit the result is measured, so
    /// growing a document one update at a time still stops exactly at the limit.
    #[tokio::test]
    async fn remembered_size_bounds_still_refuse_at_the_limit() {
        let limit = 400;
        let store = MemoryStore::with_options(StoreOptions::default().with_max_doc_bytes(limit));
        let key = Key::new("s", "c", "grows").unwrap();
        let write = Origin::actor("ann");
        store
            .create(&key, (Data::new(), None), write)
            .await
            .unwrap();
        let mut refused = None;
        for n in 0..100 {
            let patch = serde_json::json!({ format!("k{n:02}"): "twenty characters..." });
            let patch = docstore::object(patch).unwrap();
            match store.update(&key, &patch, None, write).await {
                Ok(_) => {
                    let sites = store.sites.read();
                    let slot = MemoryStore::lookup_slot(&sites, &key).unwrap();
                    let size = docstore::document::data_size(&slot.doc.data);
                    assert!(size <= limit, "{size}");
                    if n == 0 {
                        assert!(slot.size_bound.is_some_and(|b| b >= size), "remembered");
                    }
                }
                Err(err) => {
                    refused = Some(err);
                    break;
                }
            }
        }
        assert!(
            matches!(refused, Some(Error::TooLarge { .. })),
            "{refused:?}"
        );
        let stored = store.get(&key).await.unwrap().unwrap();
        let size = docstore::document::data_size(&stored.data);
        assert!(size > limit - 30, "stopped at {size}, short of the limit");
    }

    /// Data stored whole through the front end keeps the size bound the front end's check
    /// found (`Request::data_size_bound`), so the first merge into it walks nothing; data
    /// near the limit keeps its exact size, and the limit still holds for the merge.
    #[tokio::test]
    async fn whole_writes_keep_the_front_ends_size_bound() {
        let memory = Arc::new(MemoryStore::new());
        let store = docstore::Store::from_driver(memory.clone());
        let key = Key::new("s", "c", "a").unwrap();
        let bound = || {
            let sites = memory.sites.read();
            MemoryStore::lookup_slot(&sites, &key).unwrap().size_bound
        };
        let data = docstore::object(serde_json::json!({"title": "hello", "n": [1, 2]})).unwrap();
        let expected = docstore::document::data_size_bound(&data);
        store.create(&key, data.clone(), "ann").await.unwrap();
        assert_eq!(bound(), Some(expected), "create");
        store.update(&key, &data, "ann").await.unwrap();
        let bigger = docstore::object(serde_json::json!({"title": "x".repeat(100)})).unwrap();
        store.put(&key, bigger.clone(), "ann").await.unwrap();
        let expected = docstore::document::data_size_bound(&bigger);
        assert_eq!(bound(), Some(expected), "put");

        // A limit between the exact size and the bound: the front end measured, the store
        // keeps the exact size, and a merge past the limit is refused.
        let size = docstore::document::data_size(&bigger);
        let options = StoreOptions::default().with_max_doc_bytes(size);
        let memory = Arc::new(MemoryStore::with_options(options));
        let store = docstore::Store::from_driver(memory.clone());
        store.create(&key, bigger, "ann").await.unwrap();
        let kept = {
            let sites = memory.sites.read();
            MemoryStore::lookup_slot(&sites, &key).unwrap().size_bound
        };
        assert_eq!(kept, Some(size));
        let grow = docstore::object(serde_json::json!({"more": 1})).unwrap();
        let refused = store.update(&key, &grow, "ann").await;
        assert!(
            matches!(refused, Err(Error::TooLarge { .. })),
            "{refused:?}"
        );
    }

    /// Each store the suite asks for is a new, empty `MemoryStore`.
    struct MemoryHarness;

    #[async_trait]
    impl conformance_tests::Harness for MemoryHarness {
        async fn open(&self, options: StoreOptions) -> docstore::Store {
            docstore::Store::new(MemoryStore::with_options(options))
        }

        fn capabilities(&self) -> conformance_tests::Capabilities {
            conformance_tests::Capabilities::default()
                .with_secondary_indexes(true)
                .with_feed_previous(true)
        }

        /// A store keeping one change, past which the first of two writes falls.
        async fn expired_feed(&self) -> Option<(docstore::Store, ChangeCursor)> {
            let store = docstore::Store::new(MemoryStore::new().with_feed_retention(1));
            let all = docstore::feed::FeedScope::whole_store();
            let start = store.changes(&all, &FeedStart::Now, 1).await.unwrap().next;
            for id in ["a", "b"] {
                let key = Key::new("s", "c", id).unwrap();
                store.create(&key, Data::new(), "").await.unwrap();
            }
            Some((store, start))
        }
    }
}
