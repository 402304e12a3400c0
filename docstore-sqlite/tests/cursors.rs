//! Cursors the store did not make but that decode and carry the right fingerprint (a
//! client can forge one): values of another kind than a metadata column's must still give
//! the reference's answer, not an SQL error.

use docstore::query::{CursorPosition, Query};
use docstore::{Key, Store};
use docstore_sqlite::SqliteStore;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread")]
async fn forged_cursor_values_answer_like_the_reference() {
    let store = Store::new(SqliteStore::in_memory().unwrap());
    let mut docs = Vec::new();
    for i in 0..10 {
        let key = Key::new("s", "c", format!("d{i}")).unwrap();
        let doc = store
            .create(&key, docstore::object(json!({"n": i % 3})).unwrap(), "a")
            .await
            .unwrap();
        let doc = if i % 2 == 0 {
            store.put(&key, doc.data, "b").await.unwrap()
        } else {
            doc
        };
        docs.push(doc);
    }
    let orders = [
        Query::new().order_by("$version").limit(3),
        Query::new()
            .order_by_desc("$created_by")
            .order_by("n")
            .limit(3),
        Query::new().order_by("$id").limit(3),
        Query::new().order_by("n").order_by_desc("$id").limit(3),
    ];
    let forged_values = [
        json!("x"),
        json!(2.5),
        json!(u64::MAX),
        json!(null),
        json!([1]),
        json!(true),
    ];
    for query in orders {
        let first = store.query("s", "c", &query).await.unwrap();
        let cursor = first.next.expect("more than one page");
        let position = CursorPosition::decode(&cursor).unwrap();
        for slot in 0..position.keys.len() {
            for value in forged_values
                .iter()
                .cloned()
                .map(Some)
                .chain([None::<Value>])
            {
                let mut forged = position.clone();
                forged.keys[slot] = value;
                let query = query.clone().after(Some(forged.encode()));
                let got = store.query("s", "c", &query).await.unwrap();
                let want = query.compile_for("s", "c").unwrap().evaluate(&docs);
                assert_eq!(got, want, "{query:?} {forged:?}");
            }
        }
    }
}

/// On a current-thread runtime the store runs SQLite on the blocking pool (it cannot run
/// it in place there); every kind of call still works.
#[tokio::test(flavor = "current_thread")]
async fn works_on_a_current_thread_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(SqliteStore::open(dir.path().join("ct.db")).unwrap());
    let key = Key::new("s", "c", "a").unwrap();
    store
        .create(&key, docstore::object(json!({"n": 1})).unwrap(), "x")
        .await
        .unwrap();
    let patch = docstore::object(json!({"m": 2})).unwrap();
    let doc = store.update(&key, &patch, "y").await.unwrap();
    assert_eq!(doc.version, 2);
    assert_eq!(store.get(&key).await.unwrap(), Some(doc));
    let page = store.query("s", "c", &Query::new()).await.unwrap();
    assert_eq!(page.documents.len(), 1);
    assert!(store.delete(&key).await.unwrap());
    assert_eq!(store.count("s").await.unwrap(), 0);
}

/// Filters too large for one SQLite expression (thousands of `Or` terms, deep nesting) are evaluated in memory, with the same answer, paging included.
#[tokio::test(flavor = "multi_thread")]
async fn huge_filters_answer_like_the_reference() {
    use docstore::query::Filter;
    let store = Store::new(SqliteStore::in_memory().unwrap());
    let mut docs = Vec::new();
    for i in 0..50 {
        let key = Key::new("s", "c", format!("d{i:02}")).unwrap();
        let data = docstore::object(json!({"n": i, "s": format!("v{i}")})).unwrap();
        docs.push(store.create(&key, data, "").await.unwrap());
    }
    let wide = Filter::any((0..3_000).map(|i| Filter::eq("n", i * 2)));
    // Nested two-term `Or`s with a `Not` each, as deep as the core allows
    // (`MAX_FILTER_DEPTH`): 31 levels of `Or`/`Not` pairs under the limit of 64.
    let mut deep = Filter::eq("s", "v3");
    for i in 0..(docstore::query::MAX_FILTER_DEPTH / 2 - 1) {
        deep = Filter::any([Filter::eq("n", i % 40), !deep]);
    }
    let wide_and = Filter::all((0..700).map(|i| Filter::ne("n", 1_000 + i)));
    // Shallow but with 30 x 30 x 4 leaves: too many parameters for one statement.
    let bushy = Filter::all((0..30).map(|i| {
        Filter::any((0..30).map(move |j| {
            Filter::all([
                Filter::ne("n", 100 + i),
                Filter::ne("s", format!("w{j}")),
                Filter::gte("n", 0),
                Filter::prefix("s", "v"),
            ])
        }))
    }));
    let queries = [
        Query::new().filter(wide_and.clone()).limit(11),
        Query::new().filter(wide_and).order_by("s").limit(11),
        Query::new().filter(bushy.clone()).limit(13),
        Query::new().filter(bushy).order_by_desc("n").limit(13),
        Query::new().filter(wide.clone()).limit(7),
        Query::new()
            .filter(wide.clone())
            .order_by_desc("s")
            .limit(7),
        Query::new().filter(wide).order_by_desc("$id"),
        Query::new().filter(deep.clone()).limit(9),
        Query::new().filter(deep).order_by("n").limit(9),
    ];
    for query in queries {
        let mut query = query;
        loop {
            let got = store.query("s", "c", &query).await.unwrap();
            let want = query.compile_for("s", "c").unwrap().evaluate(&docs);
            assert_eq!(got, want);
            match got.next {
                Some(next) => query.cursor = Some(next),
                None => break,
            }
        }
    }
}
