//! Property tests: random operation sequences against a pure model, and random documents x
//! random queries against the reference evaluator.

use crate::Harness;
use crate::support::{Ctx, property_cases_on};
use docstore::index::{Index, IndexSet};
use docstore::query::evaluate;
use docstore::{Data, Document, Error, Key, ManualClock, Query, StoreOptions};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use proptest_state_machine::ReferenceStateMachine;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const COLLECTIONS: [&str; 2] = ["a", "b"];
const IDS: [&str; 3] = ["1", "2", "3"];
const ACTORS: [&str; 3] = ["", "ann", "bob"];
/// Small enough that random data sometimes exceeds it.
const MAX_DOC_BYTES: usize = 120;
const QUOTA: u64 = 5;
const START: i64 = 1_700_000_000_000_000_000;

/// One step of a random run.
#[derive(Clone, Debug)]
pub enum Op {
    /// `create`.
    Create(&'static str, &'static str, Data, &'static str),
    /// `put`.
    Put(&'static str, &'static str, Data, &'static str),
    /// `update`.
    Update(&'static str, &'static str, Data, &'static str),
    /// `update_if`.
    UpdateIf(&'static str, &'static str, Data, u64, &'static str),
    /// `delete`.
    Delete(&'static str, &'static str),
    /// `delete_if`.
    DeleteIf(&'static str, &'static str, u64),
    /// `get`.
    Get(&'static str, &'static str),
    /// `restore` of a document with the given metadata.
    Restore(&'static str, Document),
    /// `query` (one page).
    Query(&'static str, Query),
    /// `collections` and `count`.
    Counters,
    /// Move the clock (backwards too).
    Clock(i64),
    /// `write_all` of 1–4 writes (keys may repeat: `InvalidArgument`).
    Batch(Vec<BatchOp>, &'static str),
    /// `put` that makes the document expire this many nanoseconds after the write (a plain
    /// `put` where the backend keeps no expiry).
    PutExpiring(&'static str, &'static str, Data, &'static str, i64),
    /// `update` with an empty patch and `never_expires` (a plain empty `update` where the
    /// backend keeps no expiry).
    Persist(&'static str, &'static str, &'static str),
}

/// One write of an [`Op::Batch`].
#[derive(Clone, Debug)]
pub enum BatchOp {
    /// `Write::Create`.
    Create(&'static str, &'static str, Data),
    /// `Write::Put`.
    Put(&'static str, &'static str, Data),
    /// `Write::Update`.
    Update(&'static str, &'static str, Data),
    /// `Write::UpdateIf`.
    UpdateIf(&'static str, &'static str, Data, u64),
    /// `Write::DeleteIf`.
    DeleteIf(&'static str, &'static str, u64),
    /// `Write::Check`.
    Check(&'static str, &'static str, Option<u64>),
    /// `Write::Restore`.
    Restore(&'static str, Document),
}

impl BatchOp {
    fn key(&self) -> (&'static str, &str) {
        match self {
            BatchOp::Create(c, id, _)
            | BatchOp::Put(c, id, _)
            | BatchOp::Update(c, id, _)
            | BatchOp::UpdateIf(c, id, _, _)
            | BatchOp::DeleteIf(c, id, _)
            | BatchOp::Check(c, id, _) => (c, id),
            BatchOp::Restore(c, doc) => (c, &doc.id),
        }
    }

    /// The data `validate` checks before anything is applied.
    fn given_data(&self) -> Option<&Data> {
        match self {
            BatchOp::Create(_, _, data) | BatchOp::Put(_, _, data) => Some(data),
            BatchOp::Restore(_, doc) => Some(&doc.data),
            _ => None,
        }
    }
}

/// What a step gave, comparable between the model and the store.
#[derive(Debug, PartialEq)]
enum Outcome {
    Doc(Document),
    Maybe(Option<Document>),
    Deleted(bool),
    Done,
    Page(Vec<Document>, bool),
    Counters(Vec<(String, u64)>, u64),
    Batch(Vec<Outcome>),
    Failed(String),
}

/// `NotFound` in the model, which compares the kinds of errors (the key it names is checked
/// by the crud family).
fn not_found() -> Error {
    Error::NotFound { key: String::new() }
}

fn failure(err: Error) -> Outcome {
    match err {
        Error::InvalidArgument(_) => Outcome::Failed("InvalidArgument".into()),
        Error::Batch { index, source } => match failure(*source) {
            Outcome::Failed(kind) => Outcome::Failed(format!("Batch {index} {kind}")),
            other => panic!("not a failure: {other:?}"),
        },
        Error::NotFound { .. } => Outcome::Failed("NotFound".into()),
        Error::AlreadyExists => Outcome::Failed("AlreadyExists".into()),
        Error::Conflict { current } => Outcome::Failed(format!("Conflict {current}")),
        Error::TooLarge { size, limit } => Outcome::Failed(format!("TooLarge {size} {limit}")),
        Error::QuotaExceeded { limit } => Outcome::Failed(format!("QuotaExceeded {limit}")),
        Error::UniqueViolation {
            index,
            value,
            holder,
        } => Outcome::Failed(format!("UniqueViolation {index} {value} {holder}")),
        other => panic!("the store failed: {other}"),
    }
}

/// The unique index the runs declare (when the backend enforces them): field `b` of
/// collection `a`, whose random values often collide.
fn unique_indexes() -> &'static IndexSet {
    static SET: OnceLock<IndexSet> = OnceLock::new();
    SET.get_or_init(|| IndexSet::new([Index::parse("a", "by_b", ["b"]).unwrap().unique()]).unwrap())
}

/// The pure model: documents by (collection, id), the clock, whether the unique index
/// (field `b` of collection `a`) is enforced and whether documents expire.
///
/// An expired document is dropped at the start of the next step: the store only hides it
/// until a write or the sweep removes it, which reads cannot tell apart as long as the
/// clock does not step back over its expiry, so the run sweeps before every clock move.
#[derive(Clone, Debug, Default)]
pub struct Model {
    docs: BTreeMap<(&'static str, &'static str), Document>,
    now: i64,
    unique: bool,
    expiry: bool,
    /// Inside a batch the unique index is judged once every write is applied.
    in_batch: bool,
}

impl Model {
    /// The refusal of storing `doc` in collection `c` when another document holds its
    /// unique value (the smallest such id is named).
    fn refused(&self, c: &str, doc: &Document) -> Option<Outcome> {
        if !self.unique || self.in_batch {
            return None;
        }
        self.holder(c, doc)
    }

    fn holder(&self, c: &str, doc: &Document) -> Option<Outcome> {
        let index = unique_indexes().for_collection(c).first()?;
        let claim = index.claim(doc)?;
        let holder = self
            .docs
            .iter()
            .filter(|((col, id), other)| {
                *col == c && *id != doc.id && index.claim(other).as_ref() == Some(&claim)
            })
            .map(|((_, id), _)| *id)
            .min()?;
        Some(failure(docstore::index::unique::violation(
            index, doc, holder,
        )))
    }

    fn count(&self) -> u64 {
        self.docs.len() as u64
    }

    fn fresh(&self, id: &str, data: Data, actor: &str) -> Document {
        Document {
            expires_at: None,
            id: id.to_owned(),
            data,
            created_at: self.now,
            updated_at: self.now,
            created_by: actor.to_owned(),
            updated_by: actor.to_owned(),
            version: 1,
        }
    }

    /// The present document at `key` rewritten with `data` (not stored yet).
    fn rewritten(&self, key: (&'static str, &'static str), data: Data, actor: &str) -> Document {
        let mut doc = self.docs[&key].clone();
        doc.data = data;
        doc.updated_at = doc.updated_at.max(self.now);
        doc.updated_by = actor.to_owned();
        doc.version += 1;
        doc
    }

    /// Stores `doc` at `key` unless its unique value is held: what the store answers.
    fn store(&mut self, key: (&'static str, &'static str), doc: Document) -> Outcome {
        if let Some(refused) = self.refused(key.0, &doc) {
            return refused;
        }
        self.docs.insert(key, doc.clone());
        Outcome::Doc(doc)
    }

    fn too_large(data: &Data) -> Option<Outcome> {
        docstore::document::check_size(data, MAX_DOC_BYTES)
            .err()
            .map(failure)
    }

    /// Applies `op` and says what the store must answer. Error precedence: size, then
    /// existence/version, then quota.
    fn step(&mut self, op: &Op) -> Outcome {
        let now = self.now;
        self.docs.retain(|_, doc| !doc.is_expired(now));
        match op {
            Op::Create(c, id, data, actor) => {
                if let Some(err) = Self::too_large(data) {
                    return err;
                }
                if self.docs.contains_key(&(*c, *id)) {
                    return failure(Error::AlreadyExists);
                }
                if self.count() >= QUOTA {
                    return failure(Error::QuotaExceeded { limit: QUOTA });
                }
                let doc = self.fresh(id, data.clone(), actor);
                self.store((c, id), doc)
            }
            Op::Put(c, id, data, actor) => {
                if let Some(err) = Self::too_large(data) {
                    return err;
                }
                if self.docs.contains_key(&(*c, *id)) {
                    let doc = self.rewritten((c, id), data.clone(), actor);
                    return self.store((c, id), doc);
                }
                if self.count() >= QUOTA {
                    return failure(Error::QuotaExceeded { limit: QUOTA });
                }
                let doc = self.fresh(id, data.clone(), actor);
                self.store((c, id), doc)
            }
            Op::Update(c, id, patch, actor) => self.patch((c, id), patch, None, actor),
            Op::UpdateIf(c, id, patch, v, actor) => self.patch((c, id), patch, Some(*v), actor),
            Op::Delete(c, id) => Outcome::Deleted(self.docs.remove(&(*c, *id)).is_some()),
            Op::DeleteIf(c, id, expected) => match self.docs.get(&(*c, *id)) {
                None => failure(not_found()),
                Some(doc) if doc.version != *expected => failure(Error::Conflict {
                    current: doc.version,
                }),
                Some(_) => {
                    self.docs.remove(&(*c, *id));
                    Outcome::Done
                }
            },
            Op::Get(c, id) => Outcome::Maybe(self.docs.get(&(*c, *id)).cloned()),
            Op::Restore(c, doc) => {
                let id = IDS.iter().find(|id| **id == doc.id).expect("generated ids");
                if let Some(err) = Self::too_large(&doc.data) {
                    return err;
                }
                if self.docs.contains_key(&(*c, *id)) {
                    return failure(Error::AlreadyExists);
                }
                if self.count() >= QUOTA {
                    return failure(Error::QuotaExceeded { limit: QUOTA });
                }
                match self.store((c, id), doc.clone()) {
                    Outcome::Doc(_) => Outcome::Done,
                    refused => refused,
                }
            }
            Op::Query(c, query) => {
                let docs = self
                    .docs
                    .iter()
                    .filter(|((col, _), _)| col == c)
                    .map(|(_, d)| d);
                let page = evaluate(docs, query).expect("generated queries are valid");
                Outcome::Page(page.documents, page.next.is_some())
            }
            Op::Counters => {
                let mut counts: BTreeMap<String, u64> = BTreeMap::new();
                for (c, _) in self.docs.keys() {
                    *counts.entry(c.to_string()).or_default() += 1;
                }
                Outcome::Counters(counts.into_iter().collect(), self.count())
            }
            Op::Clock(delta) => {
                self.now += delta;
                Outcome::Done
            }
            Op::Batch(writes, actor) => self.batch(writes, actor),
            Op::PutExpiring(c, id, data, actor, after) => {
                let put = self.step(&Op::Put(c, id, data.clone(), actor));
                match put {
                    Outcome::Doc(mut doc) if self.expiry => {
                        doc.expires_at = Some(doc.updated_at + after);
                        self.docs.insert((c, id), doc.clone());
                        Outcome::Doc(doc)
                    }
                    other => other,
                }
            }
            Op::Persist(c, id, actor) => match self.patch((c, id), &Data::new(), None, actor) {
                Outcome::Doc(mut doc) if self.expiry => {
                    doc.expires_at = None;
                    self.docs.insert((c, id), doc.clone());
                    Outcome::Doc(doc)
                }
                other => other,
            },
        }
    }

    /// A batch: each key once, then every write's given data, then the writes in order on
    /// a copy that replaces the model only when every write succeeded.
    fn batch(&mut self, writes: &[BatchOp], actor: &'static str) -> Outcome {
        let mut keys = std::collections::BTreeSet::new();
        if !writes.iter().all(|w| keys.insert(w.key())) {
            return failure(Error::InvalidArgument("repeated key".into()));
        }
        let failed = |index: usize, outcome: Outcome| match outcome {
            Outcome::Failed(kind) => Outcome::Failed(format!("Batch {index} {kind}")),
            other => panic!("not a failure: {other:?}"),
        };
        for (index, write) in writes.iter().enumerate() {
            if let Some(err) = write.given_data().and_then(Self::too_large) {
                return failed(index, err);
            }
        }
        let mut next = self.clone();
        next.in_batch = true;
        let mut outcomes = Vec::new();
        for (index, write) in writes.iter().enumerate() {
            let outcome = match write {
                BatchOp::Create(c, id, data) => next.step(&Op::Create(c, id, data.clone(), actor)),
                BatchOp::Put(c, id, data) => next.step(&Op::Put(c, id, data.clone(), actor)),
                BatchOp::Update(c, id, patch) => next.patch((c, id), patch, None, actor),
                BatchOp::UpdateIf(c, id, patch, v) => next.patch((c, id), patch, Some(*v), actor),
                BatchOp::DeleteIf(c, id, v) => next.step(&Op::DeleteIf(c, id, *v)),
                BatchOp::Check(c, id, version) => match (version, next.docs.get(&(*c, *id))) {
                    (None, Some(_)) => failure(Error::AlreadyExists),
                    (Some(_), None) => failure(not_found()),
                    (Some(v), Some(doc)) if *v != doc.version => failure(Error::Conflict {
                        current: doc.version,
                    }),
                    _ => Outcome::Done,
                },
                BatchOp::Restore(c, doc) => match next.step(&Op::Restore(c, doc.clone())) {
                    Outcome::Done => Outcome::Doc(doc.clone()),
                    other => other,
                },
            };
            if let Outcome::Failed(_) = outcome {
                return failed(index, outcome);
            }
            outcomes.push(outcome);
        }
        next.in_batch = false;
        for (index, (write, outcome)) in writes.iter().zip(&outcomes).enumerate() {
            if let Outcome::Doc(doc) = outcome
                && let Some(refused) = next
                    .unique
                    .then(|| next.holder(write.key().0, doc))
                    .flatten()
            {
                return failed(index, refused);
            }
        }
        *self = next;
        Outcome::Batch(outcomes)
    }

    fn patch(
        &mut self,
        key: (&'static str, &'static str),
        patch: &Data,
        expected: Option<u64>,
        actor: &str,
    ) -> Outcome {
        let Some(doc) = self.docs.get(&key) else {
            return failure(not_found());
        };
        if expected.is_some_and(|v| v != doc.version) {
            return failure(Error::Conflict {
                current: doc.version,
            });
        }
        let mut data = doc.data.clone();
        docstore::merge_patch(&mut data, patch);
        if let Some(err) = Self::too_large(&data) {
            return err;
        }
        let doc = self.rewritten(key, data, actor);
        self.store(key, doc)
    }
}

impl ReferenceStateMachine for Model {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model {
            docs: BTreeMap::new(),
            now: START,
            unique: true,
            expiry: true,
            in_batch: false,
        })
        .boxed()
    }

    fn transitions(state: &Model) -> BoxedStrategy<Op> {
        let c = prop::sample::select(&COLLECTIONS[..]);
        let id = prop::sample::select(&IDS[..]);
        let actor = prop::sample::select(&ACTORS[..]);
        let mut versions: Vec<u64> = state.docs.values().map(|d| d.version).collect();
        versions.extend([0, 1, 2]);
        let version = prop::sample::select(versions);
        let data = docstore::strategies::data;
        let patch = docstore::strategies::patch;
        let batch_op = prop_oneof![
            (c.clone(), id.clone(), data()).prop_map(|(c, i, d)| BatchOp::Create(c, i, d)),
            (c.clone(), id.clone(), data()).prop_map(|(c, i, d)| BatchOp::Put(c, i, d)),
            (c.clone(), id.clone(), patch()).prop_map(|(c, i, p)| BatchOp::Update(c, i, p)),
            (c.clone(), id.clone(), patch(), version.clone())
                .prop_map(|(c, i, p, v)| BatchOp::UpdateIf(c, i, p, v)),
            (c.clone(), id.clone(), version.clone())
                .prop_map(|(c, i, v)| BatchOp::DeleteIf(c, i, v)),
            (c.clone(), id.clone(), prop::option::of(version.clone()))
                .prop_map(|(c, i, v)| BatchOp::Check(c, i, v)),
            (c.clone(), id.clone(), data(), 1u64..6).prop_map(|(c, id, data, version)| {
                BatchOp::Restore(
                    c,
                    Document {
                        expires_at: None,
                        id: id.to_owned(),
                        data,
                        created_at: START - 10,
                        updated_at: START - 5,
                        created_by: "restorer".to_owned(),
                        updated_by: "restorer".to_owned(),
                        version,
                    },
                )
            }),
        ];
        let batch = (prop::collection::vec(batch_op, 1..5), actor.clone())
            .prop_map(|(writes, a)| Op::Batch(writes, a));
        prop_oneof![
            3 => batch,
            3 => (c.clone(), id.clone(), data(), actor.clone()).prop_map(|(c, i, d, a)| Op::Create(c, i, d, a)),
            2 => (c.clone(), id.clone(), data(), actor.clone()).prop_map(|(c, i, d, a)| Op::Put(c, i, d, a)),
            2 => (c.clone(), id.clone(), patch(), actor.clone()).prop_map(|(c, i, p, a)| Op::Update(c, i, p, a)),
            2 => (c.clone(), id.clone(), patch(), version.clone(), actor.clone()).prop_map(|(c, i, p, v, a)| Op::UpdateIf(c, i, p, v, a)),
            1 => (c.clone(), id.clone()).prop_map(|(c, i)| Op::Delete(c, i)),
            1 => (c.clone(), id.clone(), version).prop_map(|(c, i, v)| Op::DeleteIf(c, i, v)),
            1 => (c.clone(), id.clone()).prop_map(|(c, i)| Op::Get(c, i)),
            1 => (c.clone(), id.clone(), data(), actor.clone(), 1u64..6, 0i64..1_000, 0i64..1_000)
                .prop_map(|(c, id, data, actor, version, age, edited)| {
                    let document = Document { expires_at: None,
                        id: id.to_owned(),
                        data,
                        created_at: START - age - edited,
                        updated_at: START - age,
                        created_by: "restorer".to_owned(),
                        updated_by: actor.to_owned(),
                        version,
                    };
                    Op::Restore(c, document)
                }),
            2 => (c.clone(), docstore::strategies::query()).prop_map(|(c, q)| Op::Query(c, q)),
            1 => Just(Op::Counters),
            1 => prop_oneof![Just(0i64), 1i64..1_000, -1_000i64..0].prop_map(Op::Clock),
            2 => (c.clone(), id.clone(), data(), actor.clone(), 1i64..2_000)
                .prop_map(|(c, i, d, a, after)| Op::PutExpiring(c, i, d, a, after)),
            1 => (c, id, actor).prop_map(|(c, i, a)| Op::Persist(c, i, a)),
        ]
        .boxed()
    }

    fn apply(mut state: Model, op: &Op) -> Model {
        state.step(op);
        state
    }
}

fn runner(h: &dyn Harness, default_cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases: property_cases_on(h, default_cases),
        failure_persistence: None,
        ..Config::default()
    })
}

/// Runs `body` for every generated value inside the current (multi-threaded) runtime.
fn run_blocking<S: Strategy>(
    runner: &mut TestRunner,
    strategy: &S,
    body: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let result = tokio::task::block_in_place(|| runner.run(strategy, body));
    if let Err(err) = result {
        panic!("{err}");
    }
}

/// Random sequences of every operation (with a small size limit, a quota, a clock that
/// also steps back, a unique index on a field whose values often collide and documents
/// expiring within the clock's steps) give exactly the answers of a pure model, call by
/// call.
pub async fn random_operations_match_the_model(h: &dyn Harness) {
    let handle = tokio::runtime::Handle::current();
    let knows_last = h.capabilities().knows_last_page;
    let unique = h.capabilities().unique_indexes;
    let expiry = h.capabilities().expiry;
    let mut runner = runner(h, 256);
    let strategy = Model::sequential_strategy(1..40);
    run_blocking(&mut runner, &strategy, |(initial, ops, seen)| {
        handle.block_on(async {
            let clock = Arc::new(ManualClock::new(initial.now));
            // The run sweeps when it means to (before every clock move); a background
            // sweep could not change an answer, but on a backend whose stores share a
            // table (DynamoDB's harness) a store without one gets a table of its own, out
            // of reach of other cases' sweeps on the system clock, to which every document
            // here expired long ago.
            let mut options = StoreOptions::default()
                .with_clock(clock.clone())
                .with_sweep_interval(None)
                .with_max_doc_bytes(MAX_DOC_BYTES)
                .with_max_docs_per_site(Some(QUOTA));
            if unique {
                options = options.with_indexes(unique_indexes().clone());
            }
            let ctx = Ctx::with_options(h, "model", options).await;
            let mut model = initial;
            model.unique = unique;
            model.expiry = expiry;
            for (i, op) in ops.iter().enumerate() {
                if let Some(seen) = &seen {
                    seen.fetch_add(1, Ordering::SeqCst);
                }
                let expected = model.step(op);
                let got = run_on_store(&ctx, &clock, (model.now, expiry), op).await;
                let (got, expected) = match (got, expected) {
                    // Without last-page knowledge only the documents must agree.
                    (Outcome::Page(g, _), Outcome::Page(e, _)) if !knows_last => {
                        (Outcome::Page(g, false), Outcome::Page(e, false))
                    }
                    pair => pair,
                };
                prop_assert_eq!(&got, &expected, "step {} {:?}", i, op);
            }
            Ok(())
        })
    });
}

async fn run_on_store(
    ctx: &Ctx,
    clock: &ManualClock,
    (now, expiry): (i64, bool),
    op: &Op,
) -> Outcome {
    let store = &ctx.store;
    let key = |c: &str, id: &str| Key::new(&ctx.site, c, id).unwrap();
    let doc = |r: docstore::Result<Document>| r.map_or_else(failure, Outcome::Doc);
    match op {
        Op::Create(c, id, data, actor) => doc(store.create(&key(c, id), data.clone(), actor).await),
        Op::Put(c, id, data, actor) => doc(store.put(&key(c, id), data.clone(), actor).await),
        Op::Update(c, id, patch, actor) => doc(store.update(&key(c, id), patch, actor).await),
        Op::UpdateIf(c, id, patch, v, actor) => {
            doc(store.update_if(&key(c, id), patch, *v, actor).await)
        }
        Op::Delete(c, id) => store
            .delete(&key(c, id))
            .await
            .map_or_else(failure, Outcome::Deleted),
        Op::DeleteIf(c, id, v) => store
            .delete_if(&key(c, id), *v)
            .await
            .map_or_else(failure, |()| Outcome::Done),
        Op::Get(c, id) => store
            .get(&key(c, id))
            .await
            .map_or_else(failure, Outcome::Maybe),
        Op::Restore(c, doc) => store
            .restore(&key(c, &doc.id), doc)
            .await
            .map_or_else(failure, |()| Outcome::Done),
        Op::Query(c, query) => {
            let page = store
                .query(&ctx.site, c, query)
                .await
                .map_err(failure)
                .unwrap();
            Outcome::Page(page.documents, page.next.is_some())
        }
        Op::Counters => {
            let collections = store.collections(&ctx.site).await.unwrap();
            Outcome::Counters(collections, store.count(&ctx.site).await.unwrap())
        }
        Op::Clock(_) => {
            // Nothing expired stays behind to reappear when the clock steps back.
            store.sweep_expired().await.unwrap();
            clock.set(now);
            Outcome::Done
        }
        Op::PutExpiring(c, id, data, actor, after) => {
            let key = key(c, id);
            let put = store.put(&key, data.clone(), actor);
            match expiry {
                true => doc(put.expires_after(Duration::from_nanos(*after as u64)).await),
                false => doc(put.await),
            }
        }
        Op::Persist(c, id, actor) => {
            let (key, empty) = (key(c, id), Data::new());
            let update = store.update(&key, &empty, actor);
            match expiry {
                true => doc(update.never_expires().await),
                false => doc(update.await),
            }
        }
        Op::Batch(writes, actor) => {
            use docstore::{Write, WriteOutcome};
            let writes: Vec<Write> = writes
                .iter()
                .map(|w| match w {
                    BatchOp::Create(c, id, data) => Write::create(key(c, id), data.clone()),
                    BatchOp::Put(c, id, data) => Write::put(key(c, id), data.clone()),
                    BatchOp::Update(c, id, patch) => Write::update(key(c, id), patch.clone()),
                    BatchOp::UpdateIf(c, id, patch, v) => {
                        Write::update_if(key(c, id), patch.clone(), *v)
                    }
                    BatchOp::DeleteIf(c, id, v) => Write::delete_if(key(c, id), *v),
                    BatchOp::Check(c, id, v) => Write::check(key(c, id), *v),
                    BatchOp::Restore(c, doc) => Write::restore(key(c, &doc.id), doc.clone()),
                })
                .collect();
            match store.write_all(&writes, actor).await {
                Ok(outcomes) => Outcome::Batch(
                    outcomes
                        .into_iter()
                        .map(|o| match o {
                            WriteOutcome::Written(doc) => Outcome::Doc(doc),
                            _ => Outcome::Done,
                        })
                        .collect(),
                ),
                Err(err) => failure(err),
            }
        }
    }
}

/// Random documents x random queries (every operator, mixed kinds, nested and escaped paths,
/// system fields, several sort keys, page sizes 1–5): every page the store returns equals
/// the reference evaluator's page for the same cursor, and a walk ends.
pub async fn random_queries_match_the_reference_evaluator(h: &dyn Harness) {
    let handle = tokio::runtime::Handle::current();
    let knows_last = h.capabilities().knows_last_page;
    let mut runner = runner(h, 256);
    let docs = prop::collection::vec(
        (
            docstore::strategies::data(),
            prop::sample::select(&ACTORS[..]),
            0i64..3,
            any::<bool>(),
        ),
        0..12,
    );
    let strategy = (
        docs,
        prop::collection::vec(docstore::strategies::query(), 1..4),
    );
    run_blocking(&mut runner, &strategy, |(docs, queries)| {
        handle.block_on(async {
            let clock = Arc::new(ManualClock::new(START));
            let ctx = Ctx::with_options(
                h,
                "query",
                StoreOptions::default().with_clock(clock.clone()),
            )
            .await;
            let mut stored = Vec::new();
            for (i, (data, actor, tick, touch)) in docs.into_iter().enumerate() {
                clock.advance(tick);
                let key = ctx.key("q", &format!("d{}", (i * 7) % 12));
                let mut doc = ctx.store.put(&key, data, actor).await.unwrap();
                if touch {
                    doc = ctx
                        .store
                        .update(&key, &Data::new(), "toucher")
                        .await
                        .unwrap();
                }
                stored.retain(|d: &Document| d.id != doc.id);
                stored.push(doc);
            }
            for query in queries {
                let mut cursor = None;
                let mut walked: Vec<Document> = Vec::new();
                let mut ended = false;
                for _ in 0..=stored.len() + 1 {
                    let paged = query.clone().after(cursor);
                    let expected = paged.compile_for(&ctx.site, "q").unwrap().evaluate(&stored);
                    let got = ctx.store.query(&ctx.site, "q", &paged).await.unwrap();
                    prop_assert_eq!(&got.documents, &expected.documents, "{:?}", paged);
                    if knows_last || expected.next.is_some() {
                        prop_assert_eq!(got.next.is_some(), expected.next.is_some(), "{:?}", paged);
                    }
                    walked.extend(got.documents);
                    match got.next {
                        Some(next) => cursor = Some(next),
                        None => {
                            ended = true;
                            break;
                        }
                    }
                }
                // The walk ends and gives exactly the unpaged answer, once each.
                prop_assert!(ended, "the walk of {:?} did not end", query);
                let unpaged = Query {
                    limit: None,
                    ..query.clone()
                };
                let whole = evaluate(&stored, &unpaged).unwrap().documents;
                prop_assert_eq!(&walked, &whole, "{:?}", query);
            }
            Ok(())
        })
    });
}
