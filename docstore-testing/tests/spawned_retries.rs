//! The documented way to retry a write after the store's own retries ran out — the same call
//! with the identity its `Unavailable` carries — runs in a spawned task: the library's futures
//! are `Send` and the identity is an owned value, so a job queue can keep it and hand it to
//! another task. (A retry helper that held a `&WriteId` across its awaits once failed to
//! compile in `tokio::spawn`: "implementation of `Send` is not general enough".)

mod support;

use docstore::{Collection, Data, Error, Store, WriteCall, WriteId};
use docstore_testing::{CallKind, Fault, FaultyDriver, Plan};
use serde_json::json;
use std::sync::Arc;
use support::{SITE, immediate_retries, memory_retrying};

const RETRIES: u32 = 2;

fn add_one(doc: &mut Data) {
    let n = doc["n"].as_i64().unwrap_or(0);
    doc.insert("n".into(), (n + 1).into());
}

/// The pattern of the docs: the call; when its retries ran out, the same call with the
/// identity the error carries, in a task of its own (a queued job, later).
async fn increment_then_repeat_later(counters: Collection<Data>) -> docstore::Result<u64> {
    match counters.modify("c", add_one).await {
        Err(err @ Error::Unavailable { .. }) => {
            let id: WriteId = err.write_id().cloned().expect("a write's error has it");
            let later = tokio::spawn(async move {
                let done = counters.modify("c", add_one).write_id(id).await?;
                Ok::<_, Error>(done.version)
            });
            later.await.expect("the job ran")
        }
        other => other.map(|done| done.version),
    }
}

/// A helper an app writes around any write: it borrows the identity across its awaits.
async fn with_identity<'a, T: 'a>(
    id: &WriteId,
    mut call: impl FnMut() -> WriteCall<'a, T>,
) -> docstore::Result<T> {
    loop {
        match call().write_id(id.clone()).await {
            Err(Error::Unavailable { .. }) => tokio::task::yield_now().await,
            other => return other,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_retry_runs_in_spawned_tasks_and_applies_once() {
    let inner = memory_retrying(immediate_retries(RETRIES));
    let plain = inner
        .site(SITE)
        .unwrap()
        .collection::<Data>("counters")
        .unwrap();
    plain
        .create("c", &docstore::object(json!({"n": 0})).unwrap())
        .await
        .unwrap();
    // Every try of the first modify loses its answer; the first try was applied.
    let plan = (1..=u64::from(RETRIES) + 1).fold(Plan::new(), |plan, n| {
        plan.on_nth(CallKind::ReplaceIf, n, Fault::LostAnswer)
    });
    let faulty = Arc::new(FaultyDriver::new(inner.clone(), plan));
    let counters = Store::from_driver(faulty.clone())
        .site(SITE)
        .unwrap()
        .collection::<Data>("counters")
        .unwrap();

    let version = tokio::spawn(increment_then_repeat_later(counters.clone()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(version, 2, "{}", faulty.history());
    let stored = plain.get("c").await.unwrap().unwrap();
    assert_eq!(stored.value["n"], 1, "applied once: {}", faulty.history());

    // The helper, spawned: a borrowed identity held across awaits is fine.
    let created = tokio::spawn(async move {
        let id = WriteId::from_key("request-7")?;
        let value = docstore::object(json!({"n": 7}))?;
        with_identity(&id, || counters.create("d", &value)).await
    });
    assert_eq!(created.await.unwrap().unwrap().version, 1);
}
