//! Short pages end early with a real cursor: a walk still returns every match exactly once,
//! in order.

mod support;

use docstore::query::{CursorPosition, evaluate};
use docstore::{Document, Query, Store};
use docstore_testing::{Fault, FaultyDriver, Injected, Plan};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use support::{SITE, cases, config, key, memory, runtime};

/// Every page of `query`, following `next` (at most 1 000 pages).
async fn walk(store: &Store, query: &Query) -> docstore::Result<Vec<Vec<Document>>> {
    let mut pages = Vec::new();
    let mut cursor = None;
    for _ in 0..1_000 {
        let page = store
            .query(SITE, "docs", &query.clone().after(cursor))
            .await?;
        pages.push(page.documents);
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(pages),
        }
    }
    panic!("the walk did not end");
}

/// `n` documents `d00`, `d01`, ... with `{"n": i % 4}`.
async fn documents(store: &Store, n: usize) {
    for i in 0..n {
        let data = support::data(i64::try_from(i % 4).unwrap());
        store
            .create(&key("docs", &format!("d{i:02}")), data, "setup")
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn every_page_ends_early_with_a_cursor() {
    let store = memory();
    documents(&store, 10).await;
    let faulty = std::sync::Arc::new(FaultyDriver::new(
        store.clone(),
        Plan::seeded(5).with(Fault::ShortPage, 1.0),
    ));
    let wrapped = docstore::Store::from_driver(faulty.clone());
    let query = Query::new().order_by_desc("n").limit(4);

    let pages = walk(&wrapped, &query).await.unwrap();
    let ids: Vec<String> = pages.concat().into_iter().map(|d| d.id).collect();
    let expected = walk(&store, &query).await.unwrap().concat();
    let expected: Vec<String> = expected.into_iter().map(|d| d.id).collect();
    assert_eq!(ids, expected);

    let history = faulty.history();
    let mut short = 0;
    for entry in history.entries() {
        if let Some(Injected::ShortPage { kept, of }) = entry.injected {
            assert!(kept >= 1 && kept <= of, "{history}");
            assert!(entry.outcome.to_string().ends_with("next"), "{history}");
            short += 1;
        }
    }
    // Every page was cut: none had more than one document more than the last kept.
    assert_eq!(short, history.len() - 1, "{history}");
    assert!(pages.len() > 3, "{history}");
}

#[tokio::test]
async fn a_last_page_may_point_to_an_empty_one() {
    let store = memory();
    documents(&store, 5).await;
    let query = Query::new().limit(3);
    let first = store.query(SITE, "docs", &query).await.unwrap();
    let last = query.clone().after(first.next);

    // The seed decides how a page is cut: find one that keeps the whole last page.
    let mut found = None;
    for seed in 0..200 {
        let plan = Plan::seeded(seed).on_call(1, Fault::ShortPage);
        let faulty = std::sync::Arc::new(FaultyDriver::new(store.clone(), plan));
        let wrapped = docstore::Store::from_driver(faulty.clone());
        let page = wrapped.query(SITE, "docs", &last).await.unwrap();
        if page.documents.len() == 2 {
            found = Some((page, faulty, wrapped));
            break;
        }
    }
    let (page, faulty, wrapped) = found.expect("some seed keeps the whole page");
    let history = faulty.history();
    let entry = &history.entries()[0];
    assert_eq!(entry.injected, Some(Injected::ShortPage { kept: 2, of: 2 }));
    let next = page.next.expect("a cursor after the last document");
    assert_eq!(CursorPosition::decode(&next).unwrap().id, "d04");

    let after = wrapped
        .query(SITE, "docs", &query.clone().after(Some(next)))
        .await
        .unwrap();
    assert_eq!((after.documents.len(), after.next), (0, None));
    assert_eq!(
        faulty.history().entries()[1].to_string(),
        "#2 query acme/docs limit 3 after d04 -> []"
    );
}

/// Random documents and queries: a walk through short pages returns exactly what the
/// reference evaluator returns, in its order.
#[test]
fn short_pages_lose_and_repeat_nothing() {
    let strategy = (
        prop::collection::vec(docstore::strategies::data(), 0..16),
        docstore::strategies::query(),
        any::<u64>(),
        0.0..=1.0f64,
    );
    let rt = runtime();
    let mut runner = TestRunner::new(config(cases(256)));
    let result = runner.run(&strategy, |(data, query, seed, p)| {
        rt.block_on(async {
            let store = memory();
            for (i, data) in data.into_iter().enumerate() {
                store
                    .create(&key("docs", &format!("d{i:02}")), data, "setup")
                    .await
                    .unwrap();
            }
            let everything = store.query(SITE, "docs", &Query::new()).await.unwrap();
            let expected = evaluate(
                &everything.documents,
                &Query {
                    limit: None,
                    ..query.clone()
                },
            )
            .unwrap()
            .documents;

            let faulty = std::sync::Arc::new(FaultyDriver::new(
                store,
                Plan::seeded(seed).with(Fault::ShortPage, p),
            ));
            let wrapped = docstore::Store::from_driver(faulty.clone());
            let walked = walk(&wrapped, &query).await.unwrap().concat();
            prop_assert_eq!(walked, expected, "{}", faulty.history());
            Ok(())
        })
    });
    if let Err(err) = result {
        panic!("{err}");
    }
}
