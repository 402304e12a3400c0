//! The same plan and the same calls give the same history.

mod support;

use docstore::{Query, Write};
use docstore_testing::{CallKind, Fault, FaultyDriver, History, Plan, strategy};
use proptest::test_runner::TestRunner;
use std::time::Duration;
use support::{Op, cases, config, data, key, memory, runtime};

/// A fixed workload of every call kind over a few documents.
fn workload() -> Vec<Op> {
    let mut ops = Vec::new();
    for round in 0..6u64 {
        for id in ["a", "b", "c"] {
            let k = key("docs", id);
            let n = i64::try_from(round).unwrap();
            ops.push(Op::Create(k.clone(), data(n)));
            ops.push(Op::Get(k.clone()));
            ops.push(Op::UpdateIf(k.clone(), data(n + 1), round + 1));
            ops.push(Op::Update(k.clone(), data(n + 2)));
            ops.push(Op::Query("docs".into(), Query::new().limit(2)));
            ops.push(Op::DeleteIf(k.clone(), round + 3));
        }
        ops.push(Op::WriteAll(vec![
            Write::put(key("docs", "a"), data(7)),
            Write::update_if(key("docs", "b"), data(8), 3),
        ]));
        ops.push(Op::GetMany(vec![key("docs", "a"), key("docs", "b")]));
        ops.push(Op::Delete(key("docs", "a")));
        ops.push(Op::Count);
    }
    ops
}

/// Runs `ops` through a wrapper with `plan` over a fresh store (tokio's paused clock).
fn run(plan: &Plan, ops: &[Op]) -> History {
    runtime().block_on(async {
        let faulty = std::sync::Arc::new(FaultyDriver::new(memory(), plan.clone()));
        let wrapped = docstore::Store::from_driver(faulty.clone());
        for op in ops {
            op.run(&wrapped).await;
        }
        faulty.history()
    })
}

/// Every fault kind at once, drawn from `seed`.
fn everything(seed: u64) -> Plan {
    Plan::seeded(seed)
        .with(Fault::Unavailable, 0.1)
        .with(Fault::LostAnswer, 0.1)
        .with(Fault::Latency(Duration::from_millis(30)), 0.1)
        .with_on(CallKind::UpdateIf, Fault::ConcurrentWrite, 0.3)
        .with(Fault::ConcurrentWrite, 0.2)
        .with(Fault::ShortPage, 0.5)
}

#[test]
fn the_same_seed_gives_the_same_history() {
    let ops = workload();
    let first = run(&everything(7), &ops);
    let second = run(&everything(7), &ops);
    assert_eq!(first, second);
    assert_eq!(first.to_string(), second.to_string());
    assert_eq!(first.len(), ops.len());

    // The workload met every kind of fault, so the comparison covers them all.
    let kinds: Vec<String> = first
        .faulted()
        .map(|entry| format!("{:?}", entry.injected.as_ref().unwrap().fault()))
        .collect();
    for kind in [
        "Unavailable",
        "LostAnswer",
        "ConcurrentWrite",
        "Latency",
        "ShortPage",
    ] {
        assert!(
            kinds.iter().any(|k| k.starts_with(kind)),
            "no {kind}:\n{first}"
        );
    }
}

#[test]
fn another_seed_gives_another_history() {
    let ops = workload();
    assert_ne!(run(&everything(7), &ops), run(&everything(8), &ops));
}

#[test]
fn scripted_plans_replay_exactly() {
    let ops = workload();
    let mut runner = TestRunner::new(config(cases(64)));
    let result = runner.run(&strategy::plan(), |plan| {
        let first = run(&plan, &ops);
        proptest::prop_assert_eq!(&first, &run(&plan, &ops));
        Ok(())
    });
    if let Err(err) = result {
        panic!("{err}");
    }
}

/// Two tasks racing under latency: on tokio's paused clock the interleaving, too, is fixed
/// by the plan.
#[test]
fn concurrent_calls_replay_exactly() {
    let race = || {
        runtime().block_on(async {
            let plan = Plan::seeded(11).with(Fault::Latency(Duration::from_millis(10)), 0.5);
            let faulty = std::sync::Arc::new(FaultyDriver::new(memory(), plan));
            let wrapped = docstore::Store::from_driver(faulty.clone());
            let tasks: Vec<_> = ["x", "y"]
                .into_iter()
                .map(|id| {
                    let wrapped = wrapped.clone();
                    tokio::spawn(async move {
                        for n in 0..10 {
                            wrapped.put(&key("race", id), data(n), id).await.unwrap();
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
            faulty.history()
        })
    };
    let first = race();
    assert_eq!(first.len(), 20);
    assert!(first.faulted().count() > 0, "{first}");
    assert_eq!(first, race());
}
