//! Versions, timestamps and actors.

use crate::Harness;
use crate::support::{Ctx, obj};
use docstore::{ManualClock, StoreOptions};
use serde_json::json;
use std::sync::Arc;

async fn manual(h: &dyn Harness, start: i64) -> (Ctx, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(start));
    let options = StoreOptions::default().with_clock(clock.clone());
    (Ctx::with_options(h, "meta", options).await, clock)
}

/// Every successful write bumps the version by exactly one, whatever the call.
pub async fn version_grows_by_one_per_write(h: &dyn Harness) {
    let ctx = Ctx::new(h, "meta").await;
    let key = ctx.key("c", "v");
    let store = &ctx.store;
    assert_eq!(
        store
            .create(&key, obj(json!({})), "")
            .await
            .unwrap()
            .version,
        1
    );
    assert_eq!(
        store
            .put(&key, obj(json!({"a": 1})), "")
            .await
            .unwrap()
            .version,
        2
    );
    assert_eq!(
        store
            .update(&key, &obj(json!({"b": 1})), "")
            .await
            .unwrap()
            .version,
        3
    );
    assert_eq!(
        store
            .update_if(&key, &obj(json!({"c": 1})), 3, "")
            .await
            .unwrap()
            .version,
        4
    );
    // An empty patch is still a write.
    assert_eq!(
        store
            .update(&key, &obj(json!({})), "")
            .await
            .unwrap()
            .version,
        5
    );
    assert_eq!(store.get(&key).await.unwrap().unwrap().version, 5);
}

/// Timestamps come from the store's clock, in nanoseconds; `created_at` never changes.
pub async fn timestamps_come_from_the_clock(h: &dyn Harness) {
    let start = 1_700_000_000_123_456_789;
    let (ctx, clock) = manual(h, start).await;
    let key = ctx.key("c", "t");
    let created = ctx.store.create(&key, obj(json!({})), "").await.unwrap();
    assert_eq!((created.created_at, created.updated_at), (start, start));
    clock.advance(1);
    let updated = ctx
        .store
        .update(&key, &obj(json!({"a": 1})), "")
        .await
        .unwrap();
    assert_eq!((updated.created_at, updated.updated_at), (start, start + 1));
    clock.advance(1_000);
    let put = ctx.store.put(&key, obj(json!({})), "").await.unwrap();
    assert_eq!((put.created_at, put.updated_at), (start, start + 1_001));
    assert_eq!(ctx.store.get(&key).await.unwrap().unwrap(), put);
}

/// A clock stepping back never makes `updated_at` go backwards or below `created_at`.
pub async fn clock_stepping_back_never_moves_updated_at_back(h: &dyn Harness) {
    let (ctx, clock) = manual(h, 5_000_000_000).await;
    let key = ctx.key("c", "t");
    ctx.store.create(&key, obj(json!({})), "").await.unwrap();
    clock.set(1_000);
    let after_update = ctx
        .store
        .update(&key, &obj(json!({"a": 1})), "")
        .await
        .unwrap();
    assert_eq!(after_update.updated_at, 5_000_000_000);
    let after_put = ctx.store.put(&key, obj(json!({})), "").await.unwrap();
    assert!(after_put.updated_at >= after_update.updated_at);
    let after_if = ctx
        .store
        .update_if(&key, &obj(json!({})), 3, "")
        .await
        .unwrap();
    assert!(after_if.updated_at >= after_put.updated_at);
    assert!(after_if.updated_at >= after_if.created_at);
    clock.set(9_000_000_000);
    let later = ctx.store.update(&key, &obj(json!({})), "").await.unwrap();
    assert_eq!(later.updated_at, 9_000_000_000);
}

/// `created_by` is the creating actor forever; `updated_by` the last one; empty is allowed.
pub async fn actors_are_recorded(h: &dyn Harness) {
    let ctx = Ctx::new(h, "meta").await;
    let key = ctx.key("c", "a");
    ctx.store.create(&key, obj(json!({})), "").await.unwrap();
    let doc = ctx
        .store
        .update(&key, &obj(json!({"x": 1})), "user:é 'x'")
        .await
        .unwrap();
    assert_eq!(doc.created_by, "");
    assert_eq!(doc.updated_by, "user:é 'x'");
    let doc = ctx
        .store
        .update_if(&key, &obj(json!({})), 2, "third")
        .await
        .unwrap();
    assert_eq!(
        (doc.created_by.as_str(), doc.updated_by.as_str()),
        ("", "third")
    );
    assert_eq!(
        ctx.store.get(&key).await.unwrap().unwrap().updated_by,
        "third"
    );
}

/// An actor is 0–256 bytes of UTF-8 without control characters: every write refuses another
/// with `InvalidArgument` and writes nothing (a restored document's `created_by` and
/// `updated_by` alike).
pub async fn actors_are_checked_before_any_write(h: &dyn Harness) {
    use docstore::{Document, Error, Write};
    let ctx = Ctx::new(h, "meta").await;
    let key = ctx.key("c", "a");
    let longest = "é".repeat(128);
    let doc = ctx
        .store
        .create(&key, obj(json!({})), &longest)
        .await
        .unwrap();
    assert_eq!(doc.created_by, longest);
    let other = ctx.key("c", "new");
    for bad in [
        "tab\there".to_owned(),
        "nul\u{0}".to_owned(),
        "\u{85}".to_owned(),
        "x".repeat(257),
    ] {
        let invalid = |result: docstore::Result<()>, call: &str| match result {
            Err(Error::InvalidArgument(message)) => {
                assert!(message.contains("actor"), "{call} with {bad:?}: {message}")
            }
            other => panic!("{call} with actor {bad:?}: {other:?}"),
        };
        let s = &ctx.store;
        invalid(
            s.create(&other, obj(json!({})), &bad).await.map(drop),
            "create",
        );
        invalid(s.put(&key, obj(json!({})), &bad).await.map(drop), "put");
        invalid(
            s.update(&key, &obj(json!({})), &bad).await.map(drop),
            "update",
        );
        invalid(
            s.update_if(&key, &obj(json!({})), 1, &bad).await.map(drop),
            "update_if",
        );
        let write = Write::Put {
            key: other.clone(),
            data: obj(json!({})),
        };
        invalid(s.write_all(&[write], &bad).await.map(drop), "write_all");
        for field in ["created_by", "updated_by"] {
            let mut restored = Document {
                expires_at: None,
                id: "new".into(),
                data: obj(json!({})),
                created_at: 1,
                updated_at: 2,
                created_by: "a".into(),
                updated_by: "b".into(),
                version: 1,
            };
            if field == "created_by" {
                restored.created_by = bad.clone();
            } else {
                restored.updated_by = bad.clone();
            }
            invalid(s.restore(&other, &restored).await, field);
        }
    }
    let stored = ctx.store.get(&key).await.unwrap().unwrap();
    assert_eq!((stored.version, stored.updated_by), (1, longest));
    assert_eq!(ctx.store.get(&other).await.unwrap(), None);
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 1);
}
