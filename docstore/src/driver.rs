//! The backend-facing half: the [`Driver`] trait every backend implements, and the answers
//! it gives ([`Page`], [`Explain`], [`Recount`]).

use crate::Document;
use crate::Result;
use crate::feed::{ChangeCursor, ChangePage, FeedScope, FeedStart};
use crate::identity::WriteId;
use crate::key::Key;
use crate::query::{CompiledQuery, Cursor};
use crate::request::{Answer, Request};
use async_trait::async_trait;
use std::collections::BTreeMap;

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

/// A document as [`Driver::get_text`] reads it.
#[derive(Clone, Debug, PartialEq)]
pub enum Fetched {
    /// The document, its data parsed.
    Document(Document),
    /// The document with its data as the JSON text of an object, as the database keeps it
    /// (in [`Versioned::value`](crate::Versioned::value)): valid, since the store wrote it.
    Text(crate::Versioned<String>),
}

/// How a backend would run a query: the answer of [`Store::explain`](crate::Store::explain).
///
/// ```
/// use docstore::Explain;
///
/// use docstore::index::Reading;
///
/// let plan = Explain::scan("whole collection, in id order", Reading::StopsAtPage, Some(120), true);
/// assert_eq!(plan.index, None);
/// assert_eq!(
///     plan.to_string(),
///     "scan: whole collection, in id order; reads in the query's order and stops at the page; \
///      reads about 120 documents; strongly consistent"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Explain {
    /// The index serving the query; `None` for a scan of the collection.
    pub index: Option<String>,
    /// What is read: the key ranges of the index (pinned values, range, direction, cursor) or
    /// how the collection is scanned.
    pub key_range: String,
    /// How the chosen plan reads: in the query's order, stopping at the page, or a range or
    /// the whole collection sorted in memory for every page. A walk of every page
    /// ([`Store::stream`](crate::Store::stream)) of a plan that sorts reads the matches once
    /// and sorts them once instead (`docs/contract.md`, "Walks").
    pub reading: crate::index::Reading,
    /// About how many documents the query reads (items, rows or entries): the page and what
    /// the filter skips for a served query, the collection for a scan. `None` when the
    /// backend cannot tell without reading.
    pub estimated_reads: Option<u64>,
    /// The most items the backend reads before it stops and sets
    /// [`Page::exhausted_scan`] (DynamoDB's `max_scan`); `None` when it reads what the answer
    /// needs, exactly at any size.
    pub read_limit: Option<u64>,
    /// Whether the answer reflects every write finished before the query began.
    pub strongly_consistent: bool,
    /// Every plan the planner weighed with its estimated reads, the chosen one first (empty
    /// when no declared index could serve the query: the scan was the only plan).
    pub candidates: Vec<crate::index::Estimate>,
    /// Why the chosen plan won over the others (`None` when there was no other).
    pub why: Option<String>,
    /// Whether a walk of every page sorts once (see [`walk_sorts_once`](Self::walk_sorts_once)).
    sorted_walk: bool,
}

impl Explain {
    /// A scan, described by `how`.
    pub fn scan(
        how: impl Into<String>,
        reading: crate::index::Reading,
        estimated_reads: Option<u64>,
        strongly_consistent: bool,
    ) -> Self {
        Explain {
            index: None,
            key_range: how.into(),
            reading,
            estimated_reads,
            read_limit: None,
            strongly_consistent,
            candidates: Vec::new(),
            why: None,
            sorted_walk: false,
        }
    }

    /// A query served by an index, as `plan` describes it, reading as `reading` says.
    pub fn index(
        plan: &crate::index::IndexPlan,
        reading: crate::index::Reading,
        estimated_reads: Option<u64>,
        strongly_consistent: bool,
    ) -> Self {
        Explain {
            index: Some(plan.index.clone()),
            key_range: if plan.ranges.is_empty() {
                format!("{} (matches nothing: reads nothing)", plan.description)
            } else {
                plan.description.clone()
            },
            reading,
            estimated_reads,
            read_limit: None,
            strongly_consistent,
            candidates: Vec::new(),
            why: None,
            sorted_walk: false,
        }
    }

    /// Adds the database's own plan of the statement that reads the query — `database` names
    /// it, `plan` is its words — to the [`key_range`](Self::key_range):
    ///
    /// ```
    /// use docstore::Explain;
    /// use docstore::index::Reading;
    ///
    /// let explain = Explain::scan("the collection", Reading::SortsCollection, None, true)
    ///     .with_database_plan("SQLite", "SCAN documents");
    /// assert_eq!(explain.key_range, "the collection (SQLite: SCAN documents)");
    /// ```
    pub fn with_database_plan(mut self, database: &str, plan: &str) -> Self {
        self.key_range = format!("{} ({database}: {plan})", self.key_range);
        self
    }

    /// Adds the planner's weighing ([`candidates`](Self::candidates) and
    /// [`why`](Self::why)) when it had a choice to make.
    pub fn with_choice(mut self, choice: &crate::index::Choice) -> Self {
        if choice.estimates.len() > 1 {
            self.candidates = choice.estimates.clone();
            self.why = Some(choice.reason.clone());
        }
        self
    }

    /// Whether a walk of every page ([`Store::stream`](crate::Store::stream)) reads the
    /// matches once and sorts them once: the query is in another order than `$id` and the
    /// plan sorts in memory (its [`reading`](Self::reading) is not
    /// [`Reading::StopsAtPage`](crate::index::Reading)), so page by page it would read and
    /// sort again for every page. (An id-order walk goes page by page whatever the plan: the
    /// cost rule lets a sorting index serve it only when its range is small.) Set by
    /// [`Store::explain`](crate::Store::explain); `false` on a plan made by hand.
    pub fn walk_sorts_once(&self) -> bool {
        self.sorted_walk
    }

    /// Records how a walk of `query` goes (see [`walk_sorts_once`](Self::walk_sorts_once)).
    pub(crate) fn for_walk_of(mut self, query: &crate::query::CompiledQuery) -> Self {
        self.sorted_walk =
            self.reading != crate::index::Reading::StopsAtPage && query.id_order().is_none();
        self
    }

    /// Sets [`read_limit`](Self::read_limit).
    pub fn with_read_limit(mut self, read_limit: Option<u64>) -> Self {
        self.read_limit = read_limit;
        self
    }
}

impl std::fmt::Display for Explain {
    /// One line: `index NAME: RANGES` or `scan: HOW`, then the estimate, the read limit and
    /// the consistency.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.index {
            Some(name) => write!(f, "index {name}: {}", self.key_range)?,
            None => write!(f, "scan: {}", self.key_range)?,
        }
        write!(f, "; {}", self.reading)?;
        if self.walk_sorts_once() {
            f.write_str(" (a walk of every page reads and sorts the matches once)")?;
        }
        if let Some(n) = self.estimated_reads {
            write!(f, "; reads about {n} documents")?;
        }
        if let Some(n) = self.read_limit {
            write!(f, "; stops after {n} items (exhausted_scan)")?;
        }
        f.write_str(if self.strongly_consistent {
            "; strongly consistent"
        } else {
            "; eventually consistent"
        })?;
        if let Some(why) = &self.why {
            let weighed: Vec<String> = self.candidates.iter().map(|c| c.to_string()).collect();
            write!(f, "; weighed {}; chosen because {why}", weighed.join(", "))?;
        }
        Ok(())
    }
}

/// What [`Store::recount`](crate::Store::recount) does with the differences it finds.
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

/// About how many entries a query served by `plan` reads in a collection of
/// `collection_size` documents, for [`Explain::estimated_reads`]: the page and one more per
/// key range (the walk stops there), at most the collection; the collection without a limit.
pub fn estimated_index_reads(
    plan: &crate::index::IndexPlan,
    query: &CompiledQuery,
    collection_size: u64,
) -> u64 {
    match query.limit() {
        Some(limit) => collection_size.min(
            (limit as u64)
                .saturating_add(1)
                .saturating_mul(plan.ranges.len() as u64),
        ),
        None => collection_size,
    }
}

/// About how many documents a query in id order reads in a collection of `collection_size`
/// documents, for [`Explain::estimated_reads`]: without a filter, the page and one more (the
/// read stops there); with one, the collection (it may skip any number).
pub fn estimated_id_order_reads(query: &CompiledQuery, collection_size: u64) -> u64 {
    match (query.limit(), query.filter()) {
        (Some(limit), None) => collection_size.min((limit as u64).saturating_add(1)),
        _ => collection_size,
    }
}

/// A stable 64-bit hash of `bytes` (FNV-1a): the same in every process, release and
/// platform, unlike `std`'s hasher, for what a backend writes down and must find again —
/// query fingerprints, shard numbers, generated names, lock keys. Changing it changes
/// every stored layout that uses it: it never changes.
///
/// ```
/// use docstore::driver::stable_hash;
///
/// assert_eq!(stable_hash(b""), 0xcbf2_9ce4_8422_2325);
/// assert_eq!(stable_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
/// ```
pub fn stable_hash(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(PRIME)
    })
}

/// What a delete ([`Call::Delete`](crate::request::Call::Delete)) answers once the driver knows whether it `deleted` the document at
/// `key`: `delete` says so, `delete_if` (`expected_version: Some`) finds a missing document
/// [`Error::NotFound`](crate::Error::NotFound).
///
/// ```
/// use docstore::driver::delete_answer;
///
/// let key = docstore::Key::new("acme", "tickets", "T-1")?;
/// assert_eq!(delete_answer(&key, None, false)?, false);
/// assert!(delete_answer(&key, Some(3), false).is_err());
/// assert_eq!(delete_answer(&key, Some(3), true)?, true);
/// # Ok::<(), docstore::Error>(())
/// ```
pub fn delete_answer(key: &Key, expected_version: Option<u64>, deleted: bool) -> Result<bool> {
    match (deleted, expected_version) {
        (false, Some(_)) => Err(crate::Error::not_found(key)),
        _ => Ok(deleted),
    }
}

/// The most expired documents one atomic unit of a sweep removes ([`sweep_in_chunks`]), so
/// that a sweep never holds a transaction (or a writer) for long.
pub const SWEEP_CHUNK: usize = 200;

/// What one chunk of a sweep did ([`sweep_in_chunks`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Swept {
    /// The expired documents it found (at most the chunk asked for).
    pub found: usize,
    /// How many of them it removed.
    pub removed: usize,
}

/// The sweep of [`Driver::sweep_expired`] in atomic units of at most [`SWEEP_CHUNK`]
/// documents: `chunk(n)` removes up to `n` of those expired longest, each with its change,
/// in one unit of the driver's; chunks follow until `limit` are removed or one finds fewer
/// than it asked for. How many were removed.
///
/// ```
/// use docstore::driver::{SWEEP_CHUNK, Swept, sweep_in_chunks};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let mut expired = 450;
/// let swept = sweep_in_chunks(1_000, |n| {
///     let found = n.min(expired);
///     expired -= found;
///     async move { Ok::<_, docstore::Error>(Swept { found, removed: found }) }
/// });
/// assert_eq!(swept.await?, 450, "two full chunks of {SWEEP_CHUNK}, then 50");
/// # Ok::<(), docstore::Error>(()) }).unwrap();
/// ```
pub async fn sweep_in_chunks<F, Fut, E>(limit: usize, mut chunk: F) -> std::result::Result<usize, E>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = std::result::Result<Swept, E>>,
{
    let mut removed = 0;
    while removed < limit {
        let asked = SWEEP_CHUNK.min(limit - removed);
        let swept = chunk(asked).await?;
        removed += swept.removed;
        if swept.found < asked {
            break;
        }
    }
    Ok(removed)
}

/// The recount comparison every driver makes: the counters that disagree with the documents'
/// true counts, by collection name — collections with documents but no counter (`counter:
/// None`), counters left over for empty collections (`documents: 0`) and counters off by any
/// amount. A missing counter and a counter of 0 agree with no documents.
///
/// ```
/// use docstore::driver::counter_changes;
/// use std::collections::BTreeMap;
///
/// let documents = BTreeMap::from([("a".to_owned(), 2), ("b".to_owned(), 1)]);
/// let counters = BTreeMap::from([("a".to_owned(), 2), ("c".to_owned(), 4)]);
/// let changes = counter_changes(&documents, &counters);
/// let names: Vec<_> = changes.iter().map(|c| (c.collection.as_str(), c.counter, c.documents)).collect();
/// assert_eq!(names, [("b", None, 1), ("c", Some(4), 0)]);
/// ```
pub fn counter_changes(
    documents: &BTreeMap<String, u64>,
    counters: &BTreeMap<String, u64>,
) -> Vec<CounterChange> {
    let mut names: Vec<&String> = documents.keys().chain(counters.keys()).collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .filter_map(|name| {
            let actual = documents.get(name).copied().unwrap_or(0);
            let counter = counters.get(name).copied();
            (counter.unwrap_or(0) != actual).then(|| CounterChange {
                collection: name.clone(),
                counter,
                documents: actual,
            })
        })
        .collect()
}

/// What [`Store::recount`](crate::Store::recount) found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recount {
    /// Every collection of the site holding at least one document, by name, with the number
    /// of documents it really holds (counted from the documents, not from the counters).
    pub collections: Vec<(String, u64)>,
    /// The counters that disagreed, by collection name (repaired when the mode was
    /// [`RecountMode::Repair`]).
    pub changes: Vec<CounterChange>,
    /// Where a unique index disagreed with the documents (`docs/contract.md`, "Unique
    /// indexes"): what keeps a backend's values (DynamoDB's guard items) missing or left
    /// over — repaired in [`RecountMode::Repair`] — or documents sharing a value, which only
    /// a change from outside the store can cause and which is never repaired (which document
    /// keeps the value is the application's decision).
    pub unique: Vec<UniqueProblem>,
}

impl Recount {
    /// What a recount found from the site's true counts (`collections`, by name) and its
    /// `counters`: the collections and the counters that disagree ([`counter_changes`]), no
    /// unique problem (a driver keeping unique indexes adds its own).
    ///
    /// ```
    /// use docstore::Recount;
    /// use std::collections::BTreeMap;
    ///
    /// let found = Recount::compare(vec![("a".into(), 2)], BTreeMap::from([("a".into(), 3)]));
    /// assert_eq!(found.changes[0].documents, 2);
    /// assert_eq!(found.changes[0].counter, Some(3));
    /// ```
    pub fn compare(collections: Vec<(String, u64)>, counters: BTreeMap<String, u64>) -> Recount {
        let documents: BTreeMap<String, u64> = collections.iter().cloned().collect();
        Recount {
            changes: counter_changes(&documents, &counters),
            collections,
            unique: Vec::new(),
        }
    }
}

/// One disagreement between a unique index and a site's documents, found by
/// [`Store::recount`](crate::Store::recount).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UniqueProblem {
    /// The document `id` claims a value of `index` that nothing records it holding.
    Missing {
        /// The collection.
        collection: String,
        /// The unique index.
        index: String,
        /// The document.
        id: String,
    },
    /// A record of a value names `holder`, which does not claim it (deleted, changed, or the
    /// index dropped).
    Orphan {
        /// The collection the record is of.
        collection: String,
        /// The index the record is of.
        index: String,
        /// The id the record names.
        holder: String,
    },
    /// The documents `ids` (in id order) share one value of `index`: never repaired.
    Shared {
        /// The collection.
        collection: String,
        /// The unique index.
        index: String,
        /// The documents, by id.
        ids: Vec<String>,
    },
}

impl UniqueProblem {
    /// Whether `docstore fsck --repair` repairs it (all but [`UniqueProblem::Shared`]).
    pub fn is_repairable(&self) -> bool {
        !matches!(self, UniqueProblem::Shared { .. })
    }
}

/// Who makes a write, and the identity the caller gave it: what every write request of a
/// [`Driver`] carries besides its input ([`Request::origin`]).
///
/// With `write_id: Some(id)` the write must be safe to repeat: when the document at the key
/// holds `id` among its kept identities ([`WriteIds`](crate::identity::WriteIds)), the driver
/// applies nothing and answers with the document as it stands (`restore`: `Ok`); a delete
/// records `id` on the deleted key for
/// [`DELETE_IDS_KEPT_FOR`](crate::identity::DELETE_IDS_KEPT_FOR), and a delete whose `id` is
/// recorded there answers as its first call did and removes nothing, not even a document
/// created at the key since. With `None`, identities are the driver's own business (DynamoDB
/// draws one per call for its resends; memory and SQLite keep none).
#[derive(Clone, Copy, Debug)]
pub struct Origin<'a> {
    /// The actor the write is stamped with (checked by the front end).
    pub actor: &'a str,
    /// The caller's identity of the write, when it gave one.
    pub write_id: Option<&'a WriteId>,
    /// What the write does to the stored document's expiry (`docs/contract.md`, "Expiry"),
    /// resolved by the front end from the call and the collection's default; a driver
    /// applies it with [`Expiry::apply`]. Unused by deletes and `restore` (a restored
    /// document keeps its own); a batch's are per write ([`CheckedBatch::expiry`](crate::batch::CheckedBatch::expiry)).
    pub expiry: Expiry,
}

/// What a write does to its document's [`expires_at`](Document::expires_at).
///
/// ```
/// use docstore::driver::Expiry;
///
/// // A document written at 100 whose expiry was 5:
/// assert_eq!(Expiry::Keep.apply(Some(5), 100), Some(5));
/// assert_eq!(Expiry::At(9).apply(Some(5), 100), Some(9));
/// assert_eq!(Expiry::After(30).apply(Some(5), 100), Some(130));
/// assert_eq!(Expiry::Never.apply(Some(5), 100), None);
/// assert_eq!(Expiry::Keep.apply(None, 100), None); // a create without one never expires
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Expiry {
    /// Keep the document's (a new document: never expires).
    #[default]
    Keep,
    /// Expire at this instant (unix nanoseconds, the store's clock).
    At(i64),
    /// Expire this many nanoseconds after the write (its `updated_at`).
    After(i64),
    /// Never expire.
    Never,
}

impl Expiry {
    /// The expiry of the document a write stamped `written_at` (its `updated_at`), whose
    /// previous expiry (`None` for a new document, or one that never expired) was `current`.
    pub fn apply(self, current: Option<i64>, written_at: i64) -> Option<i64> {
        match self {
            Expiry::Keep => current,
            Expiry::At(at) => Some(at),
            Expiry::After(nanos) => Some(written_at.saturating_add(nanos)),
            Expiry::Never => None,
        }
    }
}

impl<'a> Origin<'a> {
    /// A write by `actor` without a caller identity.
    pub fn actor(actor: &'a str) -> Self {
        Origin {
            actor,
            write_id: None,
            expiry: Expiry::Keep,
        }
    }

    /// A write by `actor` with the caller's identity, if any.
    pub fn with(actor: &'a str, write_id: &'a Option<WriteId>) -> Self {
        Origin {
            actor,
            write_id: write_id.as_ref(),
            expiry: Expiry::Keep,
        }
    }

    /// The same write, doing `expiry` to its document's expiry.
    pub fn expiring(mut self, expiry: Expiry) -> Self {
        self.expiry = expiry;
        self
    }
}

/// A backend: what needs the database, and nothing else.
///
/// Applications never call a driver: they hold a [`Store`](crate::Store) (built with
/// [`Store::new`](crate::Store::new) over a driver), which checks every input first — names,
/// actors, sizes, nesting depth, batch limits and distinct keys, queries and cursors — and
/// calls the driver only with inputs that passed, and which scopes, types and streams the
/// answers. The semantics every driver must show are `docs/contract.md`; the
/// `conformance-tests` crate checks them through the front end, for every driver.
///
/// The trait is object safe (the front end holds an `Arc<dyn Driver>`), so wrappers stack: a
/// driver that wraps another (fault injection, logging, metrics) implements this trait and
/// forwards.
///
/// Every failed write leaves the store exactly as it was.
#[async_trait]
pub trait Driver: Send + Sync + std::fmt::Debug {
    /// The options the driver was built with: the front end checks sizes against
    /// [`StoreOptions::max_doc_bytes`](crate::StoreOptions::max_doc_bytes).
    fn options(&self) -> &crate::StoreOptions;

    /// Whether a write of this driver that ended [`Error::Unavailable`](crate::Error::Unavailable)
    /// may have been applied — its answer lost on the way back (default `true`).
    ///
    /// The front end retries writes itself (`docs/contract.md`, "Retries"). When answers may
    /// be lost, it sends every try of a write with one identity, so that a try whose answer
    /// was lost is recognised by the next (what a caller identity costs the driver). A driver
    /// whose `Unavailable` writes never took effect (an in-process store that rolled them back)
    /// says `false`, and a write the caller gave no identity is then retried without one.
    /// A wrapper that injects lost answers says `true`.
    fn may_lose_answers(&self) -> bool {
        true
    }

    /// Whether a write of this driver can end [`Error::Unavailable`](crate::Error::Unavailable)
    /// at all (default `true`). A driver that never can (an in-process store with nothing to
    /// wait for) says `false`, and the front end then hands each write its data without
    /// keeping a copy for a retry.
    fn writes_may_be_unavailable(&self) -> bool {
        true
    }

    /// Applies one write request — a single call or a checked batch — atomically: the one
    /// way a write reaches the driver (Go CDK's `RunActions`). The front end has checked
    /// every input (actor, sizes, batch limits and distinct keys) and built the request;
    /// [`Request::call`] says which call it is, for a driver with its own code per call,
    /// and [`Request::decide`] decides every write on the documents read, for a driver that
    /// decides in Rust.
    ///
    /// What the driver must guarantee (`docs/contract.md`, "Writes", "Batches", "Write
    /// identities"):
    /// - all of the request's writes, or — when any fails — none; a batch's failure is
    ///   [`Error::Batch`](crate::Error::Batch) naming the write, a single call's is its own
    ///   error ([`Error::AlreadyExists`](crate::Error::AlreadyExists),
    ///   [`Error::NotFound`](crate::Error::NotFound), [`Error::Conflict`](crate::Error::Conflict)
    ///   with the current version, [`Error::QuotaExceeded`](crate::Error::QuotaExceeded), ...);
    /// - the collection counters move with the writes, in the same atomic unit, and each
    ///   committed write has its one change in the feed;
    /// - `update` (no expected version) retries internally when a concurrent write got in
    ///   between, [`Error::Conflict`](crate::Error::Conflict) only after bounded retries;
    /// - a request with an identity ([`Request::id`]) is safe to repeat (see [`Origin`]): a
    ///   repeat applies nothing and answers as the first call did ([`Answer::Repeat`], or
    ///   the documents as they stand);
    /// - the answer has one outcome per write, in order ([`Answer`]): a delete that found
    ///   nothing is [`WriteOutcome::Checked`](crate::batch::WriteOutcome::Checked), and `restore` answers the document it wrote.
    ///
    /// An empty batch never reaches the driver.
    async fn apply(&self, request: Request<'_>) -> Result<Answer>;

    /// Reads a document.
    async fn get(&self, key: &Key) -> Result<Option<Document>>;

    /// Reads a document for a typed read ([`Collection::get`](crate::Collection::get)): a
    /// driver that keeps documents as JSON text may hand its data over as that text, so that
    /// it is parsed once, straight into the caller's type, instead of into a map first.
    /// The same read as [`get`](Self::get) otherwise; by default, `get` itself.
    async fn get_text(&self, key: &Key) -> Result<Option<Fetched>> {
        Ok(self.get(key).await?.map(Fetched::Document))
    }

    /// Reads several distinct keys: one `Option` per key, in the keys' order, strongly
    /// consistent; a driver with a per-request limit splits them. Its docs say whether the
    /// answer is one snapshot.
    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<crate::Document>>>;

    /// Runs a query over one collection: exactly the reference evaluator's page
    /// ([`CompiledQuery::evaluate`]), whatever the driver pushes down. Cursors of the answer
    /// come from [`CompiledQuery::cursor_after`], which binds them to the query and its scope.
    async fn query(&self, site: &str, collection: &str, query: &CompiledQuery) -> Result<Page>;

    /// Says how [`query`](Self::query) would run `query` without running it.
    async fn explain(&self, site: &str, collection: &str, query: &CompiledQuery)
    -> Result<Explain>;

    /// The collections of a site holding at least one document, by name, with their counts.
    async fn collections(&self, site: &str) -> Result<Vec<(String, u64)>>;

    /// The number of documents in a site.
    async fn count(&self, site: &str) -> Result<u64>;

    /// The sites holding at least one document, by name (`docs/contract.md`, "Operations":
    /// `sites`). Its docs say what listing costs on the backend.
    async fn sites(&self) -> Result<Vec<String>>;

    /// Counts a site's documents collection by collection — from the documents themselves,
    /// never from the counters — and compares each count with its counter (see
    /// [`Store::recount`](crate::Store::recount)).
    async fn recount(&self, site: &str, mode: RecountMode) -> Result<Recount>;

    /// Reads at most `limit` (1 to [`MAX_CHANGE_PAGE`](crate::feed::MAX_CHANGE_PAGE),
    /// checked) changes of `scope` after `start`, oldest first (`docs/contract.md`, "Change
    /// feed"): one [`Change`](crate::feed::Change) per committed write, none for refused
    /// writes or recognised repeats, never an internal item.
    /// [`Error::CursorExpired`](crate::Error::CursorExpired) when `start` is a cursor older
    /// than what the backend keeps; [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// for a cursor this driver did not write.
    async fn changes(
        &self,
        scope: &FeedScope,
        start: &FeedStart,
        limit: usize,
    ) -> Result<ChangePage>;

    /// Removes documents that have expired by the store clock (`docs/contract.md`,
    /// "Expiry") — at most `limit`, those expired longest first — each with its one
    /// [`ChangeKind::Expired`](crate::ChangeKind::Expired) change; how many it removed.
    /// Reads leave expired documents out already; this frees their room. The store calls
    /// it in the background ([`StoreOptions::sweep_interval`](crate::StoreOptions::sweep_interval)).
    /// The default, for a driver that does not keep expiry ([`supports_expiry`](Self::supports_expiry)
    /// false), removes nothing: it holds no expiring document.
    async fn sweep_expired(&self, limit: usize) -> Result<usize> {
        let _ = limit;
        Ok(0)
    }

    /// Whether the driver keeps document expiry (`docs/contract.md`, "Expiry"): reads leave
    /// expired documents out, writes find their keys empty, [`sweep_expired`](Self::sweep_expired)
    /// removes them. For a driver that does not (the default), the front end refuses every
    /// write that would give a document an expiry ([`Error::InvalidArgument`](crate::Error::InvalidArgument)).
    /// A wrapper says what the driver it wraps says.
    fn supports_expiry(&self) -> bool {
        false
    }

    /// Waits until a change may have been committed after `after`, in any scope — without
    /// busy polling: woken by this process's commits, polling for other processes' at an
    /// interval the driver documents. It may return early (the caller reads, finds nothing
    /// and waits again); cancelling it (dropping the future) is always safe.
    async fn wait_for_changes(&self, after: &ChangeCursor) -> Result<()>;
}
