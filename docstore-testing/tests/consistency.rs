//! The wrapped store only ever holds what the history says was applied: random calls under
//! random faults, replayed on a second store from the history alone, leave both stores equal
//! after every call, with counters that agree with the documents.

mod support;

use docstore::{Query, RecountMode, Write};
use docstore_testing::{CONCURRENT_ACTOR, FaultyDriver, Injected, Plan, strategy};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use support::{
    Op, SITE, cases, config, data, key, memory, ok_or_kind, restorable, runtime, snapshot,
};

fn a_key() -> impl Strategy<Value = docstore::Key> {
    (
        prop::sample::select(vec!["x", "y"]),
        prop::sample::select(vec!["a", "b", "c"]),
    )
        .prop_map(|(collection, id)| key(collection, id))
}

fn a_write() -> impl Strategy<Value = Write> {
    prop_oneof![
        (a_key(), 0..5i64).prop_map(|(k, n)| Write::create(k, data(n))),
        (a_key(), 0..5i64).prop_map(|(k, n)| Write::put(k, data(n))),
        (a_key(), 0..5i64, 1..4u64).prop_map(|(k, n, v)| Write::update_if(k, data(n), v)),
        (a_key(), 1..4u64).prop_map(|(k, v)| Write::delete_if(k, v)),
        (a_key(), prop::option::of(1..4u64)).prop_map(|(k, v)| Write::check(k, v)),
    ]
}

fn an_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (a_key(), 0..5i64).prop_map(|(k, n)| Op::Create(k, data(n))),
        a_key().prop_map(Op::Get),
        (a_key(), 0..5i64).prop_map(|(k, n)| Op::Put(k, data(n))),
        (a_key(), 0..5i64).prop_map(|(k, n)| Op::Update(k, data(n))),
        (a_key(), 0..5i64, 1..4u64).prop_map(|(k, n, v)| Op::UpdateIf(k, data(n), v)),
        a_key().prop_map(Op::Delete),
        (a_key(), 1..4u64).prop_map(|(k, v)| Op::DeleteIf(k, v)),
        a_key().prop_map(|k| {
            let doc = restorable(k.id(), 9);
            Op::Restore(k, doc)
        }),
        prop::collection::vec(a_key(), 1..3).prop_map(Op::GetMany),
        prop::collection::vec(a_write(), 1..4).prop_map(Op::WriteAll),
        (1..4usize).prop_map(|limit| Op::Query("x".into(), Query::new().limit(limit))),
        Just(Op::Count),
    ]
}

/// Either a script (shrinks well) or random rules over every fault.
fn a_plan() -> impl Strategy<Value = Plan> {
    prop_oneof![
        strategy::plan(),
        (
            any::<u64>(),
            prop::collection::vec((strategy::fault(), 0.0..0.5f64), 0..4)
        )
            .prop_map(|(seed, rules)| {
                rules
                    .into_iter()
                    .fold(Plan::seeded(seed), |plan, (fault, p)| plan.with(fault, p))
            }),
    ]
}

#[test]
fn the_store_holds_exactly_what_the_history_says() {
    let rt = runtime();
    let mut runner = TestRunner::new(config(cases(256)));
    let strategy = (prop::collection::vec(an_op(), 1..30), a_plan());
    let result = runner.run(&strategy, |(ops, plan)| {
        rt.block_on(async {
            let inner = memory();
            let model = memory();
            let faulty = std::sync::Arc::new(FaultyDriver::new(inner.clone(), plan));
            let wrapped = docstore::Store::from_driver(faulty.clone());
            for op in &ops {
                let before = faulty.history().len();
                let answer = op.run(&wrapped).await;
                let history = faulty.history();
                if history.len() == before {
                    // The front end answered without calling the driver (a refused input,
                    // an empty batch): the model answers the same.
                    prop_assert_eq!(op.run(&model).await, answer, "{:?}", op);
                    continue;
                }
                let entry = &history.entries()[before];
                // Replay on the model what the entry says reached the store.
                if let Some(Injected::ConcurrentWrite { target, .. }) = &entry.injected {
                    let mut parts = target.splitn(3, '/');
                    let (_, collection, id) =
                        (parts.next(), parts.next().unwrap(), parts.next().unwrap());
                    let _ = model
                        .update(
                            &key(collection, id),
                            &docstore::Data::new(),
                            CONCURRENT_ACTOR,
                        )
                        .await;
                }
                if let Some(inner_outcome) = &entry.inner {
                    prop_assert_eq!(
                        op.run(&model).await,
                        ok_or_kind(inner_outcome),
                        "{}",
                        history
                    );
                }
                prop_assert_eq!(
                    snapshot(&inner).await,
                    snapshot(&model).await,
                    "{}",
                    history
                );
            }
            let recount = inner.recount(SITE, RecountMode::Report).await.unwrap();
            prop_assert!(recount.changes.is_empty(), "{:?}", recount);
            let total: u64 = inner
                .collections(SITE)
                .await
                .unwrap()
                .iter()
                .map(|c| c.1)
                .sum();
            prop_assert_eq!(inner.count(SITE).await.unwrap(), total);
            Ok(())
        })
    });
    if let Err(err) = result {
        panic!("{err}");
    }
}
