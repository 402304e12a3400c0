//! The import pipeline ([`Pending`]) against a store that watches its callers: several
//! batches are in flight at once, never two with one key, and every outcome is the one of
//! a batch at a time. No timing is asserted: the watching store holds each batch until two
//! later batches have started (or a tenth of a second has passed), so a pipeline shows its
//! overlap whatever the machine's speed, and one batch at a time just waits.

use super::*;
use crate::args::OnExisting;
use async_trait::async_trait;
use docstore::driver::Driver;
use docstore::query::CompiledQuery;
use docstore::request::{Answer, Request};
use docstore::{Explain, Page, Recount};
use std::io::Cursor;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a batch waits for company before going on alone.
const HOLD: Duration = Duration::from_millis(100);

/// What [`Watch`] saw.
#[derive(Debug, Default)]
struct Seen {
    /// Batch calls (`write_all`, a batch's `get_many`) started so far.
    started: usize,
    /// Batch calls under way now, and the most at once.
    active: usize,
    most_active: usize,
    /// The keys of every call under way (batches and single writes), with how many calls.
    keys: HashMap<Key, usize>,
    /// Keys that were in two calls under way at once.
    overlaps: Vec<Key>,
}

/// A store passing every call to `inner`, watching the keys of the calls under way.
#[derive(Debug)]
struct Watch {
    inner: Store,
    seen: Mutex<Seen>,
}

impl Watch {
    fn new(inner: Store) -> Self {
        Watch {
            inner,
            seen: Mutex::default(),
        }
    }

    /// Registers a call on `keys` (a batch may name one key twice: the store refuses it).
    fn enter<'k>(&self, keys: impl IntoIterator<Item = &'k Key>) {
        let mut seen = self.seen.lock().unwrap();
        for key in keys.into_iter().collect::<std::collections::HashSet<_>>() {
            let count = seen.keys.entry(key.clone()).or_default();
            *count += 1;
            if *count > 1 {
                seen.overlaps.push(key.clone());
            }
        }
    }

    fn leave<'k>(&self, keys: impl IntoIterator<Item = &'k Key>) {
        let mut seen = self.seen.lock().unwrap();
        for key in keys.into_iter().collect::<std::collections::HashSet<_>>() {
            let count = seen.keys.get_mut(key).unwrap();
            *count -= 1;
            if *count == 0 {
                seen.keys.remove(key);
            }
        }
    }

    /// Runs a single-document call on `key`, one poll late so that others can overlap it.
    async fn single<T>(&self, key: &Key, call: impl Future<Output = T>) -> T {
        self.enter([key]);
        tokio::task::yield_now().await;
        let answer = call.await;
        self.leave([key]);
        answer
    }

    /// Runs a batch call (`write_all`, or a batch's `get_many`) on `keys`, holding it until
    /// two later batch calls have started, or for [`HOLD`].
    async fn batch<T>(&self, keys: &[Key], call: impl Future<Output = T>) -> T {
        self.enter(keys);
        let number = {
            let mut seen = self.seen.lock().unwrap();
            seen.started += 1;
            seen.active += 1;
            seen.most_active = seen.most_active.max(seen.active);
            seen.started
        };
        let until = tokio::time::Instant::now() + HOLD;
        while self.seen.lock().unwrap().started < number + 2 && tokio::time::Instant::now() < until
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let answer = call.await;
        self.seen.lock().unwrap().active -= 1;
        self.leave(keys);
        answer
    }

    fn seen(&self) -> (usize, Vec<Key>) {
        let seen = self.seen.lock().unwrap();
        (seen.most_active, seen.overlaps.clone())
    }
}

#[async_trait]
impl Driver for Watch {
    fn options(&self) -> &docstore::StoreOptions {
        self.inner.driver().options()
    }
    /// A batch is held like [`get_many`](Self::get_many), a single call by its key.
    async fn apply(&self, request: Request<'_>) -> docstore::Result<Answer> {
        let keys: Vec<Key> = request.keys().cloned().collect();
        let is_batch = request.is_batch();
        let call = self.inner.driver().apply(request);
        match is_batch {
            true => self.batch(&keys, call).await,
            false => self.single(&keys[0], call).await,
        }
    }
    async fn get(&self, key: &Key) -> docstore::Result<Option<Document>> {
        self.single(key, self.inner.driver().get(key)).await
    }
    /// A batch's read of its keys (a resumed import): held like a batch [`apply`](Self::apply).
    async fn get_many(&self, keys: &[Key]) -> docstore::Result<Vec<Option<Document>>> {
        self.batch(keys, self.inner.driver().get_many(keys)).await
    }
    async fn query(
        &self,
        site: &str,
        collection: &str,
        query: &CompiledQuery,
    ) -> docstore::Result<Page> {
        self.inner.driver().query(site, collection, query).await
    }
    async fn explain(
        &self,
        site: &str,
        collection: &str,
        query: &CompiledQuery,
    ) -> docstore::Result<Explain> {
        self.inner.driver().explain(site, collection, query).await
    }
    async fn collections(&self, site: &str) -> docstore::Result<Vec<(String, u64)>> {
        self.inner.driver().collections(site).await
    }
    async fn count(&self, site: &str) -> docstore::Result<u64> {
        self.inner.driver().count(site).await
    }
    async fn sites(&self) -> docstore::Result<Vec<String>> {
        self.inner.driver().sites().await
    }
    async fn recount(&self, site: &str, mode: RecountMode) -> docstore::Result<Recount> {
        self.inner.driver().recount(site, mode).await
    }
    async fn changes(
        &self,
        scope: &docstore::feed::FeedScope,
        start: &docstore::FeedStart,
        limit: usize,
    ) -> docstore::Result<docstore::feed::ChangePage> {
        self.inner.driver().changes(scope, start, limit).await
    }
    async fn wait_for_changes(&self, after: &docstore::ChangeCursor) -> docstore::Result<()> {
        self.inner.driver().wait_for_changes(after).await
    }
    async fn sweep_expired(&self, limit: usize) -> docstore::Result<usize> {
        self.inner.driver().sweep_expired(limit).await
    }
    fn supports_expiry(&self) -> bool {
        self.inner.driver().supports_expiry()
    }
}

/// A document line of site `s`, collection `c`.
fn line(id: &str, version: u64, updated_at: i64, body: usize) -> String {
    let data =
        docstore::object(serde_json::json!({ "body": "x".repeat(body), "v": version })).unwrap();
    let document = Document {
        expires_at: None,
        id: id.to_owned(),
        data,
        created_at: 1_699_999_999_999_999_000,
        updated_at: 1_700_000_000_000_000_000 + updated_at,
        created_by: "origin".into(),
        updated_by: "origin".into(),
        version,
    };
    serde_json::to_string(&Record::new("s", "c", document)).unwrap()
}

fn options(on_existing: OnExisting, in_flight: usize) -> ImportOptions {
    ImportOptions {
        site: Some("s".into()),
        on_existing,
        in_flight,
        errors: Arc::default(),
    }
}

/// Imports `input` into a fresh memory store (documents over 3 000 bytes refused) holding
/// `stored` lines already; returns what a user sees (the summary, or the error with its
/// code), what the store holds afterwards, and what the watching store saw.
async fn run(
    input: &str,
    stored: &str,
    options: &ImportOptions,
) -> (String, Vec<Document>, usize, Vec<Key>) {
    let inner = docstore_any::open_url("memory:?max_doc_bytes=3000")
        .await
        .unwrap();
    let before = import(
        &inner,
        &mut Cursor::new(stored),
        &self::options(OnExisting::Skip, 1),
    )
    .await
    .unwrap();
    assert!(before.skipped.is_empty(), "{before:?}");
    let watch = Arc::new(Watch::new(inner.clone()));
    let watched = Store::from_driver(watch.clone());
    let seen = match import(&watched, &mut Cursor::new(input), options).await {
        Ok(summary) => serde_json::to_string(&summary).unwrap(),
        Err(err) => format!("exit {}: {err}", err.code),
    };
    let page = inner
        .query("s", "c", &Query::new().limit(10_000))
        .await
        .unwrap();
    let (most_active, overlaps) = watch.seen();
    (seen, page.documents, most_active, overlaps)
}

/// Many batches: several are in flight at once (at most [`MAX_BATCHES_IN_FLIGHT`]), and
/// only one with `--on-existing fail` or when asked for one at a time. Fails on an import
/// that waits for each batch before sending the next.
#[tokio::test]
async fn several_batches_are_in_flight_at_once() {
    let input: String = (0..1_000)
        .map(|i| line(&format!("doc-{i:04}"), 1, i, 100) + "\n")
        .collect();
    for (on_existing, in_flight, expected) in [
        (
            OnExisting::Skip,
            MAX_BATCHES_IN_FLIGHT,
            2..=MAX_BATCHES_IN_FLIGHT,
        ),
        (
            OnExisting::Overwrite,
            MAX_BATCHES_IN_FLIGHT,
            2..=MAX_BATCHES_IN_FLIGHT,
        ),
        (OnExisting::Skip, 1, 1..=1),
        (OnExisting::Fail, MAX_BATCHES_IN_FLIGHT, 1..=1),
    ] {
        let (summary, documents, most_active, overlaps) =
            run(&input, "", &options(on_existing, in_flight)).await;
        assert!(
            summary.contains(r#""imported":1000,"#),
            "{on_existing:?}: {summary}"
        );
        assert_eq!(documents.len(), 1_000);
        assert!(
            expected.contains(&most_active),
            "{on_existing:?}, {in_flight} in flight: {most_active} batches at once"
        );
        assert!(overlaps.is_empty(), "{overlaps:?}");
    }
}

/// Input where one id comes back every 130 lines (2.6 batches: within the pipeline's
/// reach) with a higher version, an id twice in a row (one batch), lines that are not
/// documents, documents too large, and ids stored before the run: with batches in flight,
/// every `--on-existing` gives the same summary (the skipped lines in the same order), the
/// same error and the same stored documents as one batch at a time, and no key is ever in
/// two calls under way.
#[tokio::test]
async fn the_pipeline_decides_everything_as_one_batch_at_a_time() {
    let mut input = String::new();
    for i in 0..460_i64 {
        let id = match i {
            // The previous line's id again: a batch holding one key twice, which the front
            // end refuses before any driver call (then the lines go one at a time).
            _ if i % 141 == 140 => format!("doc-{}", (i - 1) % 130),
            _ => format!("doc-{}", i % 130),
        };
        let version = 1 + (i / 130) as u64;
        // Two lines too large for the store: their batches are refused by the front end
        // before any driver call and fall back to one line at a time; the batches between
        // them still overlap.
        let body = if i % 197 == 50 { 4_000 } else { 200 };
        input += &line(&id, version, i, body);
        input.push('\n');
        if i % 37 == 36 {
            input += "not a document\n";
        }
    }
    // Stored already: doc-5 older than every line, doc-77 newer than every line.
    let stored = line("doc-5", 1, -1, 10) + "\n" + &line("doc-77", 9, 0, 10) + "\n";
    for on_existing in [
        OnExisting::Skip,
        OnExisting::Newer,
        OnExisting::Overwrite,
        OnExisting::Fail,
    ] {
        let one = run(&input, &stored, &options(on_existing, 1)).await;
        let many = run(
            &input,
            &stored,
            &options(on_existing, MAX_BATCHES_IN_FLIGHT),
        )
        .await;
        assert_eq!(one.0, many.0, "{on_existing:?}: the summaries differ");
        assert_eq!(one.1, many.1, "{on_existing:?}: the stores differ");
        assert!(
            many.3.is_empty(),
            "{on_existing:?}: {} keys in two calls at once, first {:?}",
            many.3.len(),
            many.3.first()
        );
        if on_existing != OnExisting::Fail {
            assert!(
                many.2 > 1,
                "{on_existing:?}: one batch at a time ({} at most, summary {})",
                many.2,
                many.0
            );
            assert!(one.0.contains(r#""line":52,"#), "{}", one.0);
        }
    }
}

/// The order of the skipped lines is the one of batches written one at a time: a line
/// that is not a document, read before the batch holding an earlier refused document was
/// sent, comes first.
#[tokio::test]
async fn skipped_lines_come_in_the_order_of_one_batch_at_a_time() {
    let mut input = String::new();
    for i in 0..120 {
        input += &line(&format!("doc-{i}"), 1, i, if i == 2 { 4_000 } else { 100 });
        input.push('\n');
        if i == 10 || i == 60 || i == 110 {
            input += "not a document\n";
        }
    }
    // Lines: documents 0..=10 are lines 1..=11, the first bad line is 12; document 2
    // (line 3) is too large; the first batch (documents 0..=49) is sent when document 50
    // (line 52) comes, after line 12 was read.
    for in_flight in [1, MAX_BATCHES_IN_FLIGHT] {
        let (summary, documents, _, _) =
            run(&input, "", &options(OnExisting::Skip, in_flight)).await;
        let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
        let lines: Vec<u64> = summary["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["line"].as_u64().unwrap())
            .collect();
        assert_eq!(lines, [12, 3, 63, 114], "{in_flight} in flight");
        assert_eq!(documents.len(), 119);
    }
}

/// Imports `input` into a memory store holding `stored`, `per_batch` documents per batch;
/// returns the summary (or the error) and the documents stored afterwards.
async fn import_with(
    input: &str,
    stored: &str,
    options: &ImportOptions,
    per_batch: usize,
) -> (String, Vec<Document>) {
    let store = docstore_any::open_url("memory:?max_doc_bytes=3000")
        .await
        .unwrap();
    import(&store, &mut Cursor::new(stored), options)
        .await
        .unwrap();
    let seen = match import_in_batches(&store, &mut Cursor::new(input), options, per_batch).await {
        Ok(summary) => serde_json::to_string(&summary).unwrap(),
        Err(err) => format!("exit {}: {err}", err.code),
    };
    let page = store
        .query("s", "c", &Query::new().limit(10_000))
        .await
        .unwrap();
    (seen, page.documents)
}

/// A resumed import decides from its batched reads exactly what writing each document alone
/// decides: the stored documents are some of the lines (equal), older ones, newer ones and
/// one too large for the store, and the input repeats ids within a batch with other
/// versions; for every `--on-existing`, the summary (skipped lines in order) and the stored
/// documents equal those of the per-document path (batches of one, never read).
#[tokio::test]
async fn a_resumed_import_decides_as_each_document_alone() {
    let mut input = String::new();
    let mut stored = String::new();
    for i in 0..300_i64 {
        let id = format!("doc-{}", i % 120);
        let version = 1 + (i / 120) as u64;
        let body = if i == 7 { 4_000 } else { 100 };
        input += &(line(&id, version, i, body) + "\n");
        if i % 3 == 0 {
            // Stored as the line: equal.
            stored += &(line(&id, version, i, body.min(100)) + "\n");
        }
        if i % 3 == 1 && i < 120 {
            // Stored newer or older than the line.
            let stored_version = if i % 2 == 0 { 9 } else { 1 };
            stored += &(line(&format!("doc-{}", i + 1), stored_version, -5, 50) + "\n");
        }
    }
    for on_existing in [OnExisting::Skip, OnExisting::Newer, OnExisting::Overwrite] {
        let options = options(on_existing, MAX_BATCHES_IN_FLIGHT);
        let alone = import_with(&input, &stored, &options, 1).await;
        let batched = import_with(&input, &stored, &options, MAX_BATCH_WRITES).await;
        assert_eq!(alone.0, batched.0, "{on_existing:?}: the summaries differ");
        assert_eq!(alone.1, batched.1, "{on_existing:?}: the stores differ");
        assert!(batched.0.contains(r#""already_present":"#), "{}", batched.0);
    }
}
