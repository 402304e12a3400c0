//! The app-facing front end: [`Store`], the tenant scope [`Site`], typed [`Collection`]s and
//! streams of every match.
//!
//! Every input is checked here, once, before a driver sees it: names (by [`Key`] and
//! [`Site`]), actors, sizes and nesting depth, restored metadata, batch limits and distinct
//! keys, queries and their cursors (bound to their site and collection). A driver receives only
//! inputs that passed, and keeps only the work that needs its database.

mod call;
mod collection;
mod dispatch;
mod feed;
mod requests;
mod site;
mod sorted;
mod stream;

use call::CallExpiry;
pub use call::WriteCall;
pub use collection::MODIFY_TRIES;
pub use collection::{Collection, TypedPage, Versioned};
pub use feed::{ChangeStream, TypedChange, TypedChangePage};
pub use site::{Site, SiteBatch};
pub use stream::{DEFAULT_STREAM_PAGE, DocumentStream};

use crate::Data;
use crate::batch::{self, Write, WriteOutcome};
use crate::document::{Document, check_restorable, checked_size_bound, validate_actor};
use crate::driver::{Driver, Expiry, Explain, Origin, Page, Recount, RecountMode};
use crate::key::{Key, validate_site};
use crate::query::Query;
use crate::{Result, StoreOptions};
use dispatch::Dispatch;
use std::sync::Arc;

/// A document store: the one handle an application holds, whatever the backend.
///
/// Cheap to clone (one `Arc`), `Send + Sync`. Open one with `docstore_any::open` /
/// `open_url`, or wrap a driver with [`Store::new`]. Request handlers get a [`Site`]
/// ([`Store::site`]), which cannot reach any other site; the untyped calls here, addressed by
/// [`Key`] and site name, are for tools that work across sites (import, export, copy, fsck).
///
/// Every call retries [`Error::Unavailable`](crate::Error::Unavailable) itself under the
/// store's [`RetryPolicy`](crate::retry::RetryPolicy) (`StoreOptions::retry`), a write under
/// one write identity for all its tries; see [`WriteCall`] for repeating a write later.
///
/// ```
/// use docstore::{Key, Store};
///
/// async fn tally(store: &Store) -> docstore::Result<u64> {
///     let key = Key::new("acme", "tickets", "T-1")?;
///     let data = docstore::object(serde_json::json!({"status": "open"}))?;
///     store.create(&key, data, "importer").await?;
///     store.count("acme").await
/// }
/// ```
#[derive(Clone, Debug)]
pub struct Store {
    driver: Dispatch,
}

impl Store {
    /// A store over `driver`.
    pub fn new(driver: impl Driver + 'static) -> Self {
        Store::from_driver(Arc::new(driver))
    }

    /// A store over a shared driver (one that wraps another, say).
    ///
    /// Inside a tokio runtime it starts the task that removes expired documents every
    /// [`StoreOptions::sweep_interval`] (`docs/contract.md`, "Expiry"); the task ends when the
    /// driver is dropped.
    pub fn from_driver(driver: Arc<dyn Driver>) -> Self {
        if let Some(interval) = driver.options().sweep_interval {
            spawn_sweeper(&driver, interval);
        }
        Store {
            driver: Dispatch::new(driver),
        }
    }

    /// Removes the documents that have expired now, at most
    /// [`SWEEP_LIMIT`](crate::SWEEP_LIMIT) of them, each with its one `Expired`
    /// change; how many it removed. Reads leave expired documents out already; the store
    /// sweeps in the background too ([`StoreOptions::sweep_interval`]).
    pub async fn sweep_expired(&self) -> Result<usize> {
        let limit = crate::options::SWEEP_LIMIT;
        self.driver.read(|driver| driver.sweep_expired(limit)).await
    }

    /// The driver underneath, for wrappers that stack another driver on it.
    pub fn driver(&self) -> &Arc<dyn Driver> {
        self.driver.driver()
    }

    /// The options the store was opened with.
    pub fn options(&self) -> &StoreOptions {
        self.driver.options()
    }

    /// The tenant scope `name`; [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// for a name that breaks the rules (`docs/contract.md`, Addressing).
    ///
    /// ```
    /// # fn demo(store: &docstore::Store) -> docstore::Result<()> {
    /// let acme = store.site("acme")?.with_actor("alice")?;
    /// assert_eq!(acme.name(), "acme");
    /// assert!(store.site("bad name").is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn site(&self, name: &str) -> Result<Site> {
        Site::new(self.clone(), name)
    }

    fn max_doc_bytes(&self) -> usize {
        self.options().max_doc_bytes
    }

    /// Creates a document at version 1; [`Error::AlreadyExists`](crate::Error::AlreadyExists)
    /// if the id is taken.
    pub fn create<'a>(
        &'a self,
        key: &'a Key,
        data: Data,
        actor: &'a str,
    ) -> WriteCall<'a, Document> {
        WriteCall::new(move |id, expiry| async move {
            let origin = Origin::with(actor, &id).expiring(self.expiry(key, expiry, true)?);
            self.create_with(key, data, origin).await
        })
    }

    pub(crate) async fn create_with(
        &self,
        key: &Key,
        data: Data,
        origin: Origin<'_>,
    ) -> Result<Document> {
        self.write_whole(Write::create, key, data, origin).await
    }

    /// A write storing `data` whole at `key` (`write`: [`Write::create`] or [`Write::put`]):
    /// its checks, then the driver's call under the write's identity.
    async fn write_whole(
        &self,
        write: fn(Key, Data) -> Write,
        key: &Key,
        data: Data,
        origin: Origin<'_>,
    ) -> Result<Document> {
        let bound = Some(self.check_written(&data, origin)?);
        let identity = self.driver.identity(origin.write_id);
        let origin = identity.origin(origin.actor).expiring(origin.expiry);
        let written = self.driver.write_data(&identity, data, |driver, data| {
            requests::write(driver, write(key.clone(), data), origin, bound)
        });
        written.await
    }

    /// What a write at `key` does to its document's expiry: the call's `expiry`, else —
    /// for a write storing the whole value (`whole`) — the collection's default, else keep.
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when the write would give
    /// its document an expiry and the driver keeps none.
    pub(crate) fn expiry(
        &self,
        key: &Key,
        expiry: Option<CallExpiry>,
        whole: bool,
    ) -> Result<Expiry> {
        let from_now = |after: std::time::Duration| {
            Expiry::After(i64::try_from(after.as_nanos()).unwrap_or(i64::MAX))
        };
        let resolved = match expiry {
            Some(CallExpiry::At(at)) => Expiry::At(at),
            Some(CallExpiry::After(after)) => from_now(after),
            Some(CallExpiry::Never) => Expiry::Never,
            None if whole => match self.options().expiry.get(key.collection()) {
                Some(after) => from_now(*after),
                None => Expiry::Keep,
            },
            None => Expiry::Keep,
        };
        if matches!(resolved, Expiry::At(_) | Expiry::After(_)) {
            self.check_expiry_kept()?;
        }
        Ok(resolved)
    }

    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) unless the driver keeps
    /// document expiry.
    fn check_expiry_kept(&self) -> Result<()> {
        if self.driver().supports_expiry() {
            return Ok(());
        }
        Err(crate::Error::invalid(
            "this backend does not keep document expiry yet (docs/contract.md, \"Expiry\"): \
             write without one",
        ))
    }

    /// The checks of a write that stores `data` whole: its actor, then its size; an upper
    /// bound of that size, for the driver ([`Request::data_size_bound`](crate::request::Request::data_size_bound)).
    fn check_written(&self, data: &Data, origin: Origin<'_>) -> Result<usize> {
        validate_actor(origin.actor)?;
        checked_size_bound(data, self.max_doc_bytes())
    }

    /// Reads a document.
    pub async fn get(&self, key: &Key) -> Result<Option<Document>> {
        self.driver.read(|driver| driver.get(key)).await
    }

    /// [`get`](Self::get) for a typed read: the data may come as JSON text
    /// ([`Driver::get_text`](crate::driver::Driver::get_text)).
    pub(crate) async fn get_text(&self, key: &Key) -> Result<Option<crate::driver::Fetched>> {
        self.driver.read(|driver| driver.get_text(key)).await
    }

    /// Creates or replaces a document; a replaced document keeps its `created_*` fields and
    /// its version grows by one.
    pub fn put<'a>(&'a self, key: &'a Key, data: Data, actor: &'a str) -> WriteCall<'a, Document> {
        WriteCall::new(move |id, expiry| async move {
            let origin = Origin::with(actor, &id).expiring(self.expiry(key, expiry, true)?);
            self.put_with(key, data, origin).await
        })
    }

    pub(crate) async fn put_with(
        &self,
        key: &Key,
        data: Data,
        origin: Origin<'_>,
    ) -> Result<Document> {
        self.write_whole(Write::put, key, data, origin).await
    }

    /// Applies an RFC 7386 merge patch (see [`merge_patch`](crate::merge_patch)), retrying
    /// when a concurrent write got in between; [`Error::NotFound`](crate::Error::NotFound)
    /// without a document, [`Error::Conflict`](crate::Error::Conflict) only after bounded
    /// retries under heavy contention.
    pub fn update<'a>(
        &'a self,
        key: &'a Key,
        patch: &'a Data,
        actor: &'a str,
    ) -> WriteCall<'a, Document> {
        WriteCall::new(move |id, expiry| async move {
            let origin = Origin::with(actor, &id).expiring(self.expiry(key, expiry, false)?);
            self.update_with(key, patch, None, origin).await
        })
    }

    /// `update` (`expected_version: None`) and `update_if`.
    pub(crate) async fn update_with(
        &self,
        key: &Key,
        patch: &Data,
        expected_version: Option<u64>,
        origin: Origin<'_>,
    ) -> Result<Document> {
        // The patch's depth is not refused here: what counts is the merged result's, which
        // the driver checks (a patch one level too deep may merge into data that fits).
        validate_actor(origin.actor)?;
        let identity = self.driver.identity(origin.write_id);
        let origin = identity.origin(origin.actor).expiring(origin.expiry);
        let written = self.driver.write(&identity, |driver| {
            let patch = patch.clone();
            let write = match expected_version {
                Some(version) => Write::update_if(key.clone(), patch, version),
                None => Write::update(key.clone(), patch),
            };
            requests::write(driver, write, origin, None)
        });
        written.await
    }

    /// Applies a merge patch if the document is still at `expected_version`;
    /// [`Error::Conflict`](crate::Error::Conflict) with the current version otherwise.
    pub fn update_if<'a>(
        &'a self,
        key: &'a Key,
        patch: &'a Data,
        expected_version: u64,
        actor: &'a str,
    ) -> WriteCall<'a, Document> {
        WriteCall::new(move |id, expiry| async move {
            let origin = Origin::with(actor, &id).expiring(self.expiry(key, expiry, false)?);
            self.update_with(key, patch, Some(expected_version), origin)
                .await
        })
    }

    /// Replaces the whole data if the document is still at `expected_version` (`created_*`
    /// kept, version one more): [`Error::NotFound`](crate::Error::NotFound), or
    /// [`Error::Conflict`](crate::Error::Conflict) with the current version.
    pub fn replace_if<'a>(
        &'a self,
        key: &'a Key,
        data: Data,
        expected_version: u64,
        actor: &'a str,
    ) -> WriteCall<'a, Document> {
        WriteCall::new(move |id, expiry| async move {
            let origin = Origin::with(actor, &id).expiring(self.expiry(key, expiry, true)?);
            self.replace_if_with(key, data, expected_version, origin)
                .await
        })
    }

    pub(crate) async fn replace_if_with(
        &self,
        key: &Key,
        data: Data,
        expected_version: u64,
        origin: Origin<'_>,
    ) -> Result<Document> {
        let bound = self.check_written(&data, origin)?;
        let identity = self.driver.identity(origin.write_id);
        let origin = identity.origin(origin.actor).expiring(origin.expiry);
        let written = self.driver.write_data(&identity, data, |driver, data| {
            requests::replace_if(driver, key, (data, expected_version, bound), origin)
        });
        written.await
    }

    /// Deletes a document; `true` when there was one. The change feed reports the delete
    /// with an empty actor (a [`Collection`]'s delete carries its site's actor).
    pub fn delete<'a>(&'a self, key: &'a Key) -> WriteCall<'a, bool> {
        WriteCall::new(move |id, _| async move {
            self.delete_with(key, None, Origin::with("", &id)).await
        })
    }

    /// Deletes a document if it is still at `expected_version`.
    pub fn delete_if<'a>(&'a self, key: &'a Key, expected_version: u64) -> WriteCall<'a, ()> {
        WriteCall::new(move |id, _| async move {
            let origin = Origin::with("", &id);
            self.delete_with(key, Some(expected_version), origin)
                .await
                .map(drop)
        })
    }

    /// `delete` (`expected_version: None`) and `delete_if`, by `origin`'s actor.
    pub(crate) async fn delete_with(
        &self,
        key: &Key,
        expected_version: Option<u64>,
        origin: Origin<'_>,
    ) -> Result<bool> {
        validate_actor(origin.actor)?;
        let identity = self.driver.identity(origin.write_id);
        let origin = identity.origin(origin.actor).expiring(origin.expiry);
        let written = self.driver.write(&identity, |driver| {
            requests::delete(driver, key, expected_version, origin)
        });
        written.await
    }

    /// Writes `document` exactly as given — data, timestamps, actors and version — when no
    /// document with its id exists: the write behind import, copy and restore from backups.
    ///
    /// Checks, in this order: `key.id()` equals `document.id`, `version >= 1` and
    /// `created_at <= updated_at` ([`Error::InvalidArgument`](crate::Error::InvalidArgument)),
    /// then the size ([`Error::TooLarge`](crate::Error::TooLarge)); see
    /// [`check_restorable`]. Then, like `create`:
    /// [`Error::AlreadyExists`](crate::Error::AlreadyExists) when the id is taken,
    /// [`Error::QuotaExceeded`](crate::Error::QuotaExceeded) in a full site.
    pub fn restore<'a>(&'a self, key: &'a Key, document: &'a Document) -> WriteCall<'a, ()> {
        WriteCall::new(move |id, _| async move {
            check_restorable(key, document, self.max_doc_bytes())?;
            if document.expires_at.is_some() {
                self.check_expiry_kept()?;
            }
            let identity = self.driver.identity(id.as_ref());
            let origin = identity.origin(&document.updated_by);
            let written = self.driver.write(&identity, |driver| {
                let write = Write::restore(key.clone(), document.clone());
                requests::write(driver, write, origin, None)
            });
            written.await.map(drop)
        })
    }

    /// Reads several documents: one `Option` per key, in the keys' order, strongly
    /// consistent, any number of keys. A key given twice is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Document>>> {
        batch::check_distinct(keys, "key")?;
        self.driver.read(|driver| driver.get_many(keys)).await
    }

    /// Applies a batch of writes atomically: all of them, or — when any fails — none. Returns
    /// one [`WriteOutcome`] per write, in order. All writes are stamped by `actor` (except
    /// `Restore`, which keeps its document's metadata).
    ///
    /// At most [`MAX_BATCH_WRITES`](crate::batch::MAX_BATCH_WRITES) writes and
    /// [`MAX_BATCH_BYTES`](crate::batch::MAX_BATCH_BYTES) bytes, each key at most once
    /// ([`Error::InvalidArgument`](crate::Error::InvalidArgument) otherwise, nothing written);
    /// a failing write is [`Error::Batch`](crate::Error::Batch) with its index and the error
    /// the single call would give. A [`Site`] builds batches of typed writes
    /// ([`Site::batch`]). With an identity ([`WriteCall::write_id`]), a repeated batch
    /// answers from the documents as they stand
    /// ([`batch::repeated_outcomes`]).
    pub fn write_all<'a>(
        &'a self,
        writes: &'a [Write],
        actor: &'a str,
    ) -> WriteCall<'a, Vec<WriteOutcome>> {
        WriteCall::new(move |id, expiry| async move {
            self.write_all_with(writes, Origin::with(actor, &id), expiry)
                .await
        })
    }

    pub(crate) async fn write_all_with(
        &self,
        writes: &[Write],
        origin: Origin<'_>,
        expiry: Option<CallExpiry>,
    ) -> Result<Vec<WriteOutcome>> {
        validate_actor(origin.actor)?;
        let expiries: Vec<Expiry> = writes
            .iter()
            .map(|write| match write {
                Write::Create { key, .. } | Write::Put { key, .. } => {
                    self.expiry(key, expiry, true)
                }
                Write::Update { key, .. } | Write::UpdateIf { key, .. } => {
                    self.expiry(key, expiry, false)
                }
                Write::Restore { document, .. } if document.expires_at.is_some() => {
                    self.check_expiry_kept().map(|()| Expiry::Keep)
                }
                _ => Ok(Expiry::Keep),
            })
            .collect::<Result<_>>()?;
        let batch =
            batch::CheckedBatch::check(writes, self.max_doc_bytes())?.with_expiry(&expiries);
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        let identity = self.driver.identity(origin.write_id);
        let origin = identity.origin(origin.actor).expiring(origin.expiry);
        let written = self
            .driver
            .write(&identity, |driver| requests::batch(driver, &batch, origin));
        written.await
    }

    /// Runs a query over one collection: one page, with the cursor of the next.
    pub async fn query(&self, site: &str, collection: &str, query: &Query) -> Result<Page> {
        let compiled = query.compile_for(site, collection)?;
        let compiled = &compiled;
        let page = self
            .driver
            .read(|driver| driver.query(site, collection, compiled));
        page.await
    }

    /// Every match of `query`, page by page (the query's `limit` is the page size), as a
    /// stream in bounded memory; see [`DocumentStream`].
    pub fn stream(&self, site: &str, collection: &str, query: &Query) -> DocumentStream {
        DocumentStream::new(self.clone(), site, collection, query.clone())
    }

    /// Says how [`query`](Self::query) would run `query` without running it: the index
    /// serving it (or a scan), the key range, about how many documents it reads and whether
    /// the answer is strongly consistent.
    pub async fn explain(&self, site: &str, collection: &str, query: &Query) -> Result<Explain> {
        let compiled = query.compile_for(site, collection)?;
        let compiled = &compiled;
        let plan = self
            .driver
            .read(|driver| driver.explain(site, collection, compiled))
            .await?;
        Ok(plan.for_walk_of(compiled))
    }

    /// The collections of a site holding at least one document, by name, with their counts
    /// (from the collection counters).
    pub async fn collections(&self, site: &str) -> Result<Vec<(String, u64)>> {
        validate_site(site)?;
        self.driver.read(|driver| driver.collections(site)).await
    }

    /// The sites holding at least one document, by name: what a whole-store export or check
    /// walks. A maintenance call: the driver's docs say what it costs (on DynamoDB it scans
    /// the table).
    ///
    /// ```
    /// # async fn example(store: docstore::Store) -> docstore::Result<()> {
    /// for site in store.sites().await? {
    ///     println!("{site}: {} documents", store.count(&site).await?);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn sites(&self) -> Result<Vec<String>> {
        self.driver.read(|driver| driver.sites()).await
    }

    /// The number of documents in a site (from the collection counters).
    pub async fn count(&self, site: &str) -> Result<u64> {
        validate_site(site)?;
        self.driver.read(|driver| driver.count(site)).await
    }

    /// Counts a site's documents collection by collection — from the documents themselves,
    /// never from the counters — and compares each count with its counter, finding collections
    /// that have documents but no counter and counters left over for empty collections. With
    /// [`RecountMode::Repair`] every differing counter is set to the true count.
    ///
    /// Reads the whole site, so it is a maintenance call (`docstore fsck`).
    pub async fn recount(&self, site: &str, mode: RecountMode) -> Result<Recount> {
        validate_site(site)?;
        self.driver.read(|driver| driver.recount(site, mode)).await
    }
}

/// Starts the background sweep of `driver`'s expired documents, every `interval`, when a
/// tokio runtime is running (without one, reads still leave expired documents out). It holds
/// the driver only while a sweep runs, and ends once the driver is gone.
fn spawn_sweeper(driver: &Arc<dyn Driver>, interval: std::time::Duration) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let driver = Arc::downgrade(driver);
    runtime.spawn(async move {
        loop {
            tokio::time::sleep(interval).await;
            let Some(driver) = driver.upgrade() else {
                break;
            };
            if let Err(err) = driver.sweep_expired(crate::options::SWEEP_LIMIT).await {
                tracing::warn!(error = %err, "sweeping expired documents failed; trying again later");
            }
        }
    });
}
