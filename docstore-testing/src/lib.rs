//! # docstore-testing
//!
//! For application authors: test your docstore code against the failures real backends show,
//! reproducibly. (Backend authors want the `conformance-tests` crate instead.)
//!
//! [`FaultyDriver`] wraps any store's driver — under the front end, where a backend sits —
//! and, following a [`Plan`], makes calls fail the way networks and databases fail:
//!
//! | [`Fault`] | what the caller sees | what the store holds |
//! |---|---|---|
//! | [`Unavailable`](Fault::Unavailable) | `Error::Unavailable` | nothing was applied |
//! | [`LostAnswer`](Fault::LostAnswer) | `Error::Unavailable` | the call was applied (a `write_all` batch as a whole) |
//! | [`ConcurrentWrite`](Fault::ConcurrentWrite) | `Error::Conflict` from `update_if` / `replace_if` / `delete_if`, `Error::Batch` from `write_all` | another writer's change |
//! | [`Latency`](Fault::Latency) | the answer, later (`tokio::time`) | the call was applied |
//! | [`ShortPage`](Fault::ShortPage) | a query page with fewer documents and a `next` cursor | — |
//! | [`PartialPage`](Fault::PartialPage) | a query page marked partial (`exhausted_scan`); a stream's `Error::PartialAnswer` | — |
//!
//! The store over the wrapper retries what it injects as a store over a real backend does
//! (`docs/contract.md`, "Retries"), under the inner store's retry policy or the wrapper's own
//! ([`FaultyDriver::with_retry`]): the code under test sees a fault only when the store's
//! retries did not get past it.
//!
//! A plan states faults by probability (per fault kind, per call kind, drawn from a seed), by
//! position ("the third call", "the second `update_if`") or as a script; [`strategy`] generates
//! scripts for proptest, which shrinks a failing one to its fewest faults. Every call, with
//! the fault it got, what the store answered and what the caller saw, goes into a
//! [`History`] to assert on and print. The same plan and the same calls give the same
//! history.
//!
//! ```
//! use docstore::retry::{BackoffConfig, RetryPolicy};
//! use docstore::{Error, Key, ManualClock, Store, StoreOptions};
//! use docstore_memory::MemoryStore;
//! use docstore_testing::{CallKind, Fault, FaultyDriver, Plan};
//! use serde_json::json;
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! /// The code under test: adds one to a counter, retrying transient failures — as a new
//! /// call, without the identity the store's `Unavailable` carries.
//! async fn increment(store: &Store, key: &Key) -> docstore::Result<()> {
//!     loop {
//!         let doc = store.get(key).await?.ok_or_else(|| Error::not_found(key))?;
//!         let n = doc.data["n"].as_i64().unwrap_or(0);
//!         let patch = docstore::object(json!({"n": n + 1}))?;
//!         match store.update_if(key, &patch, doc.version, "app").await {
//!             Err(Error::Unavailable { .. } | Error::Conflict { .. }) => continue,
//!             other => return other.map(drop),
//!         }
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> docstore::Result<()> {
//! // The store retries a call twice itself (without waiting, as a test may).
//! let retry = RetryPolicy::default()
//!     .with_max_retries(2)
//!     .with_backoff(BackoffConfig::new(Duration::ZERO, Duration::ZERO, 1.0));
//! let options = StoreOptions::default().with_clock(Arc::new(ManualClock::new(0)));
//! let inner = Store::new(MemoryStore::with_options(options.with_retry(retry)));
//! let key = Key::new("acme", "counters", "c")?;
//! inner.create(&key, docstore::object(json!({"n": 0}))?, "setup").await?;
//!
//! // The first update_if and the store's two retries of it lose their answers: the first
//! // was applied, the app saw Unavailable.
//! let plan = Plan::new()
//!     .on_nth(CallKind::UpdateIf, 1, Fault::LostAnswer)
//!     .on_nth(CallKind::UpdateIf, 2, Fault::LostAnswer)
//!     .on_nth(CallKind::UpdateIf, 3, Fault::LostAnswer);
//! let faulty = Arc::new(FaultyDriver::new(inner.clone(), plan));
//! increment(&Store::from_driver(faulty.clone()), &key).await?;
//!
//! // The app's retry applied it a second time: the bug this crate is for.
//! let n = &inner.get(&key).await?.unwrap().data["n"];
//! assert_eq!(*n, json!(2), "history:\n{}", faulty.history());
//! # Ok(())
//! # }
//! ```
//!
//! The guide `docs/testing.md` shows the whole workflow: a memory store with a manual clock,
//! this wrapper, and property tests with `docstore::strategies` and [`strategy`].

mod history;
mod injector;
mod pages;
mod plan;
mod store;
pub mod strategy;
mod summary;

pub use history::{Entry, ErrorKind, History, Injected, Outcome};
pub use plan::{CallKind, Fault, Plan, Rule, Slot};
pub use store::{CONCURRENT_ACTOR, FaultyDriver};

/// The guide `docs/testing.md`, whose examples run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/testing.md")]
pub struct TestingGuide;
