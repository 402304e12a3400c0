//! Atomic batches: the writes [`Store::write_all`](crate::Store::write_all) applies all or
//! nothing, their outcomes, the limits every backend shares and the validation every backend
//! runs before it touches anything.
//!
//! ```
//! use docstore::batch::{Write, WriteOutcome};
//! use docstore::{Error, Key, Store};
//! use serde_json::json;
//!
//! /// Moves `amount` from one account to another, or changes nothing.
//! async fn transfer(store: &Store, from: &Key, to: &Key, amount: i64) -> docstore::Result<()> {
//!     let Some(a) = store.get(from).await? else { return Err(Error::not_found(from)) };
//!     let Some(b) = store.get(to).await? else { return Err(Error::not_found(to)) };
//!     let balance = |d: &docstore::Document| d.data["balance"].as_i64().unwrap_or(0);
//!     let writes = [
//!         Write::update_if(from.clone(), docstore::object(json!({"balance": balance(&a) - amount}))?, a.version),
//!         Write::update_if(to.clone(), docstore::object(json!({"balance": balance(&b) + amount}))?, b.version),
//!     ];
//!     match store.write_all(&writes, "bank").await {
//!         Ok(outcomes) => {
//!             assert!(matches!(outcomes[0], WriteOutcome::Written(_)));
//!             Ok(())
//!         }
//!         // Someone else wrote one of the two accounts since we read it: nothing was applied.
//!         Err(Error::Batch { index, source }) if matches!(*source, Error::Conflict { .. }) => {
//!             println!("account {index} changed meanwhile");
//!             Err(*source)
//!         }
//!         Err(other) => Err(other),
//!     }
//! }
//! ```
//!
//! ## Errors
//!
//! - A batch that breaks a rule *as a whole* — more than [`MAX_BATCH_WRITES`] writes, more than
//!   [`MAX_BATCH_BYTES`] written, or a key that appears twice — is a plain
//!   [`Error::InvalidArgument`] naming the rule (and the indexes involved).
//! - A failure of *one write* is [`Error::Batch`] `{ index, source }`: `index` is the write's
//!   position in the slice and `source` the error the equivalent single call would give
//!   ([`Error::Conflict`] with the current version, [`Error::AlreadyExists`],
//!   [`Error::NotFound`], [`Error::TooLarge`], [`Error::QuotaExceeded`], or
//!   [`Error::InvalidArgument`] for a write whose own input is bad, e.g. data nested too deep).
//!   Match the kind on `source`; [`Error::batch_failure`] gives both.
//! - [`Error::Unavailable`] and [`Error::Backend`] are returned as they are (not wrapped):
//!   they concern the whole call.
//!
//! In every error case nothing was written. When several writes would fail, [`validate`]'s
//! refusals come first (the first in slice order); among the rest the error names one of the
//! failing writes — on memory and SQLite, which apply the writes in order, the first.
//!
//! ## Limits, and why they are what they are
//!
//! Every backend enforces the same limits, so that an app that works on SQLite works on
//! DynamoDB, where a batch is one `TransactWriteItems` call: at most 100 actions and 4 MB of
//! items in total.
//!
//! - [`MAX_BATCH_WRITES`] = 50: each write is one action, and each write that may create or
//!   delete a document also moves its collection's counter (one `ADD` action on
//!   `<site>#__collections` per distinct collection). 50 writes in 50 collections are at most
//!   100 actions.
//! - [`MAX_BATCH_BYTES`] = 3 000 000: the bytes the batch writes, counted as the key names
//!   (site, collection and id) of every write plus the serialized data every write stores —
//!   the data of `Create`, `Put` and `Restore`, and the merged data of `Update` and `UpdateIf`
//!   (known only after the merge; backends add it with [`BatchBytes::add`]). The remaining
//!   1 MB of DynamoDB's 4 MB covers what an item holds beside its data (timestamps, version,
//!   actors of at most 256 bytes each, the write history's identities, index key attributes
//!   of at most 1 KB each, attribute names): up to 20 KB per write, far more than they take,
//!   and the counter items (under 200 bytes each).
//!
//! Each write's data is also held to the store's `max_doc_bytes` like a single write
//! ([`Error::TooLarge`] inside [`Error::Batch`]).
//!
//! An empty batch is accepted and does nothing (it returns no outcomes).

use crate::Data;
use crate::document::{Document, check_restorable_metadata, check_size, data_size};
use crate::key::Key;
use crate::{Error, Result};
use std::collections::HashMap;

/// The most writes one [`Store::write_all`](crate::Store::write_all) call takes, on every
/// backend (see the [module docs](self) for why).
pub const MAX_BATCH_WRITES: usize = 50;

/// The most bytes one batch writes — key names plus stored data — on every backend (see the
/// [module docs](self) for what is counted and why).
pub const MAX_BATCH_BYTES: usize = 3_000_000;

/// One write of an atomic batch.
///
/// Each variant does what the single call of the same name does, with the same errors (see
/// [`Store`](crate::Store)); the batch applies all of them or none.
///
/// ```
/// use docstore::batch::Write;
/// use docstore::Key;
///
/// let order = Key::new("shop", "orders", "o-1").unwrap();
/// let line = Key::new("shop", "lines", "o-1-1").unwrap();
/// let writes = vec![
///     Write::create(order, docstore::object(serde_json::json!({"total": 3})).unwrap()),
///     Write::create(line, docstore::object(serde_json::json!({"sku": "A", "qty": 3})).unwrap()),
/// ];
/// assert_eq!(writes[1].key().collection(), "lines");
/// ```
///
/// Not `#[non_exhaustive]`: every backend must handle every variant, so a new one is a
/// breaking change that the compiler points out in each backend.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// Creates the document at version 1 ([`Error::AlreadyExists`] if the id is taken).
    Create {
        /// Where.
        key: Key,
        /// The data.
        data: Data,
    },
    /// Creates or replaces the document (an upsert, as [`Store::put`](crate::Store::put)).
    Put {
        /// Where.
        key: Key,
        /// The data.
        data: Data,
    },
    /// Merges an RFC 7386 patch into the document, whatever its version
    /// ([`Error::NotFound`] if it does not exist). A backend that checks versions
    /// optimistically re-reads and retries the whole batch when this document changed under
    /// it, as [`Store::update`](crate::Store::update) does.
    Update {
        /// Where.
        key: Key,
        /// The merge patch.
        patch: Data,
    },
    /// Merges a patch if the document is at `expected_version` ([`Error::NotFound`],
    /// [`Error::Conflict`] otherwise).
    UpdateIf {
        /// Where.
        key: Key,
        /// The merge patch.
        patch: Data,
        /// The version the document must have.
        expected_version: u64,
    },
    /// Deletes the document if it is at `expected_version` ([`Error::NotFound`],
    /// [`Error::Conflict`] otherwise).
    DeleteIf {
        /// Where.
        key: Key,
        /// The version the document must have.
        expected_version: u64,
    },
    /// Writes nothing, but the batch applies only if the document is at `version`
    /// (`Some(v)`: [`Error::NotFound`] when missing, [`Error::Conflict`] when at another
    /// version) or does not exist (`None`: [`Error::AlreadyExists`] when it does).
    Check {
        /// Where.
        key: Key,
        /// The version the document must have; `None`: it must not exist.
        version: Option<u64>,
    },
    /// Writes `document` exactly as given — data, timestamps, actors and version — when the
    /// id is free, as [`Store::restore`](crate::Store::restore) does; the write behind the
    /// bulk tools (import, copy). The batch's `actor` is not used. Beyond the six writes of
    /// the original design, because bulk tools must keep metadata that `Create` would reset.
    Restore {
        /// Where.
        key: Key,
        /// The document to store (its `id` must be the key's).
        document: Document,
    },
}

impl Write {
    /// A [`Write::Create`].
    pub fn create(key: Key, data: Data) -> Self {
        Write::Create { key, data }
    }

    /// A [`Write::Put`].
    pub fn put(key: Key, data: Data) -> Self {
        Write::Put { key, data }
    }

    /// A [`Write::Update`].
    pub fn update(key: Key, patch: Data) -> Self {
        Write::Update { key, patch }
    }

    /// A [`Write::UpdateIf`].
    pub fn update_if(key: Key, patch: Data, expected_version: u64) -> Self {
        Write::UpdateIf {
            key,
            patch,
            expected_version,
        }
    }

    /// A [`Write::DeleteIf`].
    pub fn delete_if(key: Key, expected_version: u64) -> Self {
        Write::DeleteIf {
            key,
            expected_version,
        }
    }

    /// A [`Write::Check`]: `Some(v)` requires version `v`, `None` requires absence.
    pub fn check(key: Key, version: Option<u64>) -> Self {
        Write::Check { key, version }
    }

    /// A [`Write::Restore`].
    pub fn restore(key: Key, document: Document) -> Self {
        Write::Restore { key, document }
    }

    /// The key the write is about.
    pub fn key(&self) -> &Key {
        match self {
            Write::Create { key, .. }
            | Write::Put { key, .. }
            | Write::Update { key, .. }
            | Write::UpdateIf { key, .. }
            | Write::DeleteIf { key, .. }
            | Write::Check { key, .. }
            | Write::Restore { key, .. } => key,
        }
    }

    /// Whether the write may create or delete a document, and so move its collection's
    /// counter (`Create`, `Put`, `DeleteIf`, `Restore`).
    pub fn moves_counter(&self) -> bool {
        matches!(
            self,
            Write::Create { .. }
                | Write::Put { .. }
                | Write::DeleteIf { .. }
                | Write::Restore { .. }
        )
    }

    /// The name of the variant, for messages (`"create"`, `"update_if"`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Write::Create { .. } => "create",
            Write::Put { .. } => "put",
            Write::Update { .. } => "update",
            Write::UpdateIf { .. } => "update_if",
            Write::DeleteIf { .. } => "delete_if",
            Write::Check { .. } => "check",
            Write::Restore { .. } => "restore",
        }
    }
}

/// What one write of a successful batch did, in the order of the writes.
///
/// ```
/// use docstore::batch::WriteOutcome;
///
/// let outcome = WriteOutcome::Deleted;
/// assert!(outcome.document().is_none());
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum WriteOutcome {
    /// `Create`, `Put`, `Update`, `UpdateIf` and `Restore`: the document as stored.
    Written(Document),
    /// `DeleteIf`: the document was deleted.
    Deleted,
    /// `Check`: the condition held.
    Checked,
}

impl WriteOutcome {
    /// The written document, for [`WriteOutcome::Written`].
    pub fn document(&self) -> Option<&Document> {
        match self {
            WriteOutcome::Written(doc) => Some(doc),
            _ => None,
        }
    }

    /// The written document, by value, for [`WriteOutcome::Written`].
    pub fn into_document(self) -> Option<Document> {
        match self {
            WriteOutcome::Written(doc) => Some(doc),
            _ => None,
        }
    }
}

/// Wraps the error of write `index` as [`Error::Batch`].
///
/// ```
/// use docstore::Error;
///
/// let err = docstore::batch::failed(3, Error::AlreadyExists);
/// assert!(matches!(err.batch_failure(), Some((3, Error::AlreadyExists))));
/// ```
pub fn failed(index: usize, source: Error) -> Error {
    Error::Batch {
        index,
        source: Box::new(source),
    }
}

/// The running total of the bytes a batch writes, held to [`MAX_BATCH_BYTES`].
///
/// [`validate`] returns it with every write's key bytes and every known data size counted;
/// a backend adds the merged data of each `Update` and `UpdateIf` when it knows it.
///
/// ```
/// use docstore::batch::{BatchBytes, MAX_BATCH_BYTES};
///
/// let mut bytes = BatchBytes::default();
/// assert!(bytes.add(0, MAX_BATCH_BYTES).is_ok());
/// assert!(bytes.add(1, 1).is_err());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchBytes {
    total: usize,
}

impl BatchBytes {
    /// Adds `bytes` written by write `index`; [`Error::InvalidArgument`] naming the limit
    /// and the write when the total goes over [`MAX_BATCH_BYTES`].
    pub fn add(&mut self, index: usize, bytes: usize) -> Result<()> {
        self.total = self.total.saturating_add(bytes);
        if self.total > MAX_BATCH_BYTES {
            return Err(Error::invalid(format!(
                "the batch writes more than {MAX_BATCH_BYTES} bytes (keys and data; write \
                 {index} brings it to {})",
                self.total
            )));
        }
        Ok(())
    }

    /// The bytes counted so far.
    pub fn total(&self) -> usize {
        self.total
    }
}

/// A batch the front end has checked with [`validate`]: what a driver's
/// [`apply`](crate::driver::Driver::apply) receives in a batch request, so that no driver checks a batch
/// again. Only [`CheckedBatch::check`] builds one (and [`Request::call`](crate::request::Request::call)
/// the batch of a lone `Check`).
///
/// ```
/// use docstore::batch::{CheckedBatch, Write};
/// use docstore::Key;
///
/// let key = Key::new("s", "c", "1").unwrap();
/// let writes = [Write::create(key.clone(), docstore::Data::new())];
/// let batch = CheckedBatch::check(&writes, 1_000).unwrap();
/// assert_eq!(batch.writes().len(), 1);
/// assert_eq!(batch.bytes().total(), "s".len() + "c".len() + "1".len() + 2);
/// let twice = [Write::check(key.clone(), None), Write::check(key, None)];
/// assert!(CheckedBatch::check(&twice, 1_000).is_err());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct CheckedBatch<'a> {
    writes: &'a [Write],
    bytes: BatchBytes,
    expiry: &'a [crate::driver::Expiry],
}

impl<'a> CheckedBatch<'a> {
    /// Checks `writes` as [`validate`] does, for a store with `max_doc_bytes`.
    pub fn check(writes: &'a [Write], max_doc_bytes: usize) -> Result<Self> {
        let bytes = validate(writes, max_doc_bytes)?;
        Ok(CheckedBatch {
            writes,
            bytes,
            expiry: &[],
        })
    }

    /// The batch of one `check` (a lone check: nothing to validate but its key, which the
    /// front end checked).
    pub(crate) fn of_check(check: &'a Write) -> Self {
        let mut bytes = BatchBytes::default();
        // A key's bytes are far below the batch's limit: the sum cannot fail.
        let _ = bytes.add(0, key_bytes(check.key()));
        CheckedBatch {
            writes: std::slice::from_ref(check),
            bytes,
            expiry: &[],
        }
    }

    /// The same batch, each write doing `expiry[i]` to its document's expiry (resolved by
    /// the front end from the call and the collections' defaults).
    pub fn with_expiry(mut self, expiry: &'a [crate::driver::Expiry]) -> Self {
        self.expiry = expiry;
        self
    }

    /// What write `index` does to its document's expiry ([`Expiry::Keep`](crate::driver::Expiry)
    /// unless the front end said otherwise); a driver applies it to the document
    /// [`decide`] stores with [`Decision::expire`].
    pub fn expiry(&self, index: usize) -> crate::driver::Expiry {
        self.expiry.get(index).copied().unwrap_or_default()
    }

    /// The writes, in order.
    pub fn writes(&self) -> &'a [Write] {
        self.writes
    }

    /// The bytes counted by the check: key names and the data of `Create`, `Put` and
    /// `Restore`. A driver adds the merged data of each `Update` and `UpdateIf` when it
    /// knows it ([`BatchBytes::add`]).
    pub fn bytes(&self) -> BatchBytes {
        self.bytes
    }
}

/// What one write of a batch does to its key, decided by [`decide`] on the document stored
/// there: the one decision table every driver applies.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Store this document: a new one (`Create`, `Restore`, a `Put` on an empty key; it
    /// moves the collection's counter by one) or the next version of the stored one.
    Store {
        /// The document as the write leaves it, stamped.
        document: Document,
        /// Whether it is a new document (the counter and the quota count it).
        creates: bool,
    },
    /// Remove the stored document (`DeleteIf`; the counter moves down by one).
    Remove,
    /// Leave the key as it is (`Check`).
    Keep,
}

impl Decision {
    /// The decision with `expiry` applied to the document it stores (a removal or a check
    /// is unchanged).
    pub fn expire(mut self, expiry: crate::driver::Expiry) -> Self {
        if let Decision::Store { document, .. } = &mut self {
            document.expires_at = expiry.apply(document.expires_at, document.updated_at);
        }
        self
    }
}

impl Decision {
    /// The outcome a batch reports for the decision once applied: `Written` with the stored
    /// document, `Deleted` for a removal, `Checked` for a key left as it was.
    pub fn into_outcome(self) -> WriteOutcome {
        match self {
            Decision::Store { document, .. } => WriteOutcome::Written(document),
            Decision::Remove => WriteOutcome::Deleted,
            Decision::Keep => WriteOutcome::Checked,
        }
    }

    /// How the write moves its collection's counter: +1, -1 or 0.
    pub fn counter_delta(&self) -> i64 {
        match self {
            Decision::Store { creates: true, .. } => 1,
            Decision::Remove => -1,
            _ => 0,
        }
    }
}

/// The answer to a batch repeated with the caller identity of one that was applied (see
/// [`Origin`](crate::driver::Origin)): nothing is written again, and each write answers from
/// `current`, the documents at its keys now (in the batch's order) — `Written` with the
/// document as it stands, `Deleted`, `Checked`. A document a `Write` stored that has been
/// deleted since is [`Error::NotFound`] in a failed batch: what it wrote is gone.
pub fn repeated_outcomes(
    writes: &[Write],
    current: Vec<Option<Document>>,
) -> Result<Vec<WriteOutcome>> {
    writes
        .iter()
        .zip(current)
        .enumerate()
        .map(|(index, (write, current))| match (write, current) {
            (Write::DeleteIf { .. }, _) => Ok(WriteOutcome::Deleted),
            (Write::Check { .. }, _) => Ok(WriteOutcome::Checked),
            (_, Some(document)) => Ok(WriteOutcome::Written(document)),
            (_, None) => Err(failed(index, Error::not_found(write.key()))),
        })
        .collect()
}

/// Decides write `index` of a checked batch on `current` (what its key holds now), written by
/// `actor` at `now`: its [`Decision`], or the error the single call would give, as
/// [`Error::Batch`] with `index` (`AlreadyExists`, `NotFound`, `Conflict { current }`, and for
/// a merge `TooLarge` or a depth `InvalidArgument` of the merged result; the first three are
/// [`precondition`]'s, on the stored version). The merged data of `Update` and `UpdateIf` is
/// added to `bytes` (over [`MAX_BATCH_BYTES`]: the plain `InvalidArgument` of the whole
/// batch). The quota is the driver's to count, with [`Decision::counter_delta`].
///
/// ```
/// use docstore::batch::{BatchBytes, Decision, Write, decide};
/// use docstore::{Document, Error, Key};
///
/// let key = Key::new("s", "c", "a").unwrap();
/// let stored = Document::first("a", docstore::Data::new(), "ann", 1);
/// let mut bytes = BatchBytes::default();
/// let create = Write::create(key.clone(), docstore::Data::new());
/// let taken = decide(0, &create, Some(&stored), "bob", 2, 1_000, &mut bytes);
/// assert!(matches!(taken.unwrap_err().batch_failure(), Some((0, Error::AlreadyExists))));
/// let delete = Write::delete_if(key, 1);
/// assert_eq!(decide(1, &delete, Some(&stored), "bob", 2, 1_000, &mut bytes).unwrap(), Decision::Remove);
/// ```
pub fn decide(
    index: usize,
    write: &Write,
    current: Option<&Document>,
    actor: &str,
    now: i64,
    max_doc_bytes: usize,
    bytes: &mut BatchBytes,
) -> Result<Decision> {
    let fail = |err: Error| failed(index, err);
    precondition(write, current.map(|doc| doc.version)).map_err(fail)?;
    let store = |document: Document, creates: bool| Ok(Decision::Store { document, creates });
    match (write, current) {
        (Write::Create { key, data } | Write::Put { key, data }, None) => {
            store(Document::first(key.id(), data.clone(), actor, now), true)
        }
        (Write::Restore { document, .. }, None) => store(document.clone(), true),
        (Write::Put { data, .. }, Some(current)) => {
            store(current.next(data.clone(), actor, now), false)
        }
        (Write::Update { patch, .. } | Write::UpdateIf { patch, .. }, Some(current)) => {
            let mut data = current.data.clone();
            crate::merge_patch(&mut data, patch);
            check_size(&data, max_doc_bytes).map_err(fail)?;
            bytes.add(index, data_size(&data))?;
            store(current.next(data, actor, now), false)
        }
        (Write::DeleteIf { .. }, _) => Ok(Decision::Remove),
        (Write::Check { .. }, _) => Ok(Decision::Keep),
        (Write::Create { .. } | Write::Restore { .. }, Some(_))
        | (Write::Update { .. } | Write::UpdateIf { .. }, None) => {
            unreachable!("refused by precondition")
        }
    }
}

/// Whether `write` may apply to a key whose document is at `current_version` (`None`: no
/// document): the version conditions of the [`decide`] table, for a backend that reads only
/// the version (or merges inside its database) and so cannot hand [`decide`] the document.
/// The error is the one the single call gives, not yet wrapped as [`Error::Batch`] (wrap it
/// with [`failed`]):
///
/// | write | no document | at `current_version` |
/// |---|---|---|
/// | `Create`, `Restore` | applies | [`Error::AlreadyExists`] |
/// | `Put` | applies | applies |
/// | `Update` | [`Error::NotFound`] | applies |
/// | `UpdateIf`, `DeleteIf` | [`Error::NotFound`] | applies at the expected version, else [`Error::Conflict`] with `current_version` |
/// | `Check { version: None }` | applies | [`Error::AlreadyExists`] |
/// | `Check { version: Some(_) }` | [`Error::NotFound`] | applies at that version, else [`Error::Conflict`] |
///
/// ```
/// use docstore::batch::{Write, precondition};
/// use docstore::{Error, Key};
///
/// let key = Key::new("s", "c", "a").unwrap();
/// let delete = Write::delete_if(key.clone(), 2);
/// assert!(precondition(&delete, Some(2)).is_ok());
/// assert!(matches!(precondition(&delete, Some(3)), Err(Error::Conflict { current: 3 })));
/// assert!(matches!(precondition(&delete, None), Err(Error::NotFound { .. })));
///
/// let absent = Write::check(key.clone(), None);
/// assert!(precondition(&absent, None).is_ok());
/// assert!(matches!(precondition(&absent, Some(1)), Err(Error::AlreadyExists)));
///
/// let put = Write::put(key, docstore::Data::new());
/// assert!(precondition(&put, None).is_ok() && precondition(&put, Some(9)).is_ok());
/// ```
pub fn precondition(write: &Write, current_version: Option<u64>) -> Result<()> {
    match (write, current_version) {
        (Write::Create { .. } | Write::Restore { .. }, Some(_))
        | (Write::Check { version: None, .. }, Some(_)) => Err(Error::AlreadyExists),
        (
            Write::Update { .. }
            | Write::UpdateIf { .. }
            | Write::DeleteIf { .. }
            | Write::Check {
                version: Some(_), ..
            },
            None,
        ) => Err(Error::not_found(write.key())),
        (
            Write::UpdateIf {
                expected_version: expected,
                ..
            }
            | Write::DeleteIf {
                expected_version: expected,
                ..
            }
            | Write::Check {
                version: Some(expected),
                ..
            },
            Some(current),
        ) if *expected != current => Err(Error::Conflict { current }),
        (Write::Put { .. }, _)
        | (
            Write::Create { .. } | Write::Restore { .. } | Write::Check { version: None, .. },
            None,
        )
        | (
            Write::Update { .. }
            | Write::UpdateIf { .. }
            | Write::DeleteIf { .. }
            | Write::Check {
                version: Some(_), ..
            },
            Some(_),
        ) => Ok(()),
    }
}

/// The bytes of a key's names, as [`MAX_BATCH_BYTES`] counts them.
pub fn key_bytes(key: &Key) -> usize {
    key.site().len() + key.collection().len() + key.id().len()
}

/// Checks a batch before anything is read or written; the front end calls it (through
/// [`CheckedBatch::check`]) before any driver sees the batch.
///
/// In this order: at most [`MAX_BATCH_WRITES`] writes, each key at most once (both plain
/// [`Error::InvalidArgument`]); then, write by write, its own input as the single call checks
/// it — data of `Create` and `Put` within `max_doc_bytes` and [`MAX_DEPTH`](crate::document::MAX_DEPTH)
/// ([`Error::TooLarge`], [`Error::InvalidArgument`]), patches within the depth limit, a
/// `Restore` document consistent with its key ([`check_restorable`](crate::document::check_restorable)) — wrapped as
/// [`Error::Batch`] with its index; and the running byte total, which it returns for the
/// backend to add merged data to.
///
/// ```
/// use docstore::batch::{MAX_BATCH_WRITES, Write, validate};
/// use docstore::{Error, Key};
///
/// let key = Key::new("s", "c", "1").unwrap();
/// let data = docstore::Data::new();
/// let twice = [Write::create(key.clone(), data.clone()), Write::check(key.clone(), None)];
/// assert!(matches!(validate(&twice, 1000), Err(Error::InvalidArgument(_))));
///
/// let too_many: Vec<_> = (0..=MAX_BATCH_WRITES)
///     .map(|i| Write::create(Key::new("s", "c", i.to_string()).unwrap(), data.clone()))
///     .collect();
/// assert!(matches!(validate(&too_many, 1000), Err(Error::InvalidArgument(_))));
/// assert!(validate(&too_many[1..], 1000).is_ok());
/// ```
pub fn validate(writes: &[Write], max_doc_bytes: usize) -> Result<BatchBytes> {
    validate_with(writes, |_, data| {
        check_size(data, max_doc_bytes)?;
        Ok(data_size(data))
    })
}

/// [`validate`] for a backend that serializes the stored data anyway: `measure(index, data)`
/// is called for the data of every `Create`, `Put` and `Restore`, in order, and must refuse it
/// as [`check_size`] would with the store's `max_doc_bytes` (too deep:
/// [`Error::InvalidArgument`]; too large: [`Error::TooLarge`] with the exact size) or return
/// its exact size ([`data_size`]: the compact serialization's
/// length). The checks, their order and the errors are those of [`validate`]; the data is
/// serialized once instead of measured twice.
///
/// ```
/// use docstore::batch::{Write, validate_with};
/// use docstore::{Error, Key};
///
/// let data = docstore::object(serde_json::json!({"a": 1})).unwrap();
/// let writes = [Write::create(Key::new("s", "c", "x").unwrap(), data)];
/// let mut texts = Vec::new();
/// let bytes = validate_with(&writes, |_, data| {
///     let text = serde_json::to_string(data).unwrap();
///     let size = text.len();
///     texts.push(text);
///     Ok(size)
/// })
/// .unwrap();
/// assert_eq!(texts, [r#"{"a":1}"#]);
/// assert_eq!(bytes.total(), "s".len() + "c".len() + "x".len() + 7);
/// ```
pub fn validate_with(
    writes: &[Write],
    mut measure: impl FnMut(usize, &Data) -> Result<usize>,
) -> Result<BatchBytes> {
    if writes.len() > MAX_BATCH_WRITES {
        return Err(Error::invalid(format!(
            "a batch holds at most {MAX_BATCH_WRITES} writes (this one has {})",
            writes.len()
        )));
    }
    check_distinct(writes.iter().map(Write::key), "write")?;
    let mut bytes = BatchBytes::default();
    for (index, write) in writes.iter().enumerate() {
        let data_bytes = match write {
            Write::Create { data, .. } | Write::Put { data, .. } => {
                measure(index, data).map_err(|err| failed(index, err))?
            }
            Write::Update { patch, .. } | Write::UpdateIf { patch, .. } => {
                crate::document::check_depth(patch).map_err(|err| failed(index, err))?;
                0
            }
            Write::Restore { key, document } => {
                check_restorable_metadata(key, document).map_err(|err| failed(index, err))?;
                measure(index, &document.data).map_err(|err| failed(index, err))?
            }
            Write::DeleteIf { .. } | Write::Check { .. } => 0,
        };
        bytes.add(index, key_bytes(write.key()) + data_bytes)?;
    }
    Ok(bytes)
}

/// Refuses a key given twice ([`Error::InvalidArgument`] naming both positions); `what`
/// names the items in the message (`"write"`, `"key"`).
///
/// ```
/// use docstore::Key;
///
/// let a = Key::new("s", "c", "a").unwrap();
/// let b = Key::new("s", "c", "b").unwrap();
/// assert!(docstore::batch::check_distinct([&a, &b], "key").is_ok());
/// assert!(docstore::batch::check_distinct([&a, &b, &a], "key").is_err());
/// ```
pub fn check_distinct<'a>(keys: impl IntoIterator<Item = &'a Key>, what: &str) -> Result<()> {
    let keys = keys.into_iter();
    let mut seen: HashMap<&Key, usize> = HashMap::with_capacity(keys.size_hint().0);
    for (index, key) in keys.enumerate() {
        if let Some(first) = seen.insert(key, index) {
            return Err(Error::invalid(format!(
                "{what} {index} repeats the key {key} of {what} {first}: each key at most once"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(id: &str) -> Key {
        Key::new("s", "c", id).unwrap()
    }

    #[test]
    fn per_write_errors_carry_the_index() {
        let big = crate::object(json!({"a": "x".repeat(100)})).unwrap();
        let writes = [
            Write::check(key("a"), None),
            Write::put(key("b"), big.clone()),
        ];
        let err = validate(&writes, 50).unwrap_err();
        assert!(
            matches!(
                err.batch_failure(),
                Some((1, Error::TooLarge { limit: 50, .. }))
            ),
            "{err:?}"
        );
        assert!(validate(&writes, 1000).is_ok());
    }

    #[test]
    fn restore_is_checked_against_its_key() {
        let doc = Document {
            expires_at: None,
            id: "other".into(),
            data: Data::new(),
            created_at: 1,
            updated_at: 1,
            created_by: String::new(),
            updated_by: String::new(),
            version: 1,
        };
        let err = validate(&[Write::restore(key("a"), doc)], 1000).unwrap_err();
        assert!(matches!(
            err.batch_failure(),
            Some((0, Error::InvalidArgument(_)))
        ));
    }

    #[test]
    fn bytes_count_keys_and_data() {
        let data = crate::object(json!({"a": 1})).unwrap();
        let bytes = validate(&[Write::create(key("id"), data.clone())], 1000).unwrap();
        assert_eq!(
            bytes.total(),
            "s".len() + "c".len() + "id".len() + data_size(&data)
        );
        // Exactly at the limit passes, one byte more does not.
        let mut bytes = BatchBytes::default();
        bytes.add(0, MAX_BATCH_BYTES - 1).unwrap();
        bytes.add(1, 1).unwrap();
        assert!(matches!(bytes.add(2, 1), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn empty_batch_is_valid() {
        assert_eq!(validate(&[], 0).unwrap().total(), 0);
    }
}
