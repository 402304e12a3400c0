//! Settings every backend takes.

use crate::clock::{Clock, SystemClock};
use crate::index::IndexSet;
use crate::retry::RetryPolicy;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The default `max_doc_bytes`: what fits in one DynamoDB item with our attributes.
pub const DEFAULT_MAX_DOC_BYTES: usize = 390_000;

/// Settings shared by every backend: size limit, optional per-site quota, the clock, the
/// declared indexes and how calls are retried.
///
/// ```
/// use std::sync::Arc;
/// use docstore::{ManualClock, StoreOptions};
///
/// let options = StoreOptions::default()
///     .with_max_doc_bytes(10_000)
///     .with_max_docs_per_site(Some(100))
///     .with_clock(Arc::new(ManualClock::new(0)));
/// assert_eq!(options.max_doc_bytes, 10_000);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct StoreOptions {
    /// The largest serialized `data` a write accepts, in bytes (default 390 000).
    pub max_doc_bytes: usize,
    /// The soft per-site quota on documents (default: none).
    pub max_docs_per_site: Option<u64>,
    /// Where timestamps come from (default: the system clock).
    pub clock: Arc<dyn Clock>,
    /// The declared indexes (default: none), checked when the set was built.
    pub indexes: IndexSet,
    /// How every call is retried when it ends
    /// [`Error::Unavailable`](crate::Error::Unavailable) (default: up to 10 retries within
    /// 5 seconds; see [`RetryPolicy`]).
    pub retry: RetryPolicy,
    /// How long after a `create`, `put` or `replace_if` a document of each named collection
    /// expires when the call gives no expiry of its own (default: none; `docs/contract.md`,
    /// "Expiry").
    pub expiry: BTreeMap<String, Duration>,
    /// How often the store removes expired documents in the background (default 1 s, at most
    /// [`SWEEP_LIMIT`] per round; `None`: never — reads still leave them out, and
    /// [`Store::sweep_expired`](crate::Store::sweep_expired) removes them on demand).
    pub sweep_interval: Option<Duration>,
}

/// The most expired documents one background sweep removes.
pub const SWEEP_LIMIT: usize = 1_000;

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            max_doc_bytes: DEFAULT_MAX_DOC_BYTES,
            max_docs_per_site: None,
            clock: Arc::new(SystemClock),
            indexes: IndexSet::default(),
            retry: RetryPolicy::default(),
            expiry: BTreeMap::new(),
            sweep_interval: Some(Duration::from_secs(1)),
        }
    }
}

impl StoreOptions {
    /// Sets `max_doc_bytes`.
    pub fn with_max_doc_bytes(mut self, max_doc_bytes: usize) -> Self {
        self.max_doc_bytes = max_doc_bytes;
        self
    }

    /// Sets the soft per-site quota (`None`: no quota).
    pub fn with_max_docs_per_site(mut self, limit: Option<u64>) -> Self {
        self.max_docs_per_site = limit;
        self
    }

    /// Sets the declared indexes.
    ///
    /// ```
    /// use docstore::{Index, IndexSet, StoreOptions};
    ///
    /// let options = StoreOptions::default()
    ///     .with_indexes(IndexSet::new([Index::parse("tickets", "by_status", ["status"])?])?);
    /// assert_eq!(options.indexes.for_collection("tickets").len(), 1);
    /// # Ok::<(), docstore::Error>(())
    /// ```
    pub fn with_indexes(mut self, indexes: IndexSet) -> Self {
        self.indexes = indexes;
        self
    }

    /// Sets how calls are retried ([`RetryPolicy::NONE`]: not at all).
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Makes the documents `create`, `put` and `replace_if` write in `collection` (of every
    /// site) expire `after` this long, unless the call gives its own expiry.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let options = docstore::StoreOptions::default()
    ///     .with_expiry("sessions", Duration::from_secs(1800));
    /// assert_eq!(options.expiry["sessions"], Duration::from_secs(1800));
    /// ```
    pub fn with_expiry(mut self, collection: impl Into<String>, after: Duration) -> Self {
        self.expiry.insert(collection.into(), after);
        self
    }

    /// Sets how often expired documents are removed in the background (`None`: never).
    pub fn with_sweep_interval(mut self, interval: Option<Duration>) -> Self {
        self.sweep_interval = interval;
        self
    }

    /// Sets the clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
}
