//! Each fault does exactly what it claims, checked against the wrapped store.

mod support;

use docstore::{Error, Store, Write};
use docstore_testing::{
    CONCURRENT_ACTOR, CallKind, ErrorKind, Fault, FaultyDriver, Injected, Outcome, Plan,
};
use serde_json::json;
use std::time::Duration;
use support::{Op, data, key, memory, restorable, snapshot};

/// A store holding `tickets/T-1 {"n":1}` and `tickets/T-2 {"n":2}`, both at version 1.
async fn seeded() -> Store {
    let store = memory();
    for (id, n) in [("T-1", 1), ("T-2", 2)] {
        store
            .create(&key("tickets", id), data(n), "setup")
            .await
            .unwrap();
    }
    store
}

/// One of each write, every one of them succeeding on [`seeded`].
fn writes() -> Vec<Op> {
    let t1 = key("tickets", "T-1");
    let t2 = key("tickets", "T-2");
    vec![
        Op::Create(key("tickets", "T-3"), data(3)),
        Op::Put(t1.clone(), data(10)),
        Op::Put(key("tickets", "T-9"), data(9)),
        Op::Update(t1.clone(), data(11)),
        Op::UpdateIf(t1.clone(), data(12), 1),
        Op::Delete(t2.clone()),
        Op::DeleteIf(t2.clone(), 1),
        Op::Restore(key("tickets", "T-4"), restorable("T-4", 4)),
        Op::WriteAll(vec![
            Write::create(key("other", "O-1"), data(1)),
            Write::update_if(t1, data(13), 1),
            Write::delete_if(t2, 1),
        ]),
    ]
}

fn unavailable() -> Outcome {
    Outcome::Err(ErrorKind::Unavailable)
}

#[tokio::test]
async fn unavailable_applies_nothing() {
    for op in writes() {
        let store = seeded().await;
        let before = snapshot(&store).await;
        let faulty = std::sync::Arc::new(FaultyDriver::new(
            store.clone(),
            Plan::new().on_call(1, Fault::Unavailable),
        ));
        let wrapped = docstore::Store::from_driver(faulty.clone());

        assert_eq!(op.run(&wrapped).await, unavailable(), "{op:?}");
        assert_eq!(snapshot(&store).await, before, "{op:?} changed the store");
        let history = faulty.history();
        let entry = &history.entries()[0];
        assert_eq!(entry.injected, Some(Injected::Unavailable), "{history}");
        assert_eq!(entry.inner, None, "the store was called: {history}");
        assert!(!entry.applied());
    }
}

#[tokio::test]
async fn a_lost_answer_applies_exactly_once() {
    for op in writes() {
        let reference = seeded().await;
        assert!(op.run(&reference).await.is_ok(), "{op:?} fails by itself");
        let store = seeded().await;
        let faulty = std::sync::Arc::new(FaultyDriver::new(
            store.clone(),
            Plan::new().on_call(1, Fault::LostAnswer),
        ));
        let wrapped = docstore::Store::from_driver(faulty.clone());

        assert_eq!(op.run(&wrapped).await, unavailable(), "{op:?}");
        assert_eq!(
            snapshot(&store).await,
            snapshot(&reference).await,
            "{op:?} was not applied exactly once"
        );
        let history = faulty.history();
        let entry = &history.entries()[0];
        assert_eq!(entry.injected, Some(Injected::LostAnswer), "{history}");
        assert!(entry.applied(), "{history}");
        assert_eq!(entry.outcome, unavailable());
    }
}

#[tokio::test(start_paused = true)]
async fn latency_delays_the_call_and_nothing_else() {
    let delay = Duration::from_millis(250);
    for op in writes() {
        let reference = seeded().await;
        let expected = op.run(&reference).await;
        let store = seeded().await;
        let faulty = std::sync::Arc::new(FaultyDriver::new(
            store.clone(),
            Plan::new().on_call(1, Fault::Latency(delay)),
        ));
        let wrapped = docstore::Store::from_driver(faulty.clone());

        let start = tokio::time::Instant::now();
        assert_eq!(op.run(&wrapped).await, expected, "{op:?}");
        // tokio's paused clock: the wait is exact and takes no real time.
        let waited = start.elapsed();
        assert!(
            waited >= delay && waited < delay + Duration::from_millis(1),
            "{waited:?}"
        );
        assert_eq!(snapshot(&store).await, snapshot(&reference).await, "{op:?}");
        assert_eq!(
            faulty.history().entries()[0].injected,
            Some(Injected::Latency(delay))
        );
    }
}

#[tokio::test]
async fn a_concurrent_writer_makes_update_if_conflict() {
    let store = seeded().await;
    let faulty = std::sync::Arc::new(FaultyDriver::new(
        store.clone(),
        Plan::new().on_call(1, Fault::ConcurrentWrite),
    ));
    let wrapped = docstore::Store::from_driver(faulty.clone());
    let t1 = key("tickets", "T-1");

    let answer = wrapped.update_if(&t1, &data(5), 1, "app").await;
    assert!(
        matches!(answer, Err(Error::Conflict { current: 2 })),
        "{answer:?}"
    );
    // The concurrent writer changed only the version and the writer (default patch `{}`).
    let doc = store.get(&t1).await.unwrap().unwrap();
    assert_eq!(
        (doc.version, &doc.data, doc.updated_by.as_str()),
        (2, &data(1), CONCURRENT_ACTOR)
    );
    let history = faulty.history();
    let entry = &history.entries()[0];
    assert_eq!(
        entry.injected,
        Some(Injected::ConcurrentWrite {
            target: "acme/tickets/T-1".into(),
            outcome: Outcome::Ok(r#"T-1 v2 {"n":1}"#.into()),
        })
    );
    assert_eq!(
        entry.inner,
        Some(Outcome::Err(ErrorKind::Conflict { current: 2 }))
    );
    assert_eq!(
        history.to_string(),
        "#1 update_if acme/tickets/T-1 @v1 [concurrent write to acme/tickets/T-1: T-1 v2 \
         {\"n\":1}] -> Err(Conflict { current: 2 })\n"
    );
}

#[tokio::test]
async fn a_concurrent_writer_makes_delete_if_conflict() {
    let store = seeded().await;
    let faulty = std::sync::Arc::new(FaultyDriver::new(
        store.clone(),
        Plan::new().on_call(1, Fault::ConcurrentWrite),
    ));
    let wrapped = docstore::Store::from_driver(faulty.clone());
    let t2 = key("tickets", "T-2");

    let answer = wrapped.delete_if(&t2, 1).await;
    assert!(
        matches!(answer, Err(Error::Conflict { current: 2 })),
        "{answer:?}"
    );
    assert_eq!(store.get(&t2).await.unwrap().unwrap().version, 2);
}

#[tokio::test]
async fn a_concurrent_writer_fails_a_whole_batch() {
    let store = seeded().await;
    let before_other = store.get(&key("other", "O-1")).await.unwrap();
    let patch = docstore::object(json!({"by": "them"})).unwrap();
    let plan = Plan::new()
        .concurrent_patch(patch)
        .on_call(1, Fault::ConcurrentWrite);
    let faulty = std::sync::Arc::new(FaultyDriver::new(store.clone(), plan));
    let wrapped = docstore::Store::from_driver(faulty.clone());
    let writes = [
        Write::create(key("other", "O-1"), data(1)),
        Write::update_if(key("tickets", "T-1"), data(5), 1),
    ];

    let answer = wrapped.write_all(&writes, "app").await;
    let failure = answer.as_ref().err().and_then(Error::batch_failure);
    assert!(
        matches!(failure, Some((1, Error::Conflict { current: 2 }))),
        "{answer:?}"
    );
    // Nothing of the batch applied; the concurrent writer's patch did.
    assert_eq!(store.get(&key("other", "O-1")).await.unwrap(), before_other);
    let t1 = store.get(&key("tickets", "T-1")).await.unwrap().unwrap();
    assert_eq!(
        t1.data,
        docstore::object(json!({"n": 1, "by": "them"})).unwrap()
    );
}

#[tokio::test]
async fn a_concurrent_writer_finds_nothing_to_change() {
    let store = seeded().await;
    let faulty = std::sync::Arc::new(FaultyDriver::new(
        store.clone(),
        Plan::new().on_call(1, Fault::ConcurrentWrite),
    ));
    let wrapped = docstore::Store::from_driver(faulty.clone());

    let answer = wrapped
        .update_if(&key("tickets", "T-7"), &data(5), 1, "app")
        .await;
    assert!(matches!(answer, Err(Error::NotFound { .. })), "{answer:?}");
    let history = faulty.history();
    assert!(matches!(
        &history.entries()[0].injected,
        Some(Injected::ConcurrentWrite {
            outcome: Outcome::Err(ErrorKind::NotFound),
            ..
        })
    ));
    assert!(store.get(&key("tickets", "T-7")).await.unwrap().is_none());
}

#[tokio::test]
async fn a_fault_that_does_not_apply_is_skipped() {
    let store = seeded().await;
    let plan = Plan::new()
        .on_call(1, Fault::ShortPage)
        .on_call(2, Fault::ConcurrentWrite);
    let faulty = std::sync::Arc::new(FaultyDriver::new(store.clone(), plan));
    let wrapped = docstore::Store::from_driver(faulty.clone());

    assert!(wrapped.get(&key("tickets", "T-1")).await.unwrap().is_some());
    wrapped
        .put(&key("tickets", "T-1"), data(7), "app")
        .await
        .unwrap();
    let history = faulty.history();
    assert_eq!(history.faulted().count(), 0, "{history}");
    assert_eq!(
        store
            .get(&key("tickets", "T-1"))
            .await
            .unwrap()
            .unwrap()
            .version,
        2
    );

    assert!(Fault::ShortPage.applies_to(CallKind::Query));
    assert!(!Fault::ShortPage.applies_to(CallKind::Get));
    assert!(Fault::ConcurrentWrite.applies_to(CallKind::WriteAll));
    assert!(!Fault::ConcurrentWrite.applies_to(CallKind::Put));
    assert!(Fault::LostAnswer.applies_to(CallKind::Recount));
}

#[tokio::test]
async fn rules_hit_only_the_calls_they_target() {
    let store = seeded().await;
    let plan = Plan::seeded(3)
        .with_on(CallKind::Get, Fault::Unavailable, 1.0)
        .with(Fault::LostAnswer, 0.0);
    let faulty = std::sync::Arc::new(FaultyDriver::new(store.clone(), plan));
    let wrapped = docstore::Store::from_driver(faulty.clone());
    let t1 = key("tickets", "T-1");

    for _ in 0..5 {
        assert!(matches!(
            wrapped.get(&t1).await,
            Err(Error::Unavailable { .. })
        ));
        wrapped.update(&t1, &data(1), "app").await.unwrap();
    }
    let history = faulty.history();
    assert_eq!(history.len(), 10);
    for entry in history.entries() {
        let faulted = entry.injected == Some(Injected::Unavailable);
        assert_eq!(faulted, entry.kind == CallKind::Get, "{history}");
    }
}

#[tokio::test]
async fn the_nth_call_of_a_kind() {
    let store = seeded().await;
    let plan = Plan::new().on_nth(CallKind::UpdateIf, 2, Fault::LostAnswer);
    let faulty = std::sync::Arc::new(FaultyDriver::new(store.clone(), plan));
    let wrapped = docstore::Store::from_driver(faulty.clone());
    let t1 = key("tickets", "T-1");

    for version in 1..=3 {
        wrapped.get(&t1).await.unwrap();
        let answer = wrapped.update_if(&t1, &data(0), version, "app").await;
        assert_eq!(answer.is_err(), version == 2, "{answer:?}");
    }
    let history = faulty.history();
    let faulted: Vec<u64> = history.faulted().map(|entry| entry.call).collect();
    assert_eq!(faulted, [4], "{history}");
    assert_eq!(store.get(&t1).await.unwrap().unwrap().version, 4);
}

#[tokio::test]
async fn reads_report_what_they_saw() {
    let store = seeded().await;
    let plan = Plan::new().on_call(2, Fault::LostAnswer);
    let faulty = std::sync::Arc::new(FaultyDriver::new(store.clone(), plan));
    let wrapped = docstore::Store::from_driver(faulty.clone());

    let keys = [key("tickets", "T-1"), key("tickets", "T-5")];
    assert_eq!(wrapped.get_many(&keys).await.unwrap().len(), 2);
    assert!(wrapped.count("acme").await.is_err());
    wrapped.collections("acme").await.unwrap();
    wrapped
        .recount("acme", docstore::RecountMode::Report)
        .await
        .unwrap();
    assert_eq!(
        faulty.history().to_string(),
        "#1 get_many [acme/tickets/T-1, acme/tickets/T-5] -> [T-1 v1 {\"n\":1}, none]\n\
         #2 count acme [lost answer] -> Err(Unavailable) (store answered 2)\n\
         #3 collections acme -> [tickets: 2]\n\
         #4 recount acme (report) -> [tickets: 2] 0 changed\n"
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_given_up_during_latency_is_recorded_as_cancelled() {
    let store = seeded().await;
    let plan = Plan::new().on_call(1, Fault::Latency(Duration::from_secs(5)));
    let faulty = std::sync::Arc::new(FaultyDriver::new(store.clone(), plan));
    let wrapped = docstore::Store::from_driver(faulty.clone());
    let t1 = key("tickets", "T-1");

    // The app's own deadline is shorter than the injected latency.
    let put = wrapped.put(&t1, data(5), "app");
    let answer = tokio::time::timeout(Duration::from_secs(1), put).await;
    assert!(answer.is_err(), "the deadline passed first");
    assert_eq!(store.get(&t1).await.unwrap().unwrap().version, 1);
    assert_eq!(
        faulty.history().to_string(),
        "#1 put acme/tickets/T-1 [latency 5s] -> cancelled\n"
    );
}
