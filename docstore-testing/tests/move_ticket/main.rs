//! An application-level property under faults: moving a ticket between two boards.
//!
//! The naive move survives unavailability, conflicts and latency, but a lost answer makes it
//! append the ticket twice; proptest finds that and shrinks it to the one fault that matters.
//! The idempotent move passes thousands of fault plans.

mod board;
#[path = "../support/mod.rs"]
mod support;

use board::{board_data, move_naive, move_ticket, tickets};
use docstore::Key;
use docstore_testing::{CallKind, Fault, FaultyDriver, History, Injected, Plan, strategy};
use proptest::prelude::*;
use proptest::test_runner::{RngAlgorithm, TestError, TestRng, TestRunner};
use std::time::Duration;
use support::{cases, config, key, memory, runtime};

#[derive(Clone, Copy, Debug)]
enum Mover {
    Naive,
    Correct,
}

fn board_a() -> Key {
    key("boards", "A")
}

fn board_b() -> Key {
    key("boards", "B")
}

/// Moves `T-2` from board A `[T-1, T-2, T-3]` to board B `[T-9]` through a wrapper with
/// `plan`: the history, and whether the boards ended as they must (`A [T-1, T-3]`,
/// `B [T-9, T-2]`).
async fn scenario(mover: Mover, plan: Plan) -> (History, Result<(), String>) {
    let inner = memory();
    let setup = async {
        inner
            .create(&board_a(), board_data(&["T-1", "T-2", "T-3"]), "setup")
            .await?;
        inner
            .create(&board_b(), board_data(&["T-9"]), "setup")
            .await
    };
    setup.await.expect("the boards");
    let faulty = std::sync::Arc::new(FaultyDriver::new(inner.clone(), plan));
    let wrapped = docstore::Store::from_driver(faulty.clone());
    let moved = match mover {
        Mover::Naive => move_naive(&wrapped, &board_a(), &board_b(), "T-2").await,
        Mover::Correct => move_ticket(&wrapped, &board_a(), &board_b(), "T-2").await,
    };
    let history = faulty.history();
    let verdict = match moved {
        Err(err) => Err(format!("the move failed: {err}")),
        Ok(()) => {
            let a = tickets(&inner.get(&board_a()).await.unwrap().unwrap().data);
            let b = tickets(&inner.get(&board_b()).await.unwrap().unwrap().data);
            if a == ["T-1", "T-3"] && b == ["T-9", "T-2"] {
                Ok(())
            } else {
                Err(format!("boards after the move: A {a:?}, B {b:?}"))
            }
        }
    };
    (history, verdict)
}

/// Checks `mover` under `cases` plans from `plans`, with a fixed proptest seed so that the
/// run, its failure and its shrinking are the same every time.
// proptest's own error type, whose size depends on workspace features (serde_json's
// `preserve_order` makes the plan's patch an IndexMap); boxing it would only obscure the test.
#[allow(clippy::result_large_err)]
fn check(
    mover: Mover,
    plans: impl Strategy<Value = Plan>,
    cases: u32,
) -> Result<(), TestError<Plan>> {
    let rt = runtime();
    let rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut runner = TestRunner::new_with_rng(config(cases), rng);
    runner.run(&plans, |plan| {
        let (history, verdict) = rt.block_on(scenario(mover, plan));
        verdict.map_err(|why| TestCaseError::fail(format!("{why}\n{history}")))
    })
}

/// Random rules over every fault, from a random seed.
fn random_plans() -> impl Strategy<Value = Plan> {
    any::<u64>().prop_map(|seed| {
        Plan::seeded(seed)
            .with(Fault::Unavailable, 0.1)
            .with(Fault::LostAnswer, 0.15)
            .with(Fault::Latency(Duration::from_millis(20)), 0.1)
            .with(Fault::ConcurrentWrite, 0.25)
    })
}

#[test]
fn the_naive_move_is_caught_applying_twice() {
    // A fixed budget, whatever PROPTEST_CASES says: the search stops at the first failure.
    let failure = check(Mover::Naive, strategy::plan(), 1_000);
    let Err(TestError::Fail(reason, minimal)) = failure else {
        panic!("the naive move passed every plan: {failure:?}");
    };
    let (history, verdict) = runtime().block_on(scenario(Mover::Naive, minimal.clone()));
    println!("{reason}\nminimal plan: {minimal}\nits history:\n{history}");

    // Shrunk to one fault: the append to B loses its answer, and the retry appends again.
    assert_eq!(
        verdict,
        Err(r#"boards after the move: A ["T-1", "T-3"], B ["T-9", "T-2", "T-2"]"#.into())
    );
    let faulted: Vec<_> = history.faulted().collect();
    assert_eq!(faulted.len(), 1, "{history}");
    assert_eq!(faulted[0].injected, Some(Injected::LostAnswer), "{history}");
    assert_eq!(faulted[0].kind, CallKind::UpdateIf, "{history}");
    assert_eq!(faulted[0].target, "acme/boards/B @v1", "{history}");
    assert_eq!(minimal.scheduled().len(), 1, "{minimal}");
}

#[test]
fn the_naive_move_survives_everything_but_lost_answers() {
    let others = prop_oneof![
        Just(Fault::Unavailable),
        Just(Fault::ConcurrentWrite),
        (1u64..50).prop_map(|ms| Fault::Latency(Duration::from_millis(ms))),
    ];
    let plans = strategy::script(others, strategy::SCRIPT_CALLS, 0.4);
    if let Err(err) = check(Mover::Naive, plans, cases(1_000)) {
        panic!("{err}");
    }
}

#[test]
fn the_correct_move_passes_every_scripted_plan() {
    if let Err(err) = check(Mover::Correct, strategy::plan(), cases(3_000)) {
        panic!("{err}");
    }
}

#[test]
fn the_correct_move_passes_random_faults() {
    if let Err(err) = check(Mover::Correct, random_plans(), cases(3_000)) {
        panic!("{err}");
    }
}

/// The plans above do hit the correct move: it retries through lost answers and conflicts.
#[test]
fn the_correct_move_meets_the_faults() {
    let plan = Plan::new()
        .on_nth(CallKind::UpdateIf, 1, Fault::LostAnswer)
        .on_nth(CallKind::UpdateIf, 2, Fault::ConcurrentWrite);
    let (history, verdict) = runtime().block_on(scenario(Mover::Correct, plan));
    assert_eq!(verdict, Ok(()), "{history}");
    assert_eq!(history.faulted().count(), 2, "{history}");
    println!("{history}");
}
