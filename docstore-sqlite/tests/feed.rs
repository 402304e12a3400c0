//! The SQLite change feed: exactly the committed writes (single, batched, group-committed
//! under concurrent writers with refusals), another process's writes seen by a watcher here,
//! retention and expired cursors, a version-3 file migrated with an empty feed, the feed
//! turned off, a cursor of another file (refused as another store's). The generic semantics are the conformance family
//! `changes`; these are SQLite's own paths.

use docstore::feed::{ChangePage, FeedScope, FeedStart};
use docstore::{
    Change, ChangeKind, Data, Error, Key, ManualClock, Store, StoreOptions, Write, WriteId,
};
use docstore_sqlite::{Durability, SqliteOptions, SqliteStore};
use futures_util::{FutureExt, StreamExt};
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

const ROLE: &str = "DOCSTORE_SQLITE_FEED_TEST_ROLE";
const DB: &str = "DOCSTORE_SQLITE_FEED_TEST_DB";
/// Writes the child process makes in the cross-process test.
const CHILD_WRITES: u64 = 300;

fn data(value: serde_json::Value) -> Data {
    docstore::object(value).unwrap()
}

fn key(collection: &str, id: impl AsRef<str>) -> Key {
    Key::new("acme", collection, id).unwrap()
}

/// Every change of the store from the oldest, page by page.
async fn all_changes(store: &Store) -> Vec<Change> {
    let mut changes = Vec::new();
    let mut start = FeedStart::Oldest;
    loop {
        let ChangePage {
            changes: page,
            next,
            caught_up,
        } = store
            .changes(&FeedScope::whole_store(), &start, 7)
            .await
            .unwrap();
        changes.extend(page);
        if caught_up {
            return changes;
        }
        start = FeedStart::After(next);
    }
}

fn summary(changes: &[Change]) -> Vec<(String, ChangeKind, u64, String)> {
    changes
        .iter()
        .map(|c| (c.key.id().to_owned(), c.kind, c.version, c.actor.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_committed_write_is_one_change_and_refusals_none() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000));
    let options = StoreOptions::default().with_clock(clock.clone());
    let store = Store::new(
        SqliteStore::open_with(dir.path().join("f.db"), options, SqliteOptions::default()).unwrap(),
    );
    let (a, b, c) = (key("t", "a"), key("t", "b"), key("t", "c"));
    let created = store
        .create(&a, data(json!({"n": 1})), "ann")
        .await
        .unwrap();
    assert!(store.create(&a, data(json!({})), "x").await.is_err());
    store.put(&b, data(json!({"n": 2})), "bob").await.unwrap();
    store.put(&b, data(json!({"n": 3})), "bob").await.unwrap();
    store
        .update(&a, &data(json!({"m": 1})), "cy")
        .await
        .unwrap();
    assert!(store.update_if(&a, &data(json!({})), 1, "x").await.is_err());
    store
        .replace_if(&a, data(json!({"r": 1})), 2, "di")
        .await
        .unwrap();
    let id = WriteId::random();
    store.delete(&b).write_id(id.clone()).await.unwrap();
    // A repeat recognised by its identity, and a delete of nothing: no change.
    store.delete(&b).write_id(id).await.unwrap();
    assert!(!store.delete(&b).await.unwrap());
    let restored = docstore::Document {
        id: "c".into(),
        ..created.clone()
    };
    store.restore(&c, &restored).await.unwrap();
    let batch = [
        Write::Create {
            key: key("u", "x"),
            data: data(json!({})),
        },
        Write::DeleteIf {
            key: a.clone(),
            expected_version: 3,
        },
    ];
    clock.set(5_000);
    store.write_all(&batch, "eve").await.unwrap();
    let refused = [
        Write::Create {
            key: key("u", "y"),
            data: data(json!({})),
        },
        Write::DeleteIf {
            key: a.clone(),
            expected_version: 3,
        },
    ];
    assert!(store.write_all(&refused, "eve").await.is_err());

    let changes = all_changes(&store).await;
    use ChangeKind::*;
    let expected = [
        ("a", Created, 1, "ann"),
        ("b", Created, 1, "bob"),
        ("b", Updated, 2, "bob"),
        ("a", Updated, 2, "cy"),
        ("a", Updated, 3, "di"),
        // `Store::delete` carries no actor (a `Collection`'s carries its site's).
        ("b", Deleted, 2, ""),
        ("c", Created, 1, "ann"),
        ("x", Created, 1, "eve"),
        ("a", Deleted, 3, "eve"),
    ];
    let expected: Vec<_> = expected
        .iter()
        .map(|(id, kind, v, actor)| (id.to_string(), *kind, *v, actor.to_string()))
        .collect();
    assert_eq!(summary(&changes), expected);
    // Stored changes carry the document exactly as stored; deletes the store clock's time.
    let stored = store.get(&c).await.unwrap().unwrap();
    assert_eq!(changes[6].document.as_ref(), Some(&stored));
    assert_eq!(
        (changes[8].time, changes[8].document.as_ref()),
        (5_000, None)
    );
    // Scoped reads: a collection's changes only, and the cursor moves past the others.
    let site = store.site("acme").unwrap();
    let page = site.changes(&FeedStart::Oldest, 100).await.unwrap();
    assert_eq!(page.changes.len(), changes.len());
    assert!(page.caught_up);
    let other = store.site("globex").unwrap();
    let empty = other.changes(&FeedStart::Oldest, 100).await.unwrap();
    assert!(empty.changes.is_empty() && empty.caught_up);
    // Its cursor (bound to globex) is past every change so far: resumed, it shows only what
    // globex writes next.
    let later = Key::new("globex", "t", "g").unwrap();
    store.create(&later, data(json!({})), "gil").await.unwrap();
    let next = other
        .changes(&FeedStart::After(empty.next.clone()), 100)
        .await
        .unwrap();
    let ids: Vec<&str> = next.changes.iter().map(|c| c.key.id()).collect();
    assert_eq!(ids, ["g"]);
}

/// Group commit: 16 concurrent writers on a `Full` store (so writes queue and commit
/// together, each in a savepoint), half of their conditional writes failing: the feed holds
/// exactly the committed ones, in an order where each document's versions grow.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn group_commit_feed_holds_exactly_the_committed_writes() {
    const WRITERS: u64 = 16;
    const ROUNDS: u64 = 20;
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteOptions::default().with_durability(Durability::Full);
    let store = Store::new(
        SqliteStore::open_with(dir.path().join("g.db"), StoreOptions::default(), sqlite).unwrap(),
    );
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let k = key("g", format!("w{w}"));
            let mut committed = 1;
            store.create(&k, data(json!({"w": w})), "w").await.unwrap();
            for round in 0..ROUNDS {
                // Every other round names a stale version: refused, rolled back alone.
                let expected = if round % 2 == 0 { committed } else { 999 };
                let patch = data(json!({ "round": round }));
                if store.update_if(&k, &patch, expected, "w").await.is_ok() {
                    committed += 1;
                }
            }
            committed
        }));
    }
    let mut committed = 0;
    for task in tasks {
        committed += task.await.unwrap();
    }
    assert_eq!(committed, WRITERS * (1 + ROUNDS / 2));
    let changes = all_changes(&store).await;
    assert_eq!(changes.len() as u64, committed);
    let mut last = std::collections::HashMap::new();
    for change in &changes {
        let previous = last.insert(change.key.id().to_owned(), change.version);
        assert_eq!(change.version, previous.unwrap_or(0) + 1, "{change:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pruned_changes_make_older_cursors_expire() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let sqlite = SqliteOptions::default()
        .with_durability(Durability::Normal)
        .with_feed_retention(Duration::from_secs(3600))
        .with_feed_prune_interval(Duration::from_millis(20));
    let options = StoreOptions::default().with_clock(clock.clone());
    let store =
        Store::new(SqliteStore::open_with(dir.path().join("r.db"), options, sqlite).unwrap());
    for i in 0..5 {
        store
            .create(&key("r", format!("{i}")), data(json!({})), "a")
            .await
            .unwrap();
    }
    let first = all_changes(&store).await;
    assert_eq!(first.len(), 5);
    clock.advance(2 * 3600 * 1_000_000_000);
    store
        .create(&key("r", "new"), data(json!({})), "a")
        .await
        .unwrap();
    // Pruned off the write path: wait for the pruning thread's next round.
    let mut oldest = Vec::new();
    for _ in 0..500 {
        oldest = all_changes(&store).await;
        if oldest.len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(summary(&oldest)[0].0, "new");
    // Every cursor before the last pruned change expires; the last one reads on.
    let (last_pruned, expired) = first.split_last().unwrap();
    for change in expired {
        let read = store
            .changes(
                &FeedScope::whole_store(),
                &FeedStart::After(change.cursor.clone()),
                10,
            )
            .await;
        assert!(matches!(read, Err(Error::CursorExpired(_))), "{read:?}");
    }
    let page = store
        .changes(
            &FeedScope::whole_store(),
            &FeedStart::After(last_pruned.cursor.clone()),
            10,
        )
        .await
        .unwrap();
    assert_eq!(summary(&page.changes), summary(&oldest));
    // Positions keep growing after pruning, also across a reopen.
    drop(store);
    let store = Store::new(SqliteStore::open(dir.path().join("r.db")).unwrap());
    store
        .create(&key("r", "newer"), data(json!({})), "a")
        .await
        .unwrap();
    let after = store
        .changes(
            &FeedScope::whole_store(),
            &FeedStart::After(oldest[0].cursor.clone()),
            10,
        )
        .await
        .unwrap();
    assert_eq!(summary(&after.changes)[0].0, "newer");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_version_3_file_migrates_with_an_empty_feed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v3.db");
    let k = key("m", "old");
    {
        let store = Store::new(SqliteStore::open(&db).unwrap());
        store.create(&k, data(json!({"n": 1})), "a").await.unwrap();
    }
    // Back to version 3: no feed tables, no index uniqueness (version 7), no expiry
    // (version 8) — what a file of that release holds.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "DROP TABLE changes; DROP TABLE feed; ALTER TABLE indexes DROP COLUMN is_unique; \
         DROP INDEX documents_expiry; DROP INDEX documents_expiry_by_site; \
         ALTER TABLE documents DROP COLUMN expires_at; PRAGMA user_version = 3;",
    )
    .unwrap();
    drop(conn);
    let store = Store::new(SqliteStore::open(&db).unwrap());
    assert_eq!(store.get(&k).await.unwrap().unwrap().version, 1);
    let page = store
        .changes(&FeedScope::whole_store(), &FeedStart::Oldest, 10)
        .await
        .unwrap();
    assert!(page.changes.is_empty() && page.caught_up);
    store.update(&k, &data(json!({"n": 2})), "b").await.unwrap();
    let changes = all_changes(&store).await;
    assert_eq!(
        summary(&changes),
        [("old".into(), ChangeKind::Updated, 2, "b".into())]
    );
}

/// A version-5 file (before previous values) migrates keeping its changes, which carry no
/// previous value; with `feed_previous` on, a later update and delete carry the document
/// before them (written by the version-5 file's own change, so read from the document row,
/// not the log), and a store with it off writes none.
#[tokio::test(flavor = "multi_thread")]
async fn a_version_5_file_migrates_and_feed_previous_records_the_document_before() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v5.db");
    let k = key("p", "doc");
    let created = {
        let store = Store::new(SqliteStore::open(&db).unwrap());
        store
            .create(&k, data(json!({"n": 1.50})), "a")
            .await
            .unwrap()
    };
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "ALTER TABLE changes DROP COLUMN previous; ALTER TABLE indexes DROP COLUMN is_unique; \
         DROP INDEX documents_expiry; DROP INDEX documents_expiry_by_site; \
         ALTER TABLE documents DROP COLUMN expires_at; \
         ALTER TABLE changes DROP COLUMN expires_at; PRAGMA user_version = 5;",
    )
    .unwrap();
    drop(conn);
    let on = SqliteOptions::default().with_feed_previous(true);
    let store = Store::new(SqliteStore::open_with(&db, StoreOptions::default(), on).unwrap());
    let updated = store.update(&k, &data(json!({"m": 2})), "b").await.unwrap();
    store.delete(&k).await.unwrap();
    drop(store);
    let store = Store::new(SqliteStore::open(&db).unwrap());
    store.create(&k, data(json!({})), "c").await.unwrap();
    store.put(&k, data(json!({"x": 1})), "c").await.unwrap();
    let previous: Vec<_> = all_changes(&store)
        .await
        .into_iter()
        .map(|c| c.previous)
        .collect();
    assert_eq!(
        previous,
        [None, Some(created), Some(updated), None, None],
        "the migrated change, the option's update and delete, then a store with it off"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn feed_off_writes_no_changes_and_reads_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("off.db");
    let off = SqliteOptions::default().with_feed(false);
    let store = Store::new(SqliteStore::open_with(&db, StoreOptions::default(), off).unwrap());
    store
        .create(&key("o", "1"), data(json!({})), "a")
        .await
        .unwrap();
    let err = store
        .changes(&FeedScope::whole_store(), &FeedStart::Oldest, 10)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("feed is off"), "{err}");
    drop(store);
    let store = Store::new(SqliteStore::open(&db).unwrap());
    assert!(all_changes(&store).await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cursor_of_another_file_is_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let one = Store::new(SqliteStore::open(dir.path().join("1.db")).unwrap());
    let two = Store::new(SqliteStore::open(dir.path().join("2.db")).unwrap());
    one.create(&key("c", "1"), data(json!({})), "a")
        .await
        .unwrap();
    let cursor = one
        .changes(&FeedScope::whole_store(), &FeedStart::Oldest, 10)
        .await
        .unwrap()
        .next;
    let read = two
        .changes(&FeedScope::whole_store(), &FeedStart::After(cursor), 10)
        .await;
    // Not CursorExpired: resyncing from another database would be wrong.
    match read {
        Err(Error::InvalidArgument(message)) => {
            assert!(message.contains("belongs to another store"), "{message}")
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    let memory_like = docstore::ChangeCursor::parse("sqlite:nonsense").unwrap();
    let read = two
        .changes(
            &FeedScope::whole_store(),
            &FeedStart::After(memory_like),
            10,
        )
        .await;
    assert!(matches!(read, Err(Error::InvalidArgument(_))), "{read:?}");
}

/// Entry point of the writer process of [`a_watcher_sees_every_write_of_another_process`];
/// does nothing when the test binary runs normally.
#[test]
fn feed_child_entry() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    assert_eq!(role, "write");
    let path = std::env::var(DB).expect("the parent names the database");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = Store::new(SqliteStore::open(&path).expect("open"));
        for i in 0..CHILD_WRITES {
            let k = key("x", format!("{:04}", i / 3));
            // Creates, updates and deletes of a hundred documents.
            match i % 3 {
                0 => drop(
                    store
                        .create(&k, data(json!({"i": i})), "child")
                        .await
                        .unwrap(),
                ),
                1 => drop(
                    store
                        .update(&k, &data(json!({"i": i})), "child")
                        .await
                        .unwrap(),
                ),
                _ => assert!(store.delete(&k).await.unwrap()),
            }
            if i % 50 == 0 {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    });
}

/// A watcher in this process follows another process's writes: every one, once, in order.
#[tokio::test(flavor = "multi_thread")]
async fn a_watcher_sees_every_write_of_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db");
    let sqlite = SqliteOptions::default().with_feed_poll_interval(Duration::from_millis(50));
    let store = Store::new(SqliteStore::open_with(&db, StoreOptions::default(), sqlite).unwrap());
    let mut watch = store.watch(FeedScope::whole_store(), FeedStart::Now);
    let mut child = spawn_writer(&db);
    let mut seen = Vec::new();
    let deadline = Duration::from_secs(60);
    while (seen.len() as u64) < CHILD_WRITES {
        let change = tokio::time::timeout(deadline, watch.next())
            .await
            .expect("the watcher sees the other process's writes")
            .unwrap()
            .unwrap();
        seen.push(change);
    }
    assert!(child.wait().unwrap().success());
    let expected: Vec<_> = (0..CHILD_WRITES)
        .map(|i| {
            let kind = [
                ChangeKind::Created,
                ChangeKind::Updated,
                ChangeKind::Deleted,
            ];
            let version = [1, 2, 2];
            // `Store::delete` carries no actor.
            let actor = ["child", "child", ""];
            let r = (i % 3) as usize;
            (
                format!("{:04}", i / 3),
                kind[r],
                version[r],
                actor[r].to_owned(),
            )
        })
        .collect();
    assert_eq!(summary(&seen), expected);
    // Nothing more: the feed is caught up at the last change seen.
    let rest = store
        .changes(
            &FeedScope::whole_store(),
            &FeedStart::After(seen.last().unwrap().cursor.clone()),
            10,
        )
        .await
        .unwrap();
    assert!(rest.changes.is_empty() && rest.caught_up);
}

fn spawn_writer(db: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "feed_child_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, "write")
        .env(DB, db)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the writer process")
}

/// A write whose caller stopped waiting (its future dropped after the write began) still
/// commits; a watcher of this process is woken by that commit at once, not at its next poll
/// for other processes (an hour here). On a current-thread runtime, where a lone write runs
/// on Tokio's blocking pool while its caller waits.
#[tokio::test]
async fn a_watcher_wakes_for_a_write_whose_caller_stopped_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteOptions::default().with_feed_poll_interval(Duration::from_secs(3600));
    let store = Store::new(
        SqliteStore::open_with(dir.path().join("w.db"), StoreOptions::default(), sqlite).unwrap(),
    );
    let head = store
        .changes(&FeedScope::whole_store(), &FeedStart::Now, 1)
        .await
        .unwrap()
        .next;
    let mut watch = store.watch(FeedScope::whole_store(), FeedStart::After(head));
    let watcher = tokio::spawn(async move { watch.next().await });
    // Time for the watcher to read the feed and wait for a commit (were it not yet waiting,
    // it would find the change by reading, and this test could not fail).
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Polled once (the write starts), then dropped.
    let dropped = std::future::IntoFuture::into_future(store.create(
        &key("t", "a"),
        data(json!({"n": 1})),
        "ann",
    ))
    .now_or_never();
    assert!(
        dropped.is_none(),
        "the write was still running when dropped"
    );
    while store.get(&key("t", "a")).await.unwrap().is_none() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let change = tokio::time::timeout(Duration::from_secs(20), watcher)
        .await
        .expect("the commit wakes the watcher, not the hourly poll")
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(change.key, key("t", "a"));
}

/// Writes prune: a store's first write, and every 64th after it, removes one chunk of
/// expired changes right after its commit, so a file written only by short processes (CLI
/// commands, each one write) keeps no expired changes though the pruning thread (its
/// interval a day here) never runs.
#[tokio::test(flavor = "multi_thread")]
async fn writes_prune_expired_changes_without_the_pruning_thread() {
    const HOUR_NS: i64 = 3600 * 1_000_000_000;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let clock = Arc::new(ManualClock::new(0));
    let sqlite = SqliteOptions::default()
        .with_feed_retention(Duration::from_secs(3600))
        .with_feed_prune_interval(Duration::from_secs(24 * 3600));
    let open = || {
        let options = StoreOptions::default().with_clock(clock.clone());
        Store::new(SqliteStore::open_with(&db, options, sqlite.clone()).unwrap())
    };
    // Five short processes, one write each.
    for i in 0..5 {
        let store = open();
        store
            .create(&key("p", format!("{i}")), data(json!({})), "a")
            .await
            .unwrap();
    }
    let first = all_changes(&open()).await;
    assert_eq!(first.len(), 5);
    clock.advance(2 * HOUR_NS);
    let store = open();
    store
        .create(&key("p", "new"), data(json!({})), "a")
        .await
        .unwrap();
    assert_eq!(summary(&all_changes(&store).await)[0].0, "new");
    assert_eq!(all_changes(&store).await.len(), 1);
    let read = store
        .changes(
            &FeedScope::whole_store(),
            &FeedStart::After(first[0].cursor.clone()),
            10,
        )
        .await;
    assert!(matches!(read, Err(Error::CursorExpired(_))), "{read:?}");
    // A long-running store: its 64th write prunes again.
    clock.advance(2 * HOUR_NS);
    for i in 0..64 {
        let oldest = summary(&all_changes(&store).await)[0].0.clone();
        assert_eq!(oldest, "new", "before write {i}");
        store
            .create(&key("p", format!("w{i}")), data(json!({})), "a")
            .await
            .unwrap();
    }
    let kept = all_changes(&store).await;
    assert_eq!(summary(&kept)[0].0, "w0");
    assert_eq!(kept.len(), 64);
}
