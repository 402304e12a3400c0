//! Opening and reading never wait for a writer; a file or directory that cannot be written
//! still serves reads, and every failure names its real cause; a store that only reads
//! changes no file; a file of another program is refused unless shared.

use docstore::{Error, Key, Query, Store, StoreOptions};
use docstore_sqlite::{SqliteOptions, SqliteStore};
use rusqlite::Connection;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// A foreign connection holding an open write transaction that has written a row, until
/// told to roll it back.
fn hold_write_transaction(db: &Path) -> (mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (locked_tx, locked_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let db = db.to_owned();
    let holder = std::thread::spawn(move || {
        let conn = Connection::open(db).unwrap();
        conn.execute_batch(
            "BEGIN IMMEDIATE; \
             INSERT INTO documents VALUES ('s', 'c', 'uncommitted', jsonb('{}'), 0, 0, '', '', 1, NULL);",
        )
        .unwrap();
        locked_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        conn.execute_batch("ROLLBACK").unwrap();
    });
    locked_rx.recv().unwrap();
    (release_tx, holder)
}

async fn seed(db: &Path) -> Key {
    let store = Store::new(SqliteStore::open(db).unwrap());
    let key = Key::new("s", "c", "k").unwrap();
    store
        .create(&key, docstore::object(json!({"n": 1})).unwrap(), "")
        .await
        .unwrap();
    key
}

/// Every read a CLI `get`/`count`/`query` does, on a store opened from scratch.
async fn open_and_read(db: PathBuf, sqlite: SqliteOptions, key: Key) -> Store {
    let store = Store::new(
        tokio::task::spawn_blocking(move || {
            SqliteStore::open_with(&db, StoreOptions::default(), sqlite).unwrap()
        })
        .await
        .unwrap(),
    );
    assert_eq!(store.get(&key).await.unwrap().unwrap().data["n"], json!(1));
    assert_eq!(store.count("s").await.unwrap(), 1);
    let page = store.query("s", "c", &Query::new()).await.unwrap();
    assert_eq!(page.documents.len(), 1);
    assert_eq!(store.get_many(&[key]).await.unwrap().len(), 1);
    store
}

/// A store opened while another connection holds a write transaction opens and reads at
/// once: the open path takes no write lock when the schema is current. (With the old open
/// path this waited 4 x the 5 s busy timeout and failed.)
#[tokio::test(flavor = "multi_thread")]
async fn opening_and_reading_never_wait_for_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("busy.db");
    let key = seed(&db).await;
    let (release, holder) = hold_write_transaction(&db);
    let sqlite = SqliteOptions::default().with_busy_timeout(Duration::from_secs(5));
    let reads = open_and_read(db.clone(), sqlite, key);
    let store = tokio::time::timeout(Duration::from_secs(2), reads)
        .await
        .expect("opening or reading waited for the writer");
    release.send(()).unwrap();
    holder.join().unwrap();
    // The store writes once the foreign transaction is gone.
    store
        .create(
            &Key::new("s", "c", "after").unwrap(),
            docstore::object(json!({})).unwrap(),
            "",
        )
        .await
        .unwrap();
}

/// `SqliteOptions::read_only`: reads work (also while a writer holds its lock), every write
/// is refused with a message saying why, and nothing changes.
#[tokio::test(flavor = "multi_thread")]
async fn read_only_store_reads_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ro.db");
    let key = seed(&db).await;
    let (release, holder) = hold_write_transaction(&db);
    let sqlite = SqliteOptions::default().with_read_only(true);
    let store = tokio::time::timeout(
        Duration::from_secs(2),
        open_and_read(db.clone(), sqlite, key.clone()),
    )
    .await
    .expect("a read-only open waited for the writer");
    release.send(()).unwrap();
    holder.join().unwrap();
    let err = store
        .put(&key, docstore::object(json!({"n": 2})).unwrap(), "")
        .await
        .unwrap_err();
    match &err {
        Error::Backend { message, .. } => assert!(message.contains("read-only"), "{message}"),
        other => panic!("expected Backend, got {other:?}"),
    }
    let batch = [docstore::Write::create(
        Key::new("s", "c", "new").unwrap(),
        docstore::Data::new(),
    )];
    assert!(store.write_all(&batch, "").await.is_err());
    assert_eq!(store.get(&key).await.unwrap().unwrap().version, 1);
    assert_eq!(store.count("s").await.unwrap(), 1);
}

/// A read-only open of a file whose schema is older cannot migrate it: the error says so.
#[test]
fn read_only_open_of_an_unmigrated_file_names_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("old.db");
    Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE documents (x); PRAGMA user_version = 3;")
        .unwrap();
    let sqlite = SqliteOptions::default().with_read_only(true);
    match SqliteStore::open_with(&db, StoreOptions::default(), sqlite) {
        Err(Error::Backend { message, .. }) => {
            assert!(message.contains("read-only"), "{message}");
            assert!(message.contains("schema version 3"), "{message}");
        }
        other => panic!("expected Backend, got {other:?}"),
    }
}

/// Every file in `dir` with its bytes: what "nothing changed" compares.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(entry.path()).unwrap())
        })
        .collect()
}

/// A database another program made: a `users` table with a row, in rollback-journal mode.
fn foreign_file(db: &Path) {
    Connection::open(db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); \
             INSERT INTO users (name) VALUES ('ann');",
        )
        .unwrap();
}

fn expect_foreign_refused(result: docstore::Result<SqliteStore>) {
    match result {
        Err(Error::InvalidArgument(message)) => {
            assert!(message.contains("another program (users)"), "{message}");
            assert!(message.contains("share_file"), "{message}");
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

/// A file of another program is refused, read-write or read-only, and left exactly as it
/// was (no docstore tables, no WAL, no file beside it).
#[test]
fn a_file_of_another_program_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("other.db");
    foreign_file(&db);
    let before = snapshot(dir.path());
    expect_foreign_refused(SqliteStore::open(&db));
    assert_eq!(snapshot(dir.path()), before);
    let read_only = SqliteOptions::default().with_read_only(true);
    expect_foreign_refused(SqliteStore::open_with(
        &db,
        StoreOptions::default(),
        read_only,
    ));
    assert_eq!(snapshot(dir.path()), before);
}

/// With `share_file` a read-only store of another program's file is empty and changes
/// nothing; a read-write one adds docstore's tables beside the others, which keep theirs.
#[tokio::test(flavor = "multi_thread")]
async fn a_shared_file_reads_as_empty_until_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    foreign_file(&db);
    let before = snapshot(dir.path());
    let shared = SqliteOptions::default().with_share_file(true);
    let reader = SqliteStore::open_with(
        &db,
        StoreOptions::default(),
        shared.clone().with_read_only(true),
    )
    .unwrap();
    let reader = Store::new(reader);
    assert_eq!(reader.count("s").await.unwrap(), 0);
    let key = Key::new("s", "c", "k").unwrap();
    assert!(reader.get(&key).await.unwrap().is_none());
    let err = reader
        .put(&key, docstore::Data::new(), "")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no docstore tables"), "{err}");
    drop(reader);
    assert_eq!(snapshot(dir.path()), before);

    let writer = Store::new(SqliteStore::open_with(&db, StoreOptions::default(), shared).unwrap());
    writer.put(&key, docstore::Data::new(), "").await.unwrap();
    drop(writer);
    let conn = Connection::open(&db).unwrap();
    let name: String = conn
        .query_row("SELECT name FROM users", [], |row| row.get(0))
        .unwrap();
    assert_eq!(name, "ann");
}

/// A read-only store of a file that does not exist is empty and creates nothing; of a
/// docstore file, it reads and leaves the directory as it was (same files, same bytes).
#[tokio::test(flavor = "multi_thread")]
async fn read_only_stores_change_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let read_only = || SqliteOptions::default().with_read_only(true);
    let missing = dir.path().join("missing.db");
    let store =
        Store::new(SqliteStore::open_with(&missing, StoreOptions::default(), read_only()).unwrap());
    assert_eq!(store.count("s").await.unwrap(), 0);
    assert!(store.collections("s").await.unwrap().is_empty());
    let key = Key::new("s", "c", "k").unwrap();
    let err = store
        .put(&key, docstore::Data::new(), "")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no database at"), "{err}");
    drop(store);
    assert!(snapshot(dir.path()).is_empty());

    let db = dir.path().join("docs.db");
    let key = seed(&db).await;
    let before = snapshot(dir.path());
    let store = open_and_read(db.clone(), read_only(), key).await;
    let page = store
        .changes(
            &docstore::feed::FeedScope::whole_store(),
            &docstore::FeedStart::Oldest,
            10,
        )
        .await
        .unwrap();
    assert_eq!(page.changes.len(), 1);
    drop(store);
    assert_eq!(snapshot(dir.path()), before);
}

/// A database in a directory that does not exist: the error names the directory.
#[test]
fn missing_directory_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir");
    match SqliteStore::open(missing.join("x.db")) {
        Err(err) => {
            let text = err.to_string();
            assert!(text.contains("does not exist"), "{text}");
            assert!(text.contains("no-such-dir"), "{text}");
        }
        Ok(_) => panic!("opened a file in a missing directory"),
    }
}

/// Whether permission bits stop this process (they do not stop root, as in CI containers).
fn permissions_apply(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let probe = dir.join("probe");
    std::fs::create_dir(&probe).unwrap();
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o555)).unwrap();
    let applies = std::fs::write(probe.join("x"), b"x").is_err();
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::remove_dir_all(&probe).unwrap();
    applies
}

/// A database in a directory this process cannot write (so SQLite cannot create its `-wal`
/// and `-shm` files) opens read-only: reads work, and a write's error names the directory.
/// A write-protected file in a writable directory likewise, naming the file. Permission bits
/// do not stop root, so as root (CI containers) this test checks nothing and says so; the
/// read-only paths themselves are covered by the `read_only` option tests above.
#[tokio::test(flavor = "multi_thread")]
async fn unwritable_directory_or_file_serves_reads() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    if !permissions_apply(dir.path()) {
        eprintln!("permission bits do not apply to this process (root?): nothing checked");
        return;
    }
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    let db = locked.join("docs.db");
    let key = seed(&db).await;
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
    let result = {
        let (db, key, locked) = (db.clone(), key.clone(), locked.clone());
        async move {
            let store = open_and_read(db.clone(), SqliteOptions::default(), key.clone()).await;
            let err = store
                .put(&key, docstore::object(json!({})).unwrap(), "")
                .await
                .unwrap_err()
                .to_string();
            assert!(err.contains("read-only"), "{err}");
            assert!(err.contains("directory"), "{err}");
            assert!(err.contains(&locked.display().to_string()), "{err}");
        }
    };
    let outcome = tokio::spawn(result).await;
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    outcome.unwrap();

    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    let store = open_and_read(db.clone(), SqliteOptions::default(), key.clone()).await;
    let err = store
        .put(&key, docstore::object(json!({})).unwrap(), "")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("read-only") && err.contains("not writable"),
        "{err}"
    );
}
