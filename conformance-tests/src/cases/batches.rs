//! `write_all` and `get_many`: all or nothing on every failure kind and position, the failing
//! write's index and kind, counters moving with the writes, each key once, the shared limits
//! at and one past each bound, `Update` under concurrent writers, and an invariant under 16
//! tasks transferring between accounts.

use crate::Harness;
use crate::support::{Ctx, obj};
use docstore::batch::{MAX_BATCH_BYTES, MAX_BATCH_WRITES, key_bytes};
use docstore::document::data_size;
use docstore::{Data, Document, Error, Key, Query, StoreOptions, Write, WriteOutcome};
use serde_json::json;
use std::collections::BTreeMap;

/// Everything a case can observe about its site: every document of the listed collections,
/// the counters and the count.
#[derive(Debug, PartialEq)]
struct Snapshot {
    documents: BTreeMap<(String, String), Document>,
    collections: Vec<(String, u64)>,
    count: u64,
}

async fn snapshot(ctx: &Ctx, collections: &[&str]) -> Snapshot {
    let mut documents = BTreeMap::new();
    for collection in collections {
        let page = ctx
            .store
            .query(&ctx.site, collection, &Query::new())
            .await
            .unwrap();
        for doc in page.documents {
            documents.insert((collection.to_string(), doc.id.clone()), doc);
        }
    }
    Snapshot {
        documents,
        collections: ctx.store.collections(&ctx.site).await.unwrap(),
        count: ctx.store.count(&ctx.site).await.unwrap(),
    }
}

/// Asserts that the counters equal the documents of `collections` (which must be all the
/// site's collections).
async fn assert_counters_exact(ctx: &Ctx, collections: &[&str]) {
    let snap = snapshot(ctx, collections).await;
    let mut counted: BTreeMap<String, u64> = BTreeMap::new();
    for (collection, _) in snap.documents.keys() {
        *counted.entry(collection.clone()).or_default() += 1;
    }
    let counted: Vec<(String, u64)> = counted.into_iter().collect();
    assert_eq!(
        snap.collections, counted,
        "counters differ from the documents"
    );
    assert_eq!(snap.count, snap.documents.len() as u64, "count differs");
}

/// Asserts that `result` failed at write `index` with a kind `kind` accepts.
fn assert_failed_at<T: std::fmt::Debug>(
    result: docstore::Result<T>,
    index: usize,
    kind: impl Fn(&Error) -> bool,
    what: &str,
) {
    match result {
        Err(Error::Batch { index: i, source }) => {
            assert_eq!(i, index, "{what}: wrong index (error {source:?})");
            assert!(kind(&source), "{what}: wrong kind {source:?}");
        }
        other => panic!("{what}: expected a batch failure at {index}, got {other:?}"),
    }
}

fn restored(id: &str) -> Document {
    Document {
        expires_at: None,
        id: id.into(),
        data: obj(json!({"restored": true})),
        created_at: 1_600_000_000_000_000_000,
        updated_at: 1_700_000_000_000_000_000,
        created_by: "origin".into(),
        updated_by: "editor".into(),
        version: 9,
    }
}

/// Every kind of write in one batch: the outcomes in order, each as the single call would
/// give it, the store and the counters after it.
pub async fn batch_applies_every_kind(h: &dyn Harness) {
    let ctx = Ctx::new(h, "batch").await;
    let (a, b, c, d, e) = (
        ctx.key("c", "a"),
        ctx.key("c", "b"),
        ctx.key("c", "c"),
        ctx.key("d", "d"),
        ctx.key("d", "e"),
    );
    let b0 = ctx
        .store
        .create(&b, obj(json!({"x": 1})), "old")
        .await
        .unwrap();
    let c0 = ctx
        .store
        .create(&c, obj(json!({"y": 1})), "old")
        .await
        .unwrap();
    let d0 = ctx
        .store
        .create(&d, obj(json!({"z": 1})), "old")
        .await
        .unwrap();
    ctx.store.create(&e, obj(json!({})), "old").await.unwrap();
    let (n, p, r) = (ctx.key("c", "new"), ctx.key("d", "put"), ctx.key("r", "r"));
    let writes = vec![
        Write::create(a.clone(), obj(json!({"a": 1}))),
        Write::update(b.clone(), obj(json!({"x": null, "w": 2}))),
        Write::update_if(c.clone(), obj(json!({"y": 2})), c0.version),
        Write::delete_if(d.clone(), d0.version),
        Write::check(e.clone(), Some(1)),
        Write::check(n.clone(), None),
        Write::put(p.clone(), obj(json!({"p": 1}))),
        Write::restore(r.clone(), restored("r")),
    ];
    let outcomes = ctx.store.write_all(&writes, "batcher").await.unwrap();
    assert_eq!(outcomes.len(), writes.len());
    let written = |i: usize| outcomes[i].document().cloned().expect("a document");
    let created = written(0);
    assert_eq!(
        (created.version, created.created_by.as_str()),
        (1, "batcher")
    );
    assert_eq!(created.data, obj(json!({"a": 1})));
    let updated = written(1);
    assert_eq!(updated.data, obj(json!({"w": 2})));
    assert_eq!((updated.version, updated.created_by.as_str()), (2, "old"));
    assert_eq!(updated.updated_by, "batcher");
    assert!(updated.updated_at >= b0.updated_at);
    assert_eq!(written(2).data, obj(json!({"y": 2})));
    assert_eq!(written(2).version, 2);
    assert_eq!(outcomes[3], WriteOutcome::Deleted);
    assert_eq!(outcomes[4], WriteOutcome::Checked);
    assert_eq!(outcomes[5], WriteOutcome::Checked);
    assert_eq!(written(6).version, 1);
    assert_eq!(written(7), restored("r"));
    // The store holds what the outcomes say.
    for (i, key) in [(0, &a), (1, &b), (2, &c), (6, &p), (7, &r)] {
        assert_eq!(ctx.store.get(key).await.unwrap(), Some(written(i)), "{key}");
    }
    assert_eq!(ctx.store.get(&d).await.unwrap(), None);
    assert_eq!(ctx.store.get(&n).await.unwrap(), None);
    assert_eq!(ctx.store.get(&e).await.unwrap().unwrap().version, 1);
    assert_eq!(
        ctx.store.collections(&ctx.site).await.unwrap(),
        vec![("c".into(), 3), ("d".into(), 2), ("r".into(), 1)]
    );
    assert_counters_exact(&ctx, &["c", "d", "r"]).await;
}

/// An empty batch is accepted, returns no outcomes and writes nothing.
pub async fn empty_batch_does_nothing(h: &dyn Harness) {
    let ctx = Ctx::new(h, "batch").await;
    assert_eq!(ctx.store.write_all(&[], "x").await.unwrap(), vec![]);
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 0);
}

/// Each failure kind, with the failing write first, in the middle and last among writes that
/// would succeed (creates, puts, updates and deletes in two collections): the error is
/// `Batch` with that index and the single call's kind, and nothing changed — documents,
/// versions, counters.
pub async fn failing_write_changes_nothing_at_any_position(h: &dyn Harness) {
    let options = StoreOptions::default().with_max_doc_bytes(1_000);
    let ctx = Ctx::with_options(h, "batchfail", options).await;
    let existing = ctx.key("c", "existing");
    let doomed = ctx.key("d", "doomed");
    ctx.store
        .create(&existing, obj(json!({"v": 1})), "setup")
        .await
        .unwrap();
    ctx.store
        .create(&doomed, obj(json!({"v": 1})), "setup")
        .await
        .unwrap();
    let missing = ctx.key("c", "missing");
    let failures = failing_writes(&existing, &missing);
    let collections = ["c", "d", "e"];
    let before = snapshot(&ctx, &collections).await;
    for FailingWrite { what, write, kind } in failures {
        for position in [0, 2, 4] {
            let mut writes = vec![
                Write::create(ctx.key("e", "fresh"), obj(json!({"f": 1}))),
                Write::put(ctx.key("c", "put"), obj(json!({"p": 1}))),
                Write::delete_if(doomed.clone(), 1),
                Write::create(ctx.key("d", "other"), obj(json!({"o": 1}))),
            ];
            writes.insert(position, write.clone());
            let result = ctx.store.write_all(&writes, "batch").await;
            assert_failed_at(result, position, kind, &format!("{what} at {position}"));
            assert_eq!(
                snapshot(&ctx, &collections).await,
                before,
                "{what} at {position} changed the store"
            );
        }
    }
}

/// How a failing write's error is recognised.
type Kind = fn(&Error) -> bool;

/// A write of a batch that fails on its own: what it is, the write, and its error's kind.
struct FailingWrite {
    what: &'static str,
    write: Write,
    kind: Kind,
}

/// A [`FailingWrite`].
fn failing(what: &'static str, write: Write, kind: Kind) -> FailingWrite {
    FailingWrite { what, write, kind }
}

/// One write of each failure kind, given a document that `existing` holds (at version 1), a
/// key that `missing` does not, and a store taking documents of at most 1 000 bytes.
fn failing_writes(existing: &Key, missing: &Key) -> Vec<FailingWrite> {
    let big = obj(json!({"big": "x".repeat(2_000)}));
    let already: Kind = |e| matches!(e, Error::AlreadyExists);
    let not_found: Kind = |e| matches!(e, Error::NotFound { .. });
    let conflict: Kind = |e| matches!(e, Error::Conflict { current: 1 });
    let too_large: Kind = |e| matches!(e, Error::TooLarge { limit: 1_000, .. });
    let invalid: Kind = |e| matches!(e, Error::InvalidArgument(_));
    let mut deep = json!(1);
    for _ in 0..200 {
        deep = json!([deep]);
    }
    vec![
        failing(
            "create existing",
            Write::create(existing.clone(), obj(json!({}))),
            already,
        ),
        failing(
            "check absent",
            Write::check(existing.clone(), None),
            already,
        ),
        failing(
            "restore existing",
            Write::restore(existing.clone(), restored("existing")),
            already,
        ),
        failing(
            "update missing",
            Write::update(missing.clone(), obj(json!({"a": 1}))),
            not_found,
        ),
        failing(
            "update_if missing",
            Write::update_if(missing.clone(), obj(json!({})), 1),
            not_found,
        ),
        failing(
            "delete_if missing",
            Write::delete_if(missing.clone(), 1),
            not_found,
        ),
        failing(
            "check missing",
            Write::check(missing.clone(), Some(1)),
            not_found,
        ),
        failing(
            "update_if stale",
            Write::update_if(existing.clone(), obj(json!({})), 7),
            conflict,
        ),
        failing(
            "delete_if stale",
            Write::delete_if(existing.clone(), 2),
            conflict,
        ),
        failing(
            "check stale",
            Write::check(existing.clone(), Some(3)),
            conflict,
        ),
        failing(
            "create too large",
            Write::create(missing.clone(), big.clone()),
            too_large,
        ),
        failing(
            "put too large",
            Write::put(existing.clone(), big.clone()),
            too_large,
        ),
        failing(
            "merge too large",
            Write::update(existing.clone(), big.clone()),
            too_large,
        ),
        failing(
            "update_if merge too large",
            Write::update_if(existing.clone(), big.clone(), 1),
            too_large,
        ),
        failing(
            "create too deep",
            Write::create(missing.clone(), obj(json!({"d": deep}))),
            invalid,
        ),
    ]
}

/// With a quota, a batch that would create past it fails at the write that would exceed it
/// (`QuotaExceeded`), and nothing is written; one that stays within it applies.
pub async fn quota_applies_to_batches(h: &dyn Harness) {
    let options = StoreOptions::default().with_max_docs_per_site(Some(3));
    let ctx = Ctx::with_options(h, "batchquota", options).await;
    ctx.store
        .create(&ctx.key("c", "a"), obj(json!({})), "")
        .await
        .unwrap();
    let writes = [
        Write::create(ctx.key("c", "b"), obj(json!({}))),
        Write::put(ctx.key("d", "c"), obj(json!({}))),
        Write::create(ctx.key("d", "d"), obj(json!({}))),
    ];
    let result = ctx.store.write_all(&writes, "").await;
    assert_failed_at(
        result,
        2,
        |e| matches!(e, Error::QuotaExceeded { limit: 3 }),
        "fourth document",
    );
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 1);
    ctx.store.write_all(&writes[..2], "").await.unwrap();
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 3);
    assert_counters_exact(&ctx, &["c", "d"]).await;
}

/// A batch names each key at most once: a repeated key (whatever the two writes) is
/// `InvalidArgument` for the batch as a whole, and nothing is written. The same id in
/// another collection is another key.
pub async fn each_key_at_most_once(h: &dyn Harness) {
    let ctx = Ctx::new(h, "batchkeys").await;
    let key = ctx.key("c", "k");
    let twice = [
        Write::create(ctx.key("c", "other"), obj(json!({}))),
        Write::create(key.clone(), obj(json!({}))),
        Write::check(key.clone(), None),
    ];
    let err = ctx.store.write_all(&twice, "").await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 0);
    let distinct = [
        Write::create(key.clone(), obj(json!({}))),
        Write::create(ctx.key("d", "k"), obj(json!({}))),
    ];
    ctx.store.write_all(&distinct, "").await.unwrap();
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 2);
}

/// `MAX_BATCH_WRITES` writes apply; one more is `InvalidArgument` and writes nothing.
pub async fn batch_at_and_past_the_write_limit(h: &dyn Harness) {
    let ctx = Ctx::new(h, "batchmax").await;
    let writes = |n: usize, collection: &str| -> Vec<Write> {
        (0..n)
            .map(|i| {
                Write::create(
                    ctx.key(collection, &format!("{i:03}")),
                    obj(json!({"i": i})),
                )
            })
            .collect()
    };
    let err = ctx
        .store
        .write_all(&writes(MAX_BATCH_WRITES + 1, "over"), "")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 0);
    let outcomes = ctx
        .store
        .write_all(&writes(MAX_BATCH_WRITES, "at"), "")
        .await
        .unwrap();
    assert_eq!(outcomes.len(), MAX_BATCH_WRITES);
    assert_eq!(
        ctx.store.collections(&ctx.site).await.unwrap(),
        vec![("at".into(), MAX_BATCH_WRITES as u64)]
    );
    // Every write in its own collection: the most counter updates a batch can need.
    let spread: Vec<Write> = (0..MAX_BATCH_WRITES)
        .map(|i| Write::put(ctx.key(&format!("c{i:02}"), "x"), obj(json!({}))))
        .collect();
    ctx.store.write_all(&spread, "").await.unwrap();
    assert_eq!(
        ctx.store.count(&ctx.site).await.unwrap(),
        2 * MAX_BATCH_WRITES as u64
    );
}

/// Writes whose keys and data add up to exactly `total` bytes: `n` documents of nearly equal
/// size in collection `collection`.
fn sized_writes(ctx: &Ctx, collection: &str, n: usize, total: usize) -> Vec<Write> {
    let mut writes = Vec::new();
    let mut left = total;
    for i in 0..n {
        let key = ctx.key(collection, &format!("{i}"));
        let share = left / (n - i);
        // `{"v":"..."}` is 8 bytes plus the string.
        let fill = share - key_bytes(&key) - 8;
        let data = obj(json!({"v": "x".repeat(fill)}));
        left -= key_bytes(&key) + data_size(&data);
        writes.push(Write::create(key, data));
    }
    assert_eq!(left, 0);
    writes
}

/// A batch writing exactly `MAX_BATCH_BYTES` (keys plus data) applies; one byte more is
/// `InvalidArgument` and writes nothing — counted on the data given (`Create`) and on merged
/// data (`Update`).
pub async fn batch_at_and_past_the_byte_limit(h: &dyn Harness) {
    let ctx = Ctx::new(h, "batchbytes").await;
    let over = sized_writes(&ctx, "over", 8, MAX_BATCH_BYTES + 1);
    let err = ctx.store.write_all(&over, "").await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 0);
    let at = sized_writes(&ctx, "at", 8, MAX_BATCH_BYTES);
    ctx.store.write_all(&at, "").await.unwrap();
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 8);
    // The same total reached through merges: `Update` counts the whole merged document, so
    // patches that replace each string by another of the same length stay exactly at the
    // limit, and one byte more in the last merge is refused.
    let patch = |w: &Write, extra: usize| {
        let Write::Create { key, data } = w else {
            unreachable!()
        };
        let len = data["v"].as_str().unwrap().len();
        Write::update(key.clone(), obj(json!({"v": "y".repeat(len + extra)})))
    };
    let same_size: Vec<Write> = at.iter().map(|w| patch(w, 0)).collect();
    let outcomes = ctx.store.write_all(&same_size, "").await.unwrap();
    assert!(outcomes.iter().all(|o| o.document().unwrap().version == 2));
    let mut grown = same_size.clone();
    *grown.last_mut().unwrap() = patch(at.last().unwrap(), 1);
    let err = ctx.store.write_all(&grown, "").await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    for w in &at {
        assert_eq!(ctx.store.get(w.key()).await.unwrap().unwrap().version, 2);
    }
}

/// Counters after mixed batches (creates, puts that create and that replace, deletes, in
/// several collections, one emptied) equal the documents.
pub async fn counters_move_with_batches(h: &dyn Harness) {
    let ctx = Ctx::new(h, "batchcount").await;
    let first: Vec<Write> = (0..10)
        .map(|i| {
            Write::create(
                ctx.key(["a", "b", "c"][i % 3], &i.to_string()),
                obj(json!({})),
            )
        })
        .collect();
    let outcomes = ctx.store.write_all(&first, "").await.unwrap();
    assert_counters_exact(&ctx, &["a", "b", "c", "d"]).await;
    let mut second: Vec<Write> = outcomes
        .iter()
        .zip(&first)
        .filter(|(_, w)| w.key().collection() == "b")
        .map(|(o, w)| Write::delete_if(w.key().clone(), o.document().unwrap().version))
        .collect();
    second.push(Write::put(ctx.key("a", "0"), obj(json!({"again": true}))));
    second.push(Write::put(ctx.key("d", "new"), obj(json!({}))));
    second.push(Write::update(ctx.key("c", "2"), obj(json!({"u": 1}))));
    ctx.store.write_all(&second, "").await.unwrap();
    assert_counters_exact(&ctx, &["a", "b", "c", "d"]).await;
    assert_eq!(
        ctx.store.collections(&ctx.site).await.unwrap(),
        vec![("a".into(), 4), ("c".into(), 3), ("d".into(), 1)]
    );
}

/// 8 tasks `update` one document with single calls while 8 others apply batches that
/// `Update` it together with a document of their own: no patch is lost and the version
/// counts every write once (a backend that retries a batch on conflict re-reads and merges
/// again).
pub async fn batch_update_under_concurrent_writers(h: &dyn Harness) {
    let ctx = Ctx::new(h, "batchconc").await;
    let hot = ctx.key("c", "hot");
    ctx.store.create(&hot, obj(json!({})), "").await.unwrap();
    let rounds = 10;
    let tasks: Vec<_> = (0..16)
        .map(|task| {
            let store = ctx.store.clone();
            let hot = hot.clone();
            let own = ctx.key("own", &task.to_string());
            tokio::spawn(async move {
                for i in 0..rounds {
                    let patch = obj(json!({ format!("t{task}_{i}"): i }));
                    if task % 2 == 0 {
                        store.update(&hot, &patch, "single").await.unwrap();
                    } else {
                        let writes = [
                            Write::update(hot.clone(), patch.clone()),
                            Write::put(own.clone(), obj(json!({ "i": i }))),
                        ];
                        store.write_all(&writes, "batch").await.unwrap();
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let doc = ctx.store.get(&hot).await.unwrap().unwrap();
    assert_eq!(doc.data.len(), 16 * rounds, "patches lost");
    assert_eq!(doc.version, 1 + 16 * rounds as u64);
    for task in (1..16).step_by(2) {
        let own = ctx
            .store
            .get(&ctx.key("own", &task.to_string()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(own.version, rounds as u64);
    }
    assert_counters_exact(&ctx, &["c", "own"]).await;
}

/// A batch `UpdateIf` and single `update_if` calls race on the same version: exactly one of
/// them wins; a losing batch wrote nothing (its other write included).
pub async fn batch_races_single_writes(h: &dyn Harness) {
    let ctx = Ctx::new(h, "batchrace").await;
    for round in 0..5 {
        let key = ctx.key("c", &format!("r{round}"));
        let side = ctx.key("side", &format!("r{round}"));
        let v = ctx
            .store
            .create(&key, obj(json!({})), "")
            .await
            .unwrap()
            .version;
        let tasks: Vec<_> = (0..8)
            .map(|task| {
                let (store, key, side) = (ctx.store.clone(), key.clone(), side.clone());
                tokio::spawn(async move {
                    let patch = obj(json!({ "winner": task }));
                    let result = if task % 2 == 0 {
                        store.update_if(&key, &patch, v, "single").await.map(drop)
                    } else {
                        let writes = [
                            Write::update_if(key, patch, v),
                            Write::create(side.with_id(task), obj(json!({}))),
                        ];
                        store.write_all(&writes, "batch").await.map(drop)
                    };
                    (task, result)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            let (task, result) = task.await.unwrap();
            match result {
                Ok(()) => winners.push(task),
                Err(Error::Conflict { current: 2 }) => {}
                Err(Error::Batch { index: 0, source }) => {
                    assert!(
                        matches!(*source, Error::Conflict { current: 2 }),
                        "{source:?}"
                    )
                }
                Err(other) => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        let doc = ctx.store.get(&key).await.unwrap().unwrap();
        assert_eq!(doc.data["winner"], json!(winners[0]));
        let sides = ctx
            .store
            .query(&ctx.site, "side", &Query::new())
            .await
            .unwrap()
            .documents;
        let expected: Vec<String> = if winners[0] % 2 == 1 {
            vec![format!("r{round}-{}", winners[0])]
        } else {
            vec![]
        };
        let found: Vec<String> = sides
            .iter()
            .map(|d| d.id.clone())
            .filter(|id| id.starts_with(&format!("r{round}-")))
            .collect();
        assert_eq!(found, expected, "round {round}: a losing batch wrote");
    }
}

trait WithId {
    fn with_id(&self, task: usize) -> Key;
}

impl WithId for Key {
    fn with_id(&self, task: usize) -> Key {
        Key::new(
            self.site(),
            self.collection(),
            format!("{}-{task}", self.id()),
        )
        .unwrap()
    }
}

/// 16 tasks move money between 8 accounts, each transfer an `UpdateIf` pair in one batch
/// (retried on `Conflict`): the total never changes and every account's version counts
/// exactly the transfers that touched it.
pub async fn transfers_keep_the_total(h: &dyn Harness) {
    let ctx = Ctx::new(h, "batchbank").await;
    let accounts = 8usize;
    for i in 0..accounts {
        ctx.store
            .create(
                &ctx.key("acct", &i.to_string()),
                obj(json!({"balance": 100})),
                "",
            )
            .await
            .unwrap();
    }
    let transfers_per_task = 15;
    let tasks: Vec<_> = (0..16u64)
        .map(|task| {
            let store = ctx.store.clone();
            let keys: Vec<Key> = (0..accounts)
                .map(|i| ctx.key("acct", &i.to_string()))
                .collect();
            tokio::spawn(async move {
                // A small deterministic generator per task (no extra dependency).
                let mut state = task.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut next = move |n: usize| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state % n as u64) as usize
                };
                let mut touched = vec![0u64; keys.len()];
                let mut done = 0;
                let mut conflicts = 0;
                while done < transfers_per_task {
                    let from = next(keys.len());
                    let to = (from + 1 + next(keys.len() - 1)) % keys.len();
                    let amount = next(20) as i64 + 1;
                    let docs = store
                        .get_many(&[keys[from].clone(), keys[to].clone()])
                        .await
                        .unwrap();
                    let (a, b) = (docs[0].clone().unwrap(), docs[1].clone().unwrap());
                    let balance = |d: &Document| d.data["balance"].as_i64().unwrap();
                    let writes = [
                        Write::update_if(
                            keys[from].clone(),
                            obj(json!({"balance": balance(&a) - amount})),
                            a.version,
                        ),
                        Write::update_if(
                            keys[to].clone(),
                            obj(json!({"balance": balance(&b) + amount})),
                            b.version,
                        ),
                    ];
                    match store.write_all(&writes, "bank").await {
                        Ok(_) => {
                            done += 1;
                            touched[from] += 1;
                            touched[to] += 1;
                        }
                        Err(Error::Batch { source, .. })
                            if matches!(*source, Error::Conflict { .. }) =>
                        {
                            conflicts += 1;
                            assert!(conflicts < 10_000, "no progress");
                        }
                        Err(other) => panic!("transfer failed: {other:?}"),
                    }
                }
                touched
            })
        })
        .collect();
    let mut touched = vec![0u64; accounts];
    for task in tasks {
        for (sum, t) in touched.iter_mut().zip(task.await.unwrap()) {
            *sum += t;
        }
    }
    let keys: Vec<Key> = (0..accounts)
        .map(|i| ctx.key("acct", &i.to_string()))
        .collect();
    let docs = ctx.store.get_many(&keys).await.unwrap();
    let total: i64 = docs
        .iter()
        .map(|d| d.as_ref().unwrap().data["balance"].as_i64().unwrap())
        .sum();
    assert_eq!(total, 100 * accounts as i64, "money created or lost");
    for (i, doc) in docs.iter().enumerate() {
        assert_eq!(
            doc.as_ref().unwrap().version,
            1 + touched[i],
            "account {i}: a transfer applied twice or lost"
        );
    }
}

/// `get_many` answers in the keys' order, `None` for missing keys, across collections.
pub async fn get_many_keeps_order_and_missing(h: &dyn Harness) {
    let ctx = Ctx::new(h, "getmany").await;
    let (a, b, c) = (ctx.key("c", "a"), ctx.key("c", "b"), ctx.key("d", "a"));
    let da = ctx
        .store
        .create(&a, obj(json!({"n": 1})), "")
        .await
        .unwrap();
    let dc = ctx
        .store
        .create(&c, obj(json!({"n": 3})), "")
        .await
        .unwrap();
    let docs = ctx
        .store
        .get_many(&[c.clone(), b.clone(), a.clone()])
        .await
        .unwrap();
    assert_eq!(docs, vec![Some(dc), None, Some(da)]);
    assert_eq!(ctx.store.get_many(&[]).await.unwrap(), vec![]);
}

/// A key given twice is `InvalidArgument`.
pub async fn get_many_refuses_a_repeated_key(h: &dyn Harness) {
    let ctx = Ctx::new(h, "getmany").await;
    let (a, b) = (ctx.key("c", "a"), ctx.key("c", "b"));
    let err = ctx.store.get_many(&[a.clone(), b, a]).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
}

/// 250 keys (more than one DynamoDB `BatchGetItem` takes), in a shuffled order, every
/// third one missing.
pub async fn get_many_reads_many_keys(h: &dyn Harness) {
    let ctx = Ctx::new(h, "getmany").await;
    let n = 250;
    let keys: Vec<Key> = (0..n)
        .map(|i| {
            ctx.key(
                if i % 2 == 0 { "even" } else { "odd" },
                &format!("{:03}", (i * 97) % n),
            )
        })
        .collect();
    let mut expected: Vec<Option<Data>> = Vec::new();
    let mut chunk = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        if i % 3 == 0 {
            expected.push(None);
            continue;
        }
        let data = obj(json!({ "i": i }));
        expected.push(Some(data.clone()));
        chunk.push(Write::create(key.clone(), data));
        if chunk.len() == MAX_BATCH_WRITES {
            ctx.store.write_all(&chunk, "").await.unwrap();
            chunk.clear();
        }
    }
    ctx.store.write_all(&chunk, "").await.unwrap();
    let docs = ctx.store.get_many(&keys).await.unwrap();
    let found: Vec<Option<Data>> = docs.into_iter().map(|d| d.map(|d| d.data)).collect();
    assert_eq!(found, expected);
}
