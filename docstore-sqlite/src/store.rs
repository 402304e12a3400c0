//! `SqliteStore` and its `Driver` implementation: the write rules (versions, timestamps, quota,
//! size, conditions), each write one immediate transaction.

use crate::conn::{Connections, blocking};
use crate::error::Fail;
use crate::feed::{Feed, PruneSettings};
use crate::options::SqliteOptions;
use crate::unique::Claims;
use crate::{query, rows, write_ids};
use async_trait::async_trait;
use docstore::batch::{CheckedBatch, WriteOutcome};
use docstore::driver::{Driver, Expiry, Fetched, Origin, Swept, sweep_in_chunks};
use docstore::feed::{ChangeCursor, ChangeKind, ChangePage, FeedScope, FeedStart};
use docstore::identity::KeptIds;
use docstore::query::CompiledQuery;
use docstore::request::Answer;
use docstore::{
    Data, Document, Error, Explain, Key, Page, Recount, RecountMode, Result, StoreOptions, WriteId,
};
use rusqlite::Connection;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

mod calls;

/// The SQLite backend. See the [crate docs](crate).
///
/// Cheap to clone: clones share the connections.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    conns: Connections,
    pub(crate) options: StoreOptions,
    /// The declared indexes that are built and may be read.
    pub(crate) indexes: crate::index::Indexes,
    /// The change feed's settings and this process's watchers' wake-up channel.
    feed: Feed,
    /// Document rows queries have read (see [`SqliteStore::documents_read`]).
    documents_read: AtomicU64,
}

impl SqliteStore {
    /// Opens the database file at `path` (created if missing) with the default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, StoreOptions::default(), SqliteOptions::default())
    }

    /// Opens the database file at `path` with the given store options.
    pub fn open_with_options(path: impl AsRef<Path>, options: StoreOptions) -> Result<Self> {
        Self::open_with(path, options, SqliteOptions::default())
    }

    /// Opens the database file at `path` with the given store and SQLite options: creates the
    /// file if missing, switches it to WAL and brings its schema to the current version —
    /// unless [`SqliteOptions::read_only`] is set, which changes nothing in the file (a
    /// missing one is an empty store). A file holding another program's tables is
    /// [`Error::InvalidArgument`] naming them unless [`SqliteOptions::share_file`] is set.
    ///
    /// SQLite's special names `:memory:` and `""` (a database private to one connection)
    /// give a private in-memory database, as [`SqliteStore::in_memory`] does: the store's
    /// reader connections could not see it otherwise.
    pub fn open_with(
        path: impl AsRef<Path>,
        options: StoreOptions,
        sqlite: SqliteOptions,
    ) -> Result<Self> {
        let path = path.as_ref();
        if path.as_os_str().is_empty() || path.as_os_str() == ":memory:" {
            return Self::from_parts(Connections::open_memory(sqlite)?, options);
        }
        let conns = Connections::open_file(path.to_path_buf(), sqlite)?;
        Self::from_parts(conns, options)
    }

    /// A new private in-memory database with the default options, gone when the last clone
    /// is dropped. Reads share the one connection with writes.
    pub fn in_memory() -> Result<Self> {
        Self::in_memory_with_options(StoreOptions::default())
    }

    /// A new private in-memory database with the given store options.
    pub fn in_memory_with_options(options: StoreOptions) -> Result<Self> {
        let conns = Connections::open_memory(SqliteOptions::default())?;
        Self::from_parts(conns, options)
    }

    /// Checks the declared indexes against the file and builds the missing ones; reads the
    /// feed's file id and starts pruning the feed (a writable store with the feed on).
    fn from_parts(conns: Connections, options: StoreOptions) -> Result<Self> {
        let (indexes, file_id) = conns.with_writer(|conn, writable| {
            let indexes = crate::index::prepare(conn, &options.indexes, writable)?;
            Ok((indexes, crate::feed::file_id(conn)?))
        })?;
        let sqlite = conns.options().clone();
        let feed = Feed::new(
            (sqlite.feed, sqlite.feed_previous),
            file_id,
            sqlite.feed_poll_interval,
        );
        if let (true, Some(writer)) = (sqlite.feed, conns.writer_when_writable()) {
            feed.start_pruning(PruneSettings {
                writer,
                clock: Arc::clone(&options.clock),
                retention: sqlite.feed_retention,
                interval: sqlite.feed_prune_interval,
            });
        }
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                conns,
                options,
                indexes,
                feed,
                documents_read: AtomicU64::new(0),
            }),
        })
    }

    /// How many document rows this store's queries and `get_many` calls have read since it
    /// opened, matching or not (one addition per call): what pages and walks cost, for tests
    /// and benchmarks that count reads rather than time them.
    pub fn documents_read(&self) -> u64 {
        self.inner.documents_read.load(Ordering::Relaxed)
    }

    /// Runs the single-document write `op` inside an immediate transaction and returns after
    /// its commit. With short commits (`synchronous=NORMAL`) on the calling thread, as a
    /// mutex-guarded call would (off the runtime only while another process holds the write
    /// lock); otherwise as [`SqliteStore::write_off_the_runtime`].
    async fn write<T: Send + 'static>(
        &self,
        op: impl FnMut(&Inner, &Connection) -> Result<T, Fail> + Send + 'static,
    ) -> Result<T> {
        let on_this_thread = self.inner.conns.short_commits();
        self.write_in(op, on_this_thread).await
    }

    /// Runs `op` inside an immediate transaction and returns after its commit, never on the
    /// calling thread while other tasks could run: in place when no other write is pending
    /// (`block_in_place`: a lone writer pays no thread hop), else through the writer thread,
    /// committed with the other queued writes in its own savepoint while the caller's task
    /// waits without holding a thread. For batches, whose work grows with their size (up to
    /// 3 MB), whatever the durability.
    async fn write_off_the_runtime<T: Send + 'static>(
        &self,
        op: impl FnMut(&Inner, &Connection) -> Result<T, Fail> + Send + 'static,
    ) -> Result<T> {
        self.write_in(op, false).await
    }

    /// [`SqliteStore::write_committed`], then, after the commit of the store's first write
    /// and of every `PRUNE_EVERY_WRITES`th, one chunk of feed pruning (`crate::feed`), so
    /// that a file written only by short processes (CLI commands) is pruned too.
    async fn write_in<T: Send + 'static>(
        &self,
        op: impl FnMut(&Inner, &Connection) -> Result<T, Fail> + Send + 'static,
        on_this_thread: bool,
    ) -> Result<T> {
        let written = self.write_committed(op, on_this_thread).await;
        if written.is_ok()
            && let Some(pruning) = self.inner.feed.write_committed()
        {
            // The write stands whatever pruning does; a failed chunk is retried later. With
            // short commits a chunk is as short as a write (it never waits for another
            // process's lock), so it runs where the write ran: handing the runtime's worker
            // over (`block_in_place`) would cost a thread hop, and the other tasks' writes
            // would wait for the chunk on that many more threads.
            if on_this_thread {
                crate::feed::prune_after_write(&pruning);
            } else {
                let _ = blocking(move || {
                    crate::feed::prune_after_write(&pruning);
                    Ok(())
                })
                .await;
            }
        }
        written
    }

    /// Runs `op` in an immediate transaction and returns after its commit: on this thread,
    /// in place or through the writer thread's queue (see [`SqliteStore::write`]).
    async fn write_committed<T: Send + 'static>(
        &self,
        mut op: impl FnMut(&Inner, &Connection) -> Result<T, Fail> + Send + 'static,
        on_this_thread: bool,
    ) -> Result<T> {
        let inner = Arc::clone(&self.inner);
        let (_active, alone) = self.inner.conns.begin_write();
        if on_this_thread {
            if let Some(result) = inner
                .conns
                .write_on_this_thread(&mut |conn| op(&inner, conn))
            {
                return result;
            }
            // Another process holds the write lock: wait for it off the runtime's threads.
            return blocking(move || inner.conns.write_in_place(&mut |conn| op(&inner, conn)))
                .await;
        }
        if alone {
            return blocking(move || inner.conns.write_in_place(&mut |conn| op(&inner, conn)))
                .await;
        }
        self.inner.conns.write(move |conn| op(&inner, conn)).await
    }

    /// Runs the write `op` as [`SqliteStore::write`] does, unless `id` — the caller's
    /// identity of the write — is kept on the document at `key`: then the call is a repeat,
    /// nothing is written and `repeat` makes the answer from the document as it stands. A
    /// write with an identity keeps it, in the same transaction.
    async fn write_once<T: Send + 'static>(
        &self,
        key: &Key,
        id: Option<&WriteId>,
        mut op: impl FnMut(&Inner, &Connection) -> Result<T, Fail> + Send + 'static,
        repeat: fn(Document) -> T,
    ) -> Result<T> {
        let Some(id) = id.cloned() else {
            return self.write(op).await;
        };
        let key = key.clone();
        self.write(move |inner, conn| {
            let kept = write_ids::kept(conn, &key)?;
            if kept.as_ref().is_some_and(|kept| kept.repeats_write(&id))
                && let Some(doc) = rows::load(conn, &key, inner.now())?
            {
                return Ok(repeat(doc));
            }
            let written = op(inner, conn)?;
            write_ids::keep(conn, &key, &KeptIds::written(&id, kept.as_ref()))?;
            Ok(written)
        })
        .await
    }

    /// Runs `op` on a read connection, without stalling the async runtime.
    async fn read<T: Send + 'static>(
        &self,
        op: impl FnMut(&Connection) -> Result<T, Fail> + Send + 'static,
    ) -> Result<T> {
        let inner = Arc::clone(&self.inner);
        blocking(move || inner.conns.read(op)).await
    }
}

/// Who makes a write, and what it does to the document's expiry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct By<'a> {
    pub(crate) actor: &'a str,
    pub(crate) expiry: Expiry,
}

impl<'a> By<'a> {
    fn stamp(self, now: i64) -> rows::Stamp<'a> {
        rows::Stamp {
            now,
            actor: self.actor,
            expiry: self.expiry.into(),
        }
    }
}

impl Inner {
    pub(crate) fn now(&self) -> i64 {
        self.options.clock.now()
    }

    /// Removes the document at `key` if it has expired, recording its expiry on the feed
    /// (`docs/contract.md`, "Expiry"): what a write does that finds an expired row where
    /// it writes, and the sweep. Whether there was one.
    pub(crate) fn expire_due(&self, conn: &Connection, key: &Key) -> Result<bool, Fail> {
        let now = self.now();
        let Some(expired) = rows::remove_expired(conn, key, now)? else {
            return Ok(false);
        };
        if self.feed.enabled {
            crate::feed::log_expired(conn, key, &expired, now)?;
        }
        Ok(true)
    }

    /// Inserts `doc` (without its data) with the data `text`; a key taken by an expired
    /// document is first freed. Reads never see an expired row, so only a failed insert
    /// looks: a write on a key without one costs nothing more.
    fn insert(&self, conn: &Connection, key: &Key, doc: &Document, text: &str) -> Result<(), Fail> {
        match rows::insert(conn, key, doc, text) {
            Err(Fail::Store(Error::AlreadyExists)) if self.expire_due(conn, key)? => {
                rows::insert(conn, key, doc, text)
            }
            inserted => inserted,
        }
    }

    /// Records the change of the write that just left the document at `key` in place of
    /// `previous` ([`Inner::previous`]) (feed on).
    fn log_stored(
        &self,
        conn: &Connection,
        key: &Key,
        kind: ChangeKind,
        previous: Option<&[u8]>,
    ) -> Result<(), Fail> {
        if !self.feed.enabled {
            return Ok(());
        }
        crate::feed::log_stored(conn, key, kind, self.now(), previous)
    }

    /// The document at `key` as the change of a write about to replace or remove it keeps
    /// it: read only with [`SqliteOptions::feed_previous`] on, `None` otherwise.
    fn previous(&self, conn: &Connection, key: &Key) -> Result<Option<Vec<u8>>, Fail> {
        if !self.feed.previous {
            return Ok(None);
        }
        crate::feed::previous(conn, key)
    }

    /// Deletes the document at `key`, recording the change (at `now`, by `actor`); whether
    /// there was one.
    pub(crate) fn remove(
        &self,
        conn: &Connection,
        key: &Key,
        actor: &str,
        now: i64,
    ) -> Result<bool, Fail> {
        let previous = self.previous(conn, key)?;
        let Some(version) = rows::remove(conn, key, now)? else {
            return Ok(false);
        };
        if self.feed.enabled {
            let previous = previous.as_deref();
            let deletion = crate::feed::Deletion {
                version,
                time: now,
                actor,
                previous,
            };
            crate::feed::log_deleted(conn, key, &deletion)?;
        }
        Ok(true)
    }

    /// With a quota, a taken id must be `AlreadyExists` before the quota is looked at, so
    /// it is checked first; without one the `INSERT` itself finds it (one statement less).
    pub(crate) fn check_absent(&self, conn: &Connection, key: &Key) -> Result<(), Fail> {
        if self.options.max_docs_per_site.is_some()
            && rows::version(conn, key, self.now())?.is_some()
        {
            return Err(Error::AlreadyExists.into());
        }
        Ok(())
    }

    pub(crate) fn check_quota(&self, conn: &Connection, site: &str) -> Result<(), Fail> {
        if let Some(limit) = self.options.max_docs_per_site
            && rows::site_count(conn, site, self.now())? >= limit
        {
            return Err(Error::QuotaExceeded { limit }.into());
        }
        Ok(())
    }

    /// Inserts a new document holding `text`; returns it without its data (the caller has it).
    pub(crate) fn insert_new(
        &self,
        conn: &Connection,
        key: &Key,
        text: &str,
        by: By<'_>,
    ) -> Result<Document, Fail> {
        self.check_quota(conn, key.site())?;
        let mut doc = Document::first(key.id(), Data::new(), by.actor, self.now());
        doc.expires_at = by.expiry.apply(None, doc.updated_at);
        self.insert(conn, key, &doc, text)?;
        self.log_stored(conn, key, ChangeKind::Created, None)?;
        Ok(doc)
    }

    /// Stores `text` at `key`, as the next version of the stored document (one `UPDATE`,
    /// nothing read before it) or, when there is none, as a new one; returns the document
    /// without its data (the caller has it).
    pub(crate) fn put(
        &self,
        conn: &Connection,
        key: &Key,
        text: &str,
        by: By<'_>,
    ) -> Result<Document, Fail> {
        let previous = self.previous(conn, key)?;
        let now = self.now();
        if let Some(written) = rows::overwrite(conn, key, text, &by.stamp(now))? {
            self.log_stored(conn, key, ChangeKind::Updated, previous.as_deref())?;
            return Ok(written);
        }
        match rows::version(conn, key, now)? {
            None => self.insert_new(conn, key, text, by),
            Some(current) => Err(Error::Backend {
                message: format!("version {} does not fit SQLite's INTEGER", current + 1),
                source: None,
            }
            .into()),
        }
    }

    /// Restores the document `metadata` (without its data) with the data `text`.
    pub(crate) fn restore(
        &self,
        conn: &Connection,
        key: &Key,
        metadata: &Document,
        text: &str,
    ) -> Result<(), Fail> {
        self.check_absent(conn, key)?;
        self.check_quota(conn, key.site())?;
        self.insert(conn, key, metadata, text)?;
        self.log_stored(conn, key, ChangeKind::Created, None)
    }

    /// Writes `data` as the next version of `current`.
    pub(crate) fn replace(
        &self,
        conn: &Connection,
        key: &Key,
        mut current: Document,
        data: Data,
        text: &str,
        by: By<'_>,
    ) -> Result<Document, Fail> {
        current.data = data;
        current.stamp_next(by.actor, self.now());
        current.expires_at = by.expiry.apply(current.expires_at, current.updated_at);
        let previous = self.previous(conn, key)?;
        rows::rewrite(conn, key, &current, text)?;
        self.log_stored(conn, key, ChangeKind::Updated, previous.as_deref())?;
        Ok(current)
    }

    /// Merges `patch` into the document at `key` as its next version (when at
    /// `expected_version`); the merged document and its data's size.
    pub(crate) fn patch(
        &self,
        conn: &Connection,
        key: &Key,
        patch: &rows::Patch,
        expected_version: Option<u64>,
        by: By<'_>,
    ) -> Result<rows::Merged, Fail> {
        let text = match patch {
            rows::Patch::Text(text) => text,
            rows::Patch::Deep(patch) => {
                return self.patch_in_rust(conn, key, patch, expected_version, by);
            }
        };
        let limit = self.options.max_doc_bytes;
        let previous = self.previous(conn, key)?;
        let now = self.now();
        match rows::merge(conn, key, text, expected_version, &by.stamp(now))? {
            // Written, and undone with the transaction (or the write's savepoint).
            Some(merged) if merged.size() > limit => Err(Error::TooLarge {
                size: merged.size(),
                limit,
            }
            .into()),
            Some(merged) => {
                self.log_stored(conn, key, ChangeKind::Updated, previous.as_deref())?;
                Ok(merged)
            }
            None => match rows::version(conn, key, now)? {
                None => Err(Error::not_found(key).into()),
                Some(current) if expected_version.is_some_and(|v| v != current) => {
                    Err(Error::Conflict { current }.into())
                }
                Some(current) => Err(Error::Backend {
                    message: format!("version {} does not fit SQLite's INTEGER", current + 1),
                    source: None,
                }
                .into()),
            },
        }
    }

    /// [`Inner::patch`] for a patch nested too deep for [`rows::merge`]: read, merged in
    /// place, checked (depth and size) and written.
    fn patch_in_rust(
        &self,
        conn: &Connection,
        key: &Key,
        patch: &Data,
        expected_version: Option<u64>,
        by: By<'_>,
    ) -> Result<rows::Merged, Fail> {
        let mut current =
            rows::load(conn, key, self.now())?.ok_or_else(|| Error::not_found(key))?;
        if expected_version.is_some_and(|expected| expected != current.version) {
            return Err(Error::Conflict {
                current: current.version,
            }
            .into());
        }
        // Merged in place: `replace` puts the result back into `current`.
        let mut data = std::mem::take(&mut current.data);
        docstore::merge_patch(&mut data, patch);
        let text = rows::encode(&data, self.options.max_doc_bytes)?;
        let doc = self.replace(conn, key, current, data, &text, by)?;
        Ok(rows::Merged::parsed(doc, text.len()))
    }
}

/// Removes the document at `key` (if at `expected_version`) for `origin`'s actor;
/// `Ok(false)` when there is none. A delete with a caller identity `id` is recorded on the
/// key; one repeating a recorded delete answers `Ok(true)` and removes nothing (and records
/// no change).
fn remove_once(
    inner: &Inner,
    conn: &Connection,
    key: &Key,
    expected_version: Option<u64>,
    (id, actor): (Option<&WriteId>, &str),
) -> Result<bool, Fail> {
    let now = inner.now();
    let kept = match id {
        Some(_) => write_ids::kept(conn, key)?,
        None => None,
    };
    if let Some(id) = id
        && kept
            .as_ref()
            .is_some_and(|kept| kept.repeats_delete(id, now))
    {
        return Ok(true);
    }
    if let Some(expected) = expected_version {
        let Some(current) = rows::version(conn, key, now)? else {
            return Ok(false);
        };
        if expected != current {
            return Err(Error::Conflict { current }.into());
        }
    }
    let removed = inner.remove(conn, key, actor, now)?;
    if let Some(id) = id
        && removed
    {
        write_ids::keep(conn, key, &KeptIds::deleted(id, kept.as_ref(), now))?;
    }
    Ok(removed)
}

/// What a single write answers: the document it wrote, without its data (the caller has
/// it), or — for a repeat — the document as it stands.
enum Written {
    Fresh(Document),
    Repeat(Document),
}

impl Written {
    fn with_data(self, data: Data) -> Document {
        match self {
            Written::Fresh(doc) => Document { data, ..doc },
            Written::Repeat(doc) => doc,
        }
    }
}

/// The document a single update wrote, its data parsed after the commit (outside the writer
/// connection's lock). Failing here takes data SQLite holds and serde_json cannot read (a
/// row edited by hand), and the error says that the write happened.
fn written(merged: rows::Merged) -> Result<Document> {
    merged.into_document().map_err(|err| Error::Backend {
        message: format!(
            "the update was committed, but the document it wrote cannot be read back: {err}"
        ),
        source: None,
    })
}

#[async_trait]
impl Driver for SqliteStore {
    fn options(&self) -> &StoreOptions {
        &self.inner.options
    }

    /// Never: a write that ends `Unavailable` (busy, locked, an I/O failure) did not commit,
    /// and an answer is never lost between SQLite and the caller, so the front end retries
    /// it without an identity the caller did not give.
    fn may_lose_answers(&self) -> bool {
        false
    }

    /// One immediate transaction for the request, by its call (the `calls` module).
    async fn apply(&self, request: docstore::request::Request<'_>) -> Result<Answer> {
        self.apply_call(request).await
    }

    async fn get(&self, key: &Key) -> Result<Option<Document>> {
        let (key, now) = (key.clone(), self.inner.now());
        self.read(move |conn| rows::load(conn, &key, now)).await
    }

    /// The data as the JSON text SQLite gives: a typed read parses it once, into its type.
    async fn get_text(&self, key: &Key) -> Result<Option<Fetched>> {
        let (key, now) = (key.clone(), self.inner.now());
        self.read(move |conn| rows::load_text(conn, &key, now))
            .await
    }

    /// One read transaction on one connection: the answer is one snapshot.
    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Document>>> {
        let (keys, now) = (keys.to_vec(), self.inner.now());
        let found = self
            .read(move |conn| crate::batch::load_many(conn, &keys, now))
            .await?;
        let rows = found.iter().flatten().count() as u64;
        self.inner.documents_read.fetch_add(rows, Ordering::Relaxed);
        Ok(found)
    }

    /// The planner's choice (counting the contested index ranges when the cost rule of
    /// `docs/contract.md`, "Indexes", asks for them) and the reading, in one read transaction.
    async fn query(&self, site: &str, collection: &str, compiled: &CompiledQuery) -> Result<Page> {
        let inner = Arc::clone(&self.inner);
        let (site, collection) = (site.to_owned(), collection.to_owned());
        let (compiled, now) = (compiled.clone(), self.inner.now());
        self.read(move |conn| {
            let choice =
                crate::index::choose(conn, &inner.indexes, &site, &collection, &compiled, false)?;
            let (page, rows) = match &choice.plan {
                Some(plan) => crate::index::run(
                    conn,
                    &inner.indexes,
                    &site,
                    &collection,
                    plan,
                    &compiled,
                    now,
                )?,
                None => query::Plan::new(&site, &collection, &compiled, now).run(conn)?,
            };
            inner.documents_read.fetch_add(rows, Ordering::Relaxed);
            Ok(page)
        })
        .await
    }

    /// Always strongly consistent (reads see the last commit).
    async fn explain(
        &self,
        site: &str,
        collection: &str,
        compiled: &CompiledQuery,
    ) -> Result<Explain> {
        let inner = Arc::clone(&self.inner);
        let compiled = compiled.clone();
        let (site, collection) = (site.to_owned(), collection.to_owned());
        self.read(move |conn| {
            let choice =
                crate::index::choose(conn, &inner.indexes, &site, &collection, &compiled, true)?;
            let scan = || query::Plan::new(&site, &collection, &compiled, 0).how();
            let explain = choice.explain(&compiled, scan, true);
            Ok(match &choice.plan {
                Some(plan) => {
                    let sqlite = crate::index::query_plan(conn, plan, &site, &collection)?;
                    explain.with_database_plan("SQLite", &sqlite)
                }
                None => explain,
            })
        })
        .await
    }

    async fn collections(&self, site: &str) -> Result<Vec<(String, u64)>> {
        let (site, now) = (site.to_owned(), self.inner.now());
        self.read(move |conn| rows::collections(conn, &site, now))
            .await
    }

    async fn count(&self, site: &str) -> Result<u64> {
        let (site, now) = (site.to_owned(), self.inner.now());
        self.read(move |conn| rows::site_count(conn, &site, now))
            .await
    }

    /// From the documents themselves (so a site whose counters were lost is still listed)
    /// and the counters (so a counter left without documents is), on a reader connection,
    /// one primary-key seek per table and site: cheap at any table size.
    async fn sites(&self) -> Result<Vec<String>> {
        let now = self.inner.now();
        self.read(move |conn| rows::sites(conn, now)).await
    }

    fn supports_expiry(&self) -> bool {
        true
    }

    /// In write transactions of at most
    /// [`SWEEP_CHUNK`](docstore::driver::SWEEP_CHUNK) (200) documents each, so the sweep
    /// never holds the writer for long: each expired document found by the partial expiry
    /// index is removed with its change, as a write on its key would.
    async fn sweep_expired(&self, limit: usize) -> Result<usize> {
        sweep_in_chunks(limit, |chunk| {
            self.write(move |inner, conn| {
                let keys = rows::expired_keys(conn, inner.now(), chunk)?;
                let mut removed = 0;
                for key in &keys {
                    removed += usize::from(inner.expire_due(conn, key)?);
                }
                let found = keys.len();
                Ok(Swept { found, removed })
            })
        })
        .await
    }

    /// Counts inside one transaction, so the comparison (and the repair) sees one state: a
    /// report reads on a reader connection (it works on a read-only file), a repair counts
    /// and sets the counters in one write transaction. The triggers keep the counters exact
    /// and every write checks its unique values; differences only come from outside (a
    /// hand-edited file). Documents sharing a unique value are reported, never repaired.
    async fn recount(&self, site: &str, mode: RecountMode) -> Result<Recount> {
        let site = site.to_owned();
        match mode {
            RecountMode::Repair => {
                let recounted = move |inner: &Inner, conn: &Connection| {
                    recount(conn, &inner.indexes, &site, mode)
                };
                self.write(recounted).await
            }
            _ => {
                let inner = Arc::clone(&self.inner);
                self.read(move |conn| recount(conn, &inner.indexes, &site, mode))
                    .await
            }
        }
    }

    /// One read transaction on a reader connection (never waiting for the writer): see the
    /// `feed` module for positions, cursors and retention.
    async fn changes(
        &self,
        scope: &FeedScope,
        start: &FeedStart,
        limit: usize,
    ) -> Result<ChangePage> {
        if !self.inner.feed.enabled {
            return Err(Feed::off());
        }
        docstore::feed::check_page_size(limit)?;
        let inner = Arc::clone(&self.inner);
        let (scope, start) = (scope.clone(), start.clone());
        self.read(move |conn| inner.feed.page(conn, &scope, &start, limit))
            .await
    }

    /// Woken at once by this process's commits; another process's are seen by reading the
    /// feed's head every [`SqliteOptions::feed_poll_interval`] (200 ms by default).
    async fn wait_for_changes(&self, after: &ChangeCursor) -> Result<()> {
        let feed = &self.inner.feed;
        if !feed.enabled {
            return Err(Feed::off());
        }
        // A cursor the read that follows refuses: let it say why.
        let Ok(position) = feed.position(after) else {
            return Ok(());
        };
        let head = || self.read(crate::feed::head);
        let commits = self.inner.conns.commits();
        commits.wait_past(position, feed.poll_interval, head).await
    }
}

/// Counts `site`'s documents per collection and compares the counters (setting them on
/// [`RecountMode::Repair`]).
fn recount(
    conn: &Connection,
    indexes: &crate::index::Indexes,
    site: &str,
    mode: RecountMode,
) -> Result<Recount, Fail> {
    let collections = rows::counted_collections(conn, site)?;
    let counters: BTreeMap<String, u64> = rows::counters(conn, site)?.into_iter().collect();
    let mut recount = Recount::compare(collections, counters);
    if mode == RecountMode::Repair {
        for change in &recount.changes {
            rows::set_counter(conn, site, &change.collection, change.documents)?;
        }
    }
    recount.unique = crate::unique::shared_values(conn, indexes, site)?;
    Ok(recount)
}

#[cfg(test)]
mod tests {
    use super::*;
    use docstore::{ManualClock, Store};
    use std::time::Duration;

    /// With short commits (`synchronous=NORMAL`) a write prunes on its own thread, where it
    /// ran: the store's first write and every `PRUNE_EVERY_WRITES`th still remove the
    /// expired changes though the pruning thread (its interval a day) never runs.
    #[tokio::test(flavor = "multi_thread")]
    async fn writes_with_short_commits_prune_where_they_run() {
        const HOUR_NS: i64 = 3600 * 1_000_000_000;
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(0));
        let sqlite = SqliteOptions::default()
            .with_durability(crate::Durability::Normal)
            .with_feed_retention(Duration::from_secs(3600))
            .with_feed_prune_interval(Duration::from_secs(24 * 3600));
        let options = StoreOptions::default().with_clock(clock.clone());
        let path = dir.path().join("p.db");
        let store = Store::new(SqliteStore::open_with(&path, options, sqlite).unwrap());
        let all = FeedScope::whole_store();
        let changes = |store: &Store| {
            let store = store.clone();
            let all = all.clone();
            async move { store.changes(&all, &FeedStart::Oldest, 1000).await.unwrap() }
        };
        let write = |n: u64| Key::new("s", "c", format!("{n}")).unwrap();
        store.create(&write(0), Data::new(), "a").await.unwrap();
        clock.advance(2 * HOUR_NS);
        // Writes 1..64 prune nothing; the 64th after the first (write 64) prunes write 0's.
        for n in 1..crate::feed::PRUNE_EVERY_WRITES {
            store.create(&write(n), Data::new(), "a").await.unwrap();
        }
        assert_eq!(changes(&store).await.changes[0].key, write(0));
        let last = crate::feed::PRUNE_EVERY_WRITES;
        store.create(&write(last), Data::new(), "a").await.unwrap();
        let kept = changes(&store).await.changes;
        assert_eq!(kept[0].key, write(1), "the expired change is pruned");
        assert_eq!(kept.len() as u64, last);
    }

    /// A typed read gets the stored JSON text, and it holds exactly the data `get` parses.
    #[tokio::test(flavor = "multi_thread")]
    async fn get_text_hands_over_the_stored_text() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("t.db")).unwrap();
        let key = Key::new("s", "c", "d").unwrap();
        let data = docstore::object(serde_json::json!({"n": 1.5, "big": u64::MAX, "s": "é"}));
        Store::new(store.clone())
            .create(&key, data.unwrap(), "a")
            .await
            .unwrap();
        let document = store.get(&key).await.unwrap().unwrap();
        let Some(Fetched::Text(text)) = store.get_text(&key).await.unwrap() else {
            panic!("no text");
        };
        let parsed: Data = serde_json::from_str(&text.value).unwrap();
        assert_eq!(parsed, document.data);
        assert_eq!((text.id, text.version), (document.id, document.version));
        let missing = Key::new("s", "c", "none").unwrap();
        assert_eq!(store.get_text(&missing).await.unwrap(), None);
    }
}
