//! The `Store` trait every backend implements.

use crate::Result;
use crate::batch::{Write, WriteOutcome};
use crate::document::{Data, Document};
use crate::key::Key;
use crate::query::{Cursor, Query};
use async_trait::async_trait;

/// One page of a query's answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Page {
    /// The matching documents of this page, in the query's order.
    pub documents: Vec<Document>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<Cursor>,
    /// True when the backend stopped reading before it had seen the whole collection (the
    /// DynamoDB backend's `max_scan` bound), so the answer may be missing documents.
    pub exhausted_scan: bool,
}

/// What [`Store::recount`] does with the differences it finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecountMode {
    /// Only report them (`docstore fsck`).
    Report,
    /// Report them and set every counter to the number of documents (`docstore fsck --repair`).
    Repair,
}

/// One collection whose counter disagreed with its documents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterChange {
    /// The collection.
    pub collection: String,
    /// What the counter said; `None` when the collection had documents but no counter at all.
    pub counter: Option<u64>,
    /// The documents the collection really holds.
    pub documents: u64,
}

/// What [`Store::recount`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recount {
    /// Every collection of the site holding at least one document, by name, with the number
    /// of documents it really holds (counted from the documents, not from the counters).
    pub collections: Vec<(String, u64)>,
    /// The counters that disagreed, by collection name (repaired when the mode was
    /// [`RecountMode::Repair`]).
    pub changes: Vec<CounterChange>,
}

/// A document store: the one API every backend implements.
///
/// The trait is object safe; applications hold an `Arc<dyn Store>` and choose the backend by
/// configuration. The contract (semantics, errors, query rules) is `docs/contract.md`, and the
/// `conformance-tests` crate checks it for every backend.
///
/// Every failed write leaves the store exactly as it was.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Creates a document at version 1; [`Error::AlreadyExists`](crate::Error::AlreadyExists)
    /// if the id is taken.
    async fn create(&self, key: &Key, data: Data, actor: &str) -> Result<Document>;

    /// Reads a document.
    async fn get(&self, key: &Key) -> Result<Option<Document>>;

    /// Creates or replaces a document; a replaced document keeps its `created_*` fields and
    /// its version grows by one.
    async fn put(&self, key: &Key, data: Data, actor: &str) -> Result<Document>;

    /// Applies an RFC 7386 merge patch, retrying internally when a concurrent write got in
    /// between; [`Error::NotFound`](crate::Error::NotFound) if the document does not exist,
    /// [`Error::Conflict`](crate::Error::Conflict) only after bounded retries under heavy
    /// contention.
    async fn update(&self, key: &Key, patch: &Data, actor: &str) -> Result<Document>;

    /// Applies a merge patch if the document is still at `expected_version`;
    /// [`Error::Conflict`](crate::Error::Conflict) with the current version otherwise.
    async fn update_if(
        &self,
        key: &Key,
        patch: &Data,
        expected_version: u64,
        actor: &str,
    ) -> Result<Document>;

    /// Deletes a document; `true` when there was one.
    async fn delete(&self, key: &Key) -> Result<bool>;

    /// Deletes a document if it is still at `expected_version`.
    async fn delete_if(&self, key: &Key, expected_version: u64) -> Result<()>;

    /// Writes `document` exactly as given — data, timestamps, actors and version — when no
    /// document with its id exists: the write behind import, copy between stores and restore
    /// from backups, which must keep history that `create` would reset.
    ///
    /// Checks, in this order: `key.id()` equals `document.id`, `version >= 1` and
    /// `created_at <= updated_at` ([`Error::InvalidArgument`](crate::Error::InvalidArgument)),
    /// then the size ([`Error::TooLarge`](crate::Error::TooLarge)); see
    /// [`check_restorable`](crate::document::check_restorable). Then, like `create`:
    /// [`Error::AlreadyExists`](crate::Error::AlreadyExists) when the id is taken,
    /// [`Error::QuotaExceeded`](crate::Error::QuotaExceeded) in a full site, and the collection
    /// counter grows by one. Network backends protect it with a write identity like `create`.
    async fn restore(&self, key: &Key, document: &Document) -> Result<()>;

    /// Reads several documents: one `Option` per key, in the keys' order (`None` for a
    /// missing document). Any number of keys (a backend with a per-request limit splits
    /// them); strongly consistent. A key given twice is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) (see
    /// [`check_distinct`](crate::batch::check_distinct)). Each backend's docs say whether the
    /// answer is one snapshot.
    ///
    /// ```
    /// # async fn demo(store: &dyn docstore::Store) -> docstore::Result<()> {
    /// use docstore::Key;
    ///
    /// let keys = [Key::new("acme", "tickets", "T-1")?, Key::new("acme", "tickets", "T-2")?];
    /// let docs = store.get_many(&keys).await?;
    /// assert_eq!(docs.len(), 2);
    /// # Ok(())
    /// # }
    /// ```
    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<crate::Document>>>;

    /// Applies a batch of writes atomically: all of them, or — when any fails — none. Returns
    /// one [`WriteOutcome`] per write, in order. All writes are stamped by `actor` (except
    /// `Restore`, which keeps its document's metadata).
    ///
    /// At most [`MAX_BATCH_WRITES`](crate::batch::MAX_BATCH_WRITES) writes and
    /// [`MAX_BATCH_BYTES`](crate::batch::MAX_BATCH_BYTES) bytes, each key at most once
    /// ([`Error::InvalidArgument`](crate::Error::InvalidArgument) otherwise, nothing written);
    /// a failing write is [`Error::Batch`](crate::Error::Batch) with its index and the error
    /// the single call would give. Counters move with the writes, in the same transaction.
    /// See [`batch`](crate::batch) for the limits' reasons and the exact error rules.
    ///
    /// ```
    /// # async fn demo(store: &dyn docstore::Store) -> docstore::Result<()> {
    /// use docstore::{Key, Write, WriteOutcome};
    ///
    /// let board_a = Key::new("acme", "board-a", "T-1")?;
    /// let board_b = Key::new("acme", "board-b", "T-1")?;
    /// let ticket = store.get(&board_a).await?.expect("exists");
    /// // Move the ticket between boards: both writes happen, or neither.
    /// let outcomes = store
    ///     .write_all(
    ///         &[
    ///             Write::create(board_b, ticket.data.clone()),
    ///             Write::delete_if(board_a, ticket.version),
    ///         ],
    ///         "alice",
    ///     )
    ///     .await?;
    /// assert!(matches!(outcomes[1], WriteOutcome::Deleted));
    /// # Ok(())
    /// # }
    /// ```
    async fn write_all(&self, writes: &[Write], actor: &str) -> Result<Vec<WriteOutcome>>;

    /// Runs a query over one collection.
    async fn query(&self, site: &str, collection: &str, query: &Query) -> Result<Page>;

    /// The collections of a site holding at least one document, by name, with their counts.
    async fn collections(&self, site: &str) -> Result<Vec<(String, u64)>>;

    /// The number of documents in a site.
    async fn count(&self, site: &str) -> Result<u64>;

    /// Counts a site's documents collection by collection — from the documents themselves,
    /// never from the counters — and compares each count with its counter, finding collections
    /// that have documents but no counter and counters left over for empty collections. With
    /// [`RecountMode::Repair`] every differing counter is set to the true count.
    ///
    /// Reads the whole site (DynamoDB: a paginated Scan of the table), so it is a maintenance
    /// call (`docstore fsck`), also used by export and copy to find every collection.
    async fn recount(&self, site: &str, mode: RecountMode) -> Result<Recount>;
}
