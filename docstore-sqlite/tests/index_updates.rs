//! Index update triggers skip updates that leave the key unchanged (schema version 5): the
//! entries stay exact whether an update changes an indexed field (top level or nested) or
//! not, and a version-4 file's triggers are rebuilt by the migration.

use docstore::{Filter, Index, IndexSet, Key, Query, Store, StoreOptions};
use docstore_sqlite::SqliteStore;
use serde_json::json;
use std::path::Path;

fn open(path: &Path, indexed: bool) -> Store {
    let indexes = if indexed {
        vec![
            Index::parse("c", "by_status", ["status", "-meta.rank"]).unwrap(),
            Index::parse("c", "by_owner", ["owner"]).unwrap(),
        ]
    } else {
        Vec::new()
    };
    let options = StoreOptions::default().with_indexes(IndexSet::new(indexes).unwrap());
    Store::new(SqliteStore::open_with_options(path, options).unwrap())
}

/// The same writes on both stores: creates, then updates of unindexed, indexed top-level
/// and indexed nested fields.
async fn write(store: &Store) {
    for n in 0..30 {
        let key = Key::new("s", "c", format!("d{n:02}")).unwrap();
        let status = ["open", "done"][n % 2];
        let data = json!({"status": status, "owner": format!("o{}", n % 3),
                          "meta": {"rank": n, "note": "x"}, "other": 0});
        store
            .create(&key, docstore::object(data).unwrap(), "a")
            .await
            .unwrap();
    }
    for n in 0..30 {
        let key = Key::new("s", "c", format!("d{n:02}")).unwrap();
        let patch = match n % 4 {
            0 => json!({"other": n}),
            1 => json!({"status": "open"}),
            2 => json!({"meta": {"rank": 100 - n}}),
            _ => json!({"meta": {"note": "y"}, "owner": null}),
        };
        store
            .update(&key, &docstore::object(patch).unwrap(), "b")
            .await
            .unwrap();
    }
}

async fn answers(store: &Store) -> Vec<Vec<String>> {
    let queries = [
        Query::new()
            .filter(Filter::eq("status", "open"))
            .order_by_desc("meta.rank"),
        Query::new()
            .filter(Filter::eq("owner", "o1"))
            .order_by("owner"),
    ];
    let mut out = Vec::new();
    for query in &queries {
        let page = store.query("s", "c", query).await.unwrap();
        out.push(page.documents.iter().map(|d| d.id.clone()).collect());
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn indexed_answers_stay_exact_through_updates_and_the_migration() {
    let dir = tempfile::tempdir().unwrap();
    let (indexed, plain) = (dir.path().join("i.db"), dir.path().join("p.db"));
    let (store, reference) = (open(&indexed, true), open(&plain, false));
    write(&store).await;
    write(&reference).await;
    let expected = answers(&reference).await;
    assert_eq!(answers(&store).await, expected);
    let query = Query::new().filter(Filter::eq("status", "open"));
    let explain = store.explain("s", "c", &query).await.unwrap();
    assert!(format!("{explain:?}").contains("by_status"), "{explain:?}");
    drop(store);

    // A version-4 file (without what later versions added: the changes' `previous` column of
    // version 6, the indexes' `is_unique` of version 7, the expiry columns and indexes of
    // version 8): the migration rebuilds the update triggers, entries unchanged.
    let conn = rusqlite::Connection::open(&indexed).unwrap();
    conn.execute_batch(
        "ALTER TABLE changes DROP COLUMN previous; ALTER TABLE indexes DROP COLUMN is_unique; \
         DROP INDEX documents_expiry; DROP INDEX documents_expiry_by_site; \
         ALTER TABLE documents DROP COLUMN expires_at; ALTER TABLE changes DROP COLUMN expires_at;",
    )
    .unwrap();
    conn.pragma_update(None, "user_version", 4).unwrap();
    drop(conn);
    let store = open(&indexed, true);
    assert_eq!(answers(&store).await, expected);
    let patch = docstore::object(json!({"status": "done", "meta": {"rank": 7}})).unwrap();
    let key = Key::new("s", "c", "d01").unwrap();
    store.update(&key, &patch, "c").await.unwrap();
    reference.update(&key, &patch, "c").await.unwrap();
    assert_eq!(answers(&store).await, answers(&reference).await);
}
