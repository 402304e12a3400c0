//! Inputs the SQLite backend refuses beyond the shared contract, each with a precise error
//! and no change: data nested deeper than serde_json can read back, versions beyond `i64`.

use docstore::{Data, Document, Error, Key, Store};
use docstore_sqlite::SqliteStore;
use serde_json::{Value, json};

/// Data nested `depth` levels deep: the data object, then `depth - 1` arrays.
fn nested(depth: usize) -> Data {
    let mut value = json!(1);
    for _ in 1..depth {
        value = Value::Array(vec![value]);
    }
    docstore::object(json!({ "a": value })).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn deepest_readable_nesting_round_trips_and_deeper_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(SqliteStore::open(dir.path().join("limits.db")).unwrap());
    let key = Key::new("s", "c", "deep").unwrap();
    let ok = store.create(&key, nested(127), "").await.unwrap();
    assert_eq!(store.get(&key).await.unwrap(), Some(ok.clone()));

    let other = Key::new("s", "c", "new").unwrap();
    for result in [
        store.create(&other, nested(128), "").await,
        store.put(&key, nested(128), "").await,
        store.update(&key, &nested(128), "").await,
    ] {
        match result {
            Err(Error::InvalidArgument(message)) => assert!(message.contains("nested")),
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }
    assert_eq!(store.get(&key).await.unwrap(), Some(ok));
    assert_eq!(store.get(&other).await.unwrap(), None);
    assert_eq!(store.count("s").await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn versions_beyond_i64_are_refused_by_restore() {
    let store = Store::new(SqliteStore::in_memory().unwrap());
    let key = Key::new("s", "c", "v").unwrap();
    let doc = Document {
        expires_at: None,
        id: "v".into(),
        data: Data::new(),
        created_at: 1,
        updated_at: 2,
        created_by: "a".into(),
        updated_by: "b".into(),
        version: i64::MAX as u64 + 1,
    };
    assert!(matches!(
        store.restore(&key, &doc).await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(store.get(&key).await.unwrap(), None);
    let doc = Document {
        version: i64::MAX as u64,
        ..doc
    };
    store.restore(&key, &doc).await.unwrap();
    assert_eq!(store.get(&key).await.unwrap(), Some(doc.clone()));

    // A document at the last version cannot be written again: a precise error, no change.
    let data = docstore::object(json!({"a": 1})).unwrap();
    for result in [
        store.put(&key, data.clone(), "c").await,
        store.update(&key, &data, "c").await,
    ] {
        match result {
            Err(Error::Backend { message, .. }) => {
                assert!(message.contains("does not fit"), "{message}")
            }
            other => panic!("expected Backend, got {other:?}"),
        }
    }
    assert_eq!(store.get(&key).await.unwrap(), Some(doc));
}

#[tokio::test(flavor = "multi_thread")]
async fn special_memory_names_open_a_private_in_memory_store() {
    for name in [":memory:", ""] {
        let store = Store::new(SqliteStore::open(name).unwrap());
        let key = Key::new("s", "c", "k").unwrap();
        store
            .create(&key, docstore::object(json!({"a": 1})).unwrap(), "")
            .await
            .unwrap();
        // Reads see the writes (they would not on a second connection's own database).
        assert!(store.get(&key).await.unwrap().is_some());
        let page = store
            .query("s", "c", &docstore::Query::new())
            .await
            .unwrap();
        assert_eq!(page.documents.len(), 1);
    }
}
