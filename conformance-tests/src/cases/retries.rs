//! Retries in the store (`docs/contract.md`, "Retries"): every call retries `Unavailable`
//! itself under the store's policy, a write under one identity for all its tries, so
//! throttling (nothing applied) and lost answers (applied, the answer gone) leave each write
//! applied exactly once; when the budget ends, the error carries the identity, and the same
//! call repeated with it later applies nothing more.
//!
//! The faults come from `docstore-testing`'s wrapper above the driver: `Fault::Unavailable`
//! is throttling (refused before the store), `Fault::LostAnswer` a write applied whose answer
//! was lost.

use crate::Harness;
use crate::support::Ctx;
use docstore::retry::{BackoffConfig, RetryPolicy};
use docstore::{Collection, Data, Error, FeedStart, Query, Store, Write, WriteId, WriteOutcome};
use docstore_testing::{CallKind, Fault, FaultyDriver, Plan};
use futures_util::TryStreamExt;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// How often the stores of these cases retry a call.
const RETRIES: u32 = 4;

/// At most [`RETRIES`] retries, without waiting (the faults are injected, not real).
fn retries() -> RetryPolicy {
    RetryPolicy::default()
        .with_max_retries(RETRIES)
        .with_budget(Duration::from_secs(300))
        .with_backoff(BackoffConfig::new(Duration::ZERO, Duration::ZERO, 1.0))
}

/// The case's store under `plan`, retrying as [`retries`] says.
fn faulty(ctx: &Ctx, plan: Plan) -> (Store, Arc<FaultyDriver>) {
    let driver = Arc::new(FaultyDriver::new(ctx.store.clone(), plan).with_retry(retries()));
    (Store::from_driver(driver.clone()), driver)
}

/// The first tries of every call of `kind`: throttled, then applied with its answer lost,
/// then a repeat whose answer is lost too; the fourth try gets through.
fn throttled_then_lost(kind: CallKind) -> Plan {
    Plan::new()
        .on_nth(kind, 1, Fault::Unavailable)
        .on_nth(kind, 2, Fault::LostAnswer)
        .on_nth(kind, 3, Fault::LostAnswer)
}

fn data(value: Value) -> Data {
    docstore::object(value).expect("an object")
}

fn collection(store: &Store, ctx: &Ctx) -> Collection<Data> {
    let site = store.site(&ctx.site).unwrap().with_actor("app").unwrap();
    site.collection::<Data>("c").unwrap()
}

async fn version(ctx: &Ctx, id: &str) -> Option<u64> {
    let key = ctx.key("c", id);
    ctx.store.get(&key).await.unwrap().map(|doc| doc.version)
}

/// Every write kind, its first tries throttled and its answers lost, succeeds and moves the
/// document by exactly one version; the counters stay exact.
pub async fn every_write_is_applied_once_under_throttling_and_lost_answers(h: &dyn Harness) {
    let ctx = Ctx::new(h, "retry").await;
    let under = |kind| faulty(&ctx, throttled_then_lost(kind));
    let docs = |store: &Store| collection(store, &ctx);
    let v = |n| data(json!({ "n": n }));

    let (store, wrapper) = under(CallKind::Create);
    let created = docs(&store).create("a", &v(1)).await;
    let created = created.unwrap_or_else(|err| panic!("create: {err}\n{}", wrapper.history()));
    assert_eq!(created.version, 1, "{}", wrapper.history());
    let (store, _) = under(CallKind::Put);
    assert_eq!(docs(&store).put("b", &v(1)).await.unwrap().version, 1);
    let (store, _) = under(CallKind::Put);
    assert_eq!(docs(&store).put("a", &v(2)).await.unwrap().version, 2);
    let (store, _) = under(CallKind::Update);
    let updated = docs(&store).update("a", &json!({"u": 1})).await.unwrap();
    assert_eq!((updated.version, &updated.value["u"]), (3, &json!(1)));
    let (store, _) = under(CallKind::UpdateIf);
    let patch = json!({"ui": 1});
    assert_eq!(
        docs(&store)
            .update_if("a", &patch, 3)
            .await
            .unwrap()
            .version,
        4
    );
    let (store, _) = under(CallKind::ReplaceIf);
    assert_eq!(
        docs(&store)
            .replace_if("a", &v(5), 4)
            .await
            .unwrap()
            .version,
        5
    );
    let (store, wrapper) = under(CallKind::ReplaceIf);
    let mut runs = 0;
    let modified = docs(&store)
        .modify("a", |doc| {
            runs += 1;
            let n = doc["n"].as_i64().unwrap();
            doc.insert("n".into(), (n + 1).into());
        })
        .await
        .unwrap();
    assert_eq!((modified.version, &modified.value["n"]), (6, &json!(6)));
    assert_eq!(runs, 1, "one change, resent: {}", wrapper.history());
    let (store, _) = under(CallKind::DeleteIf);
    docs(&store).delete_if("b", 1).await.unwrap();
    let (store, _) = under(CallKind::Delete);
    assert!(
        docs(&store).delete("a").await.unwrap(),
        "the delete's own answer"
    );
    let (store, _) = under(CallKind::Restore);
    let restored = docstore::Document {
        expires_at: None,
        id: "r".into(),
        data: v(7),
        created_at: created.created_at,
        updated_at: created.updated_at,
        created_by: "importer".into(),
        updated_by: "importer".into(),
        version: 7,
    };
    store.restore(&ctx.key("c", "r"), &restored).await.unwrap();
    let (store, _) = under(CallKind::WriteAll);
    let writes = [
        Write::create(ctx.key("c", "w1"), v(1)),
        Write::put(ctx.key("c", "w2"), v(2)),
    ];
    let outcomes = store.write_all(&writes, "app").await.unwrap();
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, WriteOutcome::Written(doc) if doc.version == 1)),
        "{outcomes:?}"
    );

    assert_eq!(version(&ctx, "a").await, None, "deleted once");
    assert_eq!(version(&ctx, "b").await, None);
    assert_eq!(version(&ctx, "r").await, Some(7));
    assert_eq!(version(&ctx, "w1").await, Some(1));
    assert_eq!(version(&ctx, "w2").await, Some(1));
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 3, "r, w1, w2");
}

/// Reads, queries, streams and feed pages that are throttled are read again: the caller
/// sees the answer.
pub async fn reads_streams_and_feeds_retry_unavailable(h: &dyn Harness) {
    let ctx = Ctx::new(h, "retry").await;
    let plain = collection(&ctx.store, &ctx);
    for id in ["a", "b", "c"] {
        plain.create(id, &data(json!({ "id": id }))).await.unwrap();
    }
    let mut plan = Plan::new();
    for kind in [
        CallKind::Get,
        CallKind::GetMany,
        CallKind::Query,
        CallKind::Count,
        CallKind::Collections,
        CallKind::Changes,
    ] {
        for n in 1..=u64::from(RETRIES) {
            plan = plan.on_nth(kind, n, Fault::Unavailable);
        }
    }
    let (store, wrapper) = faulty(&ctx, plan);
    let docs = collection(&store, &ctx);
    let history = || wrapper.history();
    assert!(docs.get("a").await.unwrap().is_some(), "{}", history());
    let many = docs.get_many(&["a", "x"]).await.unwrap();
    assert_eq!((many[0].is_some(), many[1].is_none()), (true, true));
    let all: Vec<_> = docs
        .stream(&Query::new().limit(2))
        .map_ok(|doc| doc.id)
        .try_collect()
        .await
        .unwrap_or_else(|err| panic!("stream: {err}\n{}", history()));
    assert_eq!(all, ["a", "b", "c"]);
    assert_eq!(docs.count().await.unwrap(), 3, "{}", history());
    // A page may hold fewer changes than asked for before the feed is caught up: read on.
    let site = store.site(&ctx.site).unwrap();
    let (mut start, mut changes) = (FeedStart::Oldest, 0);
    loop {
        let page = site.changes(&start, 10).await;
        let page = page.unwrap_or_else(|err| panic!("changes: {err}\n{}", history()));
        changes += page.changes.len();
        if page.caught_up {
            break;
        }
        start = FeedStart::After(page.next);
    }
    assert_eq!(changes, 3, "{}", history());
}

/// Lost answers outlast the budget: the call ends `Unavailable` carrying its identity (every
/// try's), the change applied once; the same call repeated later with that identity applies
/// nothing more and answers as the first did — `modify` included.
pub async fn a_call_retried_after_its_budget_with_the_error_identity_applies_once(h: &dyn Harness) {
    let ctx = Ctx::new(h, "retry").await;
    let plain = collection(&ctx.store, &ctx);
    plain.create("m", &data(json!({"n": 0}))).await.unwrap();
    let every_try_lost = |kind| {
        (1..=u64::from(RETRIES) + 1).fold(Plan::new(), |plan, n| {
            plan.on_nth(kind, n, Fault::LostAnswer)
        })
    };

    let (store, wrapper) = faulty(&ctx, every_try_lost(CallKind::ReplaceIf));
    let docs = collection(&store, &ctx);
    let add_one = |doc: &mut Data| {
        let n = doc["n"].as_i64().unwrap();
        doc.insert("n".into(), (n + 1).into());
    };
    let ended = docs.modify("m", add_one).await;
    let id = identity_of(ended, "modify", &wrapper);
    assert_eq!(version(&ctx, "m").await, Some(2), "applied once");
    let again = docs.modify("m", add_one).write_id(id).await.unwrap();
    assert_eq!((again.version, &again.value["n"]), (2, &json!(1)));
    assert_eq!(version(&ctx, "m").await, Some(2), "still once");

    let (store, wrapper) = faulty(&ctx, every_try_lost(CallKind::Create));
    let docs = collection(&store, &ctx);
    let order = data(json!({"paid": false}));
    let id = identity_of(docs.create("o", &order).await, "create", &wrapper);
    let again = docs.create("o", &order).write_id(id).await;
    assert_eq!(
        again.unwrap().version,
        1,
        "not AlreadyExists: its own create"
    );

    let (store, wrapper) = faulty(&ctx, every_try_lost(CallKind::Update));
    let docs = collection(&store, &ctx);
    let patch = json!({"paid": true});
    let id = identity_of(docs.update("o", &patch).await, "update", &wrapper);
    assert_eq!(
        docs.update("o", &patch).write_id(id).await.unwrap().version,
        2
    );
    assert_eq!(version(&ctx, "o").await, Some(2));

    // Reads carry no identity: repeating them is always safe.
    let (store, _) = faulty(&ctx, every_try_lost(CallKind::Get));
    let read = collection(&store, &ctx).get("o").await;
    assert!(
        matches!(&read, Err(err @ Error::Unavailable { .. }) if err.write_id().is_none()),
        "{read:?}"
    );
}

/// The identity an `Unavailable` write carries; panics on anything else.
fn identity_of<T: std::fmt::Debug>(
    ended: docstore::Result<T>,
    what: &str,
    wrapper: &FaultyDriver,
) -> WriteId {
    match ended {
        Err(err @ Error::Unavailable { .. }) => err
            .write_id()
            .unwrap_or_else(|| panic!("{what}: Unavailable without its identity"))
            .clone(),
        other => panic!(
            "{what}: every answer was lost, got {other:?}\n{}",
            wrapper.history()
        ),
    }
}
