//! Pushed-down queries against the reference evaluator: thousands of random documents,
//! random queries (every operator, mixed kinds, nested and escaped paths, several sort keys,
//! paging), compared page by page.

use docstore::query::Query;
use docstore::strategies;
use docstore::{Document, Key, ManualClock, Store, StoreOptions};
use docstore_sqlite::{Durability, SqliteOptions, SqliteStore};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use std::sync::Arc;

const DOCS: usize = 2_000;
const SITE: &str = "props";
const COLLECTION: &str = "docs";

/// Ids that sort awkwardly: unicode, quotes, SQL-looking text.
fn id(i: usize) -> String {
    match i % 7 {
        0 => format!("{i:05}"),
        1 => format!("é{i}"),
        2 => format!("'){i}--"),
        3 => format!("\"{i}\\"),
        4 => format!("😀{i}"),
        5 => format!("Z{i}"),
        _ => format!("{i}"),
    }
}

/// A file-backed store holding `DOCS` random documents (some rewritten, so versions,
/// actors and timestamps vary and tie), and the documents as stored.
async fn populate(dir: &tempfile::TempDir) -> (SqliteStore, Vec<Document>) {
    let clock = Arc::new(ManualClock::new(1_000));
    let options = StoreOptions::default().with_clock(clock.clone());
    // Durability does not change answers; Normal keeps the 2 700 writes quick.
    let sqlite = SqliteOptions::default().with_durability(Durability::Normal);
    let store = SqliteStore::open_with(dir.path().join("props.db"), options, sqlite).unwrap();
    let mut runner = TestRunner::deterministic();
    let data = strategies::data();
    let actors = ["", "alice", "bob", "é"];
    let mut docs = Vec::with_capacity(DOCS);
    for i in 0..DOCS {
        let key = Key::new(SITE, COLLECTION, id(i)).unwrap();
        let value = data.new_tree(&mut runner).unwrap().current();
        let mut doc = store.create(&key, value, actors[i % 4]).await.unwrap();
        if i % 3 == 0 {
            clock.advance((i % 5) as i64);
            let value = data.new_tree(&mut runner).unwrap().current();
            doc = store.put(&key, value, actors[(i / 3) % 4]).await.unwrap();
        }
        if i % 2 == 0 {
            clock.advance(1);
        }
        docs.push(doc);
    }
    (store, docs)
}

fn query() -> impl Strategy<Value = Query> {
    let limit = prop_oneof![
        1 => Just(None),
        3 => (1usize..6).prop_map(Some),
        1 => (20usize..300).prop_map(Some),
    ];
    (strategies::query(), limit).prop_map(|(mut q, limit)| {
        q.limit = limit;
        q
    })
}

#[test]
fn pages_equal_the_reference_evaluator() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (store, docs) = rt.block_on(populate(&dir));
    // What the store holds is exactly what its writes returned.
    let all = rt
        .block_on(store.query(SITE, COLLECTION, &Query::new()))
        .unwrap();
    let mut sorted = docs.clone();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(all.documents, sorted);

    let cases = conformance_tests::property_cases(300);
    let mut runner = TestRunner::new(Config {
        cases,
        ..Config::default()
    });
    runner
        .run(&query(), |query| {
            let mut query = query;
            // Walk at most 12 pages of each query (a limit of 1 over 2 000 matches would
            // take 2 000 round trips), comparing every page with the reference's.
            for _ in 0..12 {
                let got = rt.block_on(store.query(SITE, COLLECTION, &query)).unwrap();
                let want = query.compile().unwrap().evaluate(&docs);
                prop_assert_eq!(
                    &got,
                    &want,
                    "query {}",
                    serde_json::to_string(&query).unwrap()
                );
                match got.next {
                    Some(next) => query.cursor = Some(next),
                    None => break,
                }
            }
            Ok(())
        })
        .unwrap();
}
