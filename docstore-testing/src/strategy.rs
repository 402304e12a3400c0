//! Proptest strategies for plans that shrink to the fewest, earliest faults.
//!
//! A generated plan is a script: a list with a fault or nothing for each call. When a property
//! fails, proptest shrinks the list (drops entries, turns faults into nothing), so the plan it
//! reports is the smallest sequence of faults that still breaks the property; run it once
//! more and print [`FaultyDriver::history`](crate::FaultyDriver::history) to see what happened.
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

/// How often a scripted call gets a fault in [`plan`].
pub const FAULT_DENSITY: f64 = 0.25;

/// The number of calls a [`plan`] script covers at most.
pub const SCRIPT_CALLS: usize = 24;

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

/// [`script`] of any [`fault`] over the first [`SCRIPT_CALLS`] calls, at
/// [`FAULT_DENSITY`].
pub fn plan() -> impl Strategy<Value = Plan> {
    script(fault(), SCRIPT_CALLS, FAULT_DENSITY)
}
