//! Hostile field paths and values: quotes, SQL fragments, `$`, backslashes, dots, control
//! characters, unicode and very long keys, in data and in filters and sort keys. Every answer
//! must be the reference evaluator's, no SQL error may surface, and nothing else changes.

use docstore::query::{FieldPath, Filter, Query};
use docstore::{Data, Document, Key, Store};
use docstore_sqlite::SqliteStore;
use serde_json::{Value, json};

/// Data keys that would break naive SQL or JSON-path building.
fn hostile_keys() -> Vec<String> {
    vec![
        "'".into(),
        "')--".into(),
        "'); DROP TABLE documents; --".into(),
        "\"".into(),
        "a\"b".into(),
        "\\".into(),
        "a\\\"b".into(),
        "$".into(),
        "$id".into(),
        "$.a".into(),
        "a.b".into(),
        "a[0]".into(),
        "*".into(),
        "%_".into(),
        "\u{0}".into(),
        "tab\there".into(),
        "é😀\u{202e}".into(),
        " ".into(),
        "k".repeat(5_000),
    ]
}

fn hostile_values() -> Vec<Value> {
    vec![
        json!("')--"),
        json!("'); DROP TABLE documents; --"),
        json!("\"quoted\""),
        json!("back\\slash"),
        json!("$.x"),
        json!("nul\u{0}in"),
        json!("é😀"),
        json!("%"),
        json!("v".repeat(10_000)),
        json!({"')--": {"\"": "\\"}}),
        json!(["')--", "\u{0}"]),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(5e-324),
    ]
}

/// The text form of a path whose single segment is `key`.
fn path_of(key: &str) -> String {
    FieldPath::Data(vec![key.to_owned()]).to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_paths_and_values_answer_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(SqliteStore::open(dir.path().join("hostile.db")).unwrap());

    // A bystander in another site and another collection: must never change.
    let bystander_key = Key::new("bystander", "docs", "b").unwrap();
    let bystander = store
        .create(
            &bystander_key,
            docstore::object(json!({"x": 1})).unwrap(),
            "",
        )
        .await
        .unwrap();
    let other_key = Key::new("hostile", "other", "o").unwrap();
    let other = store
        .create(
            &other_key,
            docstore::object(json!({"')--": "x"})).unwrap(),
            "",
        )
        .await
        .unwrap();

    let keys = hostile_keys();
    let values = hostile_values();
    let mut docs: Vec<Document> = Vec::new();
    for (i, value) in values.iter().enumerate() {
        let mut data = Data::new();
        for (j, key) in keys.iter().enumerate() {
            // Each document holds each key, with values rotating so filters split them.
            data.insert(key.clone(), values[(i + j) % values.len()].clone());
        }
        data.insert(
            "nested".into(),
            json!({ "')--": value, "a\"b": {"\\": value} }),
        );
        let id = format!("'){i}\"\\$é");
        let key = Key::new("hostile", "docs", &id).unwrap();
        let doc = store.create(&key, data, "')--").await.unwrap();
        assert_eq!(
            store.get(&key).await.unwrap().as_ref(),
            Some(&doc),
            "round trip"
        );
        docs.push(doc);
    }

    let mut paths: Vec<String> = keys.iter().map(|k| path_of(k)).collect();
    paths.push(r"nested.')--".into());
    paths.push(r#"nested.a"b.\\"#.into());
    paths.push(r"nested.a\.b".into());
    let mut checked = 0;
    for path in &paths {
        let mut filters = vec![Filter::exists(path.as_str())];
        for value in &values {
            filters.push(Filter::eq(path.as_str(), value.clone()));
            filters.push(Filter::ne(path.as_str(), value.clone()));
            filters.push(Filter::gte(path.as_str(), value.clone()));
            filters.push(Filter::lt(path.as_str(), value.clone()));
            filters.push(Filter::contains(path.as_str(), value.clone()));
            filters.push(Filter::is_in(path.as_str(), [value.clone(), json!(1)]));
            if let Some(s) = value.as_str() {
                let prefix: String = s.chars().take(3).collect();
                filters.push(Filter::prefix(path.as_str(), prefix));
            }
        }
        for filter in filters {
            for order in [vec![], vec![(path.clone(), true)]] {
                let mut query = Query::new().filter(filter.clone()).limit(3);
                for (field, descending) in order {
                    query = if descending {
                        query.order_by_desc(field)
                    } else {
                        query.order_by(field)
                    };
                }
                // Walk every page.
                loop {
                    let got = store.query("hostile", "docs", &query).await.unwrap();
                    let want = query
                        .compile_for("hostile", "docs")
                        .unwrap()
                        .evaluate(&docs);
                    assert_eq!(got, want, "{query:?}");
                    checked += 1;
                    match got.next {
                        Some(next) => query.cursor = Some(next),
                        None => break,
                    }
                }
            }
        }
    }
    assert!(checked > 1_000, "{checked} pages checked");

    // Updates through hostile keys touch only their document.
    let patch = docstore::object(json!({ "')--": null, "a\"b": {"\\": "patched"} })).unwrap();
    let key = Key::new("hostile", "docs", &docs[0].id).unwrap();
    let updated = store.update(&key, &patch, "x").await.unwrap();
    assert!(!updated.data.contains_key("')--"));
    assert_eq!(updated.data["a\"b"], json!({"\\": "patched"}));
    for doc in &docs[1..] {
        let key = Key::new("hostile", "docs", &doc.id).unwrap();
        assert_eq!(store.get(&key).await.unwrap().as_ref(), Some(doc));
    }
    assert_eq!(store.get(&bystander_key).await.unwrap(), Some(bystander));
    assert_eq!(store.get(&other_key).await.unwrap(), Some(other));
    assert_eq!(
        store.collections("hostile").await.unwrap(),
        vec![("docs".into(), values.len() as u64), ("other".into(), 1)]
    );
    assert_eq!(store.count("bystander").await.unwrap(), 1);
}
