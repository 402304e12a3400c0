//! One function per entry point that takes input from strangers (docs/contract.md; the design's
//! "Hostile input"): each takes raw bytes, drives the real parser or decoder, and panics when
//! an invariant breaks — a malformed input must be refused with the precise error
//! (`InvalidArgument`, `TooLarge`, exit code 6 at the command line), and what is accepted
//! must read back as itself. The fuzz targets in `fuzz/` call these functions, and the
//! `fuzz_corpora` test replays their corpora and every crash case through the same ones.
//!
//! Not part of the crate's API: hidden from its documentation and free to change.

use crate::exit::{self, CliError};
use crate::timefmt::TimeFormat;
use docstore::batch::Write;
use docstore::document::{self, MAX_DEPTH};
use docstore::feed::{ChangeCursor, FeedScope, FeedStart};
use docstore::query::{CompiledFilter, CursorPosition, FieldPath};
use docstore::{
    Cursor, DEFAULT_MAX_DOC_BYTES, Data, Document, Error, ErrorKind, Index, IndexSet, Key,
    ManualClock, Query, Store, StoreOptions, json,
};
use serde_json::{Value, json};
use std::future::Future;
use std::path::Path;
use std::sync::Arc;

/// The site and collection every store-backed check uses.
const SITE: &str = "fuzz";
const COLLECTION: &str = "docs";

/// The document-size limit of the patch check: small, so that merges cross it often.
const PATCH_LIMIT: usize = 512;

/// One fuzzed entry point.
pub struct Target {
    /// The name of its fuzz target and of its corpus folders.
    pub name: &'static str,
    /// The function the target calls with each input.
    pub run: fn(&[u8]),
}

/// Every fuzzed entry point.
pub const TARGETS: &[Target] = &[
    Target {
        name: "query_text",
        run: query_text,
    },
    Target {
        name: "query_json",
        run: query_json,
    },
    Target {
        name: "document",
        run: document,
    },
    Target {
        name: "patch",
        run: patch,
    },
    Target {
        name: "query_cursor",
        run: query_cursor,
    },
    Target {
        name: "feed_cursor",
        run: feed_cursor,
    },
    Target {
        name: "config",
        run: config,
    },
    Target {
        name: "url",
        run: url,
    },
    Target {
        name: "import_line",
        run: import_line,
    },
    Target {
        name: "batch_file",
        run: batch_file,
    },
];

/// Query text (`Query::parse`): a parse error points inside the text; a parsed query reads
/// back from its `to_text` as itself and runs on memory and SQLite with the same answer.
pub fn query_text(input: &[u8]) {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    match Query::parse(text) {
        Err(err) => {
            let lines = text.split('\n').count();
            assert!(
                err.line >= 1 && err.line <= lines && err.column >= 1 && !err.message.is_empty(),
                "parse error outside the text: {err:?} for {text:?}"
            );
        }
        Ok(query) => {
            reads_back_as_text(&query);
            runs_alike(&query);
        }
    }
}

/// Filter and query JSON, as the command line reads a QUERY that starts with `{`: refused
/// with exit code 6, or a query that serializes back to itself and runs alike everywhere.
pub fn query_json(input: &[u8]) {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    if !text.trim_start().starts_with('{') {
        return; // the text form: `query_text`
    }
    let query = match crate::run::parse_query(Some(text)) {
        Ok(query) => query,
        Err(err) => return refused(&err, text),
    };
    let json = serde_json::to_string(&query).expect("a parsed query serializes");
    match crate::run::parse_query(Some(&json)) {
        Ok(again) => assert_eq!(again, query, "query JSON {json:?} reads back differently"),
        Err(err) => panic!("query JSON {json:?} does not read back: {}", err.message),
    }
    if query.compile().is_ok() {
        let mut plain = query.clone();
        plain.cursor = None;
        plain.consistent = false;
        reads_back_as_text(&plain);
    }
    runs_alike(&query);
}

/// A document as `create`/`put` read it from the command line (bounded JSON, an object, the
/// size and depth checks): kept exactly, or refused as `InvalidArgument` / `TooLarge`.
pub fn document(input: &[u8]) {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let Ok(value) = json::parse::<Value>(text, MAX_DEPTH) else {
        return;
    };
    let data = match docstore::object(value) {
        Ok(data) => data,
        Err(err) => return precise(&err, text),
    };
    let size = document::data_size(&data);
    assert!(
        document::data_size_bound(&data) >= size,
        "size bound below the size for {text:?}"
    );
    match document::check_size(&data, DEFAULT_MAX_DOC_BYTES) {
        Ok(()) => {}
        Err(Error::TooLarge { size: told, limit }) => {
            assert!(
                told == size && size > limit,
                "TooLarge {told} of {limit}: {text:?}"
            )
        }
        Err(err) => return precise(&err, text),
    }
    let written = serde_json::to_string(&data).expect("data serializes");
    let again: Data = json::parse(&written, MAX_DEPTH)
        .unwrap_or_else(|err| panic!("stored document {written:?} does not read back: {err}"));
    assert_eq!(again, data, "document {text:?} is not kept exactly");
}

/// A merge patch (`update`, a batch's `update`) applied as the stores apply it: the memory
/// store's in-place or copying merge and the batch decision give RFC 7386's result, refused
/// exactly when the result is too large or too deep, and nothing is written then.
pub fn patch(input: &[u8]) {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let Ok(value) = json::parse::<Value>(text, MAX_DEPTH) else {
        return;
    };
    let Ok(patch) = docstore::object(value) else {
        return;
    };
    let current = patch_target();
    let mut expected = current.data.clone();
    docstore::merge_patch(&mut expected, &patch);
    let verdict = document::check_size(&expected, PATCH_LIMIT);
    if document::merged_fits(&current.data, &patch, PATCH_LIMIT) {
        assert!(
            verdict.is_ok(),
            "merged_fits but the merge is refused: {text:?}"
        );
    }
    let mut twice = expected.clone();
    docstore::merge_patch(&mut twice, &patch);
    assert_eq!(twice, expected, "merge patch is not idempotent: {text:?}");

    let key = Key::new(SITE, COLLECTION, &current.id).expect("a valid key");
    let mut bytes = docstore::batch::BatchBytes::default();
    let decided = docstore::batch::decide(
        0,
        &Write::update(key.clone(), patch.clone()),
        Some(&current),
        "fuzz",
        current.updated_at,
        PATCH_LIMIT,
        &mut bytes,
    );
    let store = patch_store();
    let stored = block_on(async {
        store
            .put(&key, current.data.clone(), "fuzz")
            .await
            .expect("the fixed document fits");
        let updated = store.update(&key, &patch, "fuzz").await;
        (updated, store.get(&key).await.expect("a memory read"))
    });
    match verdict {
        Ok(()) => {
            let (updated, _) = stored;
            let updated = updated.unwrap_or_else(|err| panic!("update refused: {err} {text:?}"));
            assert_eq!(
                updated.data, expected,
                "memory store merged otherwise: {text:?}"
            );
            match decided {
                Ok(docstore::batch::Decision::Store { document, .. }) => {
                    assert_eq!(document.data, expected, "batch merged otherwise: {text:?}")
                }
                other => panic!("batch decided {other:?} for a fitting merge: {text:?}"),
            }
        }
        Err(err) => {
            precise(&err, text);
            let (updated, after) = stored;
            let refusal = updated.expect_err("the store wrote a refused merge");
            assert!(same_kind(&refusal, &err), "{refusal} vs {err}: {text:?}");
            let after = after.expect("the fixed document is still there");
            assert_eq!(
                after.data, current.data,
                "a refused update changed the document"
            );
            let refusal = decided.expect_err("the batch took a refused merge");
            let Error::Batch { source, .. } = &refusal else {
                panic!("a batch refusal is not Error::Batch: {refusal}");
            };
            assert!(same_kind(source, &err), "{source} vs {err}: {text:?}");
        }
    }
}

/// Query cursors (`Query::cursor`, `--cursor`): decoded or refused as `InvalidArgument`,
/// re-encoded as themselves, and a query given one runs alike on memory and SQLite.
pub fn query_cursor(input: &[u8]) {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let cursor = Cursor::from(text);
    match CursorPosition::decode(&cursor) {
        Ok(position) => {
            let again = CursorPosition::decode(&position.encode()).expect("an encoded cursor");
            assert_eq!(again, position, "cursor {text:?} re-encodes differently");
        }
        Err(err) => precise(&err, text),
    }
    let query = Query::new().after(Some(cursor.clone()));
    runs_alike(&query);
    runs_alike(&query.order_by_desc("n").order_by("$updated_at"));
}

/// Change feed cursors (`--after`, `FeedStart::After`): parsed or refused as
/// `InvalidArgument`; each backend's decoding refuses another's, and a feed read from one
/// answers or says `InvalidArgument` / `CursorExpired`.
pub fn feed_cursor(input: &[u8]) {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let start = FeedStart::parse(text);
    let cursor = match ChangeCursor::parse(text) {
        Ok(cursor) => cursor,
        Err(err) => {
            precise(&err, text);
            if !matches!(text, "start" | "oldest" | "now") {
                assert!(start.is_err(), "FeedStart takes {text:?}, ChangeCursor not");
            }
            return;
        }
    };
    assert_eq!(cursor.as_str(), text, "a cursor is its text");
    if let Ok(start) = &start {
        assert!(
            matches!(start, FeedStart::After(c) if c == &cursor),
            "FeedStart::parse({text:?}) is {start:?}"
        );
    }
    match docstore_dynamodb::fuzzing::reencode_cursor(&cursor) {
        Ok(canonical) => {
            let again = docstore_dynamodb::fuzzing::reencode_cursor(&canonical)
                .expect("a DynamoDB cursor reads back");
            assert_eq!(
                again, canonical,
                "DynamoDB cursor {text:?} is not canonical"
            );
        }
        Err(err) => precise(&err, text),
    }
    let start = FeedStart::After(cursor);
    let stores = read_stores();
    block_on(async {
        for store in [&stores.memory, &stores.sqlite] {
            match store.changes(&FeedScope::whole_store(), &start, 10).await {
                Ok(_) | Err(Error::InvalidArgument(_) | Error::CursorExpired(_)) => {}
                Err(err) => panic!("a feed read from {text:?} failed with {err}"),
            }
        }
    });
}

/// A config file (`--config`): the `[database]` table read as `Config`, or exit code 6
/// naming the file; an accepted config writes back as TOML that reads as itself.
pub fn config(input: &[u8]) {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let path = Path::new("fuzz.toml");
    let config = match crate::run::config_text(text, path) {
        Ok(config) => config,
        Err(err) => return refused(&err, text),
    };
    let _ = config.database.store_options();
    let Ok(written) = toml::to_string(&config) else {
        return; // e.g. a number TOML cannot write: nothing read it from a file
    };
    match crate::run::config_text(&written, path) {
        Ok(again) => assert_eq!(again, config, "config {written:?} reads back differently"),
        Err(err) => panic!("config {written:?} does not read back: {}", err.message),
    }
}

/// A store URL (`--store`, `$DOCSTORE_URL`, `docstore_any::parse_url`), parsed without
/// opening a store: the settings, or `InvalidArgument`.
pub fn url(input: &[u8]) {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    match docstore_any::parse_url(text) {
        Ok(database) => {
            let config = docstore::config::Config { database };
            let value = serde_json::to_value(&config).expect("a config serializes");
            let again: docstore::config::Config =
                serde_json::from_value(value).expect("a parsed URL's config reads back");
            assert_eq!(again, config, "URL {text:?}");
        }
        Err(err) => precise(&err, text),
    }
}

/// One `import` line (its bytes as read, with its newline): skipped with a reason, or a record
/// whose document the store checks; an accepted record writes back, in either time format,
/// as a line that reads as itself.
pub fn import_line(input: &[u8]) {
    let line = match input.iter().position(|&b| b == b'\n') {
        Some(end) => &input[..=end],
        None => input,
    };
    let record = match crate::transfer::read_record(line, true) {
        Ok(Some(record)) => record,
        Ok(None) => return,
        Err(reason) => {
            assert!(!reason.is_empty(), "a skip without a reason");
            return;
        }
    };
    for time in [TimeFormat::Ns, TimeFormat::Rfc3339] {
        let written = record.to_line(time);
        let again = crate::transfer::read_record(written.as_bytes(), false);
        assert!(
            matches!(&again, Ok(Some(again)) if *again == record),
            "record line {written:?} reads back as {again:?}"
        );
    }
    let text = String::from_utf8_lossy(line);
    match record.into_parts() {
        Ok((key, document)) => {
            if let Err(err) = document::check_restorable(&key, &document, DEFAULT_MAX_DOC_BYTES) {
                precise(&err, &text);
            }
        }
        Err(err) => precise(&err, &text),
    }
}

/// A batch file (`docstore batch`): refused with exit code 6 naming the write, or writes
/// that a fresh store applies all or not at all.
pub fn batch_file(input: &[u8]) {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let batch = match crate::batch::parse(text, SITE) {
        Ok(batch) => batch,
        Err(err) => return refused(&err, text),
    };
    assert!(batch.writes.iter().all(|write| write.key().site() == SITE));
    let store = Store::new(docstore_memory::MemoryStore::new());
    block_on(async {
        match store.write_all(&batch.writes, "fuzz").await {
            Ok(outcomes) => assert_eq!(outcomes.len(), batch.writes.len()),
            Err(err) => {
                assert!(
                    matches!(
                        err.kind(),
                        ErrorKind::InvalidArgument
                            | ErrorKind::TooLarge
                            | ErrorKind::NotFound
                            | ErrorKind::AlreadyExists
                            | ErrorKind::Conflict
                    ),
                    "batch {text:?} failed with {err}"
                );
                let all = store
                    .query(SITE, "c", &Query::new())
                    .await
                    .map(|page| page.documents.len());
                assert!(matches!(all, Ok(0) | Err(_)), "a refused batch wrote");
            }
        }
    });
}

/// The query reads back from its text form meaning the same: the same filter, order and
/// limit once compiled (the text may spell a path differently, e.g. without a needless
/// escape), or neither compiles.
fn reads_back_as_text(query: &Query) {
    let text = query.to_text();
    match Query::parse(&text) {
        Ok(again) => assert_eq!(
            meaning(&again),
            meaning(query),
            "query text {text:?} reads back as {again:?}, not as {query:?}"
        ),
        Err(err) => panic!("query text {text:?} does not parse: {err}"),
    }
}

/// What a query asks for, its paths parsed.
#[derive(Debug, PartialEq)]
struct Meaning {
    filter: Option<CompiledFilter>,
    order: Vec<(FieldPath, bool)>,
    limit: Option<usize>,
}

/// What `query` asks for: `None` when its paths do not compile.
fn meaning(query: &Query) -> Option<Meaning> {
    let filter = match &query.filter {
        Some(filter) => Some(CompiledFilter::new(filter).ok()?),
        None => None,
    };
    let order = query
        .order
        .iter()
        .map(|order| Some((FieldPath::parse(&order.field).ok()?, order.descending)))
        .collect::<Option<Vec<_>>>()?;
    Some(Meaning {
        filter,
        order,
        limit: query.limit,
    })
}

/// The query runs on the fixed documents with the reference evaluator, the memory store and
/// SQLite: the same documents and next cursor from each, or `InvalidArgument` from each.
fn runs_alike(query: &Query) {
    let stores = read_stores();
    let reference = query
        .compile_for(SITE, COLLECTION)
        .map(|compiled| compiled.evaluate(&stores.documents));
    let (memory, sqlite) = block_on(async {
        (
            stores.memory.query(SITE, COLLECTION, query).await,
            stores.sqlite.query(SITE, COLLECTION, query).await,
        )
    });
    let shown = serde_json::to_string(query).unwrap_or_default();
    for (backend, answer) in [("memory", memory), ("sqlite", sqlite)] {
        match (&reference, answer) {
            (Ok(expected), Ok(page)) => {
                let ids = |documents: &[Document]| {
                    documents.iter().map(|d| d.id.clone()).collect::<Vec<_>>()
                };
                assert_eq!(
                    ids(&page.documents),
                    ids(&expected.documents),
                    "{backend} answers {shown} otherwise"
                );
                assert_eq!(
                    page.next, expected.next,
                    "{backend} next cursor for {shown}"
                );
            }
            (Err(Error::InvalidArgument(_)), Err(Error::InvalidArgument(_))) => {}
            (expected, answer) => {
                panic!("{backend} answers {shown} with {answer:?}, the reference {expected:?}")
            }
        }
    }
}

/// The memory and SQLite stores the read-only checks query, holding the same documents at the
/// same times (a manual clock), and those documents as stored.
struct ReadStores {
    memory: Store,
    sqlite: Store,
    documents: Vec<Document>,
}

fn read_stores() -> &'static ReadStores {
    static STORES: std::sync::OnceLock<ReadStores> = std::sync::OnceLock::new();
    STORES.get_or_init(|| {
        let options = || {
            let index = Index::parse(COLLECTION, "by_n", ["n", "-s"]).expect("a valid index");
            StoreOptions::default()
                .with_clock(Arc::new(ManualClock::new(1_700_000_000_000_000_000)))
                .with_indexes(IndexSet::new([index]).expect("one index"))
        };
        let memory = Store::new(docstore_memory::MemoryStore::with_options(options()));
        let sqlite = Store::new(
            docstore_sqlite::SqliteStore::in_memory_with_options(options())
                .expect("an in-memory SQLite store"),
        );
        block_on(async {
            for (id, data) in fixed_documents() {
                let key = Key::new(SITE, COLLECTION, id).expect("a valid key");
                for store in [&memory, &sqlite] {
                    store.put(&key, data.clone(), "fuzz").await.expect("a put");
                }
            }
        });
        let documents = block_on(memory.query(SITE, COLLECTION, &Query::new()))
            .expect("the fixed documents")
            .documents;
        ReadStores {
            memory,
            sqlite,
            documents,
        }
    })
}

/// Documents with the awkward values queries meet: extreme and equal-valued numbers, nulls,
/// nesting, arrays, dotted and dollar keys, missing fields.
fn fixed_documents() -> Vec<(&'static str, Data)> {
    let values = [
        json!({"n": 1, "s": "a", "a": {"n": 2, "s": "x"}, "t": [1, "a", null]}),
        json!({"n": 1.0, "s": "b", "a.b": true, "$x": null}),
        json!({"n": -2.5, "s": "", "a": [1, 2], "b": {"a": {"b": false}}}),
        json!({"n": u64::MAX, "s": "é", "t": [[1], {"n": 1}]}),
        json!({"n": i64::MIN, "a": null, "b": "2024-05-01T12:00:00Z"}),
        json!({"n": 9_007_199_254_740_993u64, "s": "ab", "t": []}),
        json!({"n": 5e-324, "s": "B", "a": {"n": 2.0}}),
        json!({"s": null, "t": [1.0, 2], "$x": {"y": 1}}),
        json!({"n": "1", "s": 1, "a": {}}),
        json!({}),
    ];
    let ids = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
    ids.into_iter()
        .zip(values)
        .map(|(id, value)| (id, docstore::object(value).expect("an object")))
        .collect()
}

/// The document the patch check merges into.
fn patch_target() -> Document {
    let data = json!({
        "a": {"b": {"c": 1, "d": [1, 2]}, "e": "text"},
        "n": 5, "s": "string", "null": null, "list": [{"x": 1}], "deep": [[[[1]]]]
    });
    Document::first(
        "doc",
        docstore::object(data).expect("an object"),
        "fuzz",
        1_700_000_000_000_000_000,
    )
}

/// A fresh memory store refusing documents over [`PATCH_LIMIT`] bytes (fresh for every input,
/// so that inputs do not depend on each other and nothing piles up).
fn patch_store() -> Store {
    let options = StoreOptions::default().with_max_doc_bytes(PATCH_LIMIT);
    Store::new(docstore_memory::MemoryStore::with_options(options))
}

/// Whether two errors are of the same kind.
fn same_kind(a: &Error, b: &Error) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// A library refusal of hostile input is `InvalidArgument` or `TooLarge`.
fn precise(err: &Error, input: &str) {
    assert!(
        matches!(err, Error::InvalidArgument(_) | Error::TooLarge { .. }),
        "input {input:?} refused with {err:?}, not InvalidArgument or TooLarge"
    );
}

/// A command-line refusal of hostile input exits with code 6 (invalid input) and says why.
fn refused(err: &CliError, input: &str) {
    assert!(
        err.code == exit::INVALID_ARGUMENT && !err.message.is_empty(),
        "input {input:?} refused with exit code {}: {}",
        err.code,
        err.message
    );
}

/// Runs `future` on this thread's runtime.
fn block_on<F: Future>(future: F) -> F::Output {
    thread_local! {
        static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
    }
    RUNTIME.with(|runtime| runtime.block_on(future))
}
