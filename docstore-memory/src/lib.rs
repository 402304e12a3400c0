//! # docstore-memory
//!
//! [`MemoryStore`]: the in-memory [`Driver`]. Every call takes one lock, so every operation is
//! atomic and linearizable, counters are exact, and `update` never conflicts. Queries run the
//! reference evaluator; a query in id order reads only from its cursor to the end of its page.
//!
//! `write_all` holds the one write lock for the whole batch: every write is decided against
//! the current state first, then all are applied, so a failing write leaves nothing behind.
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
use docstore::document::{check_size, merged_fits};
use docstore::driver::{Driver, Origin};
use docstore::feed::{ChangeCursor, ChangeKind, ChangePage, FeedScope, FeedStart};
use docstore::index::{CompiledIndex, Reading, Step};
use docstore::query::CompiledQuery;
use docstore::{
    Data, Document, Error, Explain, Key, Page, Recount, RecountMode, Result, StoreOptions,
};
pub use feed::DEFAULT_FEED_RETENTION;
use feed::Feed;
use identities::Identities;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

mod feed;
mod identities;

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

/// One collection's documents by id, and one ordered map per declared index of the
/// collection (in declaration order): index key -> id. Every write goes through
/// [`Collection::set`] and [`Collection::remove`], under the store's one write lock, so the
/// maps always hold exactly one key per document.
#[derive(Debug, Default)]
struct Collection {
    docs: BTreeMap<String, Document>,
    indexes: Vec<BTreeMap<Vec<u8>, String>>,
}

impl Collection {
    fn new(defs: &[CompiledIndex]) -> Self {
        Collection {
            docs: BTreeMap::new(),
            indexes: vec![BTreeMap::new(); defs.len()],
        }
    }

    fn len(&self) -> usize {
        self.docs.len()
    }

    fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    fn get(&self, id: &str) -> Option<&Document> {
        self.docs.get(id)
    }

    fn contains_key(&self, id: &str) -> bool {
        self.docs.contains_key(id)
    }

    /// Stores `doc` (new or replacing the one with its id), moving its index keys.
    fn set(&mut self, defs: &[CompiledIndex], doc: Document) {
        if let Some(old) = self.docs.get(&doc.id) {
            for (def, map) in defs.iter().zip(&mut self.indexes) {
                map.remove(&def.key(old));
            }
        }
        for (def, map) in defs.iter().zip(&mut self.indexes) {
            map.insert(def.key(&doc), doc.id.clone());
        }
        self.docs.insert(doc.id.clone(), doc);
    }

    /// Changes the document `id` in place with `change`, moving its index keys; `None` when
    /// there is no such document.
    fn modify<T>(
        &mut self,
        defs: &[CompiledIndex],
        id: &str,
        change: impl FnOnce(&mut Document) -> Result<T>,
    ) -> Option<Result<T>> {
        let doc = self.docs.get_mut(id)?;
        let old: Vec<Vec<u8>> = defs.iter().map(|def| def.key(doc)).collect();
        let result = change(doc);
        let doc = &*doc;
        for ((def, map), old) in defs.iter().zip(&mut self.indexes).zip(old) {
            let new = def.key(doc);
            if new != old {
                map.remove(&old);
                map.insert(new, doc.id.clone());
            }
        }
        Some(result)
    }

    fn remove(&mut self, defs: &[CompiledIndex], id: &str) -> Option<Document> {
        let doc = self.docs.remove(id)?;
        for (def, map) in defs.iter().zip(&mut self.indexes) {
            map.remove(&def.key(&doc));
        }
        Some(doc)
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
    /// [`Error::CursorExpired`].
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
            let count: usize = site.map_or(0, |s| s.values().map(Collection::len).sum());
            if count as u64 >= limit {
                return Err(Error::QuotaExceeded { limit });
            }
        }
        Ok(())
    }

    /// Stores `doc` under `key` when the id is free and the site's quota allows one more.
    fn insert_new(
        &self,
        sites: &mut HashMap<String, Site>,
        key: &Key,
        doc: Document,
    ) -> Result<Document> {
        let site = sites.get(key.site());
        if site
            .and_then(|s| s.get(key.collection()))
            .is_some_and(|c| c.contains_key(key.id()))
        {
            return Err(Error::AlreadyExists);
        }
        self.check_quota(site)?;
        self.feed.stored(key, ChangeKind::Created, &doc);
        self.collection_mut(sites, key)
            .set(self.defs(key.collection()), doc.clone());
        Ok(doc)
    }

    /// The declared indexes of `collection`.
    fn defs(&self, collection: &str) -> &[CompiledIndex] {
        self.options.indexes.for_collection(collection)
    }

    /// The key's collection, created (with its empty index maps) when missing.
    fn collection_mut<'s>(
        &self,
        sites: &'s mut HashMap<String, Site>,
        key: &Key,
    ) -> &'s mut Collection {
        sites
            .entry(key.site().to_owned())
            .or_default()
            .entry(key.collection().to_owned())
            .or_insert_with(|| Collection::new(self.defs(key.collection())))
    }

    fn new_document(&self, key: &Key, data: Data, actor: &str) -> Document {
        Document::first(key.id(), data, actor, self.options.clock.now())
    }

    /// Replaces `current`'s data with `data` as a new version written by `actor`.
    fn rewrite(&self, current: &mut Document, data: Data, actor: &str) -> Document {
        current.data = data;
        self.stamp(current, actor)
    }

    /// Records a write of `current`'s (already changed) data by `actor`: the new version and
    /// time; returns a copy of the result.
    fn stamp(&self, current: &mut Document, actor: &str) -> Document {
        current.stamp_next(actor, self.options.clock.now());
        current.clone()
    }

    /// Changes the existing document at `key` in place under the write lock (moving its
    /// index keys); [`Error::NotFound`] when there is none, [`Error::Conflict`] when it is
    /// not at `expected_version`.
    fn change_existing(
        &self,
        sites: &mut HashMap<String, Site>,
        key: &Key,
        expected_version: Option<u64>,
        change: impl FnOnce(&mut Document) -> Result<Document>,
    ) -> Result<Document> {
        let defs = self.defs(key.collection());
        let collection = sites
            .get_mut(key.site())
            .and_then(|site| site.get_mut(key.collection()))
            .ok_or_else(|| Error::not_found(key))?;
        let changed = collection
            .modify(defs, key.id(), |current| {
                if expected_version.is_some_and(|v| v != current.version) {
                    return Err(Error::Conflict {
                        current: current.version,
                    });
                }
                change(current)
            })
            .ok_or_else(|| Error::not_found(key))??;
        self.feed.stored(key, ChangeKind::Updated, &changed);
        Ok(changed)
    }

    fn patch(
        &self,
        key: &Key,
        patch: &Data,
        expected_version: Option<u64>,
        origin: Origin<'_>,
    ) -> Result<Document> {
        let limit = self.options.max_doc_bytes;
        let actor = origin.actor;
        self.write_once(key, origin, |sites| {
            self.change_existing(sites, key, expected_version, |current| {
                if merged_fits(&current.data, patch, limit) {
                    // Cannot fail: merge in place, no copy to fall back on needed.
                    docstore::merge_patch(&mut current.data, patch);
                    return Ok(self.stamp(current, actor));
                }
                let mut data = current.data.clone();
                docstore::merge_patch(&mut data, patch);
                check_size(&data, limit)?;
                Ok(self.rewrite(current, data, actor))
            })
        })
    }

    /// Runs `write` under the write lock, unless `origin` repeats a write the document at
    /// `key` keeps: then the document as it stands, and nothing written. A caller identity
    /// is kept on the document `write` wrote.
    fn write_once(
        &self,
        key: &Key,
        origin: Origin<'_>,
        write: impl FnOnce(&mut HashMap<String, Site>) -> Result<Document>,
    ) -> Result<Document> {
        let mut sites = self.sites.write();
        let Some(id) = origin.write_id else {
            return write(&mut sites);
        };
        if self.identities.lock().written(key, id)
            && let Some(doc) = Self::lookup(&sites, key)
        {
            return Ok(doc.clone());
        }
        let doc = write(&mut sites)?;
        self.identities.lock().record_write(key, id);
        Ok(doc)
    }

    /// Deletes the document at `key` (if at `expected_version`); `Ok(false)` when there is
    /// none. A delete that `origin` repeats answers `Ok(true)` and removes nothing.
    fn remove(&self, key: &Key, expected_version: Option<u64>, origin: Origin<'_>) -> Result<bool> {
        let mut sites = self.sites.write();
        let now = self.options.clock.now();
        if let Some(id) = origin.write_id
            && self.identities.lock().deleted(key, id, now)
        {
            return Ok(true);
        }
        let Some(site) = sites.get_mut(key.site()) else {
            return Ok(false);
        };
        let Some(collection) = site.get_mut(key.collection()) else {
            return Ok(false);
        };
        let Some(current) = collection.get(key.id()) else {
            return Ok(false);
        };
        if let Some(expected) = expected_version
            && expected != current.version
        {
            return Err(Error::Conflict {
                current: current.version,
            });
        }
        let version = current.version;
        collection.remove(self.defs(key.collection()), key.id());
        if collection.is_empty() {
            site.remove(key.collection());
        }
        self.feed.deleted(key, version, now, origin.actor);
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
    fn lookup<'a>(sites: &'a HashMap<String, Site>, key: &Key) -> Option<&'a Document> {
        sites
            .get(key.site())
            .and_then(|site| site.get(key.collection()))
            .and_then(|collection| collection.get(key.id()))
    }

    /// Decides every write of a batch against the current state ([`batch::decide`]; keys
    /// are distinct, so no write sees another's effect, except through the per-site quota
    /// count), then applies them all; on the first failure nothing has changed.
    fn apply_batch(
        &self,
        sites: &mut HashMap<String, Site>,
        writes: &[Write],
        actor: &str,
        mut bytes: batch::BatchBytes,
    ) -> Result<Vec<WriteOutcome>> {
        let now = self.options.clock.now();
        let limit = self.options.max_doc_bytes;
        // Documents per site, as the batch's earlier writes leave it (only counted with a
        // quota).
        let mut site_counts: HashMap<&str, u64> = HashMap::new();
        let mut decisions = Vec::with_capacity(writes.len());
        for (index, write) in writes.iter().enumerate() {
            let key = write.key();
            let current = Self::lookup(sites, key);
            let decision = batch::decide(index, write, current, actor, now, limit, &mut bytes)?;
            if let Some(quota) = self.options.max_docs_per_site {
                let count = self.site_count(sites, &mut site_counts, key.site());
                let delta = decision.counter_delta();
                if delta > 0 && *count >= quota {
                    return Err(batch::failed(index, Error::QuotaExceeded { limit: quota }));
                }
                *count = count.saturating_add_signed(delta);
            }
            decisions.push(decision);
        }
        let mut outcomes = Vec::with_capacity(writes.len());
        for (write, decision) in writes.iter().zip(decisions) {
            let key = write.key();
            outcomes.push(match decision {
                Decision::Store { document, creates } => {
                    let kind = if creates {
                        ChangeKind::Created
                    } else {
                        ChangeKind::Updated
                    };
                    self.feed.stored(key, kind, &document);
                    self.collection_mut(sites, key)
                        .set(self.defs(key.collection()), document.clone());
                    WriteOutcome::Written(document)
                }
                Decision::Remove => {
                    if let Some(removed) = self.remove_unchecked(sites, key) {
                        self.feed.deleted(key, removed.version, now, actor);
                    }
                    WriteOutcome::Deleted
                }
                Decision::Keep => WriteOutcome::Checked,
            });
        }
        Ok(outcomes)
    }

    /// Whether a batch with identity `id` was applied: one of its keys keeps `id`.
    fn batch_repeated(&self, writes: &[Write], id: &docstore::WriteId, now: i64) -> bool {
        let identities = self.identities.lock();
        writes.iter().any(|write| {
            identities.written(write.key(), id) || identities.deleted(write.key(), id, now)
        })
    }

    fn site_count<'a, 'c>(
        &self,
        sites: &HashMap<String, Site>,
        counts: &'c mut HashMap<&'a str, u64>,
        site: &'a str,
    ) -> &'c mut u64 {
        counts.entry(site).or_insert_with(|| {
            sites
                .get(site)
                .map_or(0, |s| s.values().map(|c| c.len() as u64).sum())
        })
    }

    /// Removes the document at `key` without checks; the removed document.
    fn remove_unchecked(&self, sites: &mut HashMap<String, Site>, key: &Key) -> Option<Document> {
        self.identities.lock().forget(key);
        let site = sites.get_mut(key.site())?;
        let collection = site.get_mut(key.collection())?;
        let removed = collection.remove(self.defs(key.collection()), key.id());
        if collection.is_empty() {
            site.remove(key.collection());
        }
        if site.is_empty() {
            sites.remove(key.site());
        }
        removed
    }
}

#[async_trait]
impl Driver for MemoryStore {
    fn options(&self) -> &StoreOptions {
        &self.options
    }

    async fn create(&self, key: &Key, data: Data, origin: Origin<'_>) -> Result<Document> {
        self.write_once(key, origin, |sites| {
            self.insert_new(sites, key, self.new_document(key, data, origin.actor))
        })
    }

    async fn get(&self, key: &Key) -> Result<Option<Document>> {
        let sites = self.sites.read();
        Ok(sites
            .get(key.site())
            .and_then(|site| site.get(key.collection()))
            .and_then(|collection| collection.get(key.id()))
            .cloned())
    }

    async fn put(&self, key: &Key, data: Data, origin: Origin<'_>) -> Result<Document> {
        let actor = origin.actor;
        self.write_once(key, origin, |sites| {
            let defs = self.defs(key.collection());
            let existing = sites
                .get_mut(key.site())
                .and_then(|site| site.get_mut(key.collection()))
                .filter(|collection| collection.contains_key(key.id()));
            if let Some(collection) = existing {
                let mut data = Some(data);
                let rewritten = collection.modify(defs, key.id(), |current| {
                    Ok(self.rewrite(current, data.take().expect("once"), actor))
                });
                let rewritten = rewritten.expect("checked present")?;
                self.feed.stored(key, ChangeKind::Updated, &rewritten);
                return Ok(rewritten);
            }
            self.insert_new(sites, key, self.new_document(key, data, actor))
        })
    }

    async fn update(
        &self,
        key: &Key,
        patch: &Data,
        expected_version: Option<u64>,
        origin: Origin<'_>,
    ) -> Result<Document> {
        self.patch(key, patch, expected_version, origin)
    }

    async fn replace_if(
        &self,
        key: &Key,
        data: Data,
        expected_version: u64,
        origin: Origin<'_>,
    ) -> Result<Document> {
        self.write_once(key, origin, |sites| {
            self.change_existing(sites, key, Some(expected_version), |current| {
                Ok(self.rewrite(current, data, origin.actor))
            })
        })
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

    async fn restore(&self, key: &Key, document: &Document, origin: Origin<'_>) -> Result<()> {
        self.write_once(key, origin, |sites| {
            self.insert_new(sites, key, document.clone())
        })
        .map(drop)
    }

    async fn query(&self, site: &str, collection: &str, compiled: &CompiledQuery) -> Result<Page> {
        let sites = self.sites.read();
        let Some(docs) = sites.get(site).and_then(|s| s.get(collection)) else {
            return Ok(Page::default());
        };
        let defs = self.defs(collection);
        let choice = choose(&self.options.indexes, collection, compiled, Some(docs));
        if let Some(plan) = choice.plan {
            return Ok(evaluate_by_index(compiled, &plan, defs, docs));
        }
        Ok(match compiled.id_order() {
            Some(descending) => evaluate_in_id_order(compiled, &docs.docs, descending),
            None => compiled.evaluate(docs.docs.values()),
        })
    }

    /// Index plans read the declared index's ordered map over the plan's key ranges; other
    /// queries in id order walk the ids from the cursor; the rest read the collection. Always
    /// strongly consistent (one lock).
    async fn explain(
        &self,
        site: &str,
        collection: &str,
        compiled: &CompiledQuery,
    ) -> Result<Explain> {
        let sites = self.sites.read();
        let docs = sites.get(site).and_then(|s| s.get(collection));
        let choice = choose(&self.options.indexes, collection, compiled, docs);
        let reads = choice.estimates.first().and_then(|e| e.reads);
        if let Some(plan) = &choice.plan {
            let reading = choice.estimates[0].reading;
            return Ok(Explain::index(plan, reading, reads, true).with_choice(&choice));
        }
        let explain = match compiled.id_order() {
            Some(descending) => Explain::scan(
                format!(
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
                Reading::StopsAtPage,
                reads,
                true,
            ),
            None => Explain::scan(
                "the whole collection, sorted in memory",
                Reading::SortsCollection,
                reads,
                true,
            ),
        };
        Ok(explain.with_choice(&choice))
    }

    async fn collections(&self, site: &str) -> Result<Vec<(String, u64)>> {
        let sites = self.sites.read();
        Ok(sites.get(site).map_or_else(Vec::new, |collections| {
            collections
                .iter()
                .map(|(name, docs)| (name.clone(), docs.len() as u64))
                .collect()
        }))
    }

    async fn count(&self, site: &str) -> Result<u64> {
        let sites = self.sites.read();
        Ok(sites
            .get(site)
            .map_or(0, |s| s.values().map(|docs| docs.len() as u64).sum()))
    }

    /// The sites with a non-empty collection, under one read lock.
    async fn sites(&self) -> Result<Vec<String>> {
        let sites = self.sites.read();
        let mut names: Vec<String> = sites
            .iter()
            .filter(|(_, collections)| collections.values().any(|c| !c.docs.is_empty()))
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        Ok(names)
    }

    /// One read lock: the answer is one snapshot.
    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Document>>> {
        let sites = self.sites.read();
        Ok(keys
            .iter()
            .map(|key| Self::lookup(&sites, key).cloned())
            .collect())
    }

    /// One write lock for the whole batch: every write is decided first, then all are
    /// applied, so a failing one leaves the store untouched.
    async fn write_all(
        &self,
        batch: &CheckedBatch<'_>,
        origin: Origin<'_>,
    ) -> Result<Vec<WriteOutcome>> {
        let (writes, bytes) = (batch.writes(), batch.bytes());
        let mut sites = self.sites.write();
        let Some(id) = origin.write_id else {
            return self.apply_batch(&mut sites, writes, origin.actor, bytes);
        };
        let now = self.options.clock.now();
        if self.batch_repeated(writes, id, now) {
            let current = writes
                .iter()
                .map(|w| Self::lookup(&sites, w.key()).cloned());
            return batch::repeated_outcomes(writes, current.collect());
        }
        let outcomes = self.apply_batch(&mut sites, writes, origin.actor, bytes)?;
        let mut identities = self.identities.lock();
        for (write, outcome) in writes.iter().zip(&outcomes) {
            match outcome {
                WriteOutcome::Written(_) => identities.record_write(write.key(), id),
                WriteOutcome::Deleted => identities.record_delete(write.key(), id, now),
                _ => {}
            }
        }
        Ok(outcomes)
    }

    /// The log's entries after `start`, as they were appended (commit order).
    async fn changes(
        &self,
        scope: &FeedScope,
        start: &FeedStart,
        limit: usize,
    ) -> Result<ChangePage> {
        self.feed.page(scope, start, limit)
    }

    /// Woken by the next append: no polling.
    async fn wait_for_changes(&self, after: &ChangeCursor) -> Result<()> {
        self.feed.wait(after).await
    }

    /// The memory backend counts its maps, so its counters can never disagree: `changes` is
    /// always empty.
    async fn recount(&self, site: &str, _mode: RecountMode) -> Result<Recount> {
        Ok(Recount {
            collections: self.collections(site).await?,
            changes: Vec::new(),
        })
    }
}

/// The planner's choice for `compiled` over `collection` (`None`: no document yet), with the
/// collection's size and, when the cost rule asks for them, the entries of the contested
/// indexes' key ranges counted up to its small-range limit (counting stops there, so it never
/// costs more than the plan it rejects).
fn choose(
    indexes: &docstore::index::IndexSet,
    collection: &str,
    compiled: &CompiledQuery,
    docs: Option<&Collection>,
) -> docstore::index::Choice {
    let candidates = docstore::index::candidates(indexes, collection, compiled);
    let size = docs.map_or(0, Collection::len) as u64;
    let at_most = candidates.small_range_limit(size).saturating_add(1);
    let range_entries = candidates
        .to_count()
        .into_iter()
        .map(|plan| {
            let counted = docs.map_or(0, |docs| {
                count_entries(indexes.for_collection(collection), docs, plan, at_most)
            });
            (plan.index.clone(), counted)
        })
        .collect();
    candidates.choose(&docstore::index::Statistics {
        collection_size: Some(size),
        range_entries,
    })
}

/// The entries in `plan`'s key ranges, counted up to `at_most`.
fn count_entries(
    defs: &[CompiledIndex],
    collection: &Collection,
    plan: &docstore::index::IndexPlan,
    at_most: u64,
) -> u64 {
    let Some(position) = defs.iter().position(|d| d.name() == plan.index) else {
        return 0;
    };
    let map = &collection.indexes[position];
    let mut counted = 0u64;
    for range in &plan.ranges {
        let bounds = (
            Bound::Included(range.start.clone()),
            range.end.clone().map_or(Bound::Unbounded, Bound::Excluded),
        );
        let left = usize::try_from(at_most - counted).unwrap_or(usize::MAX);
        counted += map.range::<Vec<u8>, _>(bounds).take(left).count() as u64;
        if counted >= at_most {
            break;
        }
    }
    counted
}

/// Reads the plan's key ranges of the index's ordered map, each only as far as its
/// [`RangeWalk`](docstore::index::RangeWalk) needs, then lets the evaluator sort and cut.
fn evaluate_by_index(
    query: &CompiledQuery,
    plan: &docstore::index::IndexPlan,
    defs: &[CompiledIndex],
    collection: &Collection,
) -> Page {
    let Some(position) = defs.iter().position(|d| d.name() == plan.index) else {
        return query.evaluate(collection.docs.values());
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
            let matches = query.matches(doc) && query.is_after_cursor(doc);
            match walk.offer(def, key, matches) {
                Step::Keep => kept.push(doc),
                Step::Skip => {}
                Step::Stop => break,
            }
        }
    }
    query.evaluate(kept)
}

/// Walks the collection in id order from the cursor and stops once one match more than the
/// page holds was seen, so a page costs what it returns plus what the filter skipped.
fn evaluate_in_id_order(
    query: &CompiledQuery,
    docs: &BTreeMap<String, Document>,
    descending: bool,
) -> Page {
    let start = query.after().map(|position| position.id.as_str());
    let wanted = query
        .limit()
        .map_or(usize::MAX, |limit| limit.saturating_add(1));
    let candidates: Vec<&Document> = match (descending, start) {
        (false, Some(id)) => walk(
            docs.range::<str, _>((Bound::Excluded(id), Bound::Unbounded))
                .map(|e| e.1),
            query,
            wanted,
        ),
        (false, None) => walk(docs.values(), query, wanted),
        (true, Some(id)) => walk(
            docs.range::<str, _>((Bound::Unbounded, Bound::Excluded(id)))
                .rev()
                .map(|e| e.1),
            query,
            wanted,
        ),
        (true, None) => walk(docs.values().rev(), query, wanted),
    };
    query.evaluate(candidates)
}

fn walk<'a>(
    docs: impl Iterator<Item = &'a Document>,
    query: &CompiledQuery,
    wanted: usize,
) -> Vec<&'a Document> {
    docs.filter(|doc| query.matches(doc)).take(wanted).collect()
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

    /// Each store the suite asks for is a new, empty `MemoryStore`.
    struct MemoryHarness;

    #[async_trait]
    impl conformance_tests::Harness for MemoryHarness {
        async fn open(&self, options: StoreOptions) -> docstore::Store {
            docstore::Store::new(MemoryStore::with_options(options))
        }

        fn capabilities(&self) -> conformance_tests::Capabilities {
            conformance_tests::Capabilities::default().with_secondary_indexes(true)
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
