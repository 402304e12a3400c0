//! Limits, cursors and walking pages.

use crate::Harness;
use crate::support::{Ctx, obj};
use docstore::{Cursor, Document, Error, Filter, Query};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

/// Walks every page of `base` with page size `limit`, checking each page's size and that
/// `next` is only set when more documents follow (or, on a backend that cannot know, that
/// the page after a full last page is empty and final).
pub(crate) async fn walk(
    ctx: &Ctx,
    collection: &str,
    base: &Query,
    limit: usize,
    knows_last: bool,
) -> Vec<Document> {
    let mut all = Vec::new();
    let mut cursor = None;
    for _ in 0..10_000 {
        let query = base.clone().limit(limit).after(cursor);
        let page = ctx
            .store
            .query(&ctx.site, collection, &query)
            .await
            .unwrap();
        assert!(page.documents.len() <= limit, "page larger than its limit");
        let empty = page.documents.is_empty();
        all.extend(page.documents);
        match page.next {
            None => return all,
            Some(next) => {
                if knows_last {
                    assert!(!empty, "a page with a next cursor must not be empty");
                }
                cursor = Some(next);
            }
        }
    }
    panic!("walk did not end");
}

async fn fixture(h: &dyn Harness, n: usize) -> Ctx {
    let ctx = Ctx::new(h, "page").await;
    for i in 0..n {
        let data = json!({"n": (i * 7) % 5, "s": format!("s{}", (i * 3) % 4), "odd": i % 2 == 1});
        let data = if i % 6 == 0 {
            json!({"s": "none"})
        } else {
            data
        };
        ctx.store
            .create(&ctx.key("p", &format!("d{i:02}")), obj(data), "")
            .await
            .unwrap();
    }
    ctx
}

fn ids(docs: &[Document]) -> Vec<&str> {
    docs.iter().map(|d| d.id.as_str()).collect()
}

/// Walking all pages with limits 1, 2, 7 and 100 gives exactly the unpaged result, for
/// several orders and filters.
pub async fn page_walks_equal_the_unpaged_result(h: &dyn Harness) {
    let ctx = fixture(h, 23).await;
    let knows_last = h.capabilities().knows_last_page;
    let queries = [
        Query::new(),
        Query::new().order_by_desc("$id"),
        Query::new().order_by("n"),
        Query::new().order_by_desc("n").order_by("s"),
        Query::new().filter(Filter::eq("odd", true)).order_by("s"),
        Query::new().filter(Filter::gte("n", 2)),
        Query::new().filter(Filter::eq("n", 99)).order_by("n"),
    ];
    for base in queries {
        let whole = ctx.store.query(&ctx.site, "p", &base).await.unwrap();
        assert!(whole.next.is_none());
        for limit in [1, 2, 7, 100] {
            let walked = walk(&ctx, "p", &base, limit, knows_last).await;
            assert_eq!(
                ids(&walked),
                ids(&whole.documents),
                "{base:?} limit {limit}"
            );
        }
    }
}

/// A page that ends exactly at the last match has no `next` (on backends that know).
pub async fn last_page_has_no_next(h: &dyn Harness) {
    let ctx = fixture(h, 6).await;
    for query in [Query::new(), Query::new().order_by("s")] {
        let over = ctx
            .store
            .query(&ctx.site, "p", &query.clone().limit(7))
            .await
            .unwrap();
        assert_eq!((over.documents.len(), over.next.is_none()), (6, true));
        let exact = ctx
            .store
            .query(&ctx.site, "p", &query.clone().limit(6))
            .await
            .unwrap();
        assert_eq!(exact.documents.len(), 6);
        match exact.next {
            None => {}
            Some(next) => {
                assert!(
                    !h.capabilities().knows_last_page,
                    "next set on the last page"
                );
                let after = ctx
                    .store
                    .query(&ctx.site, "p", &query.clone().limit(6).after(Some(next)))
                    .await
                    .unwrap();
                assert_eq!((after.documents.len(), after.next.is_none()), (0, true));
            }
        }
        let short = ctx
            .store
            .query(&ctx.site, "p", &query.limit(5))
            .await
            .unwrap();
        assert_eq!((short.documents.len(), short.next.is_some()), (5, true));
    }
}

/// A walk stays exact while documents are inserted and deleted between pages (the cursor's
/// own document included): every document present for the whole walk is returned once,
/// deleted ones never after their deletion, and the order never goes back.
pub async fn walk_is_exact_under_inserts_and_deletes(h: &dyn Harness) {
    for base in [
        Query::new().order_by("n"),
        Query::new(),
        Query::new().order_by_desc("s"),
    ] {
        let ctx = fixture(h, 20).await;
        let mut present: BTreeSet<String> = (0..20).map(|i| format!("d{i:02}")).collect();
        let mut deleted = BTreeSet::new();
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut returned: Vec<Document> = Vec::new();
        let mut cursor = None;
        let mut step = 0;
        loop {
            let query = base.clone().limit(3).after(cursor);
            let page = ctx.store.query(&ctx.site, "p", &query).await.unwrap();
            for doc in &page.documents {
                assert!(
                    !deleted.contains(&doc.id),
                    "{} returned after its deletion",
                    doc.id
                );
                *seen.entry(doc.id.clone()).or_default() += 1;
            }
            returned.extend(page.documents);
            let Some(next) = page.next else { break };
            cursor = Some(next);
            // Mutate between pages: delete one unseen and one seen document, insert two.
            step += 1;
            if let Some(victim) = present
                .iter()
                .rev()
                .find(|id| !seen.contains_key(*id))
                .cloned()
            {
                assert!(ctx.store.delete(&ctx.key("p", &victim)).await.unwrap());
                present.remove(&victim);
                deleted.insert(victim);
            }
            // Every other step, the document the cursor points at: the walk must go on
            // from its position even though it is gone.
            let cursor_doc = returned
                .last()
                .map(|d| d.id.clone())
                .filter(|_| step % 2 == 0);
            let seen_victim = cursor_doc
                .filter(|id| present.contains(id))
                .or_else(|| present.iter().find(|id| seen.contains_key(*id)).cloned());
            if let Some(victim) = seen_victim {
                assert!(ctx.store.delete(&ctx.key("p", &victim)).await.unwrap());
                present.remove(&victim);
            }
            for extra in [format!("a{step}"), format!("z{step}")] {
                ctx.store
                    .create(
                        &ctx.key("p", &extra),
                        obj(json!({"n": step % 5, "s": "new"})),
                        "",
                    )
                    .await
                    .unwrap();
            }
        }
        for id in &present {
            assert_eq!(
                seen.get(id),
                Some(&1),
                "{id} (present throughout) returned {:?} times ({base:?})",
                seen.get(id)
            );
        }
        assert!(
            seen.values().all(|n| *n == 1),
            "a document was returned twice: {seen:?}"
        );
        let compiled = base.compile().unwrap();
        for pair in returned.windows(2) {
            assert!(
                compiled.compare(&pair[0], &pair[1]).is_lt(),
                "order went back: {} then {}",
                pair[0].id,
                pair[1].id
            );
        }
    }
}

/// Text that is not a cursor of this store is `InvalidArgument`.
pub async fn garbage_cursor_is_invalid(h: &dyn Harness) {
    let ctx = fixture(h, 3).await;
    for text in ["", "garbage", "e30", "!!!!", "eyJmIjoxfQ", "%00"] {
        let query = Query::new().limit(1).after(Some(Cursor::from(text)));
        let result = ctx.store.query(&ctx.site, "p", &query).await;
        assert!(
            matches!(result, Err(Error::InvalidArgument(_))),
            "{text:?}: {result:?}"
        );
    }
}

/// A cursor from a query with another filter or order is `InvalidArgument`; the same query
/// with another page size accepts it.
pub async fn foreign_cursor_is_invalid(h: &dyn Harness) {
    let ctx = fixture(h, 8).await;
    let by_n = Query::new().order_by("n");
    let first = ctx
        .store
        .query(&ctx.site, "p", &by_n.clone().limit(2))
        .await
        .unwrap();
    let cursor = first.next.expect("more pages");
    let foreign = [
        Query::new().order_by("s"),
        Query::new().order_by_desc("n"),
        Query::new(),
        by_n.clone().filter(Filter::exists("n")),
        Query::new().order_by("n").order_by("s"),
    ];
    for query in foreign {
        let query = query.limit(2).after(Some(cursor.clone()));
        let result = ctx.store.query(&ctx.site, "p", &query).await;
        assert!(
            matches!(result, Err(Error::InvalidArgument(_))),
            "{query:?}: {result:?}"
        );
    }
    let resized = ctx
        .store
        .query(&ctx.site, "p", &by_n.limit(5).after(Some(cursor)))
        .await
        .unwrap();
    assert_eq!(resized.documents.len(), 5);
    assert!(
        ids(&resized.documents)
            .iter()
            .all(|id| !ids(&first.documents).contains(id))
    );
}

/// Cursors keep a stored `null` sort value apart from a missing field: walks over ties of
/// both end, and return every document once, in either direction.
pub async fn walks_over_null_and_missing_sort_values(h: &dyn Harness) {
    let ctx = Ctx::new(h, "page").await;
    for (id, data) in [
        ("a", json!({"k": null})),
        ("b", json!({"k": null})),
        ("c", json!({})),
        ("d", json!({"k": false})),
        ("e", json!({"k": null})),
        ("f", json!({"j": null})),
    ] {
        ctx.store
            .create(&ctx.key("p", id), obj(data), "")
            .await
            .unwrap();
    }
    let knows_last = h.capabilities().knows_last_page;
    let cases = [
        (Query::new().order_by("k"), ["c", "f", "a", "b", "e", "d"]),
        (
            Query::new().order_by_desc("k"),
            ["d", "a", "b", "e", "c", "f"],
        ),
        (
            Query::new().order_by("j").order_by_desc("k"),
            ["d", "a", "b", "e", "c", "f"],
        ),
    ];
    for (query, expected) in cases {
        for limit in [1, 2, 4] {
            let walked = walk(&ctx, "p", &query, limit, knows_last).await;
            assert_eq!(ids(&walked), expected, "{query:?} limit {limit}");
        }
    }
}

/// The largest page size a client can send is served like "no limit".
pub async fn huge_limit_is_served(h: &dyn Harness) {
    let ctx = fixture(h, 5).await;
    for query in [
        Query::new(),
        Query::new().filter(Filter::exists("s")),
        Query::new().order_by("n"),
    ] {
        let page = ctx
            .store
            .query(&ctx.site, "p", &query.clone().limit(usize::MAX))
            .await
            .unwrap();
        assert_eq!(
            (page.documents.len(), page.next.is_none()),
            (5, true),
            "{query:?}"
        );
    }
}
