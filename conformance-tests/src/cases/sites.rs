//! A `Site` reaches its own site and nothing else: reads, writes, counts, queries, streams,
//! batches and cursors.

use crate::Harness;
use crate::support::{Ctx, unique_site};
use docstore::{Data, Error, Filter, Query};
use futures_util::TryStreamExt;
use serde_json::{Value, json};

fn data(value: Value) -> Data {
    docstore::object(value).expect("an object")
}

/// Two sites holding the same collection and ids: every call through one site's handles sees
/// only that site's documents.
pub async fn a_site_reaches_only_its_own_documents(h: &dyn Harness) {
    let ctx = Ctx::new(h, "site").await;
    let mine = ctx.store.site(&ctx.site).unwrap().with_actor("me").unwrap();
    let theirs = ctx.store.site(&unique_site("site")).unwrap();
    let my_docs = mine.collection::<Data>("c").unwrap();
    let their_docs = theirs.collection::<Data>("c").unwrap();
    my_docs
        .create("same", &data(json!({"n": 1})))
        .await
        .unwrap();
    their_docs
        .create("same", &data(json!({"n": 2})))
        .await
        .unwrap();
    their_docs
        .create("only-theirs", &data(json!({"n": 3})))
        .await
        .unwrap();

    assert_eq!(my_docs.get("same").await.unwrap().unwrap().value["n"], 1);
    assert_eq!(my_docs.get("only-theirs").await.unwrap(), None);
    assert_eq!(mine.count().await.unwrap(), 1);
    assert_eq!(mine.collections().await.unwrap(), vec![("c".to_owned(), 1)]);
    assert_eq!(my_docs.count().await.unwrap(), 1);
    let page = my_docs.query(&Query::new()).await.unwrap();
    let ids: Vec<&str> = page.items.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(ids, ["same"]);
    let streamed: Vec<_> = my_docs.stream(&Query::new()).try_collect().await.unwrap();
    assert_eq!(streamed.len(), 1);
    assert_eq!(
        my_docs.count_matching(&Filter::exists("n")).await.unwrap(),
        1
    );
    let many = my_docs.get_many(&["same", "only-theirs"]).await.unwrap();
    assert!(many[0].is_some() && many[1].is_none(), "{many:?}");

    // Writes through one site never touch the other.
    assert!(matches!(
        my_docs.delete_if("only-theirs", 1).await,
        Err(Error::NotFound { .. })
    ));
    assert!(!my_docs.delete("only-theirs").await.unwrap());
    assert!(my_docs.delete("same").await.unwrap());
    assert_eq!(their_docs.get("same").await.unwrap().unwrap().value["n"], 2);
    assert_eq!(theirs.count().await.unwrap(), 2);
}

/// A batch of one site refuses a collection handle of another site, naming it, and writes
/// nothing; a batch over several collections of its own site applies atomically.
pub async fn a_batch_stays_in_its_site(h: &dyn Harness) {
    let ctx = Ctx::new(h, "sitebatch").await;
    let mine = ctx.store.site(&ctx.site).unwrap();
    let theirs = ctx.store.site(&unique_site("sitebatch")).unwrap();
    let a = mine.collection::<Data>("a").unwrap();
    let b = mine.collection::<Data>("b").unwrap();
    let foreign = theirs.collection::<Data>("a").unwrap();

    let refused = mine
        .batch()
        .create(&a, "x", &data(json!({})))
        .create(&foreign, "y", &data(json!({})))
        .commit()
        .await;
    match refused {
        Err(Error::Batch { index: 1, source }) => {
            assert!(matches!(*source, Error::InvalidArgument(ref m) if m.contains("site")));
        }
        other => panic!("expected the foreign write to be refused: {other:?}"),
    }
    assert_eq!(a.get("x").await.unwrap(), None, "nothing was written");
    assert_eq!(foreign.get("y").await.unwrap(), None);

    let outcomes = mine
        .batch()
        .create(&a, "x", &data(json!({"n": 1})))
        .create(&b, "x", &data(json!({"n": 2})))
        .commit()
        .await
        .unwrap();
    assert_eq!(outcomes.len(), 2);
    assert_eq!(mine.count().await.unwrap(), 2);
    assert_eq!(theirs.count().await.unwrap(), 0);
}

/// A cursor is bound to its site and collection: the same query on another site or another
/// collection refuses it as `InvalidArgument`; on its own scope it continues the walk.
pub async fn cursors_are_refused_across_sites_and_collections(h: &dyn Harness) {
    let ctx = Ctx::new(h, "sitecursor").await;
    let mine = ctx.store.site(&ctx.site).unwrap();
    let theirs = ctx.store.site(&unique_site("sitecursor")).unwrap();
    for site in [&mine, &theirs] {
        for collection in ["c", "d"] {
            let docs = site.collection::<Data>(collection).unwrap();
            for id in ["1", "2", "3"] {
                docs.create(id, &data(json!({}))).await.unwrap();
            }
        }
    }
    let query = Query::new().limit(1);
    let first = mine
        .collection::<Data>("c")
        .unwrap()
        .query(&query)
        .await
        .unwrap();
    let cursor = first.next.expect("more pages");
    let after = query.clone().after(Some(cursor));
    for (site, collection) in [(&theirs, "c"), (&mine, "d"), (&theirs, "d")] {
        let answer = site
            .collection::<Data>(collection)
            .unwrap()
            .query(&after)
            .await;
        assert!(
            matches!(answer, Err(Error::InvalidArgument(_))),
            "{} {collection}: {answer:?}",
            site.name()
        );
    }
    let second = mine
        .collection::<Data>("c")
        .unwrap()
        .query(&after)
        .await
        .unwrap();
    assert_eq!(second.items[0].id, "2");
}

/// Handles are built valid: a bad site, collection or actor is `InvalidArgument` before any
/// call, and a bad id fails the call that names it, writing nothing.
pub async fn handles_are_built_valid(h: &dyn Harness) {
    let ctx = Ctx::new(h, "sitenames").await;
    for bad in ["", "bad name", "__reserved", &"x".repeat(65)] {
        assert!(
            matches!(ctx.store.site(bad), Err(Error::InvalidArgument(_))),
            "site {bad:?}"
        );
    }
    let site = ctx.store.site(&ctx.site).unwrap();
    for bad in ["", "a#b", "__c"] {
        assert!(
            matches!(site.collection::<Data>(bad), Err(Error::InvalidArgument(_))),
            "collection {bad:?}"
        );
    }
    assert!(matches!(
        site.with_actor("tab\tbed"),
        Err(Error::InvalidArgument(_))
    ));
    let docs = site.collection::<Data>("c").unwrap();
    assert!(matches!(
        docs.create("bad\nid", &Data::new()).await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(site.count().await.unwrap(), 0);
}

/// `Store::sites` lists, by name and once each, every site holding a document — whatever
/// else the store holds (counters, delete records, index records, other cases' sites) — and
/// no site whose documents are all deleted.
pub async fn the_store_lists_the_sites_holding_documents(h: &dyn Harness) {
    let ctx = Ctx::new(h, "listed").await;
    let busy = ctx.store.site(&ctx.site).unwrap();
    let quiet = ctx.store.site(&unique_site("listed")).unwrap();
    let emptied = ctx.store.site(&unique_site("emptied")).unwrap();
    let never = unique_site("never");
    for (collection, id) in [("a", "1"), ("a", "2"), ("b", "1")] {
        let docs = busy.collection::<Data>(collection).unwrap();
        docs.create(id, &data(json!({"n": 1}))).await.unwrap();
    }
    let quiet_docs = quiet.collection::<Data>("c").unwrap();
    quiet_docs.create("only", &data(json!({}))).await.unwrap();
    let emptied_docs = emptied.collection::<Data>("c").unwrap();
    emptied_docs.create("gone", &data(json!({}))).await.unwrap();
    assert!(emptied_docs.delete("gone").await.unwrap());

    let sites = ctx.store.sites().await.unwrap();
    let mut sorted = sites.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sites, sorted, "sites come by name, once each");
    for site in [busy.name(), quiet.name()] {
        assert!(sites.iter().any(|s| s == site), "{site} missing: {sites:?}");
    }
    for site in [emptied.name(), never.as_str()] {
        assert!(!sites.iter().any(|s| s == site), "{site} listed: {sites:?}");
    }
    for site in &sites {
        assert!(
            ctx.store.site(site).is_ok(),
            "{site:?} is no valid site name"
        );
    }
}
