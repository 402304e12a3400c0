//! `update_if` and `delete_if`.

use crate::Harness;
use crate::support::{Ctx, obj};
use docstore::Error;
use serde_json::json;

/// `update_if` with the current version applies the patch.
pub async fn update_if_current_version_applies(h: &dyn Harness) {
    let ctx = Ctx::new(h, "cond").await;
    let key = ctx.key("c", "d");
    ctx.store
        .create(&key, obj(json!({"a": 1})), "")
        .await
        .unwrap();
    let doc = ctx
        .store
        .update_if(&key, &obj(json!({"b": 2})), 1, "x")
        .await
        .unwrap();
    assert_eq!(
        (doc.version, doc.data.clone()),
        (2, obj(json!({"a": 1, "b": 2})))
    );
    assert_eq!(ctx.store.get(&key).await.unwrap(), Some(doc));
}

/// `update_if` with another version is `Conflict { current }` and changes nothing.
pub async fn update_if_stale_version_is_conflict(h: &dyn Harness) {
    let ctx = Ctx::new(h, "cond").await;
    let key = ctx.key("c", "d");
    ctx.store
        .create(&key, obj(json!({"a": 1})), "")
        .await
        .unwrap();
    let current = ctx
        .store
        .update(&key, &obj(json!({"a": 2})), "")
        .await
        .unwrap();
    for stale in [0, 1, 3, u64::MAX] {
        let err = ctx
            .store
            .update_if(&key, &obj(json!({"a": 9})), stale, "")
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::Conflict { current: 2 }),
            "{stale}: {err:?}"
        );
    }
    assert_eq!(ctx.store.get(&key).await.unwrap(), Some(current));
}

/// `update_if` on a missing document is `NotFound` and creates nothing.
pub async fn update_if_missing_is_not_found(h: &dyn Harness) {
    let ctx = Ctx::new(h, "cond").await;
    let key = ctx.key("c", "d");
    let err = ctx
        .store
        .update_if(&key, &obj(json!({"a": 1})), 1, "")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::NotFound { key: named } if *named == key.to_string()),
        "{err:?}"
    );
    assert_eq!(ctx.store.get(&key).await.unwrap(), None);
}

/// `delete_if` with the current version deletes.
pub async fn delete_if_current_version_deletes(h: &dyn Harness) {
    let ctx = Ctx::new(h, "cond").await;
    let key = ctx.key("c", "d");
    ctx.store.create(&key, obj(json!({})), "").await.unwrap();
    ctx.store.put(&key, obj(json!({})), "").await.unwrap();
    ctx.store.delete_if(&key, 2).await.unwrap();
    assert_eq!(ctx.store.get(&key).await.unwrap(), None);
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 0);
}

/// `delete_if` with another version is `Conflict { current }` and keeps the document.
pub async fn delete_if_stale_version_is_conflict(h: &dyn Harness) {
    let ctx = Ctx::new(h, "cond").await;
    let key = ctx.key("c", "d");
    let doc = ctx
        .store
        .create(&key, obj(json!({"k": 1})), "")
        .await
        .unwrap();
    for stale in [0, 2, 7] {
        let err = ctx.store.delete_if(&key, stale).await.unwrap_err();
        assert!(
            matches!(err, Error::Conflict { current: 1 }),
            "{stale}: {err:?}"
        );
    }
    assert_eq!(ctx.store.get(&key).await.unwrap(), Some(doc));
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 1);
}

/// `delete_if` on a missing document is `NotFound`.
pub async fn delete_if_missing_is_not_found(h: &dyn Harness) {
    let ctx = Ctx::new(h, "cond").await;
    let key = ctx.key("c", "d");
    let err = ctx.store.delete_if(&key, 1).await.unwrap_err();
    assert!(
        matches!(&err, Error::NotFound { key: named } if *named == key.to_string()),
        "{err:?}"
    );
    assert_eq!(ctx.store.collections(&ctx.site).await.unwrap(), vec![]);
}
