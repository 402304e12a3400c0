//! The change feed (`docs/contract.md`, "Change feed"): one change per committed write, none
//! for a refused one, every write of a batch, each document's versions in order, cursors that
//! resume exactly, `watch` woken by a write, a scope that never shows another site, bad and
//! expired cursors refused, and a replica rebuilt from the feed equal to its source.
//!
//! Every case reads its own site's feed (the store may be shared with other cases). A feed
//! may show a commit a moment later (DynamoDB Streams), so reads wait for the changes a case
//! expects, with a generous bound, instead of assuming they are there at once.

use crate::Harness;
use crate::support::{Ctx, obj, property_cases};
use docstore::feed::{ChangePage, FeedScope};
use docstore::{
    Change, ChangeKind, Data, Document, Error, FeedStart, Site, Store, StoreOptions, Write,
};
use futures_util::{StreamExt, TryStreamExt};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long a case waits for changes it expects before it fails: a bound for a feed that
/// never delivers, not a speed target; generous for moto (one Python thread) behind a
/// loaded CI machine.
const PATIENCE: Duration = Duration::from_secs(180);

/// The first `n` changes of `site`'s feed from `start`, waiting for them to appear.
async fn first_changes(site: &Site, start: FeedStart, n: usize) -> Vec<Change> {
    let read = site.watch(start).take(n).try_collect::<Vec<_>>();
    tokio::time::timeout(PATIENCE, read)
        .await
        .unwrap_or_else(|_| panic!("fewer than {n} changes after {PATIENCE:?}"))
        .unwrap()
}

/// Changes of `site` from the start of its feed up to and including the first change of
/// `marker` (a write made last, so that everything before it has been committed).
async fn changes_through(site: &Site, marker: &str) -> Vec<Change> {
    let mut watch = site.watch(FeedStart::Oldest);
    let read = async {
        let mut changes = Vec::new();
        while let Some(change) = watch.try_next().await.unwrap() {
            let last = change.key.id() == marker;
            changes.push(change);
            if last {
                break;
            }
        }
        changes
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .unwrap_or_else(|_| panic!("no change of {marker} after {PATIENCE:?}"))
}

/// What a change says, without its cursor and time, for comparisons.
#[derive(Debug, PartialEq)]
struct Seen {
    id: String,
    kind: ChangeKind,
    version: u64,
    document: Option<Document>,
    actor: String,
}

fn seen(change: &Change) -> Seen {
    Seen {
        id: change.key.id().to_owned(),
        kind: change.kind,
        version: change.version,
        document: change.document.clone(),
        actor: change.actor.clone(),
    }
}

fn stored(kind: ChangeKind, document: &Document) -> Seen {
    Seen {
        id: document.id.clone(),
        kind,
        version: document.version,
        document: Some(document.clone()),
        actor: document.updated_by.clone(),
    }
}

fn deleted(id: &str, version: u64, actor: &str) -> Seen {
    Seen {
        id: id.to_owned(),
        kind: ChangeKind::Deleted,
        version,
        document: None,
        actor: actor.to_owned(),
    }
}

/// Every write kind gives exactly one change: its kind, the version it left, the document as
/// the write returned it (its time and actor), and for a delete the removed version and the
/// deleting actor.
pub async fn each_write_kind_gives_one_change(h: &dyn Harness) {
    let ctx = Ctx::new(h, "feed-kinds").await;
    let site = ctx
        .store
        .site(&ctx.site)
        .unwrap()
        .with_actor("ann")
        .unwrap();
    let (store, key) = (&ctx.store, |id: &str| ctx.key("c", id));
    let mut expected = Vec::new();
    let a = store
        .create(&key("a"), obj(json!({"n": 1})), "ann")
        .await
        .unwrap();
    expected.push(stored(ChangeKind::Created, &a));
    let b = store
        .put(&key("b"), obj(json!({"n": 1})), "ann")
        .await
        .unwrap();
    expected.push(stored(ChangeKind::Created, &b));
    let b = store
        .put(&key("b"), obj(json!({"n": 2})), "bob")
        .await
        .unwrap();
    expected.push(stored(ChangeKind::Updated, &b));
    let a = store
        .update(&key("a"), &obj(json!({"m": 1})), "ann")
        .await
        .unwrap();
    expected.push(stored(ChangeKind::Updated, &a));
    let a = store
        .update_if(&key("a"), &obj(json!({"m": null})), 2, "cy")
        .await
        .unwrap();
    expected.push(stored(ChangeKind::Updated, &a));
    let a = store
        .replace_if(&key("a"), obj(json!({"x": [1]})), 3, "ann")
        .await
        .unwrap();
    expected.push(stored(ChangeKind::Updated, &a));
    let collection = site
        .with_actor("dee")
        .unwrap()
        .collection::<Data>("c")
        .unwrap();
    assert!(collection.delete("b").await.unwrap());
    expected.push(deleted("b", 2, "dee"));
    collection.delete_if("a", 4).await.unwrap();
    expected.push(deleted("a", 4, "dee"));
    let old = Document {
        version: 7,
        created_by: "old".into(),
        updated_by: "older".into(),
        ..Document::first("r", obj(json!({"kept": true})), "", 1_000)
    };
    store.restore(&key("r"), &old).await.unwrap();
    expected.push(stored(ChangeKind::Created, &old));

    let changes = first_changes(&site, FeedStart::Oldest, expected.len()).await;
    let got: Vec<Seen> = changes.iter().map(seen).collect();
    assert_eq!(got, expected);
    for change in &changes {
        assert_eq!(change.key.site(), ctx.site);
        assert_eq!(change.key.collection(), "c");
        if let Some(doc) = &change.document {
            assert_eq!(change.time, doc.updated_at, "{change:?}");
        }
    }
    let deletes: Vec<i64> = changes
        .iter()
        .filter(|c| c.kind == ChangeKind::Deleted)
        .map(|c| c.time)
        .collect();
    assert!(deletes.iter().all(|&t| t >= a.updated_at), "{deletes:?}");
}

/// Writes that are refused — by their condition, their size, a taken id, a failing batch —
/// leave no trace in the feed.
pub async fn refused_writes_give_no_change(h: &dyn Harness) {
    let options = StoreOptions::default().with_max_doc_bytes(100);
    let ctx = Ctx::with_options(h, "feed-refused", options).await;
    let site = ctx.store.site(&ctx.site).unwrap();
    let (store, key) = (&ctx.store, |id: &str| ctx.key("c", id));
    let a = store
        .create(&key("a"), obj(json!({"n": 1})), "")
        .await
        .unwrap();
    let refusals = [
        store.create(&key("a"), obj(json!({})), "").await.err(),
        store
            .update_if(&key("a"), &obj(json!({"n": 2})), 9, "")
            .await
            .err(),
        store
            .replace_if(&key("a"), obj(json!({})), 9, "")
            .await
            .err(),
        store.delete_if(&key("a"), 9).await.err(),
        store.delete_if(&key("none"), 1).await.err(),
        store.update(&key("none"), &obj(json!({})), "").await.err(),
        store
            .put(&key("big"), obj(json!({"s": "x".repeat(200)})), "")
            .await
            .err(),
        store
            .update(&key("a"), &obj(json!({"s": "x".repeat(200)})), "")
            .await
            .err(),
    ];
    assert!(refusals.iter().all(Option::is_some), "{refusals:?}");
    let batch = [
        Write::create(key("z"), obj(json!({}))),
        Write::put(key("y"), obj(json!({"n": 3}))),
        Write::update_if(key("a"), obj(json!({"n": 3})), 9),
    ];
    let failed = store.write_all(&batch, "").await;
    assert!(
        matches!(failed, Err(Error::Batch { index: 2, .. })),
        "{failed:?}"
    );
    assert!(!store.delete(&key("none")).await.unwrap());
    let marker = store
        .create(&key("marker"), obj(json!({})), "")
        .await
        .unwrap();

    let got: Vec<Seen> = changes_through(&site, "marker")
        .await
        .iter()
        .map(seen)
        .collect();
    let expected = [
        stored(ChangeKind::Created, &a),
        stored(ChangeKind::Created, &marker),
    ];
    assert_eq!(got, expected);
}

/// Each write of a committed batch is one change (a `Check` is none), across collections.
pub async fn a_batch_gives_each_of_its_writes(h: &dyn Harness) {
    let ctx = Ctx::new(h, "feed-batch").await;
    let site = ctx.store.site(&ctx.site).unwrap();
    let (store, key) = (&ctx.store, |c: &str, id: &str| ctx.key(c, id));
    store
        .create(&key("c", "x"), obj(json!({"n": 1})), "")
        .await
        .unwrap();
    store
        .create(&key("c", "y"), obj(json!({"n": 1})), "")
        .await
        .unwrap();
    store
        .create(&key("d", "w"), obj(json!({"n": 1})), "")
        .await
        .unwrap();
    let batch = [
        Write::create(key("d", "new"), obj(json!({"n": 0}))),
        Write::put(key("c", "x"), obj(json!({"n": 2}))),
        Write::update_if(key("c", "y"), obj(json!({"m": 1})), 1),
        Write::delete_if(key("d", "w"), 1),
        Write::check(key("c", "absent"), None),
    ];
    let outcomes = store.write_all(&batch, "batcher").await.unwrap();
    let mut expected = vec![deleted("w", 1, "batcher")];
    for outcome in &outcomes {
        if let docstore::WriteOutcome::Written(doc) = outcome {
            let kind = if doc.version == 1 {
                ChangeKind::Created
            } else {
                ChangeKind::Updated
            };
            expected.push(stored(kind, doc));
        }
    }
    let mut got: Vec<Seen> = first_changes(&site, FeedStart::Oldest, 7).await[3..]
        .iter()
        .map(seen)
        .collect();
    let by_id = |s: &Seen| s.id.clone();
    got.sort_by_key(by_id);
    expected.sort_by_key(by_id);
    assert_eq!(got, expected);
}

/// Under 16 concurrent writers on a few documents, each document's changes come in version
/// order, every version once.
pub async fn each_documents_changes_come_in_version_order(h: &dyn Harness) {
    const TASKS: usize = 16;
    const UPDATES: usize = 8;
    const DOCS: usize = 4;
    let ctx = Ctx::new(h, "feed-order").await;
    let site = ctx.store.site(&ctx.site).unwrap();
    for doc in 0..DOCS {
        let data = obj(json!({"n": 0}));
        ctx.store
            .create(&ctx.key("c", &format!("d{doc}")), data, "")
            .await
            .unwrap();
    }
    let writers = (0..TASKS).map(|task| {
        let (store, site) = (ctx.store.clone(), ctx.site.clone());
        tokio::spawn(async move {
            for i in 0..UPDATES {
                let key = docstore::Key::new(&site, "c", format!("d{}", (task + i) % DOCS));
                let patch = obj(json!({ format!("t{task}"): i }));
                store.update(&key.unwrap(), &patch, "").await.unwrap();
            }
        })
    });
    for writer in futures_util::future::join_all(writers).await {
        writer.unwrap();
    }
    let total = DOCS + TASKS * UPDATES;
    let changes = first_changes(&site, FeedStart::Oldest, total).await;
    let mut versions: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for change in &changes {
        versions
            .entry(change.key.id().to_owned())
            .or_default()
            .push(change.version);
    }
    for (id, versions) in &versions {
        let expected: Vec<u64> = (1..=versions.len() as u64).collect();
        assert_eq!(versions, &expected, "{id}");
    }
    assert_eq!(versions.values().map(Vec::len).sum::<usize>(), total);
}

/// Reading on from any change's cursor, or from any page's `next`, gives exactly the rest of
/// the feed, whatever the page size.
pub async fn a_cursor_resumes_without_gap_or_duplicate(h: &dyn Harness) {
    const WRITES: usize = 24;
    let ctx = Ctx::new(h, "feed-resume").await;
    let site = ctx.store.site(&ctx.site).unwrap();
    for i in 0..WRITES {
        let key = ctx.key(["c", "d"][i % 2], &format!("k{}", i % 5));
        ctx.store
            .put(&key, obj(json!({ "i": i })), "")
            .await
            .unwrap();
    }
    let whole = first_changes(&site, FeedStart::Oldest, WRITES).await;
    for (position, limit) in [(0, 1), (5, 2), (11, 7), (17, 1000), (22, 3)] {
        let start = FeedStart::After(whole[position].cursor.clone());
        let wanted = WRITES - position - 1;
        let read = tokio::time::timeout(PATIENCE, read_pages(&site, start, limit, wanted));
        let (rest, start) = read.await.expect("the rest of the feed");
        assert_eq!(
            rest,
            whole[position + 1..],
            "after change {position}, pages of {limit}"
        );
        let after_last = site.changes(&start, 10).await.unwrap();
        assert_eq!(after_last.changes, [], "nothing after the last change");
    }
}

/// Pages of `limit` from `start` until `wanted` changes were read; with where the next
/// read starts.
async fn read_pages(
    site: &Site,
    mut start: FeedStart,
    limit: usize,
    wanted: usize,
) -> (Vec<Change>, FeedStart) {
    let mut changes = Vec::new();
    while changes.len() < wanted {
        let page: ChangePage = site.changes(&start, limit).await.unwrap();
        assert!(page.changes.len() <= limit);
        changes.extend(page.changes);
        start = FeedStart::After(page.next);
    }
    (changes, start)
}

/// A watcher waiting at the end of the feed wakes for a new write, typed or not.
pub async fn watch_wakes_on_a_new_write(h: &dyn Harness) {
    let ctx = Ctx::new(h, "feed-watch").await;
    let site = ctx.store.site(&ctx.site).unwrap().with_actor("w").unwrap();
    let now = site.changes(&FeedStart::Now, 1).await.unwrap();
    assert_eq!(now.changes, []);
    let mut untyped = site.watch(FeedStart::After(now.next.clone()));
    let typed = site.collection::<serde_json::Value>("c").unwrap();
    let typed_now = typed.changes(&FeedStart::Now, 1).await.unwrap().next;
    let mut typed_changes = typed.watch(FeedStart::After(typed_now));
    let waiting = tokio::spawn(async move {
        let change = untyped.next().await.unwrap().unwrap();
        let typed = typed_changes.next().await.unwrap().unwrap();
        (change, typed)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "a watcher at the end of the feed waits"
    );
    let written = typed.create("late", &json!({"hello": 1})).await.unwrap();
    let (change, typed_change) = tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("the watcher woke")
        .unwrap();
    assert_eq!(
        (change.key.id(), change.kind, change.version),
        ("late", ChangeKind::Created, 1)
    );
    assert_eq!(typed_change.id, "late");
    assert_eq!(typed_change.value.unwrap(), Some(written));
}

/// A site's feed shows only that site's changes, a collection's only that collection's, and
/// the store-wide feed both sites'.
pub async fn a_feed_shows_only_its_scope(h: &dyn Harness) {
    let ctx = Ctx::new(h, "feed-scope").await;
    let other = crate::support::unique_site("feed-scope");
    let all = FeedScope::whole_store();
    let store_start = ctx
        .store
        .changes(&all, &FeedStart::Now, 1)
        .await
        .unwrap()
        .next;
    let store_start = FeedStart::After(store_start);
    let (mine, theirs) = (
        ctx.store.site(&ctx.site).unwrap(),
        ctx.store.site(&other).unwrap(),
    );
    for site in [&theirs, &mine, &theirs] {
        for collection in ["c", "d"] {
            let typed = site.collection::<Data>(collection).unwrap();
            typed
                .put("same", &obj(json!({"site": site.name()})))
                .await
                .unwrap();
        }
    }
    let marker = |site: &Site| {
        let site = site.clone();
        async move {
            let typed = site.collection::<Data>("m").unwrap();
            typed.create("marker", &Data::new()).await.unwrap();
        }
    };
    marker(&mine).await;
    marker(&theirs).await;
    let keys =
        |changes: &[Change]| -> Vec<String> { changes.iter().map(|c| c.key.to_string()).collect() };
    let mine_changes = changes_through(&mine, "marker").await;
    let expected = [
        format!("{}/c/same", ctx.site),
        format!("{}/d/same", ctx.site),
        format!("{}/m/marker", ctx.site),
    ];
    assert_eq!(keys(&mine_changes), expected);
    let collection = mine.collection::<Data>("d").unwrap();
    let mut watch = collection.watch(FeedStart::Oldest);
    let first = watch.next();
    let first = tokio::time::timeout(PATIENCE, first)
        .await
        .expect("a change of d");
    let first = first.unwrap().unwrap();
    assert_eq!((first.id.as_str(), first.version), ("same", 1));
    let page = collection
        .changes(&FeedStart::After(first.cursor), 100)
        .await
        .unwrap();
    assert!(page.changes.is_empty(), "{:?}", page.changes);
    // The store-wide feed holds both sites' changes (and other cases' too: filtered out).
    let both = ctx
        .store
        .watch(all, store_start)
        .try_filter(|c| {
            let ours = [ctx.site.as_str(), other.as_str()].contains(&c.key.site());
            futures_util::future::ready(ours)
        })
        .take(8)
        .try_collect::<Vec<_>>();
    let both = tokio::time::timeout(PATIENCE, both)
        .await
        .expect("8 changes")
        .unwrap();
    assert_eq!(both.iter().filter(|c| c.key.site() == other).count(), 5);
}

/// A cursor that no store wrote, one of another backend, and a page size out of range are
/// `InvalidArgument`; a cursor past the retention is `CursorExpired` (where the harness can
/// produce one: see [`Harness::expired_feed`]).
pub async fn bad_and_expired_cursors_are_errors(h: &dyn Harness) {
    let ctx = Ctx::new(h, "feed-bad").await;
    let site = ctx.store.site(&ctx.site).unwrap();
    for text in ["", "no-tag", "sqlite:", "a b:1", "UPPER:1"] {
        assert!(FeedStart::parse(text).is_err(), "{text:?} parses");
    }
    let now = site.changes(&FeedStart::Now, 1).await.unwrap().next;
    let tag = now.as_str().split(':').next().unwrap();
    let foreign = if tag == "memory" {
        "sqlite:1"
    } else {
        "memory:1.1"
    };
    for cursor in [foreign.to_owned(), format!("{tag}:garbage!!")] {
        let start = FeedStart::parse(&cursor).unwrap();
        let read = site.changes(&start, 10).await;
        assert!(
            matches!(read, Err(Error::InvalidArgument(_))),
            "{cursor}: {read:?}"
        );
    }
    for limit in [0, docstore::feed::MAX_CHANGE_PAGE + 1] {
        let read = site.changes(&FeedStart::Oldest, limit).await;
        assert!(
            matches!(read, Err(Error::InvalidArgument(_))),
            "{limit}: {read:?}"
        );
    }
    if let Some((store, cursor)) = h.expired_feed().await {
        let all = FeedScope::whole_store();
        let read = store
            .changes(&all, &FeedStart::After(cursor.clone()), 10)
            .await;
        assert!(matches!(read, Err(Error::CursorExpired(_))), "{read:?}");
        let mut watch = store.watch(all, FeedStart::After(cursor));
        assert!(matches!(
            watch.next().await,
            Some(Err(Error::CursorExpired(_)))
        ));
    }
}

/// One writer's random operation.
#[derive(Clone, Debug)]
enum Op {
    Put(usize, i64),
    Update(usize, i64),
    ReplaceIf(usize, i64),
    Delete(usize),
    DeleteIf(usize),
    Batch(usize, usize, i64),
}

fn op() -> impl Strategy<Value = Op> {
    let id = 0..6usize;
    prop_oneof![
        (id.clone(), any::<i64>()).prop_map(|(i, n)| Op::Put(i, n)),
        (id.clone(), any::<i64>()).prop_map(|(i, n)| Op::Update(i, n)),
        (id.clone(), any::<i64>()).prop_map(|(i, n)| Op::ReplaceIf(i, n)),
        id.clone().prop_map(Op::Delete),
        id.clone().prop_map(Op::DeleteIf),
        (id.clone(), id, any::<i64>()).prop_map(|(i, j, n)| Op::Batch(i, j, n)),
    ]
}

/// Runs one writer's operations on `site`; refused ones (conflicts, missing documents) are
/// part of the test: they must leave no change.
async fn write(site: Site, ops: Vec<Op>) {
    let collections = [
        site.collection::<Data>("c").unwrap(),
        site.collection::<Data>("d").unwrap(),
    ];
    for (n, op) in ops.into_iter().enumerate() {
        let c = &collections[n % 2];
        let id = |i: usize| format!("k{i}");
        let value = |v: i64| obj(json!({ "v": v, "deep": {"n": v} }));
        let current = |i: usize| async move { c.get(&id(i)).await.unwrap().map(|d| d.version) };
        let _ = match op {
            Op::Put(i, v) => c.put(&id(i), &value(v)).await.map(drop),
            Op::Update(i, v) => c.update(&id(i), &json!({ "u": v })).await.map(drop),
            Op::ReplaceIf(i, v) => match current(i).await {
                Some(version) => c.replace_if(&id(i), &value(v), version).await.map(drop),
                None => c.create(&id(i), &value(v)).await.map(drop),
            },
            Op::Delete(i) => c.delete(&id(i)).await.map(drop),
            Op::DeleteIf(i) => c.delete_if(&id(i), current(i).await.unwrap_or(1)).await,
            Op::Batch(i, j, v) if i != j => site
                .batch()
                .put(c, &id(i), &value(v))
                .update(c, &id(j), &json!({ "b": v }))
                .commit()
                .await
                .map(drop),
            Op::Batch(..) => Ok(()),
        };
    }
}

/// Follows `site`'s feed into `replica`: while the writers write, watches from the last cursor
/// and stops after each run of `runs[i]` changes to start again; once `done` says they
/// finished, reads pages to the end of the feed until the replica equals the source. Returns
/// how many changes it replayed.
///
/// A watch is only ever stopped after a change it yielded, never on a timer: on a shared
/// store (DynamoDB's feed is the whole table's stream, filtered to the site) the first change
/// of the site can take long to reach, and a watch dropped before it would lose that reading.
async fn follow(
    site: Site,
    source: Store,
    replica: Store,
    runs: Vec<usize>,
    mut done: tokio::sync::watch::Receiver<bool>,
) -> usize {
    let mut start = FeedStart::Oldest;
    let mut replayed = 0;
    for run in runs.iter().cycle() {
        if *done.borrow() {
            break;
        }
        let mut changes = site.watch(start.clone()).take(*run);
        loop {
            tokio::select! {
                change = changes.next() => match change {
                    Some(change) => {
                        let change = change.unwrap();
                        replica.replay(&change).await.unwrap();
                        start = FeedStart::After(change.cursor);
                        replayed += 1;
                    }
                    None => break,
                },
                () = writers_finished(&mut done) => break,
            }
        }
    }
    replayed + catch_up(&site, &source, &replica, start).await
}

/// Resolves once the writers said they finished.
async fn writers_finished(done: &mut tokio::sync::watch::Receiver<bool>) {
    // The guard `wait_for` answers with is not `Send`: drop it here.
    let _ = done.wait_for(|finished| *finished).await;
}

/// Reads `site`'s feed from `start` into `replica` until the feed is caught up and the
/// replica equals the source (a feed may show a commit a little after it is acknowledged);
/// returns how many changes it replayed.
async fn catch_up(site: &Site, source: &Store, replica: &Store, mut start: FeedStart) -> usize {
    let mut replayed = 0;
    loop {
        let page = site.changes(&start, 100).await.unwrap();
        let caught_up = page.caught_up;
        for change in &page.changes {
            replica.replay(change).await.unwrap();
            replayed += 1;
        }
        start = FeedStart::After(page.next);
        if !caught_up {
            continue;
        }
        if documents(source, site.name()).await == documents(replica, site.name()).await {
            let rest = site.changes(&start, 100).await.unwrap();
            assert_eq!(
                rest.changes,
                [],
                "the replica is equal before the feed's end"
            );
            return replayed;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The documents whose replica differs from the source (missing, in excess or at another
/// revision), each with both sides, by `collection/id`.
fn difference(
    source: &BTreeMap<String, Document>,
    replica: &BTreeMap<String, Document>,
) -> BTreeMap<String, String> {
    let keys = source.keys().chain(replica.keys());
    keys.filter(|key| source.get(*key) != replica.get(*key))
        .map(|key| {
            let sides = format!(
                "source {:?}, replica {:?}",
                source.get(key),
                replica.get(key)
            );
            (key.clone(), sides)
        })
        .collect()
}

/// The feed's changes of the documents `differing` names (`collection/id`), one a line:
/// what a failed replica case shows, to tell a change the feed lacks from one the follower
/// missed.
async fn feed_history(site: &Site, differing: &[String]) -> String {
    let mut start = FeedStart::Oldest;
    let mut lines = String::new();
    loop {
        let page = site.changes(&start, 100).await.unwrap();
        for change in &page.changes {
            let key = format!("{}/{}", change.key.collection(), change.key.id());
            if differing.contains(&key) {
                lines.push_str(&format!(
                    "{key} {:?} v{}: {:?}\n",
                    change.kind, change.version, change.document
                ));
            }
        }
        start = FeedStart::After(page.next);
        if page.caught_up {
            return lines;
        }
    }
}

/// Every document of the site, by collection and id.
async fn documents(store: &Store, site: &str) -> BTreeMap<String, Document> {
    let mut all = BTreeMap::new();
    for (collection, _) in store.collections(site).await.unwrap() {
        let query = docstore::Query::new();
        let docs: Vec<Document> = store
            .stream(site, &collection, &query)
            .try_collect()
            .await
            .unwrap();
        for doc in docs {
            all.insert(format!("{collection}/{}", doc.id), doc);
        }
    }
    all
}

/// Replaying the feed from its start into an empty memory store — while 16 writers write,
/// stopping and resuming from the last cursor after random runs — rebuilds exactly the
/// source's documents: ids, data, versions, timestamps, actors.
pub async fn a_replica_from_the_feed_equals_the_source(h: &dyn Harness) {
    let handle = tokio::runtime::Handle::current();
    let mut runner = TestRunner::new(Config {
        cases: property_cases(4),
        failure_persistence: None,
        // A failing case waits out its patience; shrinking would wait it out many times.
        max_shrink_iters: 0,
        ..Config::default()
    });
    let writers = prop::collection::vec(prop::collection::vec(op(), 1..12), 16);
    let runs = prop::collection::vec(1..20usize, 1..5);
    let result = tokio::task::block_in_place(|| {
        runner.run(&(writers, runs), |(writers, runs)| {
            handle.block_on(replica_case(h, writers, runs));
            Ok(())
        })
    });
    if let Err(err) = result {
        panic!("{err}");
    }
}

async fn replica_case(h: &dyn Harness, writers: Vec<Vec<Op>>, runs: Vec<usize>) {
    let ctx = Ctx::new(h, "feed-replica").await;
    let site = ctx
        .store
        .site(&ctx.site)
        .unwrap()
        .with_actor("writer")
        .unwrap();
    let replica = Store::new(docstore_memory::MemoryStore::new());
    let (done_tx, done) = tokio::sync::watch::channel(false);
    let source = ctx.store.clone();
    let follower = tokio::spawn(follow(site.clone(), source, replica.clone(), runs, done));
    let tasks = writers
        .into_iter()
        .map(|ops| tokio::spawn(write(site.clone(), ops)));
    for task in futures_util::future::join_all(tasks).await {
        task.unwrap();
    }
    done_tx.send_replace(true);
    let Ok(replayed) = tokio::time::timeout(PATIENCE, follower).await else {
        let source = documents(&ctx.store, &ctx.site).await;
        let replica = documents(&replica, &ctx.site).await;
        let differing = difference(&source, &replica);
        let keys: Vec<String> = differing.keys().cloned().collect();
        panic!(
            "the replica did not catch up in {PATIENCE:?}: {differing:#?}\n\
             the feed's changes of those documents:\n{}",
            feed_history(&site, &keys).await
        );
    };
    let replayed = replayed.unwrap();
    assert!(replayed > 0 || documents(&ctx.store, &ctx.site).await.is_empty());
    assert_eq!(
        documents(&replica, &ctx.site).await,
        documents(&ctx.store, &ctx.site).await
    );
}
