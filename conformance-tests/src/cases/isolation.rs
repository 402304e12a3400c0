//! Sites and collections never see each other's documents.

use crate::Harness;
use crate::support::{Ctx, obj, unique_site};
use docstore::{Key, Query};
use serde_json::json;

/// The same collection and id in two sites are two documents.
pub async fn sites_are_isolated(h: &dyn Harness) {
    let ctx = Ctx::new(h, "iso").await;
    let other = unique_site("iso");
    let mine = ctx.key("c", "same");
    let theirs = Key::new(&other, "c", "same").unwrap();
    ctx.store
        .create(&mine, obj(json!({"site": 1})), "")
        .await
        .unwrap();
    ctx.store
        .create(&theirs, obj(json!({"site": 2})), "")
        .await
        .unwrap();
    ctx.store.delete(&mine).await.unwrap();
    assert_eq!(
        ctx.store.get(&theirs).await.unwrap().unwrap().data,
        obj(json!({"site": 2}))
    );
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 0);
    assert_eq!(ctx.store.count(&other).await.unwrap(), 1);
    assert_eq!(
        ctx.store
            .query(&ctx.site, "c", &Query::new())
            .await
            .unwrap()
            .documents,
        vec![]
    );
    assert_eq!(
        ctx.store
            .query(&other, "c", &Query::new())
            .await
            .unwrap()
            .documents
            .len(),
        1
    );
}

/// The same id in two collections (and in collections whose names are prefixes of each
/// other) are separate documents.
pub async fn collections_are_isolated(h: &dyn Harness) {
    let ctx = Ctx::new(h, "iso").await;
    for (collection, n) in [("c", 1), ("c2", 2), ("cc", 3)] {
        ctx.store
            .create(&ctx.key(collection, "id"), obj(json!({"n": n})), "")
            .await
            .unwrap();
    }
    ctx.store
        .update(&ctx.key("c", "id"), &obj(json!({"n": 10})), "")
        .await
        .unwrap();
    for (collection, n) in [("c", 10), ("c2", 2), ("cc", 3)] {
        let page = ctx
            .store
            .query(&ctx.site, collection, &Query::new())
            .await
            .unwrap();
        assert_eq!(page.documents.len(), 1, "{collection}");
        assert_eq!(page.documents[0].data["n"], json!(n), "{collection}");
    }
}
