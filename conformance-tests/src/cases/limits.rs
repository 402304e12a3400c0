//! `max_doc_bytes` and the soft per-site quota.

use crate::Harness;
use crate::support::{Ctx, obj};
use docstore::{Error, StoreOptions};
use serde_json::json;

/// Data whose compact JSON is exactly `size` bytes: `{"p":"xxx…"}`.
fn data_of_size(size: usize) -> docstore::Data {
    obj(json!({"p": "x".repeat(size - 8)}))
}

/// At the limit every write succeeds; one byte above it every write is `TooLarge` with the
/// sizes, and nothing changes.
pub async fn max_doc_bytes_at_and_above_the_limit(h: &dyn Harness) {
    let limit = 1_000;
    let ctx = Ctx::with_options(h, "size", StoreOptions::default().with_max_doc_bytes(limit)).await;
    assert_eq!(docstore::document::data_size(&data_of_size(limit)), limit);
    let too_large = |r: docstore::Result<docstore::Document>| match r {
        Err(Error::TooLarge { size, limit: l }) => size == limit + 1 && l == limit,
        _ => false,
    };
    let key = ctx.key("c", "d");
    assert!(too_large(
        ctx.store.create(&key, data_of_size(limit + 1), "").await
    ));
    assert!(too_large(
        ctx.store.put(&key, data_of_size(limit + 1), "").await
    ));
    assert_eq!(ctx.store.get(&key).await.unwrap(), None);
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 0);
    ctx.store
        .create(&key, data_of_size(limit), "")
        .await
        .unwrap();
    let at_limit = ctx
        .store
        .put(&key, data_of_size(limit - 1), "")
        .await
        .unwrap();
    // A patch that grows the document by two bytes crosses the limit.
    let grow = obj(json!({"p": "x".repeat(limit - 8 + 1)}));
    assert!(too_large(ctx.store.update(&key, &grow, "").await));
    assert!(too_large(ctx.store.update_if(&key, &grow, 2, "").await));
    assert_eq!(ctx.store.get(&key).await.unwrap(), Some(at_limit));
    let exact = obj(json!({"p": "x".repeat(limit - 8)}));
    assert_eq!(
        ctx.store
            .update_if(&key, &exact, 2, "")
            .await
            .unwrap()
            .version,
        3
    );
}

/// The default limit is 390 000 bytes.
pub async fn default_max_doc_bytes_is_390000(h: &dyn Harness) {
    let ctx = Ctx::new(h, "size").await;
    ctx.store
        .create(&ctx.key("c", "ok"), data_of_size(390_000), "")
        .await
        .unwrap();
    let err = ctx
        .store
        .create(&ctx.key("c", "big"), data_of_size(390_001), "")
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::TooLarge {
                size: 390_001,
                limit: 390_000
            }
        ),
        "{err:?}"
    );
}

/// With `max_docs_per_site`, a create or a creating put in a full site is `QuotaExceeded`
/// and writes nothing; replacing, updating and deleting still work.
pub async fn quota_refuses_creates_in_a_full_site(h: &dyn Harness) {
    let options = StoreOptions::default().with_max_docs_per_site(Some(2));
    let ctx = Ctx::with_options(h, "quota", options).await;
    let store = &ctx.store;
    store
        .create(&ctx.key("a", "1"), obj(json!({})), "")
        .await
        .unwrap();
    store
        .put(&ctx.key("b", "1"), obj(json!({})), "")
        .await
        .unwrap();
    let quota = |r: docstore::Result<docstore::Document>| {
        matches!(r, Err(Error::QuotaExceeded { limit: 2 }))
    };
    assert!(quota(
        store.create(&ctx.key("a", "2"), obj(json!({})), "").await
    ));
    assert!(quota(
        store.put(&ctx.key("c", "1"), obj(json!({})), "").await
    ));
    assert_eq!(store.get(&ctx.key("c", "1")).await.unwrap(), None);
    assert_eq!(store.count(&ctx.site).await.unwrap(), 2);
    store
        .put(&ctx.key("a", "1"), obj(json!({"x": 1})), "")
        .await
        .unwrap();
    store
        .update(&ctx.key("b", "1"), &obj(json!({"x": 1})), "")
        .await
        .unwrap();
    store.delete(&ctx.key("a", "1")).await.unwrap();
    store
        .create(&ctx.key("a", "2"), obj(json!({})), "")
        .await
        .unwrap();
    // Another site has its own quota.
    let other = crate::unique_site("quota");
    store
        .create(
            &docstore::Key::new(&other, "a", "1").unwrap(),
            obj(json!({})),
            "",
        )
        .await
        .unwrap();
}

/// Data whose deepest container sits at nesting level `level` (the data object is level 1).
fn nested(level: usize) -> docstore::Data {
    let mut value = json!([]);
    for _ in 2..level {
        value = json!([value]);
    }
    obj(json!({ "a": value }))
}

/// Data nested as deep as `MAX_DEPTH` is stored and read back; one level more is
/// `InvalidArgument` from every write, and nothing is written.
pub async fn nesting_depth_is_limited(h: &dyn Harness) {
    let ctx = Ctx::new(h, "depth").await;
    let deepest = nested(docstore::document::MAX_DEPTH);
    let key = ctx.key("c", "deep");
    ctx.store.create(&key, deepest.clone(), "").await.unwrap();
    assert_eq!(ctx.store.get(&key).await.unwrap().unwrap().data, deepest);
    let page = ctx
        .store
        .query(&ctx.site, "c", &docstore::Query::new())
        .await
        .unwrap();
    assert_eq!(page.documents[0].data, deepest);

    let too_deep = nested(docstore::document::MAX_DEPTH + 1);
    let invalid =
        |r: docstore::Result<docstore::Document>| matches!(r, Err(Error::InvalidArgument(_)));
    let other = ctx.key("c", "other");
    assert!(invalid(
        ctx.store.create(&other, too_deep.clone(), "").await
    ));
    assert!(invalid(ctx.store.put(&other, too_deep.clone(), "").await));
    assert!(invalid(ctx.store.put(&key, too_deep.clone(), "").await));
    assert!(invalid(
        ctx.store
            .update(&key, &obj(json!({"b": too_deep["a"]})), "")
            .await
    ));
    assert!(invalid(ctx.store.update_if(&key, &too_deep, 1, "").await));
    let mut restored = ctx.store.get(&key).await.unwrap().unwrap();
    restored.id = "other".into();
    restored.data = too_deep;
    let err = ctx.store.restore(&other, &restored).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert_eq!(ctx.store.get(&other).await.unwrap(), None);
    assert_eq!(ctx.store.get(&key).await.unwrap().unwrap().data, deepest);
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 1);
}
