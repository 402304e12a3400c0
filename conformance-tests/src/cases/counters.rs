//! Per-collection counters: `collections` and `count`.

use crate::Harness;
use crate::support::{Ctx, obj};
use serde_json::json;

fn listing(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs
        .iter()
        .map(|(name, n)| (name.to_string(), *n))
        .collect()
}

/// Counters follow creates, puts that create, puts that replace, deletes and re-creates.
pub async fn counters_follow_every_write(h: &dyn Harness) {
    let ctx = Ctx::new(h, "count").await;
    let store = &ctx.store;
    assert_eq!(store.collections(&ctx.site).await.unwrap(), listing(&[]));
    assert_eq!(store.count(&ctx.site).await.unwrap(), 0);
    store
        .create(&ctx.key("b", "1"), obj(json!({})), "")
        .await
        .unwrap();
    store
        .create(&ctx.key("b", "2"), obj(json!({})), "")
        .await
        .unwrap();
    store
        .put(&ctx.key("a", "1"), obj(json!({})), "")
        .await
        .unwrap();
    assert_eq!(
        store.collections(&ctx.site).await.unwrap(),
        listing(&[("a", 1), ("b", 2)])
    );
    assert_eq!(store.count(&ctx.site).await.unwrap(), 3);
    store
        .put(&ctx.key("a", "1"), obj(json!({"x": 1})), "")
        .await
        .unwrap();
    store
        .update(&ctx.key("b", "1"), &obj(json!({"x": 1})), "")
        .await
        .unwrap();
    assert_eq!(
        store.count(&ctx.site).await.unwrap(),
        3,
        "replacing writes do not count"
    );
    assert!(store.delete(&ctx.key("a", "1")).await.unwrap());
    assert_eq!(
        store.collections(&ctx.site).await.unwrap(),
        listing(&[("b", 2)])
    );
    store.delete_if(&ctx.key("b", "2"), 1).await.unwrap();
    store
        .create(&ctx.key("a", "1"), obj(json!({})), "")
        .await
        .unwrap();
    assert_eq!(
        store.collections(&ctx.site).await.unwrap(),
        listing(&[("a", 1), ("b", 1)])
    );
    assert_eq!(store.count(&ctx.site).await.unwrap(), 2);
}

/// Failed writes never move a counter.
pub async fn failed_writes_do_not_move_counters(h: &dyn Harness) {
    let ctx = Ctx::new(h, "count").await;
    let store = &ctx.store;
    let key = ctx.key("c", "1");
    store.create(&key, obj(json!({})), "").await.unwrap();
    assert!(store.create(&key, obj(json!({})), "").await.is_err());
    assert!(!store.delete(&ctx.key("c", "missing")).await.unwrap());
    assert!(store.delete_if(&key, 9).await.is_err());
    assert!(store.delete_if(&ctx.key("c", "missing"), 1).await.is_err());
    assert!(
        store
            .update(&ctx.key("d", "missing"), &obj(json!({})), "")
            .await
            .is_err()
    );
    assert_eq!(
        store.collections(&ctx.site).await.unwrap(),
        listing(&[("c", 1)])
    );
    assert_eq!(store.count(&ctx.site).await.unwrap(), 1);
}

/// `collections` lists by name, byte order, only collections that hold documents.
pub async fn collections_are_listed_by_name(h: &dyn Harness) {
    let ctx = Ctx::new(h, "count").await;
    for name in ["b", "B", "a-", "a_", "a", "_z", "9"] {
        ctx.store
            .create(&ctx.key(name, "x"), obj(json!({})), "")
            .await
            .unwrap();
    }
    ctx.store
        .create(&ctx.key("empty", "x"), obj(json!({})), "")
        .await
        .unwrap();
    ctx.store.delete(&ctx.key("empty", "x")).await.unwrap();
    let names: Vec<String> = ctx
        .store
        .collections(&ctx.site)
        .await
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["9", "B", "_z", "a", "a-", "a_", "b"]);
}
