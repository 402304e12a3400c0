//! The default fault plan catches a retry that forgets the write identity.
//!
//! `Collection::modify` retries a write whose answer was lost under one identity, within the
//! store's retry budget, then hands `Unavailable` on with that identity. An app that retries
//! that `modify` as a new call (a fresh identity) applies its change twice when the first
//! call's write was applied: only after more lost answers in a row than the budget holds,
//! which is why [`strategy::plan`] scripts runs of faults. The store here retries
//! [`RETRIES`] times (a budget that a run of at most `strategy::MAX_RUN` faults can exhaust,
//! as a run of timeouts exhausts a budget in seconds). The same loop that keeps one identity
//! for every try (`WriteId::from_key` of the request's key) passes every plan.

mod support;

use docstore::{Collection, Data, Error, WriteId};
use docstore_testing::{CallKind, FaultyDriver, History, Plan, strategy};
use proptest::test_runner::{RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use serde_json::json;
use support::{SITE, cases, config, immediate_retries, memory_retrying, runtime};

/// How often the store retries a call itself before it hands `Unavailable` on.
const RETRIES: u32 = 3;

/// How many increments a scenario makes, each a logical write retried until it succeeds.
const INCREMENTS: i64 = 3;

/// proptest's default number of cases: what an app's property test runs unless told.
const DEFAULT_CASES: u32 = 256;

#[derive(Clone, Copy, Debug)]
enum Retry {
    /// Every try is a new call: `modify` again, with a fresh identity.
    WithoutIdentity,
    /// Every try of one increment carries the identity of the increment's key.
    WithIdentity,
}

fn add_one(counter: &mut Data) {
    let n = counter["n"].as_i64().unwrap_or(0);
    counter.insert("n".into(), (n + 1).into());
}

/// Adds one to the counter, retrying `Unavailable` as `retry` says.
async fn increment(
    counters: &Collection<Data>,
    retry: Retry,
    request: i64,
) -> docstore::Result<()> {
    let identity = WriteId::from_key(&format!("increment-{request}"))?;
    loop {
        let call = counters.modify("c", add_one);
        let tried = match retry {
            Retry::WithoutIdentity => call.await,
            Retry::WithIdentity => call.write_id(identity.clone()).await,
        };
        match tried {
            Err(Error::Unavailable { .. }) => continue,
            other => return other.map(drop),
        }
    }
}

/// [`INCREMENTS`] increments through a wrapper with `plan`: the history, and whether the
/// counter ended at [`INCREMENTS`].
async fn scenario(retry: Retry, plan: Plan) -> (History, Result<(), String>) {
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
    let faulty = std::sync::Arc::new(FaultyDriver::new(inner.clone(), plan));
    let wrapped = docstore::Store::from_driver(faulty.clone());
    let counters = wrapped
        .site(SITE)
        .unwrap()
        .collection::<Data>("counters")
        .unwrap();
    let mut verdict = Ok(());
    for request in 0..INCREMENTS {
        if let Err(err) = increment(&counters, retry, request).await {
            verdict = Err(format!("increment {request} failed: {err}"));
            break;
        }
    }
    let n = plain.get("c").await.unwrap().unwrap().value["n"].clone();
    if verdict.is_ok() && n != json!(INCREMENTS) {
        verdict = Err(format!("{INCREMENTS} increments left the counter at {n}"));
    }
    (faulty.history(), verdict)
}

/// Runs `retry` under `cases` plans of the default strategy, with a fixed proptest seed so
/// that the search and the shrinking are the same every time.
// proptest's own error type, whose size depends on workspace features; boxing it would only
// obscure the test.
#[allow(clippy::result_large_err)]
fn check(retry: Retry, cases: u32) -> Result<(), TestError<Plan>> {
    let rt = runtime();
    let rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut runner = TestRunner::new_with_rng(config(cases), rng);
    runner.run(&strategy::plan(), |plan| {
        let (history, verdict) = rt.block_on(scenario(retry, plan));
        verdict.map_err(|why| TestCaseError::fail(format!("{why}\n{history}")))
    })
}

#[test]
fn the_default_plan_catches_a_retry_without_the_identity() {
    // proptest's default budget, whatever PROPTEST_CASES says: what an app's test would run.
    let failure = check(Retry::WithoutIdentity, DEFAULT_CASES);
    let Err(TestError::Fail(reason, minimal)) = failure else {
        panic!("the retry without identity passed every plan: {failure:?}");
    };
    let (history, verdict) = runtime().block_on(scenario(Retry::WithoutIdentity, minimal.clone()));
    println!("{reason}\nminimal plan: {minimal}\nits history:\n{history}");

    // Shrunk to one run: modify's write and its retries all lose their answers, the first
    // was applied, and the retry as a new call applies again.
    assert_eq!(
        verdict,
        Err(format!(
            "{INCREMENTS} increments left the counter at {}",
            INCREMENTS + 1
        )),
        "{history}"
    );
    let faulted: Vec<_> = history.faulted().collect();
    let resends = RETRIES as usize;
    const { assert!((RETRIES as usize) < strategy::MAX_RUN) };
    assert_eq!(faulted.len(), resends + 1, "{history}");
    assert!(
        faulted
            .iter()
            .all(|entry| entry.kind == CallKind::ReplaceIf),
        "{history}"
    );
    let calls: Vec<u64> = faulted.iter().map(|entry| entry.call).collect();
    assert!(
        calls.windows(2).all(|pair| pair[1] == pair[0] + 1),
        "consecutive: {history}"
    );
    assert_eq!(minimal.scheduled().len(), resends + 1, "{minimal}");
}

#[test]
fn a_retry_with_the_identity_passes_the_default_plan() {
    if let Err(err) = check(Retry::WithIdentity, cases(1_000)) {
        panic!("{err}");
    }
}
