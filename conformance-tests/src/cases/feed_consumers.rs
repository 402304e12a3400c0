//! Feed consumers (`docs/contract.md`, "Change feed"): a snapshot start hands a new consumer
//! every document and then every later change, exactly once, under one cursor that resumes
//! from any point; feed cursors are bound to the site (and collection) whose feed handed them
//! out; a typed change whose document does not decode still carries its cursor.

use crate::Harness;
use crate::support::{Ctx, obj};
use docstore::feed::FeedScope;
use docstore::{
    Change, ChangeCursor, ChangeKind, Document, Error, FeedStart, Key, Site, Store, Write,
};
use futures_util::{StreamExt, TryStreamExt};
use serde_json::json;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

/// How long a case waits for changes it expects before it fails.
const PATIENCE: Duration = Duration::from_secs(120);

/// Concurrent writers while the consumer reads.
const WRITERS: usize = 16;

/// Consumers starting from a snapshot at once, each reading and restarting its own way.
const CONSUMERS: usize = 3;

/// Writes each writer makes.
const WRITES: usize = 24;

/// Documents the site holds before the consumer starts, per collection.
const EXISTING: usize = 20;

const COLLECTIONS: [&str; 3] = ["a", "b", "c"];

/// The ids writers touch in each collection: the existing ones and as many new ones.
fn ids() -> Vec<String> {
    (0..EXISTING * 2).map(|i| format!("d{i:02}")).collect()
}

/// A small deterministic random source (xorshift), so a failure repeats from its seed.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// One writer: puts, patches and deletes over the shared ids (deleted documents come back
/// with the next put, at version 1 again). Every document it writes holds a tag no other
/// write uses, so a change handed out twice is seen. Returns the deletes it made, by key.
async fn writer(store: Store, site: String, writer: usize) -> HashMap<Key, usize> {
    let mut dice = Dice(0x9e37_79b9_7f4a_7c15 ^ ((writer as u64 + 1) * 0x1000_0001));
    let ids = ids();
    let mut deletes = HashMap::new();
    for write in 0..WRITES {
        let collection = COLLECTIONS[dice.below(COLLECTIONS.len())];
        let key = Key::new(&site, collection, &ids[dice.below(ids.len())]).unwrap();
        let tag = format!("w{writer}-{write}");
        match dice.below(4) {
            0 | 1 => {
                store
                    .put(&key, obj(json!({"tag": tag})), "w")
                    .await
                    .unwrap();
            }
            2 => match store.update(&key, &obj(json!({"tag": tag})), "w").await {
                Ok(_) | Err(Error::NotFound { .. }) => {}
                Err(err) => panic!("update {key}: {err}"),
            },
            _ => {
                if store.delete(&key).await.unwrap() {
                    *deletes.entry(key).or_default() += 1;
                }
            }
        }
        // Lets the consumer read between writes even where a write never waits (memory).
        tokio::task::yield_now().await;
    }
    deletes
}

/// What the consumer has been handed: the documents it holds, and every tag and delete it
/// saw, to tell a repeat.
#[derive(Default)]
struct Consumer {
    documents: BTreeMap<Key, Document>,
    tags: HashSet<(Key, String)>,
    deletes: HashMap<Key, usize>,
}

impl Consumer {
    fn apply(&mut self, change: &Change, site: &str) {
        assert_eq!(
            change.key.site(),
            site,
            "a change of another site: {change:?}"
        );
        match &change.document {
            Some(document) => {
                assert_eq!(change.version, document.version);
                let tag = document.data["tag"]
                    .as_str()
                    .unwrap_or("existing")
                    .to_owned();
                let first = self.tags.insert((change.key.clone(), tag.clone()));
                assert!(first, "{} {tag} handed out twice: {change:?}", change.key);
                self.documents.insert(change.key.clone(), document.clone());
            }
            None => {
                assert_eq!(change.kind, ChangeKind::Deleted);
                *self.deletes.entry(change.key.clone()).or_default() += 1;
                self.documents.remove(&change.key);
            }
        }
    }
}

/// Every document of `site`'s collections, by key.
async fn documents_of(store: &Store, site: &str) -> BTreeMap<Key, Document> {
    let mut all = BTreeMap::new();
    for collection in COLLECTIONS {
        let query = docstore::Query::new();
        let documents: Vec<Document> = store
            .stream(site, collection, &query)
            .try_collect()
            .await
            .unwrap();
        for doc in documents {
            all.insert(Key::new(site, collection, &doc.id).unwrap(), doc);
        }
    }
    all
}

/// Reads `site`'s feed from a snapshot start in pages of random sizes, handling a random
/// part of some pages and starting again after the last change handled (as a consumer that
/// restarts does), until `done` says the writers finished and what it holds is the site's
/// documents.
async fn consume(
    site: &Site,
    store: &Store,
    done: &tokio::sync::watch::Receiver<bool>,
    dice: &mut Dice,
) -> Consumer {
    let mut consumer = Consumer::default();
    let mut start = FeedStart::Snapshot;
    let mut restarts = 0;
    loop {
        let limit = 1 + dice.below(8);
        let page = site.changes(&start, limit).await.unwrap();
        let handled = match dice.below(4) {
            0 if !page.changes.is_empty() => dice.below(page.changes.len()),
            _ => page.changes.len(),
        };
        for change in &page.changes[..handled] {
            consumer.apply(change, site.name());
        }
        let saved = match handled {
            n if n == page.changes.len() => Some(page.next.clone()),
            0 => None,
            n => Some(page.changes[n - 1].cursor.clone()),
        };
        if handled < page.changes.len() {
            restarts += 1;
        }
        if let Some(cursor) = saved {
            start = FeedStart::After(ChangeCursor::parse(&cursor.to_string()).unwrap());
        }
        if page.caught_up
            && *done.borrow()
            && consumer.documents == documents_of(store, site.name()).await
        {
            assert!(restarts > 0, "the consumer never started again mid-page");
            return consumer;
        }
        if page.caught_up {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::task::yield_now().await;
    }
}

/// Consumers that start from a snapshot while 16 writers put, patch and delete (deleted
/// documents coming back), reading pages of random sizes and starting again from the cursor
/// of a random change they handled, end holding exactly the site's documents: each
/// document's final version once, nothing handed out twice, no more deletes of a key than
/// were made, and nothing of another site.
pub async fn a_snapshot_then_the_changes_give_each_version_once(h: &dyn Harness) {
    let ctx = Ctx::new(h, "feed-snapshot").await;
    let other = Ctx::new(h, "feed-snapshot-other").await;
    let ids = ids();
    for collection in COLLECTIONS {
        for id in &ids[..EXISTING] {
            let tag = format!("before-{collection}-{id}");
            ctx.store
                .create(&ctx.key(collection, id), obj(json!({"tag": tag})), "")
                .await
                .unwrap();
        }
    }
    let (finished, done) = tokio::sync::watch::channel(false);
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (store, site) = (ctx.store.clone(), ctx.site.clone());
            tokio::spawn(writer(store, site, w))
        })
        .collect();
    let noise = {
        let store = ctx.store.clone();
        let key = Key::new(&other.site, "a", "d00").unwrap();
        tokio::spawn(async move {
            for n in 0..WRITES {
                store.put(&key, obj(json!({"n": n})), "").await.unwrap();
            }
        })
    };
    let site = ctx.store.site(&ctx.site).unwrap();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|n| {
            let (site, store, done) = (site.clone(), ctx.store.clone(), done.clone());
            tokio::spawn(async move {
                let mut dice = Dice(0x2545_f491_4f6c_dd1d + n as u64);
                tokio::time::timeout(PATIENCE, consume(&site, &store, &done, &mut dice))
                    .await
                    .expect("the consumer never held the site's documents")
            })
        })
        .collect();
    let mut deletes: HashMap<Key, usize> = HashMap::new();
    for writer in writers {
        for (key, n) in writer.await.unwrap() {
            *deletes.entry(key).or_default() += n;
        }
    }
    noise.await.unwrap();
    finished.send(true).unwrap();
    let documents = documents_of(&ctx.store, &ctx.site).await;
    for consumer in consumers {
        let consumer = consumer.await.unwrap();
        assert_eq!(consumer.documents, documents);
        for (key, seen) in &consumer.deletes {
            let made = deletes.get(key).copied().unwrap_or(0);
            assert!(
                *seen <= made,
                "{key}: {seen} deletes handed out, {made} made"
            );
        }
    }
}

/// A snapshot of a quiet collection hands out its documents in id order, kind `existing`,
/// then follows: a write after it is the next change, and the cursor of any document of the
/// snapshot resumes with the next one.
pub async fn a_snapshot_hands_out_the_documents_then_follows(h: &dyn Harness) {
    let ctx = Ctx::new(h, "feed-snapshot-quiet").await;
    let site = ctx.store.site(&ctx.site).unwrap();
    let tickets = site.collection::<docstore::Data>("tickets").unwrap();
    for id in ["t3", "t1", "t2"] {
        tickets.create(id, &obj(json!({"id": id}))).await.unwrap();
    }
    ctx.store
        .create(&ctx.key("other", "x"), obj(json!({})), "")
        .await
        .unwrap();
    let page = tickets.changes(&FeedStart::Snapshot, 2).await.unwrap();
    let first: Vec<(String, ChangeKind, u64)> = page
        .changes
        .iter()
        .map(|c| (c.id.clone(), c.kind, c.version))
        .collect();
    assert_eq!(
        first,
        [
            ("t1".to_owned(), ChangeKind::Existing, 1),
            ("t2".to_owned(), ChangeKind::Existing, 1)
        ]
    );
    assert!(!page.caught_up);
    let resumed = FeedStart::After(page.changes[0].cursor.clone());
    let rest = tickets.changes(&resumed, 10).await.unwrap();
    let ids: Vec<&str> = rest.changes.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["t2", "t3"]);
    assert!(rest.caught_up);
    tickets.update("t1", &json!({"n": 1})).await.unwrap();
    let mut follow = tickets.watch(FeedStart::After(rest.next));
    let next = tokio::time::timeout(PATIENCE, follow.next())
        .await
        .expect("the update after the snapshot never came")
        .unwrap()
        .unwrap();
    assert_eq!(
        (next.id.as_str(), next.kind, next.version),
        ("t1", ChangeKind::Updated, 2)
    );
}

/// A feed cursor belongs to the feed that handed it out: another site's, a collection's on
/// the site's feed (and the reverse), the whole store's on a site's, and a snapshot's cursor
/// of another site are all `InvalidArgument`; on its own feed it reads on.
pub async fn a_feed_cursor_of_one_site_is_refused_on_another(h: &dyn Harness) {
    let ctx = Ctx::new(h, "feed-bound").await;
    let other = Ctx::new(h, "feed-bound-other").await;
    ctx.store
        .create(&ctx.key("c", "a"), obj(json!({})), "")
        .await
        .unwrap();
    let mine = ctx.store.site(&ctx.site).unwrap();
    let theirs = ctx.store.site(&other.site).unwrap();
    let collection = mine.collection::<docstore::Data>("c").unwrap();
    let site_cursor = mine.changes(&FeedStart::Now, 1).await.unwrap().next;
    let collection_cursor = collection.changes(&FeedStart::Now, 1).await.unwrap().next;
    let whole = FeedScope::whole_store();
    let store_cursor = ctx
        .store
        .changes(&whole, &FeedStart::Now, 1)
        .await
        .unwrap()
        .next;
    let snapshot_cursor = mine.changes(&FeedStart::Snapshot, 1).await.unwrap().next;
    let refused = [
        theirs
            .changes(&FeedStart::After(site_cursor.clone()), 10)
            .await
            .err(),
        theirs
            .changes(&FeedStart::After(snapshot_cursor.clone()), 10)
            .await
            .err(),
        mine.changes(&FeedStart::After(collection_cursor.clone()), 10)
            .await
            .err(),
        mine.changes(&FeedStart::After(store_cursor.clone()), 10)
            .await
            .err(),
        collection
            .changes(&FeedStart::After(site_cursor.clone()), 10)
            .await
            .err(),
        ctx.store
            .changes(&whole, &FeedStart::After(site_cursor.clone()), 10)
            .await
            .err(),
    ];
    for (n, err) in refused.into_iter().enumerate() {
        assert!(
            matches!(err, Some(Error::InvalidArgument(_))),
            "{n}: {err:?}"
        );
    }
    mine.changes(&FeedStart::After(site_cursor), 10)
        .await
        .unwrap();
    mine.changes(&FeedStart::After(snapshot_cursor), 10)
        .await
        .unwrap();
    collection
        .changes(&FeedStart::After(collection_cursor), 10)
        .await
        .unwrap();
    ctx.store
        .changes(&whole, &FeedStart::After(store_cursor), 10)
        .await
        .unwrap();
}

/// A ticket type a document of the collection does not fit (`n` past a `u8`).
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Small {
    n: u8,
}

/// A typed change whose document does not decode is a change with its cursor (its value the
/// `Decode` error naming the key): a consumer saves it and the next read starts after it.
pub async fn an_undecodable_change_carries_its_cursor(h: &dyn Harness) {
    let ctx = Ctx::new(h, "feed-undecodable").await;
    let site = ctx.store.site(&ctx.site).unwrap();
    let small = site.collection::<Small>("s").unwrap();
    let start = small.changes(&FeedStart::Now, 1).await.unwrap().next;
    ctx.store
        .create(&ctx.key("s", "bad"), obj(json!({"n": 300})), "")
        .await
        .unwrap();
    small.create("good", &Small { n: 7 }).await.unwrap();
    let read = small
        .watch(FeedStart::After(start))
        .take(2)
        .try_collect::<Vec<_>>();
    let changes = tokio::time::timeout(PATIENCE, read).await.unwrap().unwrap();
    let bad = &changes[0];
    assert_eq!(bad.id, "bad");
    match &bad.value {
        Err(Error::Decode { .. }) => {}
        other => panic!("bad decoded: {other:?}"),
    }
    let after_bad = small
        .changes(&FeedStart::After(bad.cursor.clone()), 10)
        .await
        .unwrap();
    let good = &after_bad.changes[0];
    assert_eq!(good.id, "good");
    assert_eq!(
        good.value.as_ref().unwrap().as_ref().unwrap().value,
        Small { n: 7 }
    );
    assert_eq!(changes[1].cursor, good.cursor);
}

/// Where the backend keeps it ([`Capabilities::feed_previous`](crate::Capabilities)), every
/// write that replaces or removes a document carries what it replaced — an update, a put, a
/// batch's update, a delete, a batch's delete — and a create carries none; a typed change
/// decodes it. Elsewhere no change carries one.
pub async fn changes_carry_the_previous_value_where_kept(h: &dyn Harness) {
    let ctx = Ctx::new(h, "feed-previous").await;
    let site = ctx.store.site(&ctx.site).unwrap();
    let start = site.changes(&FeedStart::Now, 1).await.unwrap().next;
    let typed = site.collection::<serde_json::Value>("c").unwrap();
    let typed_start = typed.changes(&FeedStart::Now, 1).await.unwrap().next;
    let (key, other) = (ctx.key("c", "a"), ctx.key("c", "b"));
    let store = &ctx.store;
    let v1 = store.create(&key, obj(json!({"n": 1})), "").await.unwrap();
    let v2 = store.update(&key, &obj(json!({"n": 2})), "").await;
    let v2 = v2.unwrap();
    let v3 = store.put(&key, obj(json!({"n": 3})), "").await.unwrap();
    let batch = [Write::update_if(key.clone(), obj(json!({"n": 4})), 3)];
    let outcomes = store.write_all(&batch, "").await.unwrap();
    let docstore::WriteOutcome::Written(v4) = outcomes[0].clone() else {
        panic!("{outcomes:?}")
    };
    store.delete(&key).await.unwrap();
    let b1 = store
        .create(&other, obj(json!({"m": 1})), "")
        .await
        .unwrap();
    let batch = [Write::delete_if(other.clone(), 1)];
    store.write_all(&batch, "").await.unwrap();
    let read = site
        .watch(FeedStart::After(start.clone()))
        .take(7)
        .try_collect::<Vec<_>>();
    let changes = tokio::time::timeout(PATIENCE, read).await.unwrap().unwrap();
    let previous: Vec<Option<Document>> = changes.iter().map(|c| c.previous.clone()).collect();
    if h.capabilities().feed_previous {
        let expected = [None, Some(v1), Some(v2), Some(v3), Some(v4), None, Some(b1)];
        assert_eq!(previous, expected);
        let read = typed.watch(FeedStart::After(typed_start)).take(2);
        let typed_changes = read.try_collect::<Vec<_>>().await.unwrap();
        let before = typed_changes[1].previous.as_ref().unwrap();
        assert_eq!((before.version, &before.value), (1, &json!({"n": 1})));
    } else {
        assert_eq!(previous, [None, None, None, None, None, None, None]);
    }
}
