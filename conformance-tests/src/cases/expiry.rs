//! Expiring documents (`docs/contract.md`, "Expiry"): from its expiry instant on the store's
//! clock a document reads, counts and holds unique values as if deleted; writes find its key
//! empty; a sweep removes it with one `Expired` change. Time comes from a [`ManualClock`]:
//! nothing sleeps.

use crate::Harness;
use crate::support::{Ctx, obj};
use docstore::index::{Index, IndexSet};
use docstore::{ChangeKind, Error, FeedStart, ManualClock, Query, StoreOptions, Write};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

const START: i64 = 1_700_000_000_000_000_000;
const SECOND: i64 = 1_000_000_000;

/// A store on a manual clock at [`START`] (no background sweep: the cases sweep when they
/// mean to), or `None` where the backend does not keep expiry — after checking that it
/// refuses a write with one and writes nothing.
async fn open(
    h: &dyn Harness,
    tag: &str,
    options: StoreOptions,
) -> Option<(Ctx, Arc<ManualClock>)> {
    let clock = Arc::new(ManualClock::new(START));
    let options = options.with_clock(clock.clone()).with_sweep_interval(None);
    let ctx = Ctx::with_options(h, tag, options).await;
    if h.capabilities().expiry {
        return Some((ctx, clock));
    }
    let key = ctx.key("sessions", "s");
    let refused = ctx
        .store
        .create(&key, obj(json!({})), "")
        .expires_after(Duration::from_secs(1))
        .await;
    assert!(
        matches!(refused, Err(Error::InvalidArgument(_))),
        "{refused:?}"
    );
    assert_eq!(ctx.store.get(&key).await.unwrap(), None);
    None
}

/// From its expiry instant a document is gone from every read: `get`, `get_many`, queries,
/// counts, collections and sites.
pub async fn an_expired_document_reads_as_deleted(h: &dyn Harness) {
    let Some((ctx, clock)) = open(h, "exp-reads", StoreOptions::default()).await else {
        return;
    };
    let store = &ctx.store;
    let (s, k) = (ctx.key("sessions", "s"), ctx.key("sessions", "keep"));
    let created = store
        .create(&s, obj(json!({"user": "ann"})), "")
        .expires_after(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(created.expires_at, Some(START + 10 * SECOND));
    store
        .create(&k, obj(json!({"user": "bob"})), "")
        .await
        .unwrap();
    clock.set(START + 10 * SECOND - 1);
    assert_eq!(store.get(&s).await.unwrap(), Some(created));
    assert_eq!(store.count(&ctx.site).await.unwrap(), 2);

    clock.set(START + 10 * SECOND);
    assert_eq!(store.get(&s).await.unwrap(), None);
    let many = store.get_many(&[s.clone(), k.clone()]).await.unwrap();
    assert_eq!((many[0].is_none(), many[1].is_some()), (true, true));
    let page = store
        .query(&ctx.site, "sessions", &Query::new())
        .await
        .unwrap();
    assert_eq!(
        page.documents
            .iter()
            .map(|d| d.id.as_str())
            .collect::<Vec<_>>(),
        ["keep"]
    );
    let ann = Query::parse(r#"user = "ann""#).unwrap();
    assert!(
        store
            .query(&ctx.site, "sessions", &ann)
            .await
            .unwrap()
            .documents
            .is_empty()
    );
    assert_eq!(store.count(&ctx.site).await.unwrap(), 1);
    assert_eq!(
        store.collections(&ctx.site).await.unwrap(),
        [("sessions".to_owned(), 1)]
    );
    assert!(store.delete(&k).await.unwrap());
    assert!(!store.sites().await.unwrap().contains(&ctx.site));
}

/// A write finds an expired document's key empty: `create` and `put` make version 1, an
/// update is `NotFound`, a delete finds nothing.
pub async fn writes_find_an_expired_key_empty(h: &dyn Harness) {
    let Some((ctx, clock)) = open(h, "exp-writes", StoreOptions::default()).await else {
        return;
    };
    let store = &ctx.store;
    let k = |id: &str| ctx.key("sessions", id);
    for id in ["a", "b", "c", "d"] {
        store
            .create(&k(id), obj(json!({"n": 1})), "")
            .expires_at(START + SECOND)
            .await
            .unwrap();
        store
            .update(&k(id), &obj(json!({"n": 2})), "")
            .await
            .unwrap();
    }
    clock.set(START + SECOND);
    let again = store
        .create(&k("a"), obj(json!({"n": 3})), "")
        .await
        .unwrap();
    assert_eq!((again.version, again.expires_at), (1, None));
    let put = store.put(&k("b"), obj(json!({"n": 3})), "").await.unwrap();
    assert_eq!((put.version, put.created_at), (1, START + SECOND));
    let update = store.update(&k("c"), &obj(json!({"n": 3})), "").await;
    assert!(matches!(update, Err(Error::NotFound { .. })), "{update:?}");
    assert!(!store.delete(&k("d")).await.unwrap());
    assert_eq!(store.count(&ctx.site).await.unwrap(), 2);
}

/// A write keeps the document's expiry unless it gives one (`never_expires` removes it);
/// a collection's default applies to `create`, `put` and `replace_if` without one.
pub async fn writes_keep_set_and_default_the_expiry(h: &dyn Harness) {
    let options = StoreOptions::default().with_expiry("sessions", Duration::from_secs(30));
    let Some((ctx, clock)) = open(h, "exp-default", options).await else {
        return;
    };
    let store = &ctx.store;
    let s = ctx.key("sessions", "s");
    let created = store.create(&s, obj(json!({})), "").await.unwrap();
    assert_eq!(created.expires_at, Some(START + 30 * SECOND));
    clock.set(START + SECOND);
    let updated = store.update(&s, &obj(json!({"n": 1})), "").await.unwrap();
    assert_eq!(
        updated.expires_at,
        Some(START + 30 * SECOND),
        "an update keeps it"
    );
    let put = store.put(&s, obj(json!({})), "").await.unwrap();
    assert_eq!(
        put.expires_at,
        Some(START + 31 * SECOND),
        "the default, from the put"
    );
    let never = store
        .update(&s, &obj(json!({})), "")
        .never_expires()
        .await
        .unwrap();
    assert_eq!(never.expires_at, None);
    let other = store
        .create(&ctx.key("users", "u"), obj(json!({})), "")
        .await
        .unwrap();
    assert_eq!(other.expires_at, None, "another collection has no default");
    let explicit = store
        .create(&ctx.key("sessions", "t"), obj(json!({})), "")
        .expires_at(START + 5 * SECOND)
        .await
        .unwrap();
    assert_eq!(explicit.expires_at, Some(START + 5 * SECOND));
    let batch = [
        Write::create(ctx.key("sessions", "u"), obj(json!({}))),
        Write::update(ctx.key("sessions", "t"), obj(json!({"n": 1}))),
    ];
    let written = store.write_all(&batch, "").await.unwrap();
    let expiry = |i: usize| match &written[i] {
        docstore::WriteOutcome::Written(doc) => doc.expires_at,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        (expiry(0), expiry(1)),
        (Some(START + 31 * SECOND), Some(START + 5 * SECOND))
    );
}

/// A sweep removes each expired document once, with one `Expired` change at its expiry
/// instant; a create on an expired key first records the expiry.
pub async fn each_expiry_is_one_change_on_the_feed(h: &dyn Harness) {
    let Some((ctx, clock)) = open(h, "exp-feed", StoreOptions::default()).await else {
        return;
    };
    let store = &ctx.store;
    let site = store.site(&ctx.site).unwrap();
    let start = site.changes(&FeedStart::Now, 1).await.unwrap().next;
    for id in ["a", "b"] {
        store
            .create(&ctx.key("sessions", id), obj(json!({})), "")
            .expires_at(START + SECOND)
            .await
            .unwrap();
    }
    clock.set(START + 2 * SECOND);
    store
        .create(&ctx.key("sessions", "b"), obj(json!({})), "")
        .await
        .unwrap();
    assert!(store.sweep_expired().await.unwrap() >= 1);
    assert_eq!(store.sweep_expired().await.unwrap(), 0);
    let page = site.changes(&FeedStart::After(start), 10).await.unwrap();
    let seen: Vec<(String, ChangeKind, i64)> = page
        .changes
        .iter()
        .map(|c| (c.key.id().to_owned(), c.kind, c.time))
        .collect();
    let created = |id: &str, at: i64| (id.to_owned(), ChangeKind::Created, at);
    let expired = |id: &str| (id.to_owned(), ChangeKind::Expired, START + SECOND);
    assert_eq!(
        seen,
        [
            created("a", START),
            created("b", START),
            expired("b"),
            created("b", START + 2 * SECOND),
            expired("a"),
        ]
    );
    assert_eq!(store.count(&ctx.site).await.unwrap(), 1);
}

/// An expired document holds no unique value: another may take it at once.
pub async fn an_expired_document_frees_its_unique_values(h: &dyn Harness) {
    // A backend without unique indexes refuses the declaration: the `unique` family checks
    // that; here there is nothing to free.
    if !h.capabilities().unique_indexes {
        return;
    }
    let indexes = IndexSet::new([Index::parse("users", "by_email", ["email"])
        .unwrap()
        .unique()])
    .unwrap();
    let options = StoreOptions::default().with_indexes(indexes);
    let Some((ctx, clock)) = open(h, "exp-unique", options).await else {
        return;
    };
    let store = &ctx.store;
    let data = obj(json!({"email": "x"}));
    store
        .create(&ctx.key("users", "a"), data.clone(), "")
        .expires_at(START + SECOND)
        .await
        .unwrap();
    let held = store.create(&ctx.key("users", "b"), data.clone(), "").await;
    assert!(
        matches!(held, Err(Error::UniqueViolation { .. })),
        "{held:?}"
    );
    clock.set(START + SECOND);
    store
        .create(&ctx.key("users", "b"), data, "")
        .await
        .unwrap();
    assert_eq!(store.count(&ctx.site).await.unwrap(), 1);
}
