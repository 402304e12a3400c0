//! `restore`: writing a document with its metadata, for import and copy.

use crate::Harness;
use crate::support::{Ctx, obj};
use docstore::{Document, Error, StoreOptions};
use serde_json::json;

fn document(id: &str) -> Document {
    Document {
        expires_at: None,
        id: id.into(),
        data: obj(json!({"n": u64::MAX, "f": 1.0, "s": "é"})),
        created_at: 1_600_000_000_000_000_001,
        updated_at: 1_650_000_000_000_000_002,
        created_by: "origin".into(),
        updated_by: "editor".into(),
        version: 17,
    }
}

/// A restored document reads back exactly, counts like a create, and later writes continue
/// from its version and timestamps.
pub async fn restore_writes_the_document_verbatim(h: &dyn Harness) {
    let ctx = Ctx::new(h, "restore").await;
    let key = ctx.key("c", "r");
    let doc = document("r");
    ctx.store.restore(&key, &doc).await.unwrap();
    assert_eq!(ctx.store.get(&key).await.unwrap(), Some(doc.clone()));
    assert_eq!(
        ctx.store.collections(&ctx.site).await.unwrap(),
        vec![("c".to_string(), 1)]
    );
    let page = ctx
        .store
        .query(&ctx.site, "c", &docstore::Query::new())
        .await
        .unwrap();
    assert_eq!(page.documents, vec![doc.clone()]);
    let next = ctx
        .store
        .update_if(&key, &obj(json!({"x": 1})), 17, "later")
        .await
        .unwrap();
    assert_eq!(next.version, 18);
    assert_eq!(
        (next.created_at, next.created_by.as_str()),
        (doc.created_at, "origin")
    );
    assert!(next.updated_at >= doc.updated_at);
}

/// Restoring over an existing id is `AlreadyExists` and changes nothing.
pub async fn restore_existing_is_already_exists(h: &dyn Harness) {
    let ctx = Ctx::new(h, "restore").await;
    let key = ctx.key("c", "r");
    let existing = ctx
        .store
        .create(&key, obj(json!({"mine": true})), "me")
        .await
        .unwrap();
    let err = ctx.store.restore(&key, &document("r")).await.unwrap_err();
    assert!(matches!(err, Error::AlreadyExists), "{err:?}");
    assert_eq!(ctx.store.get(&key).await.unwrap(), Some(existing));
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 1);
}

/// A document that does not fit its key or breaks a metadata rule or the size limit is
/// refused and nothing is written.
pub async fn restore_refuses_bad_documents(h: &dyn Harness) {
    let ctx = Ctx::with_options(h, "restore", StoreOptions::default().with_max_doc_bytes(40)).await;
    let key = ctx.key("c", "r");
    let mut wrong_id = document("other");
    wrong_id.data = obj(json!({}));
    let mut version_zero = document("r");
    version_zero.data = obj(json!({}));
    version_zero.version = 0;
    let mut backwards = document("r");
    backwards.data = obj(json!({}));
    backwards.updated_at = backwards.created_at - 1;
    let mut version_too_big = document("r");
    version_too_big.data = obj(json!({}));
    version_too_big.version = i64::MAX as u64 + 1;
    for bad in [wrong_id, version_zero, version_too_big, backwards] {
        let err = ctx.store.restore(&key, &bad).await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{bad:?}: {err:?}");
    }
    let mut large = document("r");
    large.data = obj(json!({"p": "x".repeat(40)}));
    let err = ctx.store.restore(&key, &large).await.unwrap_err();
    assert!(matches!(err, Error::TooLarge { limit: 40, .. }), "{err:?}");
    assert_eq!(ctx.store.get(&key).await.unwrap(), None);
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 0);
}

/// The per-site quota applies to `restore` as to `create`.
pub async fn restore_respects_the_quota(h: &dyn Harness) {
    let options = StoreOptions::default().with_max_docs_per_site(Some(1));
    let ctx = Ctx::with_options(h, "restore", options).await;
    ctx.store
        .restore(&ctx.key("c", "a"), &document("a"))
        .await
        .unwrap();
    let err = ctx
        .store
        .restore(&ctx.key("c", "b"), &document("b"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::QuotaExceeded { limit: 1 }), "{err:?}");
    assert_eq!(ctx.store.get(&ctx.key("c", "b")).await.unwrap(), None);
}
