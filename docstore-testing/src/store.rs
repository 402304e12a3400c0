//! The fault-injecting wrapper.

use crate::history::{ErrorKind, History, Injected, Outcome};
use crate::injector::Injector;
use crate::pages;
use crate::plan::{CallKind, Fault, Plan};
use crate::summary;
use async_trait::async_trait;
use docstore::driver::Driver;
use docstore::feed::{ChangeCursor, ChangePage, FeedScope, FeedStart};
use docstore::query::CompiledQuery;
use docstore::request::{Answer, Call, Request};
use docstore::{
    Document, Error, Explain, Key, Page, Recount, RecountMode, Result, Store, StoreOptions, Write,
};
use std::future::Future;

/// The actor of the concurrent writer that [`Fault::ConcurrentWrite`] sends.
pub const CONCURRENT_ACTOR: &str = "docstore-testing:concurrent-writer";

/// A [`Driver`] over another store's driver that injects the faults of a [`Plan`] and records
/// every call in a [`History`]. It sits under the front end, as a backend does: a
/// [`Store`] over it checks every input first, and the typed layer runs above the faults as
/// it does in production.
///
/// Give a store over the wrapper ([`Store::from_driver`]) to the code under test, keep the
/// inner store to set up and to check what really got written, and print
/// [`history`](Self::history) when an assertion fails. Calls are numbered from 1 in the order
/// they start; with the same plan and the same sequence of calls, the history is the same.
///
/// ```
/// use docstore::retry::RetryPolicy;
/// use docstore::{Key, Store, StoreOptions};
/// use docstore_memory::MemoryStore;
/// use docstore_testing::{Fault, FaultyDriver, Plan};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> docstore::Result<()> {
/// // Without the store's own retries, the caller sees the fault as injected.
/// let options = StoreOptions::default().with_retry(RetryPolicy::NONE);
/// let inner = Store::new(MemoryStore::with_options(options));
/// let faulty = Arc::new(FaultyDriver::new(inner.clone(), Plan::new().on_call(1, Fault::LostAnswer)));
/// let store = Store::from_driver(faulty.clone());
///
/// let key = Key::new("acme", "tickets", "T-1")?;
/// let data = docstore::object(serde_json::json!({"status": "open"}))?;
/// let answer = store.create(&key, data, "alice").await;
/// assert!(matches!(answer, Err(docstore::Error::Unavailable { .. })));
/// assert!(inner.get(&key).await?.is_some()); // ...and yet it was written
/// assert_eq!(
///     faulty.history().to_string(),
///     "#1 create acme/tickets/T-1 [lost answer] -> Err(Unavailable) \
///      (store answered T-1 v1 {\"status\":\"open\"})\n"
/// );
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct FaultyDriver {
    inner: Store,
    injector: Injector,
    /// The inner store's options, with the retry policy of the store above the wrapper.
    options: StoreOptions,
}

impl FaultyDriver {
    /// Wraps the driver of `inner`, injecting the faults of `plan`. A store over the wrapper
    /// retries as `inner` is configured to ([`StoreOptions::retry`]), so the code under test
    /// sees a fault only when the store's retries did not get past it.
    pub fn new(inner: Store, plan: Plan) -> Self {
        FaultyDriver {
            options: inner.options().clone(),
            inner,
            injector: Injector::new(plan),
        }
    }

    /// The same wrapper, its store retrying as `retry` says instead
    /// ([`RetryPolicy::NONE`](docstore::retry::RetryPolicy::NONE): every injected
    /// `Unavailable` reaches the caller).
    pub fn with_retry(mut self, retry: docstore::retry::RetryPolicy) -> Self {
        self.options = self.options.with_retry(retry);
        self
    }

    /// The wrapped store: reads and writes through it bypass the plan and the history.
    pub fn inner(&self) -> &Store {
        &self.inner
    }

    /// The plan.
    pub fn plan(&self) -> &Plan {
        self.injector.plan()
    }

    /// Every call that has finished so far, by call number.
    pub fn history(&self) -> History {
        self.injector.history()
    }

    /// One call: the fault's part before the store (refusal, latency, a concurrent writer on
    /// one of the `touchable` keys), the store, then the fault's part after it (a lost
    /// answer).
    async fn call<T: Send, F>(
        &self,
        kind: CallKind,
        target: String,
        touchable: &[&Key],
        forward: impl FnOnce() -> F + Send,
        summary: fn(&T) -> String,
    ) -> Result<T>
    where
        F: Future<Output = Result<T>> + Send,
    {
        self.call_shaped(kind, target, touchable, forward, summary, |_, _, _| None)
            .await
    }

    /// [`call`](Self::call), with `shape` applying [`Fault::ShortPage`] or
    /// [`Fault::PartialPage`] to a success.
    async fn call_shaped<T: Send, F>(
        &self,
        kind: CallKind,
        target: String,
        touchable: &[&Key],
        forward: impl FnOnce() -> F + Send,
        summary: fn(&T) -> String,
        shape: impl FnOnce(&mut T, Fault, u64) -> Option<Injected> + Send,
    ) -> Result<T>
    where
        F: Future<Output = Result<T>> + Send,
    {
        let mut turn = self.injector.begin(kind, target);
        let touched = u64::try_from(touchable.len())
            .ok()
            .filter(|&n| n > 0)
            .and_then(|n| usize::try_from(turn.draw % n).ok())
            .map(|i| touchable[i]);
        match (turn.fault, touched) {
            (Some(Fault::Unavailable), _) => {
                turn.injected = Some(Injected::Unavailable);
                turn.finish(None, Outcome::Err(ErrorKind::Unavailable));
                return Err(unavailable("the call failed before reaching the store"));
            }
            (Some(Fault::Latency(delay)), _) => {
                turn.injected = Some(Injected::Latency(delay));
                tokio::time::sleep(delay).await;
            }
            (Some(Fault::ConcurrentWrite), Some(key)) => {
                let patch = self.injector.plan().patch();
                let written = self.inner.update(key, patch, CONCURRENT_ACTOR).await;
                turn.injected = Some(Injected::ConcurrentWrite {
                    target: summary::path(key),
                    outcome: Outcome::of(&written, summary::document),
                });
            }
            _ => {}
        }
        let mut answer = forward().await;
        let inner = Outcome::of(&answer, summary);
        match (turn.fault, &mut answer) {
            (Some(Fault::LostAnswer), _) => {
                turn.injected = Some(Injected::LostAnswer);
                answer = Err(unavailable(
                    "the answer was lost after the store applied the call",
                ));
            }
            (Some(fault @ (Fault::ShortPage | Fault::PartialPage)), Ok(value)) => {
                turn.injected = shape(value, fault, turn.draw);
            }
            _ => {}
        }
        turn.finish(Some(inner), Outcome::of(&answer, summary));
        answer
    }
}

fn unavailable(what: &str) -> Error {
    Error::Unavailable {
        message: format!("injected fault: {what}"),
        source: None,
        write_id: None,
    }
}

/// How a write request shows in the history: the call it came from, what it addressed, the
/// keys a concurrent writer may touch, and how its answer reads.
struct Shown<'a> {
    kind: CallKind,
    target: String,
    touchable: Vec<&'a Key>,
    summary: fn(&Answer) -> String,
}

impl<'a> Shown<'a> {
    fn of(request: &Request<'a>) -> Self {
        let at = |key: &Key, version: Option<u64>| match version {
            Some(v) => format!("{} @v{v}", summary::path(key)),
            None => summary::path(key),
        };
        let (kind, target, touchable, summary): (_, _, Vec<&'a Key>, fn(&Answer) -> String) =
            match request.call() {
                Call::Create { key, .. } => {
                    (CallKind::Create, at(key, None), vec![key], summary::written)
                }
                Call::Put { key, .. } => {
                    (CallKind::Put, at(key, None), vec![key], summary::written)
                }
                Call::Update { key, expected, .. } => {
                    let kind = expected.map_or(CallKind::Update, |_| CallKind::UpdateIf);
                    (kind, at(key, expected), vec![key], summary::written)
                }
                Call::ReplaceIf { key, expected, .. } => (
                    CallKind::ReplaceIf,
                    at(key, Some(expected)),
                    vec![key],
                    summary::written,
                ),
                Call::Delete { key, expected } => {
                    let kind = expected.map_or(CallKind::Delete, |_| CallKind::DeleteIf);
                    (kind, at(key, expected), vec![key], summary::removed)
                }
                Call::Restore { key, document } => {
                    let target = format!("{} v{}", summary::path(key), document.version);
                    (CallKind::Restore, target, vec![key], summary::restored)
                }
                Call::Batch(batch) => {
                    let writes = batch.writes();
                    let target = summary::batch_target(writes);
                    (
                        CallKind::WriteAll,
                        target,
                        versioned(writes),
                        summary::batch,
                    )
                }
            };
        Shown {
            kind,
            target,
            touchable,
            summary,
        }
    }
}

/// The keys of the writes that expect a version: where a concurrent writer makes a batch fail.
fn versioned(writes: &[Write]) -> Vec<&Key> {
    writes
        .iter()
        .filter(|write| {
            matches!(
                write,
                Write::UpdateIf { .. }
                    | Write::DeleteIf { .. }
                    | Write::Check {
                        version: Some(_),
                        ..
                    }
            )
        })
        .map(Write::key)
        .collect()
}

#[async_trait]
impl Driver for FaultyDriver {
    fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// A lost answer is what the wrapper injects: the front end gives every write an
    /// identity, so that its retries are recognised.
    fn may_lose_answers(&self) -> bool {
        true
    }

    /// The call the request came from, under its own [`CallKind`], with its own faults.
    async fn apply(&self, request: Request<'_>) -> Result<Answer> {
        let shown = Shown::of(&request);
        let forward = || self.inner.driver().apply(request);
        let touchable: Vec<&Key> = shown.touchable.clone();
        self.call(shown.kind, shown.target, &touchable, forward, shown.summary)
            .await
    }

    async fn get(&self, key: &Key) -> Result<Option<Document>> {
        let forward = || self.inner.driver().get(key);
        self.call(
            CallKind::Get,
            summary::path(key),
            &[key],
            forward,
            summary::found,
        )
        .await
    }

    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Document>>> {
        let paths: Vec<String> = keys.iter().map(summary::path).collect();
        let target = format!("[{}]", paths.join(", "));
        let forward = || self.inner.driver().get_many(keys);
        self.call(CallKind::GetMany, target, &[], forward, |docs| {
            summary::found_many(docs)
        })
        .await
    }

    async fn query(&self, site: &str, collection: &str, query: &CompiledQuery) -> Result<Page> {
        let target = summary::query_target(site, collection, query);
        let forward = || self.inner.driver().query(site, collection, query);
        let shape = |answer: &mut Page, fault, draw| match fault {
            Fault::PartialPage => {
                answer.exhausted_scan = true;
                Some(Injected::PartialPage)
            }
            _ => pages::shorten(answer, query, draw)
                .map(|(kept, of)| Injected::ShortPage { kept, of }),
        };
        self.call_shaped(CallKind::Query, target, &[], forward, summary::page, shape)
            .await
    }

    async fn explain(
        &self,
        site: &str,
        collection: &str,
        query: &CompiledQuery,
    ) -> Result<Explain> {
        let target = summary::query_target(site, collection, query);
        let forward = || self.inner.driver().explain(site, collection, query);
        self.call(CallKind::Explain, target, &[], forward, |plan| {
            plan.to_string()
        })
        .await
    }

    async fn collections(&self, site: &str) -> Result<Vec<(String, u64)>> {
        let forward = || self.inner.driver().collections(site);
        self.call(CallKind::Collections, site.to_owned(), &[], forward, |c| {
            summary::counts(c)
        })
        .await
    }

    async fn count(&self, site: &str) -> Result<u64> {
        let forward = || self.inner.driver().count(site);
        self.call(
            CallKind::Count,
            site.to_owned(),
            &[],
            forward,
            summary::count,
        )
        .await
    }

    /// Forwarded without faults: a listing writes nothing, so a lost answer is the same as
    /// a failed read.
    async fn sites(&self) -> Result<Vec<String>> {
        self.inner.driver().sites().await
    }

    async fn recount(&self, site: &str, mode: RecountMode) -> Result<Recount> {
        let target = match mode {
            RecountMode::Report => format!("{site} (report)"),
            RecountMode::Repair => format!("{site} (repair)"),
        };
        let forward = || self.inner.driver().recount(site, mode);
        self.call(CallKind::Recount, target, &[], forward, summary::recount)
            .await
    }

    /// Feed reads are forwarded without faults: they write nothing, so a lost answer is
    /// the same as a failed read, which the feed's own tests cover.
    async fn changes(
        &self,
        scope: &FeedScope,
        start: &FeedStart,
        limit: usize,
    ) -> Result<ChangePage> {
        let forward = || self.inner.driver().changes(scope, start, limit);
        let target = summary::feed_scope(scope);
        self.call(CallKind::Changes, target, &[], forward, |page| {
            format!("{} changes", page.changes.len())
        })
        .await
    }

    async fn wait_for_changes(&self, after: &ChangeCursor) -> Result<()> {
        self.inner.driver().wait_for_changes(after).await
    }

    /// Passed through without a fault: the sweep is the store's own background work, not a
    /// call a plan counts.
    async fn sweep_expired(&self, limit: usize) -> Result<usize> {
        self.inner.driver().sweep_expired(limit).await
    }

    fn supports_expiry(&self) -> bool {
        self.inner.driver().supports_expiry()
    }
}
