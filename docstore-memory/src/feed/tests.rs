//! The log of reverse patches against a model: a write's answer is the document its change
//! must carry, and the key's answer before it the change's `previous` (`docs/contract.md`,
//! "Change feed"). The writes mix merges (nested, removing, empty), puts, deletes,
//! re-creates, batches, expiry changes and expiries over several keys and two sites, more
//! than [`KEYFRAME_EVERY`] updates of one key, so every way the log keeps a version is read
//! back, from every page size and scope.

use super::KEYFRAME_EVERY;
use crate::MemoryStore;
use docstore::feed::{Change, FeedScope};
use docstore::{ChangeKind, Data, Document, FeedStart, Key, ManualClock, Store, StoreOptions};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;

/// A change as the model expects it.
#[derive(Debug, PartialEq)]
struct Expected {
    key: Key,
    kind: ChangeKind,
    document: Option<Document>,
    previous: Option<Document>,
}

impl Expected {
    fn of(change: &Change) -> Self {
        Expected {
            key: change.key.clone(),
            kind: change.kind,
            document: change.document.clone(),
            previous: change.previous.clone(),
        }
    }
}

/// The changes the writes made, from their answers.
#[derive(Default)]
struct Model {
    changes: Vec<Expected>,
    current: HashMap<Key, Document>,
}

impl Model {
    fn stored(&mut self, key: &Key, kind: ChangeKind, document: Document) {
        let previous = self.current.insert(key.clone(), document.clone());
        self.changes.push(Expected {
            key: key.clone(),
            kind,
            document: Some(document),
            previous,
        });
    }

    fn removed(&mut self, key: &Key, kind: ChangeKind) {
        let previous = self.current.remove(key);
        assert!(previous.is_some(), "{key:?} was stored");
        self.changes.push(Expected {
            key: key.clone(),
            kind,
            document: None,
            previous,
        });
    }
}

fn data(value: serde_json::Value) -> Data {
    docstore::object(value).expect("an object")
}

/// The `n`th update's patch: nested merges, removals at both levels, arrays, empty.
fn patch(n: usize) -> Data {
    data(match n % 6 {
        0 => json!({"n": n, "address": {"zip": format!("{n:05}"), "country": null}}),
        1 => json!({"tags": [n, "x", null], "gone": null, "address": {"street": {"no": n}}}),
        2 => json!({"address": null, "note": format!("n{n}")}),
        3 => json!({"address": {"street": null, "zip": {"code": n}}, "n": null}),
        4 => json!({}),
        _ => json!({"note": {"text": "t", "drop": null}, "tags": null}),
    })
}

/// Writes a mix of everything the log records to `store`, returning the model of it.
async fn write_mix(store: &Store, clock: &ManualClock) -> Model {
    let mut model = Model::default();
    let keys: Vec<Key> = [("s", "a"), ("s", "b"), ("t", "c")]
        .into_iter()
        .map(|(site, id)| Key::new(site, "c", id).unwrap())
        .collect();
    for key in &keys {
        let doc = store
            .create(key, data(json!({"n": 0})), "ann")
            .await
            .unwrap();
        model.stored(key, ChangeKind::Created, doc);
    }
    for n in 1..=(3 * KEYFRAME_EVERY as usize) {
        clock.set(1_000 + n as i64);
        // The first key takes most writes, so its chain crosses several keyframes.
        let key = &keys[if n % 4 == 0 { 1 + n % 2 } else { 0 }];
        let actor = if n % 3 == 0 { "bob" } else { "ann" };
        let exists = model.current.contains_key(key);
        if !exists {
            let doc = store
                .create(key, data(json!({"again": n})), actor)
                .await
                .unwrap();
            model.stored(key, ChangeKind::Created, doc);
        } else if n % 37 == 0 {
            assert!(store.delete(key).await.unwrap());
            model.removed(key, ChangeKind::Deleted);
        } else if n % 23 == 0 {
            let doc = store
                .put(key, data(json!({"put": n})), actor)
                .await
                .unwrap();
            model.stored(key, ChangeKind::Updated, doc);
        } else if n % 29 == 0 {
            let write = docstore::Write::update(key.clone(), patch(n));
            let outcomes = store.write_all(&[write], actor).await.unwrap();
            let doc = outcomes
                .into_iter()
                .next()
                .unwrap()
                .into_document()
                .unwrap();
            model.stored(key, ChangeKind::Updated, doc);
        } else if n % 19 == 0 {
            let patch = patch(n);
            let update = store
                .update(key, &patch, actor)
                .expires_at(1_000_000 + n as i64);
            model.stored(key, ChangeKind::Updated, update.await.unwrap());
        } else {
            let doc = store.update(key, &patch(n), actor).await.unwrap();
            model.stored(key, ChangeKind::Updated, doc);
        }
    }
    let expiring = Key::new("t", "c", "short").unwrap();
    let update = store
        .create(&expiring, data(json!({"x": 1})), "ann")
        .expires_at(60_000);
    model.stored(&expiring, ChangeKind::Created, update.await.unwrap());
    let doc = store.update(&expiring, &patch(1), "bob").await.unwrap();
    model.stored(&expiring, ChangeKind::Updated, doc);
    clock.set(60_000);
    store.sweep_expired().await.unwrap();
    model.removed(&expiring, ChangeKind::Expired);
    model
}

/// Every change of `scope` from the oldest kept, `page` at a time.
async fn read_all(store: &Store, scope: &FeedScope, page: usize) -> Vec<Change> {
    let mut changes = Vec::new();
    let mut start = FeedStart::Oldest;
    loop {
        let read = store.changes(scope, &start, page).await.unwrap();
        changes.extend(read.changes);
        if read.caught_up {
            return changes;
        }
        start = FeedStart::After(read.next);
    }
}

fn store_with(retention: usize) -> (Store, Arc<ManualClock>, Arc<MemoryStore>) {
    let clock = Arc::new(ManualClock::new(1_000));
    let options = StoreOptions::default().with_clock(clock.clone());
    let memory = Arc::new(MemoryStore::with_options(options).with_feed_retention(retention));
    (Store::from_driver(memory.clone()), clock, memory)
}

#[tokio::test]
async fn every_version_is_rebuilt_from_any_page_and_scope() {
    let (store, clock, memory) = store_with(crate::DEFAULT_FEED_RETENTION);
    let model = write_mix(&store, &clock).await;
    let kept = memory.feed.kept_whole();
    assert!(kept.contains(&Some(false)), "updates keep reverse patches");
    for page in [1, 2, 7, 1000] {
        let changes = read_all(&store, &FeedScope::whole_store(), page).await;
        let read: Vec<Expected> = changes.iter().map(Expected::of).collect();
        assert_eq!(read.len(), model.changes.len(), "page {page}");
        for (n, (read, expected)) in read.iter().zip(&model.changes).enumerate() {
            assert_eq!(read, expected, "change {n}, page {page}");
        }
        for change in &changes {
            let by = change.document.as_ref().map(|doc| doc.updated_by.as_str());
            assert_eq!(by.unwrap_or(""), change.actor, "the actor");
        }
    }
    let site = FeedScope::site("t").unwrap();
    let changes = read_all(&store, &site, 3).await;
    let expected: Vec<&Expected> = model
        .changes
        .iter()
        .filter(|e| e.key.site() == "t")
        .collect();
    let read: Vec<Expected> = changes.iter().map(Expected::of).collect();
    assert_eq!(read.iter().collect::<Vec<_>>(), expected, "site t");
}

/// With a short retention the chains start at entries whose earlier changes are gone.
#[tokio::test]
async fn a_short_log_rebuilds_what_it_keeps() {
    let retention = 40;
    let (store, clock, _) = store_with(retention);
    let model = write_mix(&store, &clock).await;
    let changes = read_all(&store, &FeedScope::whole_store(), 9).await;
    let read: Vec<Expected> = changes.iter().map(Expected::of).collect();
    let tail = &model.changes[model.changes.len() - retention..];
    assert_eq!(read.len(), retention);
    for (n, (read, expected)) in read.iter().zip(tail).enumerate() {
        assert_eq!(read, expected, "change {n} of the tail");
    }
}

/// Every `KEYFRAME_EVERY`th update of a document keeps its whole previous version; the
/// others a reverse patch.
#[tokio::test]
async fn keyframes_bound_the_patches_a_read_undoes() {
    let (store, _, memory) = store_with(crate::DEFAULT_FEED_RETENTION);
    let key = Key::new("s", "c", "a").unwrap();
    store
        .create(&key, data(json!({"n": 0})), "ann")
        .await
        .unwrap();
    for n in 1..=2 * KEYFRAME_EVERY as usize {
        store.update(&key, &patch(n), "ann").await.unwrap();
    }
    let kept = memory.feed.kept_whole();
    assert_eq!(kept[0], None, "the create");
    let whole: Vec<usize> = (1..kept.len()).filter(|&n| kept[n] == Some(true)).collect();
    let every = KEYFRAME_EVERY as usize;
    assert_eq!(whole, vec![every, 2 * every]);
}

/// An update merges into the stored map itself when nobody else holds it: no copy, and the
/// feed still hands out the version before it.
#[tokio::test]
async fn an_update_merges_in_place() {
    let (store, _, memory) = store_with(crate::DEFAULT_FEED_RETENTION);
    let key = Key::new("s", "c", "a").unwrap();
    store
        .create(&key, data(json!({"n": 1, "keep": [1, 2]})), "ann")
        .await
        .unwrap();
    let stored_map = || {
        let sites = memory.sites.read();
        let doc = MemoryStore::lookup(&sites, &key).unwrap();
        std::ptr::from_ref::<serde_json::Map<_, _>>(&doc.data) as usize
    };
    let before = stored_map();
    store
        .update(&key, &data(json!({"n": 2})), "bob")
        .await
        .unwrap();
    assert_eq!(stored_map(), before, "merged in place");

    // An answer still held shares the map: the next update copies it, the answer keeps
    // what it had.
    let held = store
        .update(&key, &data(json!({"n": 3})), "bob")
        .await
        .unwrap();
    store
        .update(&key, &data(json!({"n": 4})), "bob")
        .await
        .unwrap();
    assert_eq!(held.data["n"], 3);
    assert_ne!(stored_map(), before, "copied: the answer held it");

    let changes = read_all(&store, &FeedScope::whole_store(), 10).await;
    let n = |doc: &Option<Document>| doc.as_ref().map(|doc| doc.data["n"].clone());
    let read: Vec<_> = changes
        .iter()
        .map(|c| (n(&c.previous), n(&c.document)))
        .collect();
    let expected = [(None, 1), (Some(1), 2), (Some(2), 3), (Some(3), 4)]
        .map(|(before, after)| (before.map(|v| json!(v)), Some(json!(after))));
    assert_eq!(read, expected);
    assert_eq!(changes[1].previous.as_ref().unwrap().updated_by, "ann");
    assert_eq!(
        changes[1].previous.as_ref().unwrap().data["keep"],
        json!([1, 2])
    );
}

/// A batch of updates merges each into its stored map, as a single update does; a batch
/// one of whose writes is refused changes nothing and names that write.
#[tokio::test]
async fn a_batch_of_updates_merges_in_place() {
    use docstore::{Error, Write};
    let (store, _, memory) = store_with(crate::DEFAULT_FEED_RETENTION);
    let keys = ["a", "b"].map(|id| Key::new("s", "c", id).unwrap());
    for key in &keys {
        store
            .create(key, data(json!({"n": 1})), "ann")
            .await
            .unwrap();
    }
    let stored_maps = || {
        let sites = memory.sites.read();
        keys.clone().map(|key| {
            let doc = MemoryStore::lookup(&sites, &key).unwrap();
            std::ptr::from_ref::<serde_json::Map<_, _>>(&doc.data) as usize
        })
    };
    let before = stored_maps();
    let [a, b] = keys.clone();
    let both = |n: i64, expected: u64| {
        let update = Write::update(a.clone(), data(json!({"n": n})));
        [
            update,
            Write::update_if(b.clone(), data(json!({"n": n})), expected),
        ]
    };
    let written = store.write_all(&both(2, 1), "bob").await.unwrap();
    assert_eq!(written.len(), 2);
    drop(written); // the answers share the maps: an update would copy them first
    assert_eq!(stored_maps(), before, "merged in place");
    assert_eq!(memory.feed.kept_whole()[2..], [Some(false), Some(false)]);

    match store.write_all(&both(3, 1), "bob").await {
        Err(Error::Batch { index: 1, source }) => {
            assert!(
                matches!(*source, Error::Conflict { current: 2 }),
                "{source}"
            );
        }
        other => panic!("{other:?}"),
    }
    for key in &keys {
        let doc = store.get(key).await.unwrap().unwrap();
        assert_eq!((doc.version, doc.data["n"].clone()), (2, json!(2)));
    }
    let changes = read_all(&store, &FeedScope::whole_store(), 10).await;
    let n = |doc: &Option<Document>| doc.as_ref().map(|doc| doc.data["n"].clone());
    let read: Vec<_> = changes[2..]
        .iter()
        .map(|c| (n(&c.previous), n(&c.document), c.actor.as_str()))
        .collect();
    let updated = (Some(json!(1)), Some(json!(2)), "bob");
    assert_eq!(read, [updated.clone(), updated]);
}

/// An update refused after its merge (a unique value another document holds; the result
/// over the size limit) leaves the document, its index entries and the feed as they were.
#[tokio::test]
async fn a_refused_merge_is_undone() {
    let index = docstore::Index::parse("c", "by_email", ["email"])
        .unwrap()
        .unique();
    let indexes = docstore::IndexSet::new([index]).unwrap();
    let options = StoreOptions::default()
        .with_indexes(indexes)
        .with_max_doc_bytes(200);
    let memory = Arc::new(MemoryStore::with_options(options));
    let store = Store::from_driver(memory.clone());
    let (a, b) = (
        Key::new("s", "c", "a").unwrap(),
        Key::new("s", "c", "b").unwrap(),
    );
    let first = data(json!({"email": "a@x", "n": 1, "nested": {"k": "v"}}));
    let original = store.create(&a, first, "ann").await.unwrap();
    store
        .create(&b, data(json!({"email": "b@x"})), "ann")
        .await
        .unwrap();

    let taken = data(json!({"email": "b@x", "n": 2, "nested": {"k": null}}));
    let refused = store.update(&a, &taken, "bob").await;
    assert!(
        matches!(refused, Err(docstore::Error::UniqueViolation { .. })),
        "{refused:?}"
    );
    let big = data(json!({"n": "x".repeat(300), "nested": null}));
    let refused = store.update(&a, &big, "bob").await;
    assert!(
        matches!(refused, Err(docstore::Error::TooLarge { .. })),
        "{refused:?}"
    );
    assert_eq!(store.get(&a).await.unwrap(), Some(original.clone()));

    // The index still files `a` under its own email, and the next change's previous is
    // the original.
    let moved = store
        .update(&a, &data(json!({"email": "c@x"})), "bob")
        .await
        .unwrap();
    store
        .update(&b, &data(json!({"email": "a@x"})), "bob")
        .await
        .unwrap();
    let changes = read_all(&store, &FeedScope::whole_store(), 10).await;
    assert_eq!(changes.len(), 4, "nothing logged for a refusal");
    assert_eq!(changes[2].previous.as_ref(), Some(&original));
    assert_eq!(changes[2].document.as_ref(), Some(&moved));
}

/// The log sends its head to waiting readers only while one is subscribed: a reader whose
/// cursor is behind changes logged before it waited returns at once, from the log itself,
/// and one at the head is woken by the next change.
#[tokio::test]
async fn a_wait_sees_changes_logged_before_it_and_wakes_for_the_next() {
    use docstore::driver::Driver;
    use std::time::Duration;
    let (store, _clock, memory) = store_with(100);
    let scope = FeedScope::whole_store();
    let key = |id: &str| Key::new("s", "c", id).unwrap();
    let before = store.changes(&scope, &FeedStart::Oldest, 10).await.unwrap();
    store.create(&key("a"), Data::new(), "ann").await.unwrap();
    let behind = tokio::time::timeout(
        Duration::from_secs(30),
        memory.wait_for_changes(&before.next),
    );
    behind
        .await
        .expect("a change is logged after the cursor")
        .unwrap();

    let head = store
        .changes(&scope, &FeedStart::After(before.next), 10)
        .await
        .unwrap();
    assert_eq!(head.changes.len(), 1);
    let waiting = tokio::spawn({
        let memory = Arc::clone(&memory);
        async move { memory.wait_for_changes(&head.next).await }
    });
    tokio::task::yield_now().await;
    store.create(&key("b"), Data::new(), "ann").await.unwrap();
    let woken = tokio::time::timeout(Duration::from_secs(30), waiting);
    woken
        .await
        .expect("woken by the next change")
        .unwrap()
        .unwrap();
}
