//! create, get, put, delete.

use crate::Harness;
use crate::support::{Ctx, obj};
use docstore::Error;
use serde_json::json;

/// `create` returns version 1 and `get` returns the same document.
pub async fn create_then_get_returns_same_document(h: &dyn Harness) {
    let ctx = Ctx::new(h, "crud").await;
    let key = ctx.key("c", "d1");
    let created = ctx
        .store
        .create(&key, obj(json!({"a": 1, "b": [true]})), "ann")
        .await
        .unwrap();
    assert_eq!(created.id, "d1");
    assert_eq!(created.version, 1);
    assert_eq!(created.data, obj(json!({"a": 1, "b": [true]})));
    assert_eq!(created.created_by, "ann");
    assert_eq!(created.updated_by, "ann");
    assert_eq!(created.created_at, created.updated_at);
    assert_eq!(ctx.store.get(&key).await.unwrap(), Some(created));
}

/// A second `create` of one id is `AlreadyExists` and leaves the first document untouched.
pub async fn create_existing_is_already_exists_and_changes_nothing(h: &dyn Harness) {
    let ctx = Ctx::new(h, "crud").await;
    let key = ctx.key("c", "d1");
    let first = ctx
        .store
        .create(&key, obj(json!({"v": 1})), "ann")
        .await
        .unwrap();
    let err = ctx
        .store
        .create(&key, obj(json!({"v": 2})), "bob")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::AlreadyExists), "{err:?}");
    assert_eq!(ctx.store.get(&key).await.unwrap(), Some(first));
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 1);
}

/// `get` of a document never written is `None`.
pub async fn get_missing_is_none(h: &dyn Harness) {
    let ctx = Ctx::new(h, "crud").await;
    assert_eq!(ctx.store.get(&ctx.key("c", "nope")).await.unwrap(), None);
    ctx.store
        .create(&ctx.key("c", "other"), obj(json!({})), "")
        .await
        .unwrap();
    assert_eq!(ctx.store.get(&ctx.key("c", "nope")).await.unwrap(), None);
}

/// `put` creates at version 1, then replaces the whole data keeping `created_*`.
pub async fn put_creates_then_replaces(h: &dyn Harness) {
    let ctx = Ctx::new(h, "crud").await;
    let key = ctx.key("c", "p");
    let first = ctx
        .store
        .put(&key, obj(json!({"a": 1, "keep": "no"})), "ann")
        .await
        .unwrap();
    assert_eq!(first.version, 1);
    assert_eq!(
        (first.created_by.as_str(), first.updated_by.as_str()),
        ("ann", "ann")
    );
    let second = ctx
        .store
        .put(&key, obj(json!({"b": 2})), "bob")
        .await
        .unwrap();
    assert_eq!(second.version, 2);
    assert_eq!(
        second.data,
        obj(json!({"b": 2})),
        "put replaces, it does not merge"
    );
    assert_eq!(second.created_at, first.created_at);
    assert_eq!(second.created_by, "ann");
    assert_eq!(second.updated_by, "bob");
    assert!(second.updated_at >= first.updated_at);
    assert_eq!(ctx.store.get(&key).await.unwrap(), Some(second));
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 1);
}

/// `delete` says whether it deleted, and the document is gone.
pub async fn delete_reports_whether_it_deleted(h: &dyn Harness) {
    let ctx = Ctx::new(h, "crud").await;
    let key = ctx.key("c", "d");
    assert!(!ctx.store.delete(&key).await.unwrap());
    ctx.store.create(&key, obj(json!({})), "").await.unwrap();
    assert!(ctx.store.delete(&key).await.unwrap());
    assert_eq!(ctx.store.get(&key).await.unwrap(), None);
    assert!(!ctx.store.delete(&key).await.unwrap());
}

/// A document created again after a delete starts over at version 1 with new `created_*`.
pub async fn recreate_after_delete_starts_over(h: &dyn Harness) {
    let ctx = Ctx::new(h, "crud").await;
    let key = ctx.key("c", "d");
    ctx.store
        .create(&key, obj(json!({"old": true})), "ann")
        .await
        .unwrap();
    ctx.store
        .update(&key, &obj(json!({"more": 1})), "ann")
        .await
        .unwrap();
    ctx.store.delete(&key).await.unwrap();
    let again = ctx
        .store
        .create(&key, obj(json!({"new": true})), "bob")
        .await
        .unwrap();
    assert_eq!(again.version, 1);
    assert_eq!(again.created_by, "bob");
    assert_eq!(again.data, obj(json!({"new": true})));
}

/// `update` merges the patch and bumps the version; on a missing document it is `NotFound`
/// and creates nothing.
pub async fn update_merges_or_is_not_found(h: &dyn Harness) {
    let ctx = Ctx::new(h, "crud").await;
    let key = ctx.key("c", "u");
    let err = ctx
        .store
        .update(&key, &obj(json!({"a": 1})), "ann")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::NotFound { key: named } if *named == key.to_string()),
        "{err:?}"
    );
    assert_eq!(ctx.store.get(&key).await.unwrap(), None);
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 0);
    ctx.store
        .create(&key, obj(json!({"a": 1, "b": {"c": 1}})), "ann")
        .await
        .unwrap();
    let updated = ctx
        .store
        .update(&key, &obj(json!({"b": {"d": 2}, "e": 3})), "bob")
        .await
        .unwrap();
    assert_eq!(updated.version, 2);
    assert_eq!(
        updated.data,
        obj(json!({"a": 1, "b": {"c": 1, "d": 2}, "e": 3}))
    );
    assert_eq!(updated.updated_by, "bob");
    assert_eq!(updated.created_by, "ann");
    assert_eq!(ctx.store.get(&key).await.unwrap(), Some(updated));
}
