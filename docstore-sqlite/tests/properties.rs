//! Pushed-down queries against the reference evaluator: thousands of random documents,
//! random queries (every operator, mixed kinds, nested and escaped paths, several sort keys,
//! paging), compared page by page.

use docstore::query::{FieldPath, Filter, Query};
use docstore::strategies;
use docstore::{Data, Document, Key, ManualClock, Store, StoreOptions};
use docstore_sqlite::{Durability, SqliteOptions, SqliteStore};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use serde_json::Value;
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

/// The data key "s" of the strategies becomes this one, which SQLite's JSON path syntax
/// cannot spell, so that the random runs also cover paths resolved outside SQLite's JSON
/// functions.
const AWKWARD_KEY: &str = "s\"\\";

fn rename_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let k = if k == "s" { AWKWARD_KEY.to_owned() } else { k };
                    (k, rename_keys(v))
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(rename_keys).collect()),
        other => other,
    }
}

fn rename_data(data: Data) -> Data {
    match rename_keys(Value::from(data)) {
        Value::Object(map) => map.into(),
        _ => unreachable!(),
    }
}

fn rename_path(field: &str) -> String {
    match FieldPath::parse(field).unwrap() {
        FieldPath::Data(segments) => FieldPath::Data(
            segments
                .into_iter()
                .map(|s| if s == "s" { AWKWARD_KEY.to_owned() } else { s })
                .collect(),
        )
        .to_string(),
        system => system.to_string(),
    }
}

fn rename_filter(filter: Filter) -> Filter {
    let all = |filters: Vec<Filter>| filters.into_iter().map(rename_filter).collect();
    match filter {
        Filter::And(filters) => Filter::And(all(filters)),
        Filter::Or(filters) => Filter::Or(all(filters)),
        Filter::Not(inner) => Filter::Not(Box::new(rename_filter(*inner))),
        Filter::Eq(f, v) => Filter::Eq(rename_path(&f), v),
        Filter::Ne(f, v) => Filter::Ne(rename_path(&f), v),
        Filter::Lt(f, v) => Filter::Lt(rename_path(&f), v),
        Filter::Lte(f, v) => Filter::Lte(rename_path(&f), v),
        Filter::Gt(f, v) => Filter::Gt(rename_path(&f), v),
        Filter::Gte(f, v) => Filter::Gte(rename_path(&f), v),
        Filter::In(f, v) => Filter::In(rename_path(&f), v),
        Filter::Exists(f) => Filter::Exists(rename_path(&f)),
        Filter::Prefix(f, p) => Filter::Prefix(rename_path(&f), p),
        Filter::Contains(f, v) => Filter::Contains(rename_path(&f), v),
        unserializable @ Filter::Unserializable { .. } => unserializable,
    }
}

/// A file-backed store holding `DOCS` random documents (some rewritten, so versions,
/// actors and timestamps vary and tie), and the documents as stored.
async fn populate(dir: &tempfile::TempDir) -> (Store, Vec<Document>) {
    let clock = Arc::new(ManualClock::new(1_000));
    let options = StoreOptions::default().with_clock(clock.clone());
    // Durability does not change answers; Normal keeps the 2 700 writes quick.
    let sqlite = SqliteOptions::default().with_durability(Durability::Normal);
    let store =
        Store::new(SqliteStore::open_with(dir.path().join("props.db"), options, sqlite).unwrap());
    let mut runner = TestRunner::deterministic();
    let data = strategies::data();
    let actors = ["", "alice", "bob", "é"];
    let mut docs = Vec::with_capacity(DOCS);
    for i in 0..DOCS {
        let key = Key::new(SITE, COLLECTION, id(i)).unwrap();
        let value = rename_data(data.new_tree(&mut runner).unwrap().current());
        let mut doc = store.create(&key, value, actors[i % 4]).await.unwrap();
        if i % 3 == 0 {
            clock.advance((i % 5) as i64);
            let value = rename_data(data.new_tree(&mut runner).unwrap().current());
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
        q.filter = q.filter.map(rename_filter);
        for order in &mut q.order {
            order.field = rename_path(&order.field);
        }
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
    assert!(
        docs.iter()
            .filter(|d| d.data.contains_key(AWKWARD_KEY))
            .count()
            > 100,
        "the awkward key is common"
    );

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
                let want = query.compile_for(SITE, COLLECTION).unwrap().evaluate(&docs);
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
