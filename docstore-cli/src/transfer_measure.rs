//! The batched import against the one-restore-per-document path it replaced: a correctness
//! check that runs always, and the speed comparison, ignored by default:
//!
//! ```sh
//! cargo test --release -p docstore-cli --lib measure_import_speed -- --ignored --nocapture
//! ```
//!
//! (`DOCSTORE_MEASURE_DOCS` sets the number of documents, default 100 000 of about 1 KB.)

use super::*;
use crate::args::OnExisting;
use std::io::Cursor;
use std::time::Instant;

/// `n` export lines of about 1 KB each in site `s`, collections `c0`..`c3`.
fn lines(n: usize) -> Vec<u8> {
    lines_with_body(n, |_| 14)
}

/// `n` export lines whose body repeats a 57-byte phrase `repeats(i)` times.
fn lines_with_body(n: usize, repeats: impl Fn(usize) -> usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 1_200);
    for i in 0..n {
        let data = docstore::object(serde_json::json!({
            "title": format!("document number {i} with a title of moderate length"),
            "body": "lorem ipsum dolor sit amet, consectetur adipiscing elit ".repeat(repeats(i)),
            "n": i,
            "score": i as f64 / 7.0,
            "tags": ["a", "b", format!("t{}", i % 17)],
            "nested": {"open": i % 2 == 0, "owner": format!("user-{}", i % 101)},
        }))
        .unwrap();
        let document = Document {
            expires_at: None,
            id: format!("doc-{i:07}"),
            data,
            created_at: 1_700_000_000_000_000_000 + i as i64,
            updated_at: 1_700_000_000_000_000_000 + i as i64,
            created_by: "origin".into(),
            updated_by: "origin".into(),
            version: 3,
        };
        let record = Record::new("s", &format!("c{}", i % 4), document);
        serde_json::to_writer(&mut out, &record).unwrap();
        out.push(b'\n');
    }
    out
}

fn options() -> ImportOptions {
    ImportOptions {
        site: Some("s".into()),
        on_existing: OnExisting::Skip,
        in_flight: MAX_BATCHES_IN_FLIGHT,
        errors: Arc::default(),
    }
}

/// A resumed import (some ids already stored, one id twice in the input) keeps its meaning:
/// the batches holding a stored id fall back to one document at a time, and every count is
/// what the per-document path gives.
#[tokio::test(flavor = "multi_thread")]
async fn resumed_import_skips_what_is_stored() {
    let input = lines(230);
    let store = docstore_any::open_url("memory:").await.unwrap();
    // The first 70 lines were imported by an interrupted run.
    let first: Vec<u8> = input
        .split_inclusive(|b| *b == b'\n')
        .take(70)
        .flatten()
        .copied()
        .collect();
    let summary = import(&store, &mut Cursor::new(first), &options())
        .await
        .unwrap();
    assert_eq!(summary.imported, 70);
    // The whole file again, with line 200 repeated at the end.
    let mut again = input.clone();
    let repeated = input.split(|b| *b == b'\n').nth(199).unwrap().to_vec();
    again.extend_from_slice(&repeated);
    again.push(b'\n');
    let summary = import(&store, &mut Cursor::new(again), &options())
        .await
        .unwrap();
    assert_eq!(
        (summary.imported, summary.already_present),
        (160, 71),
        "{summary:?}"
    );
    assert!(summary.skipped.is_empty(), "{:?}", summary.skipped);
    assert_eq!(store.count("s").await.unwrap(), 230);
    let stored = store
        .get(&Key::new("s", "c3", "doc-0000199").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((stored.version, stored.created_by.as_str()), (3, "origin"));
}

/// A document the store refuses (here: larger than `max_doc_bytes`) is skipped with its
/// line number, and the rest of its batch is imported.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_document_does_not_sink_its_batch() {
    // Line 4 (document 3) is about 6 KB, the others about 1 KB.
    let input = lines_with_body(10, |i| if i == 3 { 100 } else { 14 });
    let store = docstore_any::open_url("memory:?max_doc_bytes=3000")
        .await
        .unwrap();
    let summary = import(&store, &mut Cursor::new(input), &options())
        .await
        .unwrap();
    let skipped: Vec<u64> = summary.skipped.iter().filter_map(|s| s.line).collect();
    assert_eq!((summary.imported, skipped), (9, vec![4]), "{summary:?}");
    assert_eq!(store.count("s").await.unwrap(), 9);
}

/// The speed comparison: the same lines into fresh SQLite files (default durability,
/// `synchronous = FULL`): one `restore` (one commit) per document, batches one at a time,
/// then batches with [`MAX_BATCHES_IN_FLIGHT`] in flight (the import's way). Prints the
/// figures; timing is not asserted. On the CLI's runtime (current-thread, see `main.rs`): on
/// a multi-thread one SQLite writes a lone call in place and the batches in flight would not
/// be committed together (see [`Pending`]).
#[tokio::test]
#[ignore = "a measurement: run with --ignored --nocapture, in release"]
async fn measure_import_speed() {
    let n: usize = std::env::var("DOCSTORE_MEASURE_DOCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let input = lines(n);
    let dir = tempfile::tempdir().unwrap();
    let mut seconds = Vec::new();
    for (name, per_batch, in_flight) in [
        ("one restore per document", 1, 1),
        ("batches one at a time", MAX_BATCH_WRITES, 1),
        ("batches in flight", MAX_BATCH_WRITES, MAX_BATCHES_IN_FLIGHT),
    ] {
        let url = format!(
            "sqlite:{}",
            dir.path()
                .join(format!("{per_batch}-{in_flight}.db"))
                .display()
        );
        let store = docstore_any::open_url(&url).await.unwrap();
        let started = Instant::now();
        let options = ImportOptions {
            in_flight,
            ..options()
        };
        let summary = import_in_batches(&store, &mut Cursor::new(&input), &options, per_batch)
            .await
            .unwrap();
        let elapsed = started.elapsed().as_secs_f64();
        assert_eq!(summary.imported, n as u64);
        assert_eq!(store.count("s").await.unwrap(), n as u64);
        println!(
            "{name:>26}: {n} documents ({} bytes) in {elapsed:.2} s = {:.0} documents/s",
            input.len(),
            n as f64 / elapsed
        );
        seconds.push(elapsed);
    }
    println!(
        "batched import is {:.1}x faster than one restore per document ({:.1}x with one batch \
         at a time; batches in flight are {:.1}x faster than one at a time)",
        seconds[0] / seconds[2],
        seconds[0] / seconds[1],
        seconds[1] / seconds[2]
    );
}

/// The same comparison on DynamoDB (dynoxide, through `scripts/with-dynamodb-emulators`):
/// one transaction per document against batches of 50 in one `TransactWriteItems` each, one
/// at a time and [`MAX_BATCHES_IN_FLIGHT`] at once (on the CLI's current-thread runtime).
///
/// ```sh
/// scripts/with-dynamodb-emulators cargo test --release -p docstore-cli --lib \
///     measure_dynamodb_import_speed -- --ignored --nocapture
/// ```
///
/// (`DOCSTORE_MEASURE_DOCS` sets the number of documents, default 10 000 of about 1 KB.)
#[tokio::test]
#[ignore = "a measurement on dynoxide: run with --ignored --nocapture, in release"]
async fn measure_dynamodb_import_speed() {
    let endpoint = std::env::var("DOCSTORE_DYNOXIDE_ENDPOINT")
        .expect("run through scripts/with-dynamodb-emulators");
    let n: usize = std::env::var("DOCSTORE_MEASURE_DOCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let input = lines(n);
    let mut seconds = Vec::new();
    use docstore::config::CounterMode;
    for (name, per_batch, counters, in_flight) in [
        // What import did before batches and exact counters: PutItem + counter ADD each.
        ("per document, fast counters", 1, CounterMode::Fast, 1),
        ("per document, exact counters", 1, CounterMode::Exact, 1),
        (
            "batches one at a time",
            MAX_BATCH_WRITES,
            CounterMode::Exact,
            1,
        ),
        (
            "batches in flight",
            MAX_BATCH_WRITES,
            CounterMode::Exact,
            MAX_BATCHES_IN_FLIGHT,
        ),
    ] {
        let table = format!(
            "measure-{}-{per_batch}-{counters:?}-{in_flight}",
            std::process::id()
        );
        let config = docstore::config::DynamoDbConfig {
            region: Some("us-east-1".into()),
            endpoint: Some(endpoint.clone()),
            counters,
            ..docstore::config::DynamoDbConfig::new(table)
        };
        let driver = docstore_dynamodb::DynamoStore::connect(&config, Default::default())
            .await
            .unwrap();
        driver.create_table().await.unwrap();
        let store = docstore::Store::new(driver);
        let started = Instant::now();
        let options = ImportOptions {
            in_flight,
            ..options()
        };
        let summary = import_in_batches(&store, &mut Cursor::new(&input), &options, per_batch)
            .await
            .unwrap();
        let elapsed = started.elapsed().as_secs_f64();
        assert_eq!(summary.imported, n as u64);
        assert_eq!(store.count("s").await.unwrap(), n as u64);
        println!(
            "{name:>26}: {n} documents into DynamoDB (dynoxide) in {elapsed:.2} s = {:.0} \
             documents/s",
            n as f64 / elapsed
        );
        seconds.push(elapsed);
    }
    println!(
        "batched DynamoDB import is {:.1}x faster than the path before batches, {:.1}x \
         faster than per-document exact writes; batches in flight are {:.1}x faster than \
         one at a time",
        seconds[0] / seconds[3],
        seconds[1] / seconds[3],
        seconds[2] / seconds[3]
    );
}
