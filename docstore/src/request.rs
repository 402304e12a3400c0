//! Write requests: what [`Driver::apply`](crate::driver::Driver::apply), a driver's one
//! write entry point, receives — one single call or a checked batch, applied atomically by
//! one actor with the caller's identity if any — and what it answers ([`Answer`]).
//!
//! The front end builds every request; a driver takes it one of two ways:
//! - by the call it came from ([`Request::call`], a [`Call`]): a driver with its own code
//!   per call (DynamoDB's conditional writes);
//! - by deciding it in Rust: a driver that reads the documents at the request's keys,
//!   decides every write and writes the result back in one atomic unit (PostgreSQL's
//!   transaction): the writes as decisions ([`Op`], [`Request::decide`]), a caller identity
//!   recognised as a repeat ([`Request::is_repeat`]), the per-site quota counted write by
//!   write ([`QuotaCount`]) and what each key keeps of the identities
//!   ([`Request::kept_after`]), and everything the decisions write as a [`Plan`] of
//!   [`Effect`]s in the order a transaction applies them (documents, identities, unique
//!   claims, counters, changes). None of it touches storage: the driver reads, hands what
//!   it read here, and maps each effect to its own statement.
//!
//! By its call:
//!
//! ```
//! use docstore::batch::Write;
//! use docstore::driver::Origin;
//! use docstore::request::{Answer, Call, Op, Request};
//! use docstore::{Data, Document, Key};
//!
//! let key = Key::new("acme", "notes", "n1")?;
//! let write = Write::update_if(key.clone(), Data::new(), 3);
//! let request = Request::single(Op::Write(&write), Origin::actor("ann"));
//! let Call::Update { expected, .. } = request.call() else { panic!("an update") };
//! assert_eq!(expected, Some(3));
//! // The driver merged the patch into version 3; the front end reads its document back.
//! let merged = Document::first("n1", Data::new(), "ann", 1);
//! assert_eq!(Answer::written(merged.clone()).into_document()?, merged);
//! # Ok::<(), docstore::Error>(())
//! ```
//!
//! By deciding it:
//!
//! ```
//! use docstore::batch::{Decision, Write};
//! use docstore::driver::{Expiry, Origin};
//! use docstore::request::{Answer, Op, QuotaCount, Request};
//! use docstore::{Data, Document, Key};
//!
//! let key = Key::new("acme", "notes", "n1")?;
//! let origin = Origin { actor: "ann", write_id: None, expiry: Expiry::Keep };
//! let write = Write::create(key.clone(), Data::new());
//! let request = Request::single(Op::Write(&write), origin);
//! // The driver read the key: nothing there. The quota allows one document in the site.
//! let current: [Option<Document>; 1] = [None];
//! let mut quota = QuotaCount::new(Some(1), |_site: &str| 0);
//! let decisions = request.decide(&current, 7, 1_000, &mut quota)?;
//! assert!(matches!(decisions[0], Decision::Store { creates: true, .. }));
//! let answer = Answer::applied(decisions);
//! assert_eq!(answer.into_document()?.version, 1);
//! # Ok::<(), docstore::Error>(())
//! ```

use crate::batch::{self, BatchBytes, CheckedBatch, Decision, Write, WriteOutcome};
use crate::driver::{Expiry, Origin};
use crate::identity::KeptIds;
use crate::index::IndexSet;
use crate::index::unique::{self, Claim};
use crate::{ChangeKind, Data, Document, Error, Key, Result, WriteId};
use std::borrow::Borrow;
use std::collections::HashMap;

mod plan;

pub use plan::{Effect, Plan};

/// One write of a request: a batch write or one of the single calls that are not one.
#[derive(Clone, Copy, Debug)]
pub enum Op<'a> {
    /// A batch write, or a single call that is one (`create`, `put`, `update`, `update_if`,
    /// `restore`).
    Write(&'a Write),
    /// `replace_if`: the data replaces the document at `expected` ([`Error::NotFound`],
    /// [`Error::Conflict`] otherwise).
    ReplaceIf {
        /// Where.
        key: &'a Key,
        /// The new data.
        data: &'a Data,
        /// The version the document must have.
        expected: u64,
    },
    /// `delete` (`expected: None`: a missing document is no error) and `delete_if`.
    Delete {
        /// Where.
        key: &'a Key,
        /// The version the document must have, for `delete_if`.
        expected: Option<u64>,
    },
}

impl Op<'_> {
    /// The key the write is about.
    pub fn key(&self) -> &Key {
        match self {
            Op::Write(write) => write.key(),
            Op::ReplaceIf { key, .. } | Op::Delete { key, .. } => key,
        }
    }

    /// The decision of write `index` on `current` (what its key holds), as
    /// [`batch::decide`] makes it for batch writes; `replace_if` and `delete` follow their
    /// single calls (`NotFound`, `Conflict { current }`; a `delete` of nothing keeps the key).
    /// Errors are [`Error::Batch`] with `index`.
    pub fn decide(
        &self,
        index: usize,
        current: Option<&Document>,
        (actor, now): (&str, i64),
        max_doc_bytes: usize,
        bytes: &mut BatchBytes,
    ) -> Result<Decision> {
        let conflict = |doc: &Document| Error::Conflict {
            current: doc.version,
        };
        match (self, current) {
            (Op::Write(write), _) => {
                batch::decide(index, write, current, actor, now, max_doc_bytes, bytes)
            }
            (Op::ReplaceIf { key, .. }, None) => Err(batch::failed(index, Error::not_found(key))),
            (Op::ReplaceIf { expected, .. }, Some(doc)) if doc.version != *expected => {
                Err(batch::failed(index, conflict(doc)))
            }
            (Op::ReplaceIf { data, .. }, Some(doc)) => Ok(Decision::Store {
                document: doc.next((*data).clone(), actor, now),
                creates: false,
            }),
            (Op::Delete { expected: None, .. }, None) => Ok(Decision::Keep),
            (Op::Delete { key, .. }, None) => Err(batch::failed(index, Error::not_found(key))),
            (
                Op::Delete {
                    expected: Some(v), ..
                },
                Some(doc),
            ) if doc.version != *v => Err(batch::failed(index, conflict(doc))),
            (Op::Delete { .. }, Some(_)) => Ok(Decision::Remove),
        }
    }
}

/// Writes applied together in one atomic unit by one actor, with the caller's identity if
/// any: one single call, or a checked batch.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    ops: Ops<'a>,
    actor: &'a str,
    id: Option<&'a WriteId>,
    expiry: Expiry,
    batch: Option<CheckedBatch<'a>>,
    data_size_bound: Option<usize>,
}

impl<'a> Request<'a> {
    /// A single call by `origin`.
    pub fn single(op: Op<'a>, origin: Origin<'a>) -> Self {
        Request {
            ops: Ops::One([op]),
            actor: origin.actor,
            id: origin.write_id,
            expiry: origin.expiry,
            batch: None,
            data_size_bound: None,
        }
    }

    /// A checked batch by `origin` (each write's expiry is the batch's).
    pub fn batch(batch: &CheckedBatch<'a>, origin: Origin<'a>) -> Self {
        Request {
            ops: Ops::Many(batch.writes().iter().map(Op::Write).collect()),
            actor: origin.actor,
            id: origin.write_id,
            expiry: Expiry::Keep,
            batch: Some(*batch),
            data_size_bound: None,
        }
    }

    /// The same request, noting `bound`: an upper bound of the size of the data a single
    /// call stores whole (`create`, `put`, `replace_if`), which the front end found while
    /// checking it ([`checked_size_bound`](crate::document::checked_size_bound)).
    pub fn with_data_size_bound(mut self, bound: usize) -> Self {
        self.data_size_bound = Some(bound);
        self
    }

    /// An upper bound of the size of the data the single call stores whole, when the
    /// front end measured it ([`with_data_size_bound`](Self::with_data_size_bound)): a
    /// driver may keep it to check later merge patches into that data without walking it
    /// ([`merged_fits`](crate::document::merged_fits)). `None` for other calls and batches.
    pub fn data_size_bound(&self) -> Option<usize> {
        self.data_size_bound
    }

    /// The call the request came from, for a driver with its own code per call: a single
    /// call's inputs, or the checked batch. A lone batch-only write (`DeleteIf`, `Check`)
    /// answers as its batch of one would, except that a `DeleteIf` is `delete_if`.
    pub fn call(&self) -> Call<'a> {
        if let Some(batch) = self.batch {
            return Call::Batch(batch);
        }
        match self.ops[0] {
            Op::Write(write) => Call::of_write(write),
            Op::ReplaceIf {
                key,
                data,
                expected,
            } => Call::ReplaceIf {
                key,
                data,
                expected,
            },
            Op::Delete { key, expected } => Call::Delete { key, expected },
        }
    }

    /// Who makes the request: its actor, the caller's identity and, for a single call, what
    /// it does to the document's expiry (a batch's are per write, [`CheckedBatch::expiry`]).
    pub fn origin(&self) -> Origin<'a> {
        Origin {
            actor: self.actor,
            write_id: self.id,
            expiry: self.expiry,
        }
    }

    /// Whether the request is a batch ([`Request::batch`]), even of one write.
    pub fn is_batch(&self) -> bool {
        self.batch.is_some()
    }

    /// The writes, in order.
    pub fn ops(&self) -> &[Op<'a>] {
        &self.ops
    }

    /// The keys of the writes, in order.
    pub fn keys(&self) -> impl Iterator<Item = &Key> {
        self.ops.iter().map(Op::key)
    }

    /// The actor the writes are stamped with.
    pub fn actor(&self) -> &'a str {
        self.actor
    }

    /// The caller's identity of the request.
    pub fn id(&self) -> Option<&'a WriteId> {
        self.id
    }

    /// Whether the request repeats a call with its identity that was applied (never without
    /// one): a single write whose key's document keeps the identity, or a delete or batch
    /// one of whose keys keeps it ([`KeptIds::repeats_delete`]: a delete record lasts
    /// [`DELETE_IDS_KEPT_FOR`](crate::identity::DELETE_IDS_KEPT_FOR)). `current` holds the
    /// documents at the keys, `kept` what each key keeps (`docs/contract.md`, "Write
    /// identities"). A repeat applies nothing and answers with [`Answer::Repeat`].
    pub fn is_repeat<D: Borrow<Document>>(
        &self,
        current: &[Option<D>],
        kept: impl Fn(&Key) -> Option<&'a KeptIds>,
        now: i64,
    ) -> bool {
        let Some(id) = self.id else {
            return false;
        };
        let deletes = matches!(self.ops.first(), Some(Op::Delete { .. }));
        if self.batch.is_some() || deletes {
            return self
                .keys()
                .any(|key| kept(key).is_some_and(|kept| kept.repeats_delete(id, now)));
        }
        let key = self.ops[0].key();
        current[0].is_some() && kept(key).is_some_and(|kept| kept.repeats_write(id))
    }

    /// Every write's decision on `current` (the documents at the keys, in order), stamped
    /// `now`, with its expiry applied and the per-site quota counted in `quota`; the first
    /// refusal ends the request. A batch's errors name their write ([`Error::Batch`]); a single
    /// call's are its own.
    pub fn decide<D: Borrow<Document>>(
        &self,
        current: &[Option<D>],
        now: i64,
        max_doc_bytes: usize,
        quota: &mut QuotaCount<'_>,
    ) -> Result<Vec<Decision>> {
        let mut bytes = self.batch.map(|b| b.bytes()).unwrap_or_default();
        let decided = self
            .ops
            .iter()
            .zip(current)
            .enumerate()
            .map(|(index, (op, current))| {
                let current = current.as_ref().map(Borrow::borrow);
                let expiry = self.batch.map_or(self.expiry, |b| b.expiry(index));
                let decision = op
                    .decide(index, current, (self.actor, now), max_doc_bytes, &mut bytes)?
                    .expire(expiry);
                quota.count(index, op.key().site(), &decision)?;
                Ok(decision)
            })
            .collect();
        match self.batch {
            Some(_) => decided,
            None => decided.map_err(unwrap_single),
        }
    }

    /// The unique values the documents `decisions` store claim in `indexes`, each with its
    /// write's position: what a driver that learns of a clash only after writing (a deferred
    /// constraint) looks up, to judge the request with [`Request::check_unique`].
    pub fn claims<'i>(
        &self,
        decisions: &[Decision],
        indexes: &'i IndexSet,
    ) -> Vec<(usize, Claim<'i>)> {
        let stored = self.ops.iter().zip(decisions).enumerate();
        stored
            .filter_map(|(i, (op, decision))| match decision {
                Decision::Store { document, .. } => Some((i, op.key(), document)),
                _ => None,
            })
            .flat_map(|(i, key, doc)| {
                let indexes = indexes.for_collection(key.collection());
                unique::claims(indexes, doc)
                    .into_iter()
                    .map(move |claim| (i, claim))
            })
            .collect()
    }

    /// Judges the request's unique claims as its writes leave the documents
    /// (`docs/contract.md`, "Unique indexes"; [`unique::check_batch`]): `holder_of(key,
    /// claim, except)` answers the smallest id other than `except` holding `claim` in `key`'s
    /// site and collection before the request. A single call's refusal is its own
    /// [`Error::UniqueViolation`], a batch's [`Error::Batch`] naming the write.
    pub fn check_unique<F>(
        &self,
        decisions: &[Decision],
        indexes: &IndexSet,
        holder_of: F,
    ) -> Result<()>
    where
        F: FnMut(&Key, &Claim<'_>, &str) -> Result<Option<String>>,
    {
        let writes: Vec<unique::BatchWrite<'_>> = self
            .ops
            .iter()
            .zip(decisions)
            .enumerate()
            .filter_map(|(position, (op, decision))| {
                let stored = match decision {
                    Decision::Store { document, .. } => Some(document),
                    Decision::Remove => None,
                    Decision::Keep => return None,
                };
                let key = op.key();
                Some(unique::BatchWrite {
                    position,
                    key,
                    stored,
                })
            })
            .collect();
        let checked = unique::check_batch(&writes, |c| indexes.for_collection(c), holder_of);
        match self.batch {
            Some(_) => checked,
            None => checked.map_err(unwrap_single),
        }
    }

    /// The changes the request logs once its `decisions`, made on `found` at `now`, are
    /// applied, in its order (`docs/contract.md`, "Change feed"): the removal of an expired
    /// document before the write on its key, then the write's own — none for a check or a
    /// delete that found nothing.
    pub fn changes<'s>(
        &'s self,
        decisions: &'s [Decision],
        found: &'s Found,
        now: i64,
    ) -> Vec<Logged<'s>> {
        let mut logged = Vec::new();
        let at_keys = found.current.iter().zip(&found.expired);
        for (position, (decision, (current, expired))) in decisions.iter().zip(at_keys).enumerate()
        {
            let key = self.ops[position].key();
            if let Some(gone) = expired {
                logged.push(Logged::expired(position, key, gone));
            }
            let change = match (decision, current) {
                (Decision::Store { document, creates }, _) => Logged {
                    kind: match creates {
                        true => ChangeKind::Created,
                        false => ChangeKind::Updated,
                    },
                    version: document.version,
                    document: Some(document),
                    time: document.updated_at,
                    actor: &document.updated_by,
                    previous: current.as_ref().filter(|_| !creates),
                    position,
                    key,
                },
                (Decision::Remove, Some(previous)) => Logged {
                    kind: ChangeKind::Deleted,
                    version: previous.version,
                    document: None,
                    time: now,
                    actor: self.actor,
                    previous: Some(previous),
                    position,
                    key,
                },
                _ => continue,
            };
            logged.push(change);
        }
        logged
    }

    /// What the key of a write keeps of the identities after the write's `decision`, given
    /// `earlier` (what it kept before): nothing changes for a check or a delete of nothing; a
    /// write with an identity keeps it ([`KeptIds::written`], [`KeptIds::deleted`]); a
    /// delete without one forgets the deleted document's.
    pub fn kept_after(
        &self,
        decision: &Decision,
        earlier: Option<&KeptIds>,
        now: i64,
    ) -> KeptChange {
        match (decision, self.id) {
            (Decision::Keep, _) => KeptChange::Unchanged,
            (Decision::Store { .. }, None) => KeptChange::Unchanged,
            (Decision::Remove, None) => KeptChange::Forget,
            (Decision::Store { .. }, Some(id)) => KeptChange::Keep(KeptIds::written(id, earlier)),
            (Decision::Remove, Some(id)) => KeptChange::Keep(KeptIds::deleted(id, earlier, now)),
        }
    }
}

/// What a request finds at its keys at `now` (`docs/contract.md`, "Expiry"): from its expiry
/// instant a document is treated as deleted, so its writes find the key empty, and the
/// driver removes the expired document first, in the request's own atomic unit, with its
/// [`Expired`](crate::ChangeKind::Expired) change.
///
/// ```
/// use docstore::request::Found;
/// use docstore::{Data, Document};
///
/// let mut expiring = Document::first("a", Data::new(), "ann", 1);
/// expiring.expires_at = Some(10);
/// let found = Found::at(vec![Some(expiring.clone()), None], 10);
/// assert_eq!(found.current, [None, None]);
/// assert_eq!(found.expired, [Some(expiring.clone()), None]);
/// assert_eq!(Found::at(vec![Some(expiring.clone())], 9).current, [Some(expiring)]);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Found {
    /// The documents the writes see, in key order of the request: an expired one as `None`.
    /// What [`Request::is_repeat`] and [`Request::decide`] take.
    pub current: Vec<Option<Document>>,
    /// The expired documents at the keys, in the same order: what the driver removes first.
    pub expired: Vec<Option<Document>>,
}

impl Found {
    /// Splits `documents`, read at the request's keys, at `now` (the store clock's instant).
    pub fn at(documents: Vec<Option<Document>>, now: i64) -> Found {
        let mut found = Found::default();
        for document in documents {
            let expired = document.as_ref().is_some_and(|d| d.is_expired(now));
            let (current, gone) = match expired {
                true => (None, document),
                false => (document, None),
            };
            found.current.push(current);
            found.expired.push(gone);
        }
        found
    }
}

/// One change a request logs ([`Request::changes`]): what a driver writing its own feed
/// records, before the feed gives it a position.
#[derive(Clone, Debug, PartialEq)]
pub struct Logged<'a> {
    /// The position of the write it comes from in the request.
    pub position: usize,
    /// The document's key.
    pub key: &'a Key,
    /// What happened: `Created`, `Updated`, `Deleted` or `Expired`.
    pub kind: ChangeKind,
    /// The version written, or removed.
    pub version: u64,
    /// The document as the write left it; `None` for a removal.
    pub document: Option<&'a Document>,
    /// When: the document's `updated_at`, the delete's instant, or the expiry instant.
    pub time: i64,
    /// Who: the document's `updated_by`, the deleting call's actor, or nobody for an expiry.
    pub actor: &'a str,
    /// The document before the write ([`Change::previous`](crate::Change::previous)): the
    /// version an update or put replaced, the document a delete removed; `None` for a create
    /// and an expiry.
    pub previous: Option<&'a Document>,
}

impl<'a> Logged<'a> {
    /// The removal of the expired document `gone` at `key` (`docs/contract.md`, "Expiry"): at
    /// its expiry instant, by nobody.
    pub fn expired(position: usize, key: &'a Key, gone: &Document) -> Self {
        Logged {
            position,
            key,
            kind: ChangeKind::Expired,
            version: gone.version,
            document: None,
            time: gone.expires_at.unwrap_or(gone.updated_at),
            actor: "",
            previous: None,
        }
    }
}

/// A request's writes: a single call's held inline (a request costs no allocation of its
/// own on the path of every single write), a batch's in a vector.
#[derive(Clone, Debug)]
enum Ops<'a> {
    One([Op<'a>; 1]),
    Many(Vec<Op<'a>>),
}

impl<'a> std::ops::Deref for Ops<'a> {
    type Target = [Op<'a>];

    fn deref(&self) -> &[Op<'a>] {
        match self {
            Ops::One(one) => one,
            Ops::Many(many) => many,
        }
    }
}

/// A [`Request`] as the call it came from ([`Request::call`]): what a driver that keeps its
/// own code for each call (DynamoDB's conditional writes, SQLite's statements) dispatches on.
#[derive(Clone, Copy, Debug)]
pub enum Call<'a> {
    /// `create`: a new document at version 1 ([`Error::AlreadyExists`] if the id is taken).
    Create {
        /// Where.
        key: &'a Key,
        /// The data.
        data: &'a Data,
    },
    /// `put`: creates or replaces the document.
    Put {
        /// Where.
        key: &'a Key,
        /// The data.
        data: &'a Data,
    },
    /// `update` (`expected: None`) and `update_if`: merges an RFC 7386 patch.
    Update {
        /// Where.
        key: &'a Key,
        /// The merge patch.
        patch: &'a Data,
        /// The version the document must have, for `update_if`.
        expected: Option<u64>,
    },
    /// `replace_if`: replaces the data of the document at `expected`.
    ReplaceIf {
        /// Where.
        key: &'a Key,
        /// The new data.
        data: &'a Data,
        /// The version the document must have.
        expected: u64,
    },
    /// `delete` (`expected: None`) and `delete_if`.
    Delete {
        /// Where.
        key: &'a Key,
        /// The version the document must have, for `delete_if`.
        expected: Option<u64>,
    },
    /// `restore`: writes `document` exactly as given when the id is free.
    Restore {
        /// Where.
        key: &'a Key,
        /// The document as it is to be stored.
        document: &'a Document,
    },
    /// `write_all`: a checked batch (a lone `Check` is one too).
    Batch(CheckedBatch<'a>),
}

impl<'a> Call<'a> {
    /// The call a single write is.
    fn of_write(write: &'a Write) -> Self {
        match write {
            Write::Create { key, data } => Call::Create { key, data },
            Write::Put { key, data } => Call::Put { key, data },
            Write::Update { key, patch } => Call::Update {
                key,
                patch,
                expected: None,
            },
            Write::UpdateIf {
                key,
                patch,
                expected_version,
            } => Call::Update {
                key,
                patch,
                expected: Some(*expected_version),
            },
            Write::DeleteIf {
                key,
                expected_version,
            } => Call::Delete {
                key,
                expected: Some(*expected_version),
            },
            Write::Restore { key, document } => Call::Restore { key, document },
            Write::Check { .. } => Call::Batch(CheckedBatch::of_check(write)),
        }
    }
}

/// The single call's own error out of the [`Error::Batch`] a decision wraps it in.
fn unwrap_single(err: Error) -> Error {
    match err {
        Error::Batch { source, .. } => *source,
        other => other,
    }
}

/// What a key's kept identities become after a write ([`Request::kept_after`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeptChange {
    /// Leave them as they are.
    Unchanged,
    /// Remove them (the document they belonged to is gone).
    Forget,
    /// Store these.
    Keep(KeptIds),
}

/// The per-site quota (`max_docs_per_site`) counted over a request's writes, one after the
/// other: each site's count starts at what `stored(site)` says the site holds and moves with
/// every create and delete decided (an earlier delete makes room for a later create). Without
/// a quota nothing is counted and `stored` is never called.
///
/// ```
/// use docstore::batch::Decision;
/// use docstore::request::QuotaCount;
/// use docstore::{Document, Error};
///
/// let create = Decision::Store { document: Document::first("a", docstore::Data::new(), "", 1), creates: true };
/// let mut quota = QuotaCount::new(Some(2), |_site: &str| 1);
/// assert!(quota.count(0, "acme", &create).is_ok());
/// let full = quota.count(1, "acme", &create).unwrap_err();
/// assert!(matches!(full.batch_failure(), Some((1, Error::QuotaExceeded { limit: 2 }))));
/// assert!(quota.count(1, "acme", &Decision::Remove).is_ok());
/// assert!(quota.count(2, "acme", &create).is_ok());
/// ```
pub struct QuotaCount<'s> {
    limit: Option<u64>,
    counts: HashMap<String, u64>,
    stored: Box<dyn FnMut(&str) -> u64 + Send + 's>,
}

impl<'s> QuotaCount<'s> {
    /// A count under `limit` (`None`: no quota), starting each site at `stored(site)`.
    pub fn new(limit: Option<u64>, stored: impl FnMut(&str) -> u64 + Send + 's) -> Self {
        QuotaCount {
            limit,
            counts: HashMap::new(),
            stored: Box::new(stored),
        }
    }

    /// No quota: every count passes.
    pub fn unlimited() -> Self {
        QuotaCount::new(None, |_| 0)
    }

    /// Counts write `index` of the request in `site`: [`Error::QuotaExceeded`] (as
    /// [`Error::Batch`] with `index`) when it creates a document in a full site.
    pub fn count(&mut self, index: usize, site: &str, decision: &Decision) -> Result<()> {
        let Some(limit) = self.limit else {
            return Ok(());
        };
        if !self.counts.contains_key(site) {
            let stored = (self.stored)(site);
            self.counts.insert(site.to_owned(), stored);
        }
        let count = self.counts.get_mut(site).expect("just inserted");
        let delta = decision.counter_delta();
        if delta > 0 && *count >= limit {
            return Err(batch::failed(index, Error::QuotaExceeded { limit }));
        }
        *count = count.saturating_add_signed(delta);
        Ok(())
    }
}

/// What a request did: the driver's result, turned into each call's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// Applied now: one outcome per write (`Checked` for a delete that found nothing).
    Applied(Vec<WriteOutcome>),
    /// A repeat of a call already applied: nothing written; the documents at its keys now.
    Repeat(Vec<Option<Document>>),
}

impl Answer {
    /// A single write's answer: the document it stored (or, for a repeat, as it stands).
    pub fn written(document: Document) -> Self {
        Answer::Applied(vec![WriteOutcome::Written(document)])
    }

    /// A delete's answer: whether it removed the document (a repeat did).
    pub fn deleted(deleted: bool) -> Self {
        let outcome = match deleted {
            true => WriteOutcome::Deleted,
            false => WriteOutcome::Checked,
        };
        Answer::Applied(vec![outcome])
    }

    /// The answer of applied `decisions`: `Written` for a stored document, `Deleted` for a
    /// removal, `Checked` for a key left as it was.
    pub fn applied(decisions: Vec<Decision>) -> Self {
        Answer::Applied(decisions.into_iter().map(Decision::into_outcome).collect())
    }

    /// A single write's answer: the document it wrote, or for a repeat the document as it
    /// stands.
    pub fn into_document(self) -> Result<Document> {
        let unexpected = |what: &str| Error::backend(format!("a write answered {what}"), "write");
        match self {
            Answer::Applied(mut outcomes) => match outcomes.pop() {
                Some(WriteOutcome::Written(document)) => Ok(document),
                other => Err(unexpected(&format!("{other:?}"))),
            },
            Answer::Repeat(mut current) => current
                .pop()
                .flatten()
                .ok_or_else(|| unexpected("a repeat without its document")),
        }
    }

    /// A delete's answer ([`delete_answer`](crate::driver::delete_answer)): whether it
    /// removed the document at `key` (a repeat did).
    pub fn into_deleted(self, key: &Key, expected_version: Option<u64>) -> Result<bool> {
        let deleted = match self {
            Answer::Applied(outcomes) => matches!(outcomes[..], [WriteOutcome::Deleted]),
            Answer::Repeat(_) => true,
        };
        crate::driver::delete_answer(key, expected_version, deleted)
    }

    /// A batch's answer: its outcomes, or for a repeat
    /// [`repeated_outcomes`](batch::repeated_outcomes) of `writes`.
    pub fn into_outcomes(self, writes: &[Write]) -> Result<Vec<WriteOutcome>> {
        match self {
            Answer::Applied(outcomes) => Ok(outcomes),
            Answer::Repeat(current) => batch::repeated_outcomes(writes, current),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Expiry;

    fn key(id: &str) -> Key {
        Key::new("s", "c", id).unwrap()
    }

    fn origin(id: Option<&WriteId>) -> Origin<'_> {
        Origin {
            actor: "ann",
            write_id: id,
            expiry: Expiry::Keep,
        }
    }

    #[test]
    fn replace_if_and_delete_decide_as_their_single_calls() {
        let doc = Document::first("a", Data::new(), "x", 1);
        let (k, data, mut bytes) = (key("a"), Data::new(), BatchBytes::default());
        let decide = |op: Op<'_>, current: Option<&Document>, bytes: &mut BatchBytes| {
            op.decide(0, current, ("ann", 5), 100, bytes)
        };
        let replace = |expected| Op::ReplaceIf {
            key: &k,
            data: &data,
            expected,
        };
        let Decision::Store { document, creates } =
            decide(replace(1), Some(&doc), &mut bytes).unwrap()
        else {
            panic!("a replace stores");
        };
        assert!(!creates && document.version == 2 && document.updated_by == "ann");
        let conflict = decide(replace(2), Some(&doc), &mut bytes).unwrap_err();
        assert!(matches!(
            conflict.batch_failure(),
            Some((0, Error::Conflict { current: 1 }))
        ));
        let missing = decide(replace(1), None, &mut bytes).unwrap_err();
        assert!(matches!(
            missing.batch_failure(),
            Some((0, Error::NotFound { .. }))
        ));
        let delete = |expected| Op::Delete { key: &k, expected };
        assert_eq!(
            decide(delete(None), None, &mut bytes).unwrap(),
            Decision::Keep
        );
        assert_eq!(
            decide(delete(Some(1)), Some(&doc), &mut bytes).unwrap(),
            Decision::Remove
        );
        assert!(decide(delete(Some(1)), None, &mut bytes).is_err());
        assert!(decide(delete(Some(3)), Some(&doc), &mut bytes).is_err());
    }

    #[test]
    fn a_single_calls_errors_are_its_own_and_a_batchs_name_the_write() {
        let (a, b) = (key("a"), key("b"));
        let stored = Some(Document::first("a", Data::new(), "x", 1));
        let create = Write::create(a.clone(), Data::new());
        let single = Request::single(Op::Write(&create), origin(None));
        let err = single
            .decide(
                std::slice::from_ref(&stored),
                2,
                100,
                &mut QuotaCount::unlimited(),
            )
            .unwrap_err();
        assert!(matches!(err, Error::AlreadyExists), "{err:?}");
        let writes = [Write::check(b, None), create];
        let checked = CheckedBatch::check(&writes, 100).unwrap();
        let batch = Request::batch(&checked, origin(None));
        let err = batch
            .decide(&[None, stored], 2, 100, &mut QuotaCount::unlimited())
            .unwrap_err();
        assert!(matches!(
            err.batch_failure(),
            Some((1, Error::AlreadyExists))
        ));
    }

    #[test]
    fn the_quota_counts_across_the_request() {
        let writes = [
            Write::create(key("a"), Data::new()),
            Write::create(key("b"), Data::new()),
        ];
        let checked = CheckedBatch::check(&writes, 100).unwrap();
        let request = Request::batch(&checked, origin(None));
        let none: [Option<Document>; 2] = [None, None];
        let mut asked = 0;
        let mut quota = QuotaCount::new(Some(2), |site| {
            asked += 1;
            assert_eq!(site, "s");
            1
        });
        let err = request.decide(&none, 1, 100, &mut quota).unwrap_err();
        assert!(matches!(
            err.batch_failure(),
            Some((1, Error::QuotaExceeded { limit: 2 }))
        ));
        drop(quota);
        assert_eq!(asked, 1, "each site's count is read once");
    }

    #[test]
    fn repeats_are_recognised_by_the_kept_identities() {
        let id = WriteId::random();
        let (a, b) = (key("a"), key("b"));
        let doc = Some(Document::first("a", Data::new(), "x", 1));
        let put = Write::put(a.clone(), Data::new());
        let kept_write = KeptIds {
            ids: KeptIds::written(&id, None).ids,
            deleted_at: None,
        };
        let single = Request::single(Op::Write(&put), origin(Some(&id)));
        assert!(single.is_repeat(std::slice::from_ref(&doc), |_| Some(&kept_write), 1));
        assert!(!single.is_repeat(&[None::<Document>], |_| Some(&kept_write), 1));
        let anonymous = Request::single(Op::Write(&put), origin(None));
        assert!(!anonymous.is_repeat(&[doc], |_| Some(&kept_write), 1));
        let deleted = KeptIds::deleted(&id, None, 10);
        let delete = Request::single(
            Op::Delete {
                key: &b,
                expected: None,
            },
            origin(Some(&id)),
        );
        assert!(delete.is_repeat(&[None::<Document>], |_| Some(&deleted), 11));
        let later = 10 + crate::identity::DELETE_IDS_KEPT_FOR_NANOS;
        assert!(!delete.is_repeat(&[None::<Document>], |_| Some(&deleted), later));
    }

    #[test]
    fn a_lone_write_is_the_call_it_came_from() {
        let k = key("a");
        let call = |write: &Write| match Request::single(Op::Write(write), origin(None)).call() {
            Call::Create { .. } => "create".to_owned(),
            Call::Put { .. } => "put".to_owned(),
            Call::Update { expected, .. } => format!("update {expected:?}"),
            Call::Delete { expected, .. } => format!("delete {expected:?}"),
            Call::Restore { document, .. } => format!("restore v{}", document.version),
            Call::Batch(batch) => format!("batch of {}", batch.writes().len()),
            Call::ReplaceIf { .. } => "replace_if".to_owned(),
        };
        let doc = Document::first("a", Data::new(), "x", 1);
        let calls: Vec<String> = [
            Write::create(k.clone(), Data::new()),
            Write::put(k.clone(), Data::new()),
            Write::update(k.clone(), Data::new()),
            Write::update_if(k.clone(), Data::new(), 2),
            Write::delete_if(k.clone(), 3),
            Write::restore(k.clone(), doc),
            Write::check(k.clone(), Some(4)),
        ]
        .iter()
        .map(call)
        .collect();
        let expected = [
            "create",
            "put",
            "update None",
            "update Some(2)",
            "delete Some(3)",
            "restore v1",
            "batch of 1",
        ];
        assert_eq!(calls, expected);
        let data = Data::new();
        let replace = Op::ReplaceIf {
            key: &k,
            data: &data,
            expected: 5,
        };
        let request = Request::single(replace, origin(None));
        assert!(matches!(
            request.call(),
            Call::ReplaceIf { expected: 5, .. }
        ));
        let writes = [Write::create(k.clone(), Data::new())];
        let checked = CheckedBatch::check(&writes, 100).unwrap();
        let batch = Request::batch(&checked, origin(None));
        assert!(
            batch.is_batch() && matches!(batch.call(), Call::Batch(b) if b.writes().len() == 1)
        );
        assert_eq!(batch.origin().actor, "ann");
    }

    #[test]
    fn an_expired_documents_removal_is_logged_before_the_write_on_its_key() {
        let (a, b) = (key("a"), key("b"));
        let mut gone = Document::first("a", Data::new(), "x", 1);
        gone.expires_at = Some(5);
        let writes = [
            Write::put(a.clone(), Data::new()),
            Write::check(b.clone(), None),
        ];
        let checked = CheckedBatch::check(&writes, 100).unwrap();
        let request = Request::batch(&checked, origin(None));
        let found = Found::at(vec![Some(gone), None], 7);
        let mut quota = QuotaCount::unlimited();
        let decisions = request.decide(&found.current, 7, 100, &mut quota).unwrap();
        let logged: Vec<(&str, ChangeKind, u64, i64, &str)> = request
            .changes(&decisions, &found, 7)
            .iter()
            .map(|c| (c.key.id(), c.kind, c.version, c.time, c.actor))
            .collect();
        let expected = [
            ("a", ChangeKind::Expired, 1, 5, ""),
            ("a", ChangeKind::Created, 1, 7, "ann"),
        ];
        assert_eq!(logged, expected);
    }

    #[test]
    fn unique_refusals_are_a_single_calls_own_and_name_a_batchs_write() {
        let set =
            IndexSet::new([crate::Index::parse("c", "by_e", ["e"]).unwrap().unique()]).unwrap();
        let data = crate::object(serde_json::json!({"e": 1})).unwrap();
        let create = Write::create(key("b"), data.clone());
        let held = |_: &Key, _: &Claim<'_>, except: &str| Ok((except != "a").then(|| "a".into()));
        let single = Request::single(Op::Write(&create), origin(None));
        let decide = |request: &Request<'_>| {
            let none: Vec<Option<Document>> = vec![None; request.ops().len()];
            request
                .decide(&none, 1, 100, &mut QuotaCount::unlimited())
                .unwrap()
        };
        let err = single
            .check_unique(&decide(&single), &set, held)
            .unwrap_err();
        assert!(matches!(err, Error::UniqueViolation { ref holder, .. } if holder == "a"));
        let writes = [Write::create(key("c"), Data::new()), create.clone()];
        let checked = CheckedBatch::check(&writes, 100).unwrap();
        let batch = Request::batch(&checked, origin(None));
        let err = batch.check_unique(&decide(&batch), &set, held).unwrap_err();
        assert!(matches!(
            err.batch_failure(),
            Some((1, Error::UniqueViolation { .. }))
        ));
        assert_eq!(batch.claims(&decide(&batch), &set).len(), 1);
    }

    #[test]
    fn answers_of_each_call() {
        let doc = Document::first("a", Data::new(), "x", 1);
        let written = Answer::applied(vec![Decision::Store {
            document: doc.clone(),
            creates: true,
        }]);
        assert_eq!(written.into_document().unwrap(), doc);
        assert_eq!(
            Answer::Repeat(vec![Some(doc.clone())])
                .into_document()
                .unwrap(),
            doc
        );
        let k = key("a");
        let nothing = Answer::applied(vec![Decision::Keep]);
        assert!(!nothing.clone().into_deleted(&k, None).unwrap());
        assert!(nothing.into_deleted(&k, Some(1)).is_err());
        let removed = Answer::applied(vec![Decision::Remove]);
        assert!(removed.into_deleted(&k, Some(1)).unwrap());
    }
}
