//! Declared indexes on DynamoDB: served from GSIs beyond `max_scan`, exact with index keys
//! past DynamoDB's 1 024-byte sort key limit, added and built on a table that already holds
//! documents while writes go on, never used by `consistent: true`, and refused when a
//! declaration contradicts the table. Run on both emulators.

mod support;

use aws_sdk_dynamodb::types::AttributeValue;
use docstore::index::{Index, IndexSet};
use docstore::query::{Filter, Query};
use docstore::{Document, Error, Key, Store, StoreOptions};
use docstore_dynamodb::IndexState;
use serde_json::{Value, json};
use support::{Emulator, fresh_table, obj, site, store_on};

fn with_indexes(indexes: Vec<Index>) -> StoreOptions {
    StoreOptions::default().with_indexes(IndexSet::new(indexes).unwrap())
}

/// Every document of the collection, read one by one (the reference's input).
async fn all_docs(store: &Store, site: &str, ids: &[String]) -> Vec<Document> {
    let mut docs = Vec::new();
    for id in ids {
        if let Some(doc) = store.get(&Key::new(site, "c", id).unwrap()).await.unwrap() {
            docs.push(doc);
        }
    }
    docs
}

/// Walks every page of `query` and checks it against the reference evaluator page by page.
async fn assert_exact(store: &Store, site: &str, docs: &[Document], query: Query) {
    let mut cursor = None;
    for _ in 0..1_000 {
        let mut page_query = query.clone();
        page_query.cursor = cursor.clone();
        let got = store.query(site, "c", &page_query).await.unwrap();
        let expected = page_query.compile_for(site, "c").unwrap().evaluate(docs);
        assert!(!got.exhausted_scan, "{query:?}");
        let ids = |docs: &[Document]| docs.iter().map(|d| d.id.clone()).collect::<Vec<_>>();
        assert_eq!(
            ids(&got.documents),
            ids(&expected.documents),
            "{page_query:?}"
        );
        match got.next {
            None => return,
            Some(next) => cursor = Some(next),
        }
    }
    panic!("the walk did not end");
}

async fn served_beyond_max_scan(emulator: Emulator) {
    let table = fresh_table("idx");
    let options = with_indexes(vec![
        Index::parse("c", "by_n", ["-n"]).unwrap(),
        Index::parse("c", "open_by_priority", ["status", "priority"]).unwrap(),
    ]);
    // max_scan 5: without the index these queries would stop early.
    let driver = store_on(emulator.client(), emulator.streams(), &table, 5, options);
    driver.create_table().await.unwrap();
    let store = Store::new(driver);
    let site = site("idx");
    let mut ids = Vec::new();
    for n in 0..60 {
        let id = format!("d{n:02}");
        let status = if n % 3 == 0 { "open" } else { "closed" };
        let data = obj(json!({"n": n, "status": status, "priority": n % 7}));
        store
            .create(&Key::new(&site, "c", &id).unwrap(), data, "")
            .await
            .unwrap();
        ids.push(id);
    }
    let top = Query::new().order_by_desc("n").limit(5);
    let explain = store.explain(&site, "c", &top).await.unwrap();
    assert_eq!(explain.index.as_deref(), Some("by_n"), "{explain}");
    assert!(
        !explain.strongly_consistent,
        "a GSI is eventually consistent"
    );
    assert_eq!(explain.read_limit, None, "{explain}");
    assert!(
        explain
            .key_range
            .contains("each of the index's 8 GSI partitions"),
        "explain names the fan-out: {explain}"
    );
    let page = store.query(&site, "c", &top).await.unwrap();
    let ns: Vec<Value> = page.documents.iter().map(|d| d.data["n"].clone()).collect();
    let expected: Vec<Value> = (55..60).rev().map(|n| json!(n)).collect();
    assert_eq!(ns, expected, "the true top 5, past max_scan");
    assert!(!page.exhausted_scan);

    let docs = all_docs(&store, &site, &ids).await;
    assert_exact(
        &store,
        &site,
        &docs,
        Query::new().order_by_desc("n").limit(7),
    )
    .await;
    assert_exact(
        &store,
        &site,
        &docs,
        Query::new()
            .filter(Filter::eq("status", "open").and(Filter::gte("priority", 3)))
            .order_by("priority")
            .limit(3),
    )
    .await;
    assert_exact(
        &store,
        &site,
        &docs,
        Query::new()
            .filter(Filter::eq("status", "open"))
            .order_by_desc("priority")
            .limit(4),
    )
    .await;

    // consistent: true never reads a GSI: it takes the bounded scan.
    let consistent = Query::new().order_by_desc("n").limit(5).consistent(true);
    let explain = store.explain(&site, "c", &consistent).await.unwrap();
    assert_eq!(explain.index, None, "{explain}");
    assert!(explain.strongly_consistent);
    assert!(
        store
            .query(&site, "c", &consistent)
            .await
            .unwrap()
            .exhausted_scan
    );

    // The item: the layout's original attributes, the history, and the index keys.
    let item = emulator
        .client()
        .get_item()
        .table_name(&table)
        .key(
            "pk",
            AttributeValue::S(support::document_pk(&site, "c", "d03")),
        )
        .key("sk", AttributeValue::S("d03".into()))
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    let mut names: Vec<&str> = item.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "created_at",
            "created_by",
            "data",
            "g1pk",
            "g1sk",
            "g2pk",
            "g2sk",
            "pk",
            "sk",
            "updated_at",
            "updated_by",
            "version",
            "w"
        ]
    );
    // The index's GSI partition: the document id's among the default 8.
    let partition = support::layout_shard("d03", 8);
    assert_eq!(
        item["g1pk"],
        AttributeValue::S(format!("{site}#c#by_n#{partition}"))
    );
}

/// Values whose index keys are longer than a GSI sort key may be (1 024 bytes): long strings
/// sharing a 1 500-byte prefix and big arrays. Every answer stays the reference's.
async fn keys_past_the_sort_key_limit(emulator: Emulator) {
    let table = fresh_table("idx");
    let options = with_indexes(vec![
        Index::parse("c", "by_s", ["s"]).unwrap(),
        Index::parse("c", "by_a", ["-a", "k"]).unwrap(),
    ]);
    let driver = store_on(
        emulator.client(),
        emulator.streams(),
        &table,
        10_000,
        options,
    );
    driver.create_table().await.unwrap();
    let store = Store::new(driver);
    let site = site("long");
    let prefix = "p".repeat(1_500);
    let mut ids = Vec::new();
    for n in 0..40u32 {
        let id = format!("d{n:02}");
        // Suffixes in an order unrelated to the ids; some values equal.
        let suffix = ((n * 7919) % 13).to_string();
        let array: Vec<u32> = (0..300).map(|i| if i == 299 { n % 5 } else { i }).collect();
        let data = obj(json!({"s": format!("{prefix}{suffix}"), "a": array, "k": n % 4}));
        store
            .create(&Key::new(&site, "c", &id).unwrap(), data, "")
            .await
            .unwrap();
        ids.push(id);
    }
    let docs = all_docs(&store, &site, &ids).await;
    for query in [
        Query::new().order_by("s").limit(6),
        Query::new().order_by_desc("s").limit(5),
        Query::new()
            .filter(Filter::gte("s", format!("{prefix}5")))
            .order_by("s")
            .limit(4),
        Query::new()
            .filter(Filter::eq("s", format!("{prefix}3")))
            .limit(2),
        Query::new()
            .filter(Filter::prefix("s", format!("{prefix}1")))
            .order_by("s"),
        Query::new().order_by_desc("a").order_by("k").limit(7),
    ] {
        let explain = store.explain(&site, "c", &query).await.unwrap();
        assert!(
            explain.index.is_some(),
            "served by an index: {query:?} {explain}"
        );
        assert_exact(&store, &site, &docs, query).await;
    }
}

/// An index added to a table that already holds documents, built while another store keeps
/// writing: unused until built, then exact, including the documents written before and
/// during the build.
async fn added_and_built_while_writing(emulator: Emulator) {
    let table = fresh_table("idx");
    let site = site("build");
    let plain = store_on(
        emulator.client(),
        emulator.streams(),
        &table,
        10_000,
        StoreOptions::default(),
    );
    plain.create_table().await.unwrap();
    let plain = Store::new(plain);
    let mut ids = Vec::new();
    for n in 0..30 {
        let id = format!("d{n:02}");
        plain
            .create(
                &Key::new(&site, "c", &id).unwrap(),
                obj(json!({"n": n})),
                "",
            )
            .await
            .unwrap();
        ids.push(id);
    }
    let index = Index::parse("c", "by_n", ["-n"]).unwrap();
    let indexed = store_on(
        emulator.client(),
        emulator.streams(),
        &table,
        10_000,
        with_indexes(vec![index.clone()]),
    );
    let indexed_docs = Store::new(indexed.clone());
    let top = Query::new().order_by_desc("n").limit(3);
    assert_eq!(
        indexed_docs.explain(&site, "c", &top).await.unwrap().index,
        None,
        "not on the table yet"
    );
    let added = indexed.add_index(&index).await.unwrap();
    assert_eq!((added.slot, added.state), (1, IndexState::Building));
    assert_eq!(
        indexed_docs.explain(&site, "c", &top).await.unwrap().index,
        None,
        "not built yet"
    );
    // Writes go on during the build, through a store that knows the index.
    let writer = {
        let store = indexed_docs.clone();
        let site = site.clone();
        tokio::spawn(async move {
            for n in 30..45 {
                let key = Key::new(&site, "c", format!("d{n:02}")).unwrap();
                store.create(&key, obj(json!({"n": n})), "").await.unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            store
                .update(
                    &Key::new(&site, "c", "d00").unwrap(),
                    &obj(json!({"n": 100})),
                    "",
                )
                .await
                .unwrap();
        })
    };
    let mut reports = Vec::new();
    let built = indexed
        .build_index("c", "by_n", |progress| reports.push(progress))
        .await
        .unwrap();
    writer.await.unwrap();
    assert_eq!(built.state, IndexState::Built);
    assert!(!reports.is_empty(), "progress was reported");
    // The 30 documents written before the index, less d00 when the writer's update reached it
    // first (its writer set the key).
    let updated = reports.last().unwrap().updated;
    assert!((29..=30).contains(&updated), "{reports:?}");
    let listed = indexed.list_indexes().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, IndexState::Built);
    ids.extend((30..45).map(|n| format!("d{n:02}")));
    let docs = all_docs(&indexed_docs, &site, &ids).await;
    let explain = indexed_docs.explain(&site, "c", &top).await.unwrap();
    assert_eq!(explain.index.as_deref(), Some("by_n"), "{explain}");
    let page = indexed_docs.query(&site, "c", &top).await.unwrap();
    let ns: Vec<Value> = page.documents.iter().map(|d| d.data["n"].clone()).collect();
    assert_eq!(ns, vec![json!(100), json!(44), json!(43)]);
    assert_exact(
        &indexed_docs,
        &site,
        &docs,
        Query::new().order_by_desc("n").limit(8),
    )
    .await;

    // A declaration that contradicts the table is refused, naming the index.
    let contradicting = Store::new(store_on(
        emulator.client(),
        emulator.streams(),
        &table,
        10_000,
        with_indexes(vec![Index::parse("c", "by_n", ["n"]).unwrap()]),
    ));
    let err = contradicting
        .query(&site, "c", &Query::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("by_n")),
        "{err}"
    );

    // Dropped: no longer used.
    indexed.drop_index("c", "by_n").await.unwrap();
    assert!(indexed.list_indexes().await.unwrap().is_empty());
    assert_eq!(
        indexed_docs.explain(&site, "c", &top).await.unwrap().index,
        None
    );
}

/// A build interrupted after its first page goes on from where it stopped: the table records
/// its position, and the second run gives the remaining documents their keys — and only
/// them, so a resumed build costs the remaining work.
async fn an_interrupted_build_resumes(emulator: Emulator) {
    let table = fresh_table("idx");
    let site = site("resume");
    let plain = store_on(
        emulator.client(),
        emulator.streams(),
        &table,
        10_000,
        StoreOptions::default(),
    );
    plain.create_table().await.unwrap();
    let plain = Store::new(plain);
    let writes: Vec<docstore::Write> = (0..450)
        .map(|n| {
            docstore::Write::create(
                Key::new(&site, "c", format!("d{n:03}")).unwrap(),
                obj(json!({"n": n})),
            )
        })
        .collect();
    for chunk in writes.chunks(50) {
        plain.write_all(chunk, "").await.unwrap();
    }
    let index = Index::parse("c", "by_n", ["-n"]).unwrap();
    let driver = store_on(
        emulator.client(),
        emulator.streams(),
        &table,
        10_000,
        with_indexes(vec![index.clone()]),
    );
    let store = Store::new(driver.clone());
    driver.add_index(&index).await.unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    let first = {
        let driver = driver.clone();
        tokio::spawn(async move {
            driver
                .build_index("c", "by_n", move |progress| {
                    let _ = sender.send(progress);
                    // Slow down so the test can interrupt it after the first page.
                    std::thread::sleep(std::time::Duration::from_millis(300));
                })
                .await
        })
    };
    // After the second report the first page's position is surely recorded.
    let first_page = tokio::task::spawn_blocking(move || {
        receiver.recv().unwrap();
        receiver.recv().unwrap()
    })
    .await
    .unwrap();
    first.abort();
    let _ = first.await;
    assert!(
        first_page.updated > 0 && first_page.updated < 450,
        "{first_page:?}"
    );
    let held = driver.list_indexes().await.unwrap();
    assert_eq!(held[0].state, IndexState::Building, "interrupted");
    let mut reports = Vec::new();
    let built = driver
        .build_index("c", "by_n", |progress| reports.push(progress))
        .await
        .unwrap();
    assert_eq!(built.state, IndexState::Built);
    let resumed = reports.last().unwrap();
    // 450 documents, their counter shards and the index record: a run from the start scans
    // all of them.
    let counter_shards: std::collections::BTreeSet<u32> = (0..450)
        .map(|n| support::layout_shard(&format!("d{n:03}"), 32))
        .collect();
    // (And the table's layout record.)
    let items = 450 + counter_shards.len() as u64 + 1 + 1;
    assert!(
        resumed.scanned <= items - 200,
        "the second run went on from the first one's position: {first_page:?} then {resumed:?}"
    );
    // Work done is not done again: the second run writes only the keys the first one did
    // not (a page read again after the last recorded position holds documents that have
    // their keys, and they are skipped without a write).
    assert_eq!(
        first_page.updated + resumed.updated,
        450,
        "each document is given its key once: {first_page:?} then {resumed:?}"
    );
    let page = store
        .query(&site, "c", &Query::new().order_by_desc("n").limit(3))
        .await
        .unwrap();
    let ns: Vec<Value> = page.documents.iter().map(|d| d.data["n"].clone()).collect();
    assert_eq!(ns, vec![json!(449), json!(448), json!(447)]);
    let all = store
        .query(&site, "c", &Query::new().order_by("n"))
        .await
        .unwrap();
    assert_eq!(all.documents.len(), 450, "every document has its key");
}

/// At scale, on dynoxide (moto's Query reads its whole table: too slow for 20 000 items): a
/// served query over 20 000 documents costs about the page in GSI Query requests and is never
/// partial, while the same query on a store without the index and `max_scan` 1 000 is
/// partial; every page of an ordered walk equals the reference evaluator, with writes
/// between the pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynoxide_served_queries_cost_their_page_at_20000_documents() {
    use support::requests::Requests;
    const N: usize = 20_000;
    let emulator = Emulator::Dynoxide;
    let table = fresh_table("idx");
    let requests = Requests::default();
    let client = emulator.client_with(|config| config.interceptor(requests.clone()));
    let options = with_indexes(vec![Index::parse("c", "by_n", ["-n"]).unwrap()]);
    let driver = store_on(client.clone(), emulator.streams(), &table, 1_000, options);
    driver.create_table().await.unwrap();
    let store = Store::new(driver);
    let site = site("scale");
    let ids: Vec<String> = (0..N).map(|i| format!("d{i:05}")).collect();
    for chunk in ids.chunks(50) {
        let writes: Vec<docstore::Write> = chunk
            .iter()
            .map(|id| {
                let n: usize = id[1..].parse().unwrap();
                // n is a permutation of the ids: id order says nothing about n order.
                let n = (n * 7_919) % N;
                docstore::Write::create(Key::new(&site, "c", id).unwrap(), obj(json!({"n": n})))
            })
            .collect();
        store.write_all(&writes, "").await.unwrap();
    }
    requests.take();
    let top = Query::new().order_by_desc("n").limit(20);
    let page = store.query(&site, "c", &top).await.unwrap();
    assert!(!page.exhausted_scan);
    let ns: Vec<Value> = page.documents.iter().map(|d| d.data["n"].clone()).collect();
    let expected: Vec<Value> = (N - 20..N).rev().map(|n| json!(n)).collect();
    assert_eq!(ns, expected);
    // The index's 8 GSI partitions are read once each, a chunk of its share of the page and
    // half as much again (4 items each: 21 needed, 32 read), and a partition holding more of
    // the page than that a second chunk.
    let calls = requests.take_calls();
    let queries = calls.get("Query").copied().unwrap_or(0);
    assert!(
        (8..=16).contains(&queries),
        "served: one request per partition, {calls:?}"
    );

    let unindexed = Store::new(store_on(
        client.clone(),
        emulator.streams(),
        &table,
        1_000,
        StoreOptions::default(),
    ));
    // (The table holds the index; a store that does not declare it still uses it when it is
    // built, so the unindexed figure comes from a consistent query, which never reads a GSI.)
    let partial = unindexed
        .query(&site, "c", &top.clone().consistent(true))
        .await
        .unwrap();
    assert!(partial.exhausted_scan, "max_scan 1 000 of 20 000: partial");
    requests.take();

    // Every page of an ordered walk, with writes between pages.
    let walk = Query::new().order_by_desc("n").limit(500);
    let mut cursor = None;
    let mut seen = 0;
    let mut extra = 0;
    loop {
        let mut q = walk.clone();
        q.cursor = cursor.clone();
        let got = store.query(&site, "c", &q).await.unwrap();
        assert!(!got.exhausted_scan);
        // The reference over the documents as they are now.
        let ns: Vec<i64> = got
            .documents
            .iter()
            .map(|d| d.data["n"].as_i64().unwrap())
            .collect();
        assert!(ns.windows(2).all(|w| w[0] > w[1]), "descending, no repeats");
        seen += got.documents.len();
        // Writes between pages: a document above the walk (never seen), one below (seen).
        let above = Key::new(&site, "c", format!("x{extra:03}a")).unwrap();
        store
            .create(&above, obj(json!({"n": N as i64 + extra})), "")
            .await
            .unwrap();
        let below = Key::new(&site, "c", format!("x{extra:03}b")).unwrap();
        store
            .create(&below, obj(json!({"n": -1 - extra})), "")
            .await
            .unwrap();
        extra += 1;
        match got.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    // Every original document once, and the documents written below the cursor.
    assert_eq!(seen, N + extra as usize - 1, "{extra} pages");
    let calls = requests.take_calls();
    let queries = calls.get("Query").copied().unwrap_or(0);
    assert!(
        queries <= 2 * 8 * extra as u32,
        "about one GSI request per partition and page of 500: {calls:?} for {extra} pages"
    );
}

/// On dynoxide (moto's Query reads its whole table), walks of every match read what their
/// answer needs, counted in items read: with `(status, -score)` declared, the walk of
/// `status = "open"` in id order keeps the id-order scan (the index would read and sort its
/// whole range for every page) and reads about the collection once; in `score` order without
/// the index the walk finds the matches once in id order and reads them again by id, once
/// (page by page it would read the collection for every page); with the index, in its order,
/// each match about once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynoxide_walks_read_each_match_about_once() {
    use futures_util::TryStreamExt;
    use support::requests::Requests;
    const N: usize = 2_000;
    let emulator = Emulator::Dynoxide;
    let table = fresh_table("walk");
    let requests = Requests::default();
    let client = emulator.client_with(|config| config.interceptor(requests.clone()));
    let index = Index::parse("c", "by_status_score", ["status", "-score"]).unwrap();
    let indexed = store_on(
        client.clone(),
        emulator.streams(),
        &table,
        10_000,
        with_indexes(vec![index]),
    );
    indexed.create_table().await.unwrap();
    let indexed = Store::new(indexed);
    let plain = Store::new(store_on(
        client,
        emulator.streams(),
        &table,
        10_000,
        StoreOptions::default(),
    ));
    let site = site("walk");
    let writes: Vec<docstore::Write> = (0..N)
        .map(|i| {
            let status = if i % 4 == 0 { "open" } else { "closed" };
            let data = obj(json!({"status": status, "score": (i * 7) % 100}));
            docstore::Write::create(Key::new(&site, "c", format!("t{i:05}")).unwrap(), data)
        })
        .collect();
    for chunk in writes.chunks(50) {
        indexed.write_all(chunk, "").await.unwrap();
    }
    let open = Filter::eq("status", "open");
    let matches = (N / 4) as u64;
    let in_id_order = Query::new().filter(open.clone()).limit(100);
    let by_score = in_id_order.clone().order_by_desc("score");
    // (A store without the declaration still reads a built index unless the query asks
    // for consistency, which no GSI gives.)
    let walks = [
        (
            "id order, index declared",
            &indexed,
            in_id_order.clone(),
            N as u64 + matches,
        ),
        (
            "score order, no index",
            &plain,
            by_score.clone().consistent(true),
            N as u64 + 2 * matches,
        ),
        // The GSI's entries (each page and one more) and the documents they name.
        (
            "score order, index",
            &indexed,
            by_score.clone(),
            2 * matches + 100,
        ),
    ];
    let mut answers = Vec::new();
    for (walk, store, query, bound) in walks {
        requests.take_items();
        let got: Vec<Document> = store
            .stream(&site, "c", &query)
            .try_collect()
            .await
            .unwrap();
        let read = requests.take_items();
        assert_eq!(got.len() as u64, matches, "{walk}");
        assert!(
            read <= bound,
            "{walk}: {read} items read for {matches} matches"
        );
        answers.push(got);
    }
    let ids = |docs: &[Document]| docs.iter().map(|d| d.id.clone()).collect::<Vec<_>>();
    assert_eq!(
        ids(&answers[1]),
        ids(&answers[2]),
        "same order with and without the index"
    );
}

macro_rules! on_both_emulators {
    ($($case:ident),* $(,)?) => {
        mod dynoxide {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Emulator::Dynoxide).await;
                }
            )*
        }
        mod moto {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Emulator::Moto).await;
                }
            )*
        }
    };
}

on_both_emulators!(
    served_beyond_max_scan,
    keys_past_the_sort_key_limit,
    added_and_built_while_writing,
    an_interrupted_build_resumes,
);
