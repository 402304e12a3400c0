//! What the wrapper's tests share: stores on a manual clock, keys, snapshots and a small set
//! of operations that can run on any store.

#![allow(dead_code)] // each test file uses its own part

use docstore::retry::{BackoffConfig, RetryPolicy};
use docstore::{Data, Document, Key, ManualClock, Query, Store, StoreOptions, Write};
use docstore_memory::MemoryStore;
use docstore_testing::Outcome;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// The site every test writes to.
pub const SITE: &str = "acme";

/// A memory store on a clock that stands still, so two stores given the same calls hold
/// equal documents, timestamps included; without retries, so the caller sees every fault
/// the wrapper injects.
pub fn memory() -> Store {
    memory_retrying(RetryPolicy::NONE)
}

/// [`memory`], retrying as `retry` says.
pub fn memory_retrying(retry: RetryPolicy) -> Store {
    let clock = Arc::new(ManualClock::new(1_000));
    Store::new(MemoryStore::with_options(
        StoreOptions::default().with_clock(clock).with_retry(retry),
    ))
}

/// At most `max_retries` retries, without waiting between them (a test's time is not a
/// web request's): a budget measured in tries.
pub fn immediate_retries(max_retries: u32) -> RetryPolicy {
    let no_wait = BackoffConfig::new(Duration::ZERO, Duration::ZERO, 1.0);
    RetryPolicy::default()
        .with_max_retries(max_retries)
        .with_budget(Duration::from_secs(3600))
        .with_backoff(no_wait)
}

/// `acme/<collection>/<id>`.
pub fn key(collection: &str, id: &str) -> Key {
    Key::new(SITE, collection, id).expect("a valid key")
}

/// `{"n": n}`.
pub fn data(n: i64) -> Data {
    docstore::object(json!({ "n": n })).expect("an object")
}

/// Every document of the site, by collection and id.
pub async fn snapshot(store: &Store) -> Vec<(String, Document)> {
    let mut all = Vec::new();
    for (collection, _) in store.collections(SITE).await.expect("collections") {
        let page = store
            .query(SITE, &collection, &Query::new())
            .await
            .expect("query");
        all.extend(
            page.documents
                .into_iter()
                .map(|doc| (collection.clone(), doc)),
        );
    }
    all
}

/// One store call, to run through the wrapper and on a reference store alike.
#[derive(Clone, Debug)]
pub enum Op {
    Create(Key, Data),
    Get(Key),
    Put(Key, Data),
    Update(Key, Data),
    UpdateIf(Key, Data, u64),
    Delete(Key),
    DeleteIf(Key, u64),
    Restore(Key, Document),
    GetMany(Vec<Key>),
    WriteAll(Vec<Write>),
    Query(String, Query),
    Count,
}

impl Op {
    /// Runs the call; a success is `Outcome::Ok("ok")` (see [`ok_or_kind`]).
    pub async fn run(&self, store: &Store) -> Outcome {
        match self {
            Op::Create(key, data) => kind(store.create(key, data.clone(), "app").await),
            Op::Get(key) => kind(store.get(key).await),
            Op::Put(key, data) => kind(store.put(key, data.clone(), "app").await),
            Op::Update(key, patch) => kind(store.update(key, patch, "app").await),
            Op::UpdateIf(key, patch, version) => {
                kind(store.update_if(key, patch, *version, "app").await)
            }
            Op::Delete(key) => kind(store.delete(key).await),
            Op::DeleteIf(key, version) => kind(store.delete_if(key, *version).await),
            Op::Restore(key, doc) => kind(store.restore(key, doc).await),
            Op::GetMany(keys) => kind(store.get_many(keys).await),
            Op::WriteAll(writes) => kind(store.write_all(writes, "app").await),
            Op::Query(collection, query) => kind(store.query(SITE, collection, query).await),
            Op::Count => kind(store.count(SITE).await),
        }
    }

    /// Whether the call writes.
    pub fn writes(&self) -> bool {
        !matches!(
            self,
            Op::Get(_) | Op::GetMany(_) | Op::Query(..) | Op::Count
        )
    }
}

fn kind<T>(answer: docstore::Result<T>) -> Outcome {
    Outcome::of(&answer, |_| "ok".to_owned())
}

/// `outcome` with any success's summary replaced by "ok", to compare with [`Op::run`].
pub fn ok_or_kind(outcome: &Outcome) -> Outcome {
    match outcome {
        Outcome::Ok(_) => Outcome::Ok("ok".to_owned()),
        err => err.clone(),
    }
}

/// A document as `restore` takes it: version 3, written by "old" long ago.
pub fn restorable(id: &str, n: i64) -> Document {
    Document {
        expires_at: None,
        id: id.to_owned(),
        data: data(n),
        created_at: 10,
        updated_at: 20,
        created_by: "old".into(),
        updated_by: "old".into(),
        version: 3,
    }
}

/// A single-threaded runtime on tokio's paused clock: latency takes no real time.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime")
}

/// The number of cases a property runs: `PROPTEST_CASES` when set, else `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A proptest configuration with `cases` cases that writes no regression files.
pub fn config(cases: u32) -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases,
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}
