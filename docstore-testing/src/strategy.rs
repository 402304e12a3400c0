//! Proptest strategies for plans that shrink to the fewest, earliest faults.
//!
//! A generated plan is a script: a list with a fault or nothing for each call, the faults in
//! runs on consecutive calls ([`plan`]). When a property fails, proptest shrinks the list
//! (drops entries, shortens runs, turns faults into nothing), so the plan it reports is the
//! smallest sequence of faults that still breaks the property; run it once more and print
//! [`FaultyDriver::history`](crate::FaultyDriver::history) to see what happened.
//!
//! ```
//! use docstore_testing::strategy;
//! use proptest::strategy::{Strategy, ValueTree};
//! use proptest::test_runner::TestRunner;
//!
//! let mut runner = TestRunner::deterministic();
//! let plan = strategy::plan().new_tree(&mut runner).unwrap().current();
//! assert!(plan.rules().is_empty()); // only scheduled faults: they shrink one by one
//! ```

use crate::plan::{Fault, Plan};
use proptest::prelude::*;
use std::time::Duration;

/// How often a step of a [`plan`] script is a run of faults rather than one call that passes.
pub const FAULT_DENSITY: f64 = 0.25;

/// The number of steps a [`plan`] script has at most: each a call that passes or a run of
/// faulted calls.
pub const SCRIPT_CALLS: usize = 24;

/// The longest run of one fault on consecutive calls in a [`plan`]. Runs are what retry
/// loops get wrong: the store retries a lost answer under one write identity until its
/// retry budget ends, and an app that then retries without that identity applies twice only
/// after more lost answers in a row than the budget holds (a store retrying 3 times: 4 in a
/// row), which single faults at [`FAULT_DENSITY`] would almost never give. Give the store
/// under test a budget of at most `MAX_RUN - 1` retries
/// ([`RetryPolicy::with_max_retries`](docstore::retry::RetryPolicy::with_max_retries)) so
/// that runs can exhaust it.
pub const MAX_RUN: usize = 6;

/// Any fault: unavailable, lost answer, concurrent write, short page, or latency of 1 to 50
/// milliseconds (shrinking towards the first ones).
pub fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        Just(Fault::Unavailable),
        Just(Fault::LostAnswer),
        Just(Fault::ConcurrentWrite),
        Just(Fault::ShortPage),
        (1u64..=50).prop_map(|ms| Fault::Latency(Duration::from_millis(ms))),
    ]
}

/// Scripts of up to `calls` calls, each getting a fault from `fault` with probability
/// `density` (0 to 1), with a random seed for the faults' details (where pages are cut).
pub fn script(
    fault: impl Strategy<Value = Fault>,
    calls: usize,
    density: f64,
) -> impl Strategy<Value = Plan> {
    (
        any::<u64>(),
        prop::collection::vec(prop::option::weighted(density, fault), 0..=calls),
    )
        .prop_map(|(seed, faults)| Plan::seeded(seed).script(faults))
}

/// Scripts of up to `steps` steps, each with probability `density` (0 to 1) a run of 1 to
/// `max_run` consecutive calls that all get one fault from `fault`, else one call that
/// passes; with a random seed for the faults' details. A failing script shrinks by dropping
/// steps, shortening runs and turning them into passing calls.
pub fn runs(
    fault: impl Strategy<Value = Fault>,
    steps: usize,
    density: f64,
    max_run: usize,
) -> impl Strategy<Value = Plan> {
    let run = (fault, 1..=max_run.max(1));
    (
        any::<u64>(),
        prop::collection::vec(prop::option::weighted(density, run), 0..=steps),
    )
        .prop_map(|(seed, steps)| {
            let calls = steps.into_iter().flat_map(|step| match step {
                Some((fault, length)) => vec![Some(fault); length],
                None => vec![None],
            });
            Plan::seeded(seed).script(calls)
        })
}

/// [`runs`] of any [`fault`]: up to [`SCRIPT_CALLS`] steps, a run of up to [`MAX_RUN`]
/// calls at [`FAULT_DENSITY`].
pub fn plan() -> impl Strategy<Value = Plan> {
    runs(fault(), SCRIPT_CALLS, FAULT_DENSITY, MAX_RUN)
}
