//! Another connection (as another process would) holding SQLite's write lock: reads go on,
//! writes wait for it, and a write that waited past every retry is `Unavailable` and changed
//! nothing. Plus the schema version rules on open.

use docstore::{Error, Key, Store, StoreOptions};
use docstore_sqlite::{Durability, SqliteOptions, SqliteStore};
use rusqlite::Connection;
use serde_json::json;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

/// The schema version this docstore-sqlite writes (`PRAGMA user_version`).
const SCHEMA_VERSION: i64 = 8;

/// Takes the write lock on `db` from a foreign connection and holds it until told to let go.
fn hold_write_lock(db: &Path) -> (mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (locked_tx, locked_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let db = db.to_owned();
    let holder = std::thread::spawn(move || {
        let conn = Connection::open(db).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        locked_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        conn.execute_batch("COMMIT").unwrap();
    });
    locked_rx.recv().unwrap();
    (release_tx, holder)
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_wait_for_a_foreign_lock_and_reads_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lock.db");
    let store = Store::new(SqliteStore::open(&db).unwrap());
    let first = Key::new("s", "c", "first").unwrap();
    store
        .create(&first, docstore::object(json!({"n": 1})).unwrap(), "")
        .await
        .unwrap();

    let (release, holder) = hold_write_lock(&db);
    // Reads are served while the lock is held (they would fail after the retries if they
    // waited for it).
    assert!(store.get(&first).await.unwrap().is_some());
    assert_eq!(store.count("s").await.unwrap(), 1);

    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            let key = Key::new("s", "c", "second").unwrap();
            store
                .create(&key, docstore::object(json!({"n": 2})).unwrap(), "")
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    release.send(()).unwrap();
    holder.join().unwrap();
    let created = writer
        .await
        .unwrap()
        .expect("the write waited for the lock");
    assert_eq!(created.version, 1);
    assert_eq!(store.count("s").await.unwrap(), 2);
}

/// With `synchronous=NORMAL` a write runs on the calling thread; a foreign lock must not
/// make it block that thread for the busy timeout: on a current-thread runtime the other task
/// (a timer here) goes on while the write waits, and the write then succeeds.
#[tokio::test(flavor = "current_thread")]
async fn with_normal_durability_a_write_waiting_for_a_foreign_lock_leaves_the_runtime_free() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("normal.db");
    let sqlite = SqliteOptions::default()
        .with_durability(Durability::Normal)
        .with_busy_timeout(Duration::from_secs(20));
    let store = Store::new(SqliteStore::open_with(&db, StoreOptions::default(), sqlite).unwrap());
    let (release, holder) = hold_write_lock(&db);
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            let key = Key::new("s", "c", "k").unwrap();
            store
                .create(&key, docstore::object(json!({"n": 1})).unwrap(), "")
                .await
        })
    };
    let started = std::time::Instant::now();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Blocked by the write, the timer would have fired only after the 20 s busy timeout.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the runtime was blocked for {:?}",
        started.elapsed()
    );
    release.send(()).unwrap();
    holder.join().unwrap();
    let created = writer
        .await
        .unwrap()
        .expect("the write waited for the lock");
    assert_eq!(created.version, 1);
    assert_eq!(store.count("s").await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lock_held_past_every_retry_is_unavailable_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("held.db");
    let sqlite = SqliteOptions::default().with_busy_timeout(Duration::from_millis(20));
    let store = Store::new(SqliteStore::open_with(&db, StoreOptions::default(), sqlite).unwrap());
    let key = Key::new("s", "c", "k").unwrap();

    let (release, holder) = hold_write_lock(&db);
    let result = store
        .create(&key, docstore::object(json!({})).unwrap(), "")
        .await;
    assert!(
        matches!(result, Err(Error::Unavailable { .. })),
        "{result:?}"
    );
    release.send(()).unwrap();
    holder.join().unwrap();

    assert_eq!(store.get(&key).await.unwrap(), None);
    assert_eq!(store.count("s").await.unwrap(), 0);
    assert!(store.collections("s").await.unwrap().is_empty());
    // And once the lock is gone the same write goes through.
    store
        .create(&key, docstore::object(json!({})).unwrap(), "")
        .await
        .unwrap();
}

/// The busy timeout bounds the whole wait of one try of a write, the driver's own retries
/// included (they once waited it again each, 4x in all): with 400 ms a lone write, and writes
/// queued behind it for a group commit, give up after at least 400 ms and well before
/// 4 x 400 ms. The store's retry policy is off here: it repeats tries on top, within its own
/// budget (docs/contract.md, "Retries"). Correctness bounds with a wide margin, not a speed
/// target.
#[tokio::test(flavor = "multi_thread")]
async fn the_busy_timeout_bounds_the_whole_wait_of_a_write() {
    const TIMEOUT: Duration = Duration::from_millis(400);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("timeout.db");
    let sqlite = SqliteOptions::default().with_busy_timeout(TIMEOUT);
    let options = StoreOptions::default().with_retry(docstore::retry::RetryPolicy::NONE);
    let store = Store::new(SqliteStore::open_with(&db, options, sqlite).unwrap());
    let (release, holder) = hold_write_lock(&db);

    let started = std::time::Instant::now();
    let key = Key::new("s", "c", "alone").unwrap();
    let alone = store
        .put(&key, docstore::object(json!({})).unwrap(), "")
        .await;
    let waited = started.elapsed();
    assert!(matches!(alone, Err(Error::Unavailable { .. })), "{alone:?}");
    assert!(waited >= TIMEOUT && waited < 3 * TIMEOUT, "{waited:?}");

    // Several at once: the first runs in place, the others commit as a group after it.
    let started = std::time::Instant::now();
    let writes = (0..4).map(|i| {
        let store = store.clone();
        tokio::spawn(async move {
            let key = Key::new("s", "c", format!("group-{i}")).unwrap();
            let result = store
                .put(&key, docstore::object(json!({})).unwrap(), "")
                .await;
            (result, started.elapsed())
        })
    });
    for write in futures_util::future::join_all(writes).await {
        let (result, waited) = write.unwrap();
        assert!(
            matches!(result, Err(Error::Unavailable { .. })),
            "{result:?}"
        );
        assert!(waited >= TIMEOUT && waited < 4 * TIMEOUT, "{waited:?}");
    }
    release.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(store.count("s").await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn reopening_keeps_data_and_a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("schema.db");
    let key = Key::new("s", "c", "k").unwrap();
    let doc = {
        let store = Store::new(SqliteStore::open(&db).unwrap());
        store
            .create(
                &key,
                docstore::object(json!({"big": u64::MAX})).unwrap(),
                "",
            )
            .await
            .unwrap()
    };
    let store = Store::new(SqliteStore::open(&db).unwrap());
    assert_eq!(store.get(&key).await.unwrap(), Some(doc));
    drop(store);

    let conn = Connection::open(&db).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    match SqliteStore::open(&db) {
        Err(Error::Backend { message, .. }) => assert!(message.contains("99"), "{message}"),
        other => panic!("expected Backend, got {other:?}"),
    }
}

/// A file of schema version 2 (before write identities) is migrated on open: its documents
/// stay, and a repeated call with a write identity is recognised on them.
#[tokio::test(flavor = "multi_thread")]
async fn a_version_2_file_is_migrated_and_keeps_its_documents() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v2.db");
    let key = Key::new("s", "c", "k").unwrap();
    let data = docstore::object(json!({"n": 1})).unwrap();
    {
        let store = Store::new(SqliteStore::open(&db).unwrap());
        store.create(&key, data.clone(), "a").await.unwrap();
    }
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "DROP TRIGGER write_ids_forget; DROP TABLE write_ids; DROP TABLE changes; \
         DROP TABLE feed; ALTER TABLE indexes DROP COLUMN is_unique; \
         DROP INDEX documents_expiry; DROP INDEX documents_expiry_by_site; \
         ALTER TABLE documents DROP COLUMN expires_at; PRAGMA user_version = 2;",
    )
    .unwrap();
    drop(conn);

    let store = Store::new(SqliteStore::open(&db).unwrap());
    assert_eq!(store.get(&key).await.unwrap().unwrap().data, data);
    let id = docstore::WriteId::random();
    let patch = docstore::object(json!({"n": 2})).unwrap();
    let first = store
        .update(&key, &patch, "b")
        .write_id(id.clone())
        .await
        .unwrap();
    let again = store.update(&key, &patch, "b").write_id(id).await.unwrap();
    assert_eq!((first.version, again), (2, first.clone()));
    drop(store);
    let conn = Connection::open(&db).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
}
