//! The fault-injecting wrapper.

use crate::history::{self, History, Injected, Outcome};
use crate::injector::Injector;
use crate::pages;
use crate::plan::{CallKind, Fault, Plan};
use async_trait::async_trait;
use docstore::query::CursorPosition;
use docstore::{
    Data, Document, Error, Key, Page, Query, Recount, RecountMode, Result, Store, Write,
    WriteOutcome,
};
use std::future::Future;
use std::sync::Arc;

/// The actor of the concurrent writer that [`Fault::ConcurrentWrite`] sends.
pub const CONCURRENT_ACTOR: &str = "docstore-testing:concurrent-writer";

/// A [`Store`] over any other that injects the faults of a [`Plan`] and records every call in
/// a [`History`].
///
/// Give the wrapper to the code under test as its `Arc<dyn Store>`, keep the inner store to
/// set up and to check what really got written, and print [`history`](Self::history) when an
/// assertion fails. Calls are numbered from 1 in the order they start; with the same plan and
/// the same sequence of calls, the history is the same.
///
/// ```
/// use docstore::{Key, Store};
/// use docstore_memory::MemoryStore;
/// use docstore_testing::{Fault, FaultyStore, Plan};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> docstore::Result<()> {
/// let inner: Arc<dyn Store> = Arc::new(MemoryStore::new());
/// let store = FaultyStore::new(inner.clone(), Plan::new().on_call(1, Fault::LostAnswer));
///
/// let key = Key::new("acme", "tickets", "T-1")?;
/// let data = docstore::object(serde_json::json!({"status": "open"}))?;
/// let answer = store.create(&key, data, "alice").await;
/// assert!(matches!(answer, Err(docstore::Error::Unavailable { .. })));
/// assert!(inner.get(&key).await?.is_some()); // ...and yet it was written
/// assert_eq!(
///     store.history().to_string(),
///     "#1 create acme/tickets/T-1 [lost answer] -> Err(Unavailable) \
///      (store answered T-1 v1 {\"status\":\"open\"})\n"
/// );
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct FaultyStore {
    inner: Arc<dyn Store>,
    injector: Injector,
}

impl FaultyStore {
    /// Wraps `inner`, injecting the faults of `plan`.
    pub fn new(inner: Arc<dyn Store>, plan: Plan) -> Self {
        FaultyStore {
            inner,
            injector: Injector::new(plan),
        }
    }

    /// The wrapped store: reads and writes through it bypass the plan and the history.
    pub fn inner(&self) -> &Arc<dyn Store> {
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
        self.call_shaped(kind, target, touchable, forward, summary, |_, _| None)
            .await
    }

    /// [`call`](Self::call), with `shape` applying [`Fault::ShortPage`] to a success.
    async fn call_shaped<T: Send, F>(
        &self,
        kind: CallKind,
        target: String,
        touchable: &[&Key],
        forward: impl FnOnce() -> F + Send,
        summary: fn(&T) -> String,
        shape: impl FnOnce(&mut T, u64) -> Option<Injected> + Send,
    ) -> Result<T>
    where
        F: Future<Output = Result<T>> + Send,
    {
        let turn = self.injector.begin(kind, target);
        let mut injected = None;
        let touched = u64::try_from(touchable.len())
            .ok()
            .filter(|&n| n > 0)
            .and_then(|n| usize::try_from(turn.draw % n).ok())
            .map(|i| touchable[i]);
        match (turn.fault, touched) {
            (Some(Fault::Unavailable), _) => {
                let outcome = Outcome::Err(history::ErrorKind::Unavailable);
                self.injector
                    .finish(turn, Some(Injected::Unavailable), None, outcome);
                return Err(unavailable("the call failed before reaching the store"));
            }
            (Some(Fault::Latency(delay)), _) => {
                tokio::time::sleep(delay).await;
                injected = Some(Injected::Latency(delay));
            }
            (Some(Fault::ConcurrentWrite), Some(key)) => {
                let patch = self.injector.plan().patch();
                let written = self.inner.update(key, patch, CONCURRENT_ACTOR).await;
                injected = Some(Injected::ConcurrentWrite {
                    target: path(key),
                    outcome: Outcome::of(&written, history::document),
                });
            }
            _ => {}
        }
        let mut answer = forward().await;
        let inner = Outcome::of(&answer, summary);
        match (turn.fault, &mut answer) {
            (Some(Fault::LostAnswer), _) => {
                injected = Some(Injected::LostAnswer);
                answer = Err(unavailable(
                    "the answer was lost after the store applied the call",
                ));
            }
            (Some(Fault::ShortPage), Ok(value)) => injected = shape(value, turn.draw),
            _ => {}
        }
        let outcome = Outcome::of(&answer, summary);
        self.injector.finish(turn, injected, Some(inner), outcome);
        answer
    }
}

fn unavailable(what: &str) -> Error {
    Error::Unavailable {
        message: format!("injected fault: {what}"),
        source: None,
    }
}

/// `site/collection/id`.
fn path(key: &Key) -> String {
    format!("{}/{}/{}", key.site(), key.collection(), key.id())
}

/// `site/collection`, the page size and the position a cursor continues after.
fn query_target(site: &str, collection: &str, query: &Query) -> String {
    let mut target = format!("{site}/{collection}");
    if let Some(limit) = query.limit {
        target.push_str(&format!(" limit {limit}"));
    }
    if let Some(cursor) = &query.cursor {
        match CursorPosition::decode(cursor) {
            Ok(position) => target.push_str(&format!(" after {}", position.id)),
            Err(_) => target.push_str(" after a bad cursor"),
        }
    }
    target
}

/// `[kind site/collection/id @v<n>, ...]`.
fn batch_target(writes: &[Write]) -> String {
    let parts: Vec<String> = writes
        .iter()
        .map(|write| {
            let key = path(write.key());
            match write {
                Write::UpdateIf {
                    expected_version, ..
                }
                | Write::DeleteIf {
                    expected_version, ..
                } => format!("{} {key} @v{expected_version}", write.kind()),
                Write::Check {
                    version: Some(version),
                    ..
                } => format!("check {key} @v{version}"),
                Write::Check { version: None, .. } => format!("check {key} absent"),
                Write::Restore { document, .. } => {
                    format!("restore {key} v{}", document.version)
                }
                _ => format!("{} {key}", write.kind()),
            }
        })
        .collect();
    format!("[{}]", parts.join(", "))
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

fn found(doc: &Option<Document>) -> String {
    doc.as_ref()
        .map_or_else(|| "none".to_owned(), history::document)
}

fn found_many(docs: &[Option<Document>]) -> String {
    let parts: Vec<String> = docs.iter().map(found).collect();
    format!("[{}]", parts.join(", "))
}

fn outcomes(outcomes: &[WriteOutcome]) -> String {
    let parts: Vec<String> = outcomes
        .iter()
        .map(|outcome| match outcome {
            WriteOutcome::Written(doc) => history::document(doc),
            WriteOutcome::Deleted => "deleted".to_owned(),
            WriteOutcome::Checked => "checked".to_owned(),
            other => format!("{other:?}"),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

fn deleted(deleted: &bool) -> String {
    if *deleted { "deleted" } else { "absent" }.to_owned()
}

fn done(_: &()) -> String {
    "ok".to_owned()
}

fn page(page: &Page) -> String {
    let ids: Vec<&str> = page.documents.iter().map(|d| d.id.as_str()).collect();
    let mut summary = format!("[{}]", ids.join(", "));
    if page.next.is_some() {
        summary.push_str(" next");
    }
    if page.exhausted_scan {
        summary.push_str(" exhausted scan");
    }
    summary
}

fn counts(collections: &[(String, u64)]) -> String {
    let parts: Vec<String> = collections
        .iter()
        .map(|(name, count)| format!("{name}: {count}"))
        .collect();
    format!("[{}]", parts.join(", "))
}

fn count(count: &u64) -> String {
    count.to_string()
}

fn recount(recount: &Recount) -> String {
    format!(
        "{} {} changed",
        counts(&recount.collections),
        recount.changes.len()
    )
}

#[async_trait]
impl Store for FaultyStore {
    async fn create(&self, key: &Key, data: Data, actor: &str) -> Result<Document> {
        let forward = || self.inner.create(key, data, actor);
        self.call(
            CallKind::Create,
            path(key),
            &[key],
            forward,
            history::document,
        )
        .await
    }

    async fn get(&self, key: &Key) -> Result<Option<Document>> {
        let forward = || self.inner.get(key);
        self.call(CallKind::Get, path(key), &[key], forward, found)
            .await
    }

    async fn put(&self, key: &Key, data: Data, actor: &str) -> Result<Document> {
        let forward = || self.inner.put(key, data, actor);
        self.call(CallKind::Put, path(key), &[key], forward, history::document)
            .await
    }

    async fn update(&self, key: &Key, patch: &Data, actor: &str) -> Result<Document> {
        let forward = || self.inner.update(key, patch, actor);
        self.call(
            CallKind::Update,
            path(key),
            &[key],
            forward,
            history::document,
        )
        .await
    }

    async fn update_if(
        &self,
        key: &Key,
        patch: &Data,
        expected_version: u64,
        actor: &str,
    ) -> Result<Document> {
        let target = format!("{} @v{expected_version}", path(key));
        let forward = || self.inner.update_if(key, patch, expected_version, actor);
        self.call(
            CallKind::UpdateIf,
            target,
            &[key],
            forward,
            history::document,
        )
        .await
    }

    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Document>>> {
        let paths: Vec<String> = keys.iter().map(path).collect();
        let target = format!("[{}]", paths.join(", "));
        let forward = || self.inner.get_many(keys);
        self.call(CallKind::GetMany, target, &[], forward, |docs| {
            found_many(docs)
        })
        .await
    }

    async fn write_all(&self, writes: &[Write], actor: &str) -> Result<Vec<WriteOutcome>> {
        let forward = || self.inner.write_all(writes, actor);
        let touchable = versioned(writes);
        self.call(
            CallKind::WriteAll,
            batch_target(writes),
            &touchable,
            forward,
            |o| outcomes(o),
        )
        .await
    }

    async fn delete(&self, key: &Key) -> Result<bool> {
        let forward = || self.inner.delete(key);
        self.call(CallKind::Delete, path(key), &[key], forward, deleted)
            .await
    }

    async fn delete_if(&self, key: &Key, expected_version: u64) -> Result<()> {
        let target = format!("{} @v{expected_version}", path(key));
        let forward = || self.inner.delete_if(key, expected_version);
        self.call(CallKind::DeleteIf, target, &[key], forward, done)
            .await
    }

    async fn restore(&self, key: &Key, document: &Document) -> Result<()> {
        let target = format!("{} v{}", path(key), document.version);
        let forward = || self.inner.restore(key, document);
        self.call(CallKind::Restore, target, &[key], forward, done)
            .await
    }

    async fn query(&self, site: &str, collection: &str, query: &Query) -> Result<Page> {
        let target = query_target(site, collection, query);
        let forward = || self.inner.query(site, collection, query);
        let shape = |answer: &mut Page, draw| {
            pages::shorten(answer, query, draw).map(|(kept, of)| Injected::ShortPage { kept, of })
        };
        self.call_shaped(CallKind::Query, target, &[], forward, page, shape)
            .await
    }

    async fn collections(&self, site: &str) -> Result<Vec<(String, u64)>> {
        let forward = || self.inner.collections(site);
        self.call(CallKind::Collections, site.to_owned(), &[], forward, |c| {
            counts(c)
        })
        .await
    }

    async fn count(&self, site: &str) -> Result<u64> {
        let forward = || self.inner.count(site);
        self.call(CallKind::Count, site.to_owned(), &[], forward, count)
            .await
    }

    async fn recount(&self, site: &str, mode: RecountMode) -> Result<Recount> {
        let target = match mode {
            RecountMode::Report => format!("{site} (report)"),
            RecountMode::Repair => format!("{site} (repair)"),
        };
        let forward = || self.inner.recount(site, mode);
        self.call(CallKind::Recount, target, &[], forward, recount)
            .await
    }
}
