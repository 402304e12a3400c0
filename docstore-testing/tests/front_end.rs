//! The front end above injected faults, as it runs above a real backend: `modify` applies a
//! change exactly once per call whatever happens to its writes, and a stream turns a partial
//! page into an error item instead of a silent short walk.

mod support;

use docstore::{Data, Error, Query, Store, WriteId};
use docstore_testing::{CallKind, Fault, FaultyDriver, Plan};
use futures_util::StreamExt;
use serde_json::json;
use std::sync::Arc;
use support::{SITE, data, immediate_retries, key, memory_retrying};

/// How often the stores of these tests retry a call.
const RETRIES: u32 = 3;

/// A store over the wrapper, the wrapper (for its history) and the inner store, holding
/// `acme/c/x` = `{"n": 0}`; calls are retried [`RETRIES`] times.
async fn setup(plan: Plan) -> (Store, Arc<FaultyDriver>, Store) {
    let inner = memory_retrying(immediate_retries(RETRIES));
    inner
        .create(&key("c", "x"), data(0), "setup")
        .await
        .unwrap();
    let faulty = Arc::new(FaultyDriver::new(inner.clone(), plan));
    (Store::from_driver(faulty.clone()), faulty, inner)
}

async fn increment(store: &Store) -> docstore::Result<docstore::Versioned<Data>> {
    increment_with(store, None).await
}

/// Adds one to `acme/c/x`, with the caller's identity when given.
async fn increment_with(
    store: &Store,
    id: Option<WriteId>,
) -> docstore::Result<docstore::Versioned<Data>> {
    let counters = store.site(SITE)?.collection::<Data>("c")?;
    let call = counters.modify("x", |doc| {
        let n = doc["n"].as_i64().unwrap();
        doc.insert("n".into(), (n + 1).into());
    });
    match id {
        Some(id) => call.write_id(id).await,
        None => call.await,
    }
}

fn replaces(faulty: &FaultyDriver) -> usize {
    faulty
        .history()
        .entries()
        .iter()
        .filter(|e| e.kind == CallKind::ReplaceIf && e.applied())
        .count()
}

/// Someone writes between `modify`'s read and its write: it reads again and applies the
/// change once, on top of the other write.
#[tokio::test]
async fn modify_retries_a_conflict_and_applies_once() {
    let plan = Plan::new().on_nth(CallKind::ReplaceIf, 1, Fault::ConcurrentWrite);
    let (store, faulty, inner) = setup(plan).await;
    let done = increment(&store).await.unwrap();
    assert_eq!(done.value["n"], 1, "{}", faulty.history());
    // v1, the concurrent writer's v2, then this call's v3.
    assert_eq!(done.version, 3);
    assert_eq!(replaces(&faulty), 1, "{}", faulty.history());
    assert_eq!(inner.get(&key("c", "x")).await.unwrap().unwrap().version, 3);
}

/// `modify`'s write is applied and its answer lost: the call sends it again with the same
/// write identity, which finds it applied — success, with the change made once.
#[tokio::test]
async fn modify_never_applies_twice_after_a_lost_answer() {
    let plan = Plan::new().on_nth(CallKind::ReplaceIf, 1, Fault::LostAnswer);
    let (store, faulty, inner) = setup(plan).await;
    let done = increment(&store).await.unwrap();
    assert_eq!((done.version, &done.value["n"]), (2, &json!(1)));
    assert_eq!(
        replaces(&faulty),
        2,
        "the write and its resend: {}",
        faulty.history()
    );
    let stored = inner.get(&key("c", "x")).await.unwrap().unwrap();
    assert_eq!((stored.version, &stored.data["n"]), (2, &json!(1)));
}

/// Every answer lost, the retries' too: `modify` gives up with `Unavailable` ("may have been
/// applied") when its retries run out, never writes a second time, and hands on the identity
/// it used: the same `modify` with it, later, finds the change applied and applies nothing.
#[tokio::test]
async fn modify_says_unavailable_with_its_identity_when_every_answer_is_lost() {
    let mut plan = Plan::new();
    for n in 1..=u64::from(RETRIES) + 1 {
        plan = plan.on_nth(CallKind::ReplaceIf, n, Fault::LostAnswer);
    }
    let (store, faulty, inner) = setup(plan).await;
    let answer = increment(&store).await;
    let Err(err @ Error::Unavailable { .. }) = answer else {
        panic!("{answer:?}");
    };
    assert_eq!(replaces(&faulty), 4, "{}", faulty.history());
    let stored = inner.get(&key("c", "x")).await.unwrap().unwrap();
    assert_eq!((stored.version, &stored.data["n"]), (2, &json!(1)));

    let id = err
        .write_id()
        .expect("a write's Unavailable carries its identity");
    let again = increment_with(&store, Some(id.clone())).await.unwrap();
    assert_eq!((again.version, &again.value["n"]), (2, &json!(1)));
    let stored = inner.get(&key("c", "x")).await.unwrap().unwrap();
    assert_eq!(
        (stored.version, &stored.data["n"]),
        (2, &json!(1)),
        "applied once"
    );
}

/// Reads that fail are retried too, within the same call's budget: a `modify` whose every
/// read fails gives up after [`RETRIES`] retries and writes nothing.
#[tokio::test]
async fn modify_retries_its_reads_and_writes_nothing_when_they_all_fail() {
    let plan = Plan::new().on_nth(CallKind::Get, 1, Fault::Unavailable);
    let (store, faulty, inner) = setup(plan).await;
    let done = increment(&store).await.unwrap();
    assert_eq!(done.version, 2, "{}", faulty.history());

    let mut plan = Plan::new();
    for n in 1..=u64::from(RETRIES) + 1 {
        plan = plan.on_nth(CallKind::Get, n, Fault::Unavailable);
    }
    let (store, faulty, inner_too) = setup(plan).await;
    let answer = increment(&store).await;
    assert!(
        matches!(&answer, Err(err @ Error::Unavailable { .. }) if err.write_id().is_some()),
        "{answer:?}"
    );
    assert_eq!(replaces(&faulty), 0);
    assert_eq!(
        inner_too
            .get(&key("c", "x"))
            .await
            .unwrap()
            .unwrap()
            .version,
        1
    );
    drop(inner);
}

/// A page marked partial: the stream yields its documents, then `Error::PartialAnswer`,
/// then ends, where a walk by hand might have stopped short without noticing.
#[tokio::test]
async fn a_partial_page_is_an_error_item_of_the_stream() {
    let plan = Plan::new().on_nth(CallKind::Query, 2, Fault::PartialPage);
    let (store, faulty, _) = setup(plan).await;
    for i in 1..=5 {
        store
            .create(&key("c", &format!("y{i}")), data(i), "t")
            .await
            .unwrap();
    }
    let items: Vec<_> = store
        .stream(SITE, "c", &Query::new().limit(2))
        .collect()
        .await;
    let ids: Vec<String> = items
        .iter()
        .filter_map(|item| item.as_ref().ok().map(|doc| doc.id.clone()))
        .collect();
    // Pages of two: x y1 | y2 y3 (partial), then the error and nothing more.
    assert_eq!(ids, ["x", "y1", "y2", "y3"], "{}", faulty.history());
    assert_eq!(items.len(), 5);
    assert!(
        matches!(items[4], Err(Error::PartialAnswer(_))),
        "{:?}",
        items[4]
    );
}

/// A store that retries nothing still gives a write one identity, sent with it, when its
/// answer may be lost: the `Unavailable` hands it on, and the create repeated with it is
/// recognised as its own instead of answering `AlreadyExists`.
#[tokio::test]
async fn without_retries_a_lost_write_still_carries_the_identity_it_sent() {
    let inner = support::memory();
    let plan = Plan::new().on_nth(CallKind::Create, 1, Fault::LostAnswer);
    let faulty = Arc::new(FaultyDriver::new(inner.clone(), plan));
    let store = Store::from_driver(faulty.clone());
    let lost = store.create(&key("c", "n"), data(1), "app").await;
    let Err(err @ Error::Unavailable { .. }) = lost else {
        panic!("{lost:?}");
    };
    let id = err.write_id().expect("its identity").clone();
    let again = store
        .create(&key("c", "n"), data(1), "app")
        .write_id(id)
        .await;
    assert_eq!(again.unwrap().version, 1, "{}", faulty.history());
}
