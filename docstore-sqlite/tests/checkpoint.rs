//! WAL checkpoints run beside the writes (`checkpoint.rs`): the checkpointer thread copies the
//! log into the database file once it passes 1 000 frames, while the store stays open and
//! without any write waiting for it; under writes that never stop, the log still starts over
//! (it never grows past about 8 000 frames); and a store that is dropped leaves no log behind.

use docstore::{Key, Store, StoreOptions};
use docstore_sqlite::{Durability, SqliteOptions, SqliteStore};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// SQLite's default page size, and a log frame: a 24-byte header and a page.
const PAGE: u64 = 4096;
const FRAME: u64 = 24 + PAGE;

/// A `Normal` store without the change feed: the frame counts below are a document's pages
/// (the feed's copy of each document would double them).
fn open(db: &Path) -> Store {
    let sqlite = SqliteOptions::default()
        .with_durability(Durability::Normal)
        .with_feed(false);
    Store::new(SqliteStore::open_with(db, StoreOptions::default(), sqlite).unwrap())
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

fn wal(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

/// Writes `count` new documents of about 3 KB (each commit logs at least one page).
async fn fill(store: &Store, from: usize, count: usize) {
    let body = "x".repeat(3_000);
    for i in from..from + count {
        let key = Key::new("s", "c", format!("doc-{i:06}")).unwrap();
        let data = docstore::object(json!({ "body": body, "i": i })).unwrap();
        store.create(&key, data, "").await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_checkpointer_copies_the_log_while_the_store_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ckpt.db");
    let store = open(&db);
    let before = size(&db);
    // About 1 500 frames: past the checkpointer's 1 000, far below the writer's own 8 000.
    fill(&store, 0, 1_500).await;
    let logged = size(&wal(&db));
    assert!(logged >= 1_000 * FRAME, "the log holds {logged} bytes");
    assert!(logged < 8_000 * FRAME, "the log holds {logged} bytes");
    // The checkpointer runs on its own thread: give it time.
    let deadline = Instant::now() + Duration::from_secs(20);
    while size(&db) < before + 1_000 * PAGE && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        size(&db) >= before + 1_000 * PAGE,
        "nothing was copied into the database file: {} bytes (was {before})",
        size(&db)
    );
    assert_eq!(store.count("s").await.unwrap(), 1_500);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_log_starts_over_under_writes_that_never_stop() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("busy.db");
    let store = open(&db);
    // About 20 000 frames in all, written without a pause.
    fill(&store, 0, 20_000).await;
    let logged = size(&wal(&db));
    // 8 000 frames and the commits that ran while a checkpoint was under way.
    assert!(logged <= 9_000 * FRAME, "the log grew to {logged} bytes");
    assert_eq!(store.count("s").await.unwrap(), 20_000);
    drop(store);
    // The last connection closed checkpointed everything and removed the log.
    assert_eq!(size(&wal(&db)), 0, "a log was left behind");
    let store = open(&db);
    assert_eq!(store.count("s").await.unwrap(), 20_000);
}
