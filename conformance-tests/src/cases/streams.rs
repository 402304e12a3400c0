//! Streams: every match, in order, page by page, also while others write between pages.

use crate::Harness;
use crate::support::{Ctx, obj};
use docstore::{Data, Document, Filter, Query};
use futures_util::{StreamExt, TryStreamExt};
use serde_json::json;
use std::collections::BTreeMap;

async fn fixture(h: &dyn Harness, tag: &str, n: usize) -> (Ctx, Vec<Document>) {
    let ctx = Ctx::new(h, tag).await;
    let mut docs = Vec::new();
    for i in 0..n {
        let data = obj(json!({"n": (i * 7) % 11, "even": i % 2 == 0}));
        let key = ctx.key("s", &format!("d{i:02}"));
        docs.push(ctx.store.create(&key, data, "").await.unwrap());
    }
    (ctx, docs)
}

/// A stream gives exactly the reference evaluator's answer, whatever the page size, from
/// the start or from a cursor, and a typed stream the same values.
pub async fn streams_give_every_match_in_order(h: &dyn Harness) {
    let (ctx, docs) = fixture(h, "stream", 23).await;
    let filter = Filter::eq("even", true);
    for query in [
        Query::new(),
        Query::new().filter(filter.clone()).limit(1),
        Query::new().order_by_desc("n").limit(4),
        Query::new().filter(filter.clone()).order_by("n").limit(100),
    ] {
        let whole = Query {
            limit: None,
            ..query.clone()
        };
        let expected = docstore::query::evaluate(&docs, &whole).unwrap().documents;
        let got: Vec<Document> = ctx
            .store
            .stream(&ctx.site, "s", &query)
            .try_collect()
            .await
            .unwrap();
        assert_eq!(got, expected, "{query:?}");
        let typed = ctx
            .store
            .site(&ctx.site)
            .unwrap()
            .collection::<Data>("s")
            .unwrap();
        let ids: Vec<String> = typed
            .stream(&query)
            .map_ok(|v| v.id)
            .try_collect()
            .await
            .unwrap();
        let expected_ids: Vec<String> = expected.iter().map(|d| d.id.clone()).collect();
        assert_eq!(ids, expected_ids, "{query:?}");
    }
    // From a cursor: the rest of the walk.
    let query = Query::new().order_by("n").limit(5);
    let first = ctx.store.query(&ctx.site, "s", &query).await.unwrap();
    let rest: Vec<Document> = ctx
        .store
        .stream(&ctx.site, "s", &query.clone().after(first.next))
        .try_collect()
        .await
        .unwrap();
    let expected = docstore::query::evaluate(&docs, &Query::new().order_by("n"))
        .unwrap()
        .documents;
    assert_eq!(rest, expected[5..].to_vec());
    // An invalid query is an error item, and the stream ends there.
    let bad = Query::new().filter(Filter::eq("a..b", 1));
    let items: Vec<_> = ctx.store.stream(&ctx.site, "s", &bad).collect().await;
    assert!(
        matches!(items.as_slice(), [Err(docstore::Error::InvalidArgument(_))]),
        "{items:?}"
    );
}

/// Writes between the pages of a stream: every document present for the whole walk comes
/// exactly once, in order; none comes twice.
pub async fn streams_are_exact_under_writes_between_pages(h: &dyn Harness) {
    let (ctx, docs) = fixture(h, "streamw", 30).await;
    let query = Query::new().order_by("n").limit(3);
    let mut stream = ctx.store.stream(&ctx.site, "s", &query);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut returned = Vec::new();
    let mut step = 0;
    while let Some(doc) = stream.try_next().await.unwrap() {
        *seen.entry(doc.id.clone()).or_default() += 1;
        returned.push(doc);
        step += 1;
        // Every few items: delete one document not seen yet, add a new one.
        if step % 4 == 0 {
            let victim = format!("d{:02}", 29 - step / 4);
            ctx.store.delete(&ctx.key("s", &victim)).await.unwrap();
            let data = obj(json!({"n": step % 11, "even": false}));
            ctx.store
                .create(&ctx.key("s", &format!("new{step:02}")), data, "")
                .await
                .unwrap();
        }
    }
    let deleted: Vec<String> = (1..=step / 4).map(|k| format!("d{:02}", 29 - k)).collect();
    for doc in &docs {
        if !deleted.contains(&doc.id) {
            assert_eq!(seen.get(&doc.id), Some(&1), "{} present throughout", doc.id);
        }
    }
    assert!(seen.values().all(|n| *n == 1), "{seen:?}");
    let compiled = query.compile().unwrap();
    for pair in returned.windows(2) {
        assert!(compiled.compare(&pair[0], &pair[1]).is_lt());
    }
}

/// A stream says where it stands: a stream of the same query from its resume cursor yields
/// exactly the rest, in a walk page by page (id order) and in a sorted one (an order no index
/// follows).
pub async fn streams_resume_from_their_cursor(h: &dyn Harness) {
    let (ctx, docs) = fixture(h, "resume", 23).await;
    for query in [
        Query::new().limit(4),
        Query::new().order_by_desc("n").limit(4),
        Query::new()
            .filter(Filter::eq("even", true))
            .order_by("n")
            .limit(3),
    ] {
        let whole = Query {
            limit: None,
            ..query.clone()
        };
        let expected = docstore::query::evaluate(&docs, &whole).unwrap().documents;
        let mut stream = ctx.store.stream(&ctx.site, "s", &query);
        assert_eq!(stream.resume_cursor(), None, "{query:?}");
        let mut walked = Vec::new();
        for _ in 0..5 {
            walked.push(stream.try_next().await.unwrap().unwrap());
        }
        let cursor = stream.resume_cursor();
        drop(stream);
        assert!(cursor.is_some(), "{query:?}");
        // A page query takes the same cursor.
        let page = ctx
            .store
            .query(&ctx.site, "s", &query.clone().after(cursor.clone()))
            .await
            .unwrap();
        assert_eq!(page.documents[..], expected[5..5 + page.documents.len()]);
        let resumed = ctx
            .store
            .stream(&ctx.site, "s", &query.clone().after(cursor.clone()));
        assert_eq!(
            resumed.resume_cursor(),
            cursor,
            "before the first item: the query's"
        );
        let rest: Vec<Document> = resumed.try_collect().await.unwrap();
        walked.extend(rest);
        assert_eq!(walked, expected, "{query:?}");
    }
}

/// A sorted walk (an order no index follows) orders by the values its matches had when it
/// read them and yields each document in its latest version: one whose sort value changes
/// during the walk still comes exactly once; one deleted or changed out of the filter does
/// not come.
pub async fn a_sorted_walk_yields_each_document_once_in_its_latest_version(h: &dyn Harness) {
    let (ctx, docs) = fixture(h, "sorted", 20).await;
    let query = Query::new()
        .filter(Filter::eq("even", true))
        .order_by("n")
        .limit(2);
    let whole = Query {
        limit: None,
        ..query.clone()
    };
    let expected = docstore::query::evaluate(&docs, &whole).unwrap().documents;
    let plan = ctx.store.explain(&ctx.site, "s", &query).await.unwrap();
    assert!(plan.walk_sorts_once(), "{plan}");
    let mut stream = ctx.store.stream(&ctx.site, "s", &query);
    let first = stream.try_next().await.unwrap().unwrap();
    assert_eq!(first, expected[0]);
    // The last match moves before the first; the one before it leaves the filter; another
    // is deleted.
    let n = expected.len();
    let moved = ctx.key("s", &expected[n - 1].id);
    let moved_doc = ctx
        .store
        .update(&moved, &obj(json!({"n": -1})), "")
        .await
        .unwrap();
    let left = ctx.key("s", &expected[n - 2].id);
    ctx.store
        .update(&left, &obj(json!({"even": false})), "")
        .await
        .unwrap();
    let deleted = ctx.key("s", &expected[n - 3].id);
    ctx.store.delete(&deleted).await.unwrap();
    let rest: Vec<Document> = stream.try_collect().await.unwrap();
    let mut want: Vec<Document> = expected[1..n - 3].to_vec();
    want.push(moved_doc);
    assert_eq!(rest, want);
}

/// A collection's count comes from its counter; a filter's count from its matches.
pub async fn counts_of_a_collection_and_of_a_filter(h: &dyn Harness) {
    let (ctx, docs) = fixture(h, "counts", 13).await;
    let site = ctx.store.site(&ctx.site).unwrap();
    let s = site.collection::<Data>("s").unwrap();
    assert_eq!(s.count().await.unwrap(), 13);
    assert_eq!(
        site.collection::<Data>("empty")
            .unwrap()
            .count()
            .await
            .unwrap(),
        0
    );
    let even = docs.iter().filter(|d| d.data["even"] == true).count() as u64;
    assert_eq!(
        s.count_matching(&Filter::eq("even", true)).await.unwrap(),
        even
    );
    assert_eq!(s.count_matching(&Filter::any([])).await.unwrap(), 0);
}
