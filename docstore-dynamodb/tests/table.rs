//! The raw table layout (read back with the plain SDK), the requests each call costs (counted
//! by an SDK interceptor), the `max_scan` and 64 MiB stops with their warning, and the
//! construction and table errors. Run on both emulators.

mod support;

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Put, TransactWriteItem};
use aws_sdk_dynamodbstreams::types::{AttributeValue as StreamValue, ShardIteratorType};
use docstore::config::{CounterMode, DynamoDbConfig};
use docstore::query::Filter;
use docstore::{Error, Key, ManualClock, Query, Store, StoreOptions};
use docstore_dynamodb::{DynamoStore, MAX_DOC_BYTES_LIMIT};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use support::requests::{Requests, counts};
use support::{Emulator, ensure_table, obj, site, store_on};
use tokio::sync::OnceCell;

static DYNOXIDE: OnceCell<String> = OnceCell::const_new();
static MOTO: OnceCell<String> = OnceCell::const_new();

type Item = HashMap<String, AttributeValue>;

async fn raw_item(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: &str,
    sk: &str,
) -> Option<Item> {
    client
        .get_item()
        .table_name(table)
        .key("pk", AttributeValue::S(pk.into()))
        .key("sk", AttributeValue::S(sk.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
}

/// The sort key of the counter shard that the creates and deletes of document `id` move, with
/// the default 32 shards.
fn counter_sort_key(collection: &str, id: &str) -> String {
    match support::layout_shard(id, 32) {
        0 => collection.to_owned(),
        shard => format!("{collection}#{shard}"),
    }
}

fn check_write_id(s: &str) {
    assert_eq!(s.len(), 32, "w is 128 random bits in hex: {s}");
    assert!(s.chars().all(|c| c.is_ascii_hexdigit()), "{s}");
}

/// Every attribute, with its type and value; write identities are checked apart (random):
/// `w` shows as `<w>`, the history `wh` as `<n ids>`.
fn shape(item: &Item) -> BTreeMap<String, String> {
    item.iter()
        .map(|(name, value)| {
            let shown = match value {
                AttributeValue::S(s) if name == "w" => {
                    check_write_id(s);
                    "S <w>".to_owned()
                }
                AttributeValue::L(ids) if name == "wh" => {
                    for id in ids {
                        check_write_id(id.as_s().expect("wh holds strings"));
                    }
                    format!("L <{} ids>", ids.len())
                }
                // The JSON text with its keys sorted, so that the check holds whether or
                // not serde_json's `preserve_order` is on in the build (it keeps insertion
                // order then); number text (1.0, u64::MAX) is kept as stored.
                AttributeValue::S(s) if name == "data" => {
                    let parsed: serde_json::Value = serde_json::from_str(s).expect("data is JSON");
                    format!("S {}", docstore::query::canonical_json(&parsed))
                }
                AttributeValue::S(s) => format!("S {s}"),
                AttributeValue::N(n) => format!("N {n}"),
                other => format!("unexpected {other:?}"),
            };
            (name.clone(), shown)
        })
        .collect()
}

fn expected(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

async fn layout_is_the_seed_layout(emulator: Emulator, cell: &'static OnceCell<String>) {
    let table = ensure_table(cell, emulator, "table").await;
    let clock = Arc::new(ManualClock::new(1_700_000_000_000_000_123));
    let options = StoreOptions::default().with_clock(clock.clone());
    let store = Store::new(store_on(
        emulator.client(),
        emulator.streams(),
        &table,
        10_000,
        options,
    ));
    let raw = emulator.client();
    let site = site("layout");
    let pk = support::document_pk(&site, "tickets", "T-1");
    let key = Key::new(&site, "tickets", "T-1").unwrap();

    store
        .create(
            &key,
            obj(json!({"title": "é \"q\"", "n": 1.0, "big": u64::MAX})),
            "alice",
        )
        .await
        .unwrap();
    let item = raw_item(&raw, &table, &pk, "T-1").await.unwrap();
    let data = r#"{"big":18446744073709551615,"n":1.0,"title":"é \"q\""}"#;
    let created = expected(&[
        ("pk", &format!("S {pk}")),
        ("sk", "S T-1"),
        ("data", &format!("S {data}")),
        ("created_at", "N 1700000000000000123"),
        ("updated_at", "N 1700000000000000123"),
        ("created_by", "S alice"),
        ("updated_by", "S alice"),
        ("version", "N 1"),
        ("w", "S <w>"),
    ]);
    assert_eq!(shape(&item), created);
    let first_w = item["w"].clone();

    clock.advance(5);
    store
        .update_if(&key, &obj(json!({"n": null})), 1, "bob")
        .await
        .unwrap();
    let item = raw_item(&raw, &table, &pk, "T-1").await.unwrap();
    let mut after_update_if = created.clone();
    after_update_if.insert(
        "data".into(),
        r#"S {"big":18446744073709551615,"title":"é \"q\""}"#.into(),
    );
    after_update_if.insert("updated_at".into(), "N 1700000000000000128".into());
    after_update_if.insert("updated_by".into(), "S bob".into());
    after_update_if.insert("version".into(), "N 2".into());
    after_update_if.insert("wh".into(), "L <1 ids>".into());
    assert_eq!(shape(&item), after_update_if);
    assert_ne!(item["w"], first_w, "each call has its own identity");
    assert_eq!(
        item["wh"],
        AttributeValue::L(vec![first_w]),
        "the earlier write"
    );

    clock.advance(5);
    store
        .put(&key, obj(json!({"p": true})), "carol")
        .await
        .unwrap();
    let item = raw_item(&raw, &table, &pk, "T-1").await.unwrap();
    let mut after_put = after_update_if.clone();
    after_put.insert("wh".into(), "L <2 ids>".into());
    after_put.insert("data".into(), r#"S {"p":true}"#.into());
    after_put.insert("updated_at".into(), "N 1700000000000000133".into());
    after_put.insert("updated_by".into(), "S carol".into());
    after_put.insert("version".into(), "N 3".into());
    assert_eq!(shape(&item), after_put);

    store
        .update(&key, &obj(json!({"u": [1]})), "dave")
        .await
        .unwrap();
    let item = raw_item(&raw, &table, &pk, "T-1").await.unwrap();
    assert_eq!(shape(&item)["wh"], "L <3 ids>");
    assert_eq!(item["version"], AttributeValue::N("4".into()));
    assert_eq!(
        item["data"],
        AttributeValue::S(r#"{"p":true,"u":[1]}"#.into())
    );

    // The history keeps the last 16 writes: w and 15 earlier ones.
    for _ in 0..20 {
        store.update(&key, &obj(json!({})), "dave").await.unwrap();
    }
    let item = raw_item(&raw, &table, &pk, "T-1").await.unwrap();
    assert_eq!(shape(&item)["wh"], "L <15 ids>");

    // A put that creates: created_* from this call, version 1, its own w.
    let other = Key::new(&site, "notes", "N-1").unwrap();
    store.put(&other, obj(json!({})), "erin").await.unwrap();
    let item = raw_item(
        &raw,
        &table,
        &support::document_pk(&site, "notes", "N-1"),
        "N-1",
    )
    .await
    .unwrap();
    assert_eq!(item["created_by"], AttributeValue::S("erin".into()));
    assert_eq!(item["version"], AttributeValue::N("1".into()));
    assert_eq!(shape(&item)["w"], "S <w>");
    assert!(!item.contains_key("wh"));

    // Counters: the layout's original attributes on the shard the document's id hashes to,
    // and `w`, the identity of the last create or delete that moved it in the same
    // transaction (exact counters).
    let (tickets, notes) = (
        counter_sort_key("tickets", "T-1"),
        counter_sort_key("notes", "N-1"),
    );
    let counters_of = |id: &str| support::counter_pk(&site, support::layout_shard(id, 32));
    let (tickets_pk, notes_pk) = (counters_of("T-1"), counters_of("N-1"));
    let counter = |n: &str, sort_key: &str| {
        let counters = if sort_key == tickets {
            &tickets_pk
        } else {
            &notes_pk
        };
        expected(&[
            ("pk", &format!("S {counters}")),
            ("sk", &format!("S {sort_key}")),
            ("n", &format!("N {n}")),
            ("w", "S <w>"),
        ])
    };
    assert_eq!(
        shape(&raw_item(&raw, &table, &tickets_pk, &tickets).await.unwrap()),
        counter("1", &tickets)
    );
    assert_eq!(
        shape(&raw_item(&raw, &table, &notes_pk, &notes).await.unwrap()),
        counter("1", &notes)
    );
    assert!(store.delete(&key).await.unwrap());
    assert!(raw_item(&raw, &table, &pk, "T-1").await.is_none());
    assert_eq!(
        shape(&raw_item(&raw, &table, &tickets_pk, &tickets).await.unwrap()),
        counter("0", &tickets)
    );
    assert_eq!(
        store.collections(&site).await.unwrap(),
        vec![("notes".to_owned(), 1)]
    );
    assert_eq!(store.count(&site).await.unwrap(), 1);
}

/// The requests each call sends, in both counter modes: exact counters put creates and
/// deletes in one `TransactWriteItems` with the counter; fast counters send the counter `ADD`
/// after the document write. Every delete is a `TransactWriteItems` with its stamp and its delete
/// record; a delete of a revision the store wrote or read last sends only that, any other
/// first reads the document and that record in one `BatchGetItem`. `put` reads first (it
/// needs the history and the revision). The store's read of the table's index records (at
/// most every 5 s) is counted apart.
async fn each_call_costs_its_minimum(emulator: Emulator, cell: &'static OnceCell<String>) {
    let table = ensure_table(cell, emulator, "table").await;
    let requests = Requests::default();
    let client = emulator.client_with(|config| config.interceptor(requests.clone()));
    for mode in [CounterMode::Exact, CounterMode::Fast] {
        let store = Store::new(quiet_store(emulator, client.clone(), &table, mode));
        let site = site("costs");
        let key = |id: &str| Key::new(&site, "c", id).unwrap();
        let exact = mode == CounterMode::Exact;
        let counted: &[(&str, u32)] = if exact {
            &[("TransactWriteItems", 1)]
        } else {
            &[("PutItem", 1), ("UpdateItem", 1)]
        };
        // A delete of the revision this store wrote last goes at once, with its stamp (the
        // change feed's actor and time) and its record (the store draws each write's
        // identity for its retries; the record says whether an earlier try of it deleted) in
        // one transaction; with fast counters the counter `ADD` follows it.
        let deleted: &[(&str, u32)] = if exact {
            &[("TransactWriteItems", 1)]
        } else {
            &[("TransactWriteItems", 1), ("UpdateItem", 1)]
        };
        // A delete of a document this store has not seen reads it and its record together
        // first.
        let mut deleted_unseen = counts(deleted);
        deleted_unseen.insert("BatchGetItem".into(), 1);

        store.create(&key("a"), obj(json!({})), "").await.unwrap();
        assert_eq!(requests.take_calls(), counts(counted), "{mode:?} create");
        store.get(&key("a")).await.unwrap();
        assert_eq!(requests.take_calls(), counts(&[("GetItem", 1)]), "get");
        store
            .update_if(&key("a"), &obj(json!({"x": 1})), 1, "")
            .await
            .unwrap();
        let read_write = counts(&[("GetItem", 1), ("PutItem", 1)]);
        assert_eq!(
            requests.take_calls(),
            read_write,
            "update_if: read, one write"
        );
        store
            .update(&key("a"), &obj(json!({"y": 1})), "")
            .await
            .unwrap();
        assert_eq!(requests.take_calls(), read_write, "update");
        store.put(&key("a"), obj(json!({})), "").await.unwrap();
        assert_eq!(
            requests.take_calls(),
            read_write,
            "put of an existing document"
        );
        store.put(&key("b"), obj(json!({})), "").await.unwrap();
        let mut expected = counts(counted);
        *expected.entry("GetItem".into()).or_default() += 1;
        assert_eq!(requests.take_calls(), expected, "{mode:?} put that creates");
        store.delete(&key("b")).await.unwrap();
        assert_eq!(requests.take_calls(), counts(deleted), "{mode:?} delete");
        assert!(!store.delete(&key("b")).await.unwrap());
        assert_eq!(
            requests.take_calls(),
            counts(&[("BatchGetItem", 1)]),
            "delete of nothing"
        );
        store.delete_if(&key("a"), 4).await.unwrap();
        assert_eq!(requests.take_calls(), counts(deleted), "{mode:?} delete_if");
        let other = Store::new(quiet_store(emulator, client.clone(), &table, mode));
        other.create(&key("c"), obj(json!({})), "").await.unwrap();
        requests.take_calls();
        assert!(store.delete(&key("c")).await.unwrap());
        assert_eq!(
            requests.take_calls(),
            deleted_unseen,
            "{mode:?} delete of a document another store wrote"
        );
        // Changed by another store since this one wrote it: the transaction is refused and
        // nothing else is written; then the delete reads as for a document it never saw.
        store.create(&key("d"), obj(json!({})), "").await.unwrap();
        other
            .update(&key("d"), &obj(json!({"x": 1})), "")
            .await
            .unwrap();
        requests.take_calls();
        assert!(store.delete(&key("d")).await.unwrap());
        let mut refused_first = deleted_unseen.clone();
        *refused_first
            .entry("TransactWriteItems".into())
            .or_default() += 1;
        assert_eq!(
            requests.take_calls(),
            refused_first,
            "{mode:?} delete of a document changed since this store wrote it"
        );
        assert_eq!(store.get(&key("d")).await.unwrap(), None);
        // A batch's writes are known revisions too.
        store.create(&key("e"), obj(json!({})), "").await.unwrap();
        let batch = [docstore::Write::update_if(
            key("e"),
            obj(json!({"e": 2})),
            1,
        )];
        store.write_all(&batch, "").await.unwrap();
        requests.take_calls();
        assert!(store.delete(&key("e")).await.unwrap());
        assert_eq!(
            requests.take_calls(),
            counts(deleted),
            "{mode:?} delete after a batch"
        );
        // One Query per counter partition, and one per partition of the site's expiry
        // markers (the due ones are subtracted: `docs/contract.md`, "Expiry").
        let counter_reads = counts(&[("Query", 2 * support::PARTITIONS)]);
        store.collections(&site).await.unwrap();
        assert_eq!(requests.take_calls(), counter_reads, "collections");
        store.count(&site).await.unwrap();
        assert_eq!(requests.take_calls(), counter_reads, "count");

        let config = docstore::config::DynamoDbConfig {
            counters: mode,
            ..support::config(&table, 10_000)
        };
        let quota = Store::new(
            DynamoStore::from_client(
                client.clone(),
                emulator.streams(),
                &config,
                StoreOptions::default()
                    .with_max_docs_per_site(Some(100))
                    .with_sweep_interval(None),
            )
            .unwrap(),
        );
        quota.create(&key("q"), obj(json!({})), "").await.unwrap();
        let mut expected = counts(counted);
        expected.insert("Query".into(), 2 * support::PARTITIONS);
        assert_eq!(
            requests.take_calls(),
            expected,
            "{mode:?} create with a quota"
        );
    }
}

/// A store on `table` with `counters` and no background sweep, whose reads would be counted
/// with the calls'.
fn quiet_store(
    emulator: Emulator,
    client: aws_sdk_dynamodb::Client,
    table: &str,
    counters: CounterMode,
) -> DynamoStore {
    let config = DynamoDbConfig {
        counters,
        ..support::config_for(emulator, table)
    };
    let quiet = StoreOptions::default().with_sweep_interval(None);
    DynamoStore::from_client(client, emulator.streams(), &config, quiet).unwrap()
}

/// A store on `table` (`max_scan` 4) whose requests `Requests` counts: the calls' own, with
/// no background sweep (its listing of the sites with expiring documents is a `Query` that
/// could land between a call's counts: seen once on a loaded moto, 3 Queries for 2 pages).
fn counted_store(emulator: Emulator, table: &str) -> (Store, Requests) {
    let requests = Requests::default();
    let client = emulator.client_with(|config| config.interceptor(requests.clone()));
    let quiet = StoreOptions::default().with_sweep_interval(None);
    let driver = store_on(client, emulator.streams(), table, 4, quiet);
    (Store::new(driver), requests)
}

/// A table of one partition, made apart from the binary's shared one (whose collections are
/// spread over [`support::PARTITIONS`]): the layout of a table written before partitions.
async fn one_partition_table(emulator: Emulator) -> String {
    static TABLES: [OnceCell<String>; 2] = [OnceCell::const_new(), OnceCell::const_new()];
    let cell = &TABLES[usize::from(matches!(emulator, Emulator::Moto))];
    cell.get_or_init(|| async {
        let table = support::fresh_table("one");
        let config = DynamoDbConfig {
            collection_partitions: 1,
            ..support::config_for(emulator, &table)
        };
        let store = DynamoStore::from_client(
            emulator.client(),
            emulator.streams(),
            &config,
            StoreOptions::default(),
        )
        .unwrap();
        store.create_table().await.unwrap();
        table
    })
    .await
    .clone()
}

/// On one partition, a page in id order is one `Query` (two when a filter matches rarely).
async fn id_order_queries_on_one_partition_read_only_the_pages_they_need(
    emulator: Emulator,
    _cell: &'static OnceCell<String>,
) {
    let table = one_partition_table(emulator).await;
    // max_scan 4: id-order queries are not bounded by it.
    let (store, requests) = counted_store(emulator, &table);
    let site = site("pages");
    for i in 0..30 {
        let key = Key::new(&site, "c", format!("d{i:02}")).unwrap();
        store
            .create(&key, obj(json!({"even": i % 2 == 0, "i": i})), "")
            .await
            .unwrap();
    }
    requests.take_calls();
    let ids = |page: &docstore::Page| {
        page.documents
            .iter()
            .map(|d| d.id.clone())
            .collect::<Vec<_>>()
    };

    let first = store
        .query(&site, "c", &Query::new().limit(5))
        .await
        .unwrap();
    assert_eq!(ids(&first), ["d00", "d01", "d02", "d03", "d04"]);
    assert!(first.next.is_some() && !first.exhausted_scan);
    assert_eq!(
        requests.take_calls(),
        counts(&[("Query", 1)]),
        "first page: one request"
    );
    let second = store
        .query(&site, "c", &Query::new().limit(5).after(first.next))
        .await
        .unwrap();
    assert_eq!(ids(&second), ["d05", "d06", "d07", "d08", "d09"]);
    assert_eq!(
        requests.take_calls(),
        counts(&[("Query", 1)]),
        "a later page starts at its cursor"
    );

    let down = Query::new().order_by_desc("$id").limit(3);
    let page = store.query(&site, "c", &down).await.unwrap();
    assert_eq!(ids(&page), ["d29", "d28", "d27"]);
    let page = store
        .query(&site, "c", &down.clone().after(page.next))
        .await
        .unwrap();
    assert_eq!(ids(&page), ["d26", "d25", "d24"]);
    assert_eq!(
        requests.take_calls(),
        counts(&[("Query", 2)]),
        "descending pages"
    );

    let last = store
        .query(&site, "c", &Query::new().limit(10).after(second.next))
        .await
        .unwrap();
    let last = store
        .query(&site, "c", &Query::new().limit(10).after(last.next))
        .await
        .unwrap();
    assert_eq!(ids(&last).len(), 10);
    assert!(
        last.next.is_none(),
        "the last full page is known to be the last"
    );

    assert_eq!(
        requests.take_calls(),
        counts(&[("Query", 2)]),
        "two later pages"
    );

    // A selective filter: the first page stops at its one match, the next walks the rest.
    let three = Query::new().filter(Filter::eq("i", 3)).limit(1);
    let page = store.query(&site, "c", &three).await.unwrap();
    assert_eq!(ids(&page), ["d03"]);
    assert!(
        page.next.is_some(),
        "full, more unread: the page cannot know it is the last"
    );
    assert_eq!(
        requests.take_calls(),
        counts(&[("Query", 1)]),
        "one DynamoDB page of 16 items"
    );
    let page = store
        .query(&site, "c", &three.clone().after(page.next))
        .await
        .unwrap();
    assert!(page.documents.is_empty() && page.next.is_none());
    assert_eq!(
        requests.take_calls(),
        counts(&[("Query", 2)]),
        "16 then 32 items: the rest"
    );
    // A filter that matches often: one DynamoDB page shows that more follow.
    let odd = store
        .query(
            &site,
            "c",
            &Query::new().filter(Filter::eq("even", false)).limit(3),
        )
        .await
        .unwrap();
    assert_eq!(ids(&odd), ["d01", "d03", "d05"]);
    assert!(odd.next.is_some());
    assert_eq!(requests.take_calls(), counts(&[("Query", 1)]));

    let even = store
        .query(
            &site,
            "c",
            &Query::new().filter(Filter::eq("even", false)).limit(20),
        )
        .await
        .unwrap();
    assert_eq!(even.documents.len(), 15);
    assert!(even.next.is_none() && !even.exhausted_scan);
}

/// On a table of [`support::PARTITIONS`] partitions a query in id order reads every partition
/// of the collection and merges them: pages in id order both ways, cursors, filters, `next`
/// exact at the end, and a page costs one `Query` per partition when each partition's share
/// holds it.
async fn id_order_queries_merge_the_partitions(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    let table = ensure_table(cell, emulator, "table").await;
    let (store, requests) = counted_store(emulator, &table);
    let site = site("merge");
    let all: Vec<String> = (0..60).map(|i| format!("d{i:02}")).collect();
    let used: std::collections::BTreeSet<u32> = all
        .iter()
        .map(|id| support::layout_shard(id, support::PARTITIONS))
        .collect();
    assert_eq!(
        used.len() as u32,
        support::PARTITIONS,
        "every partition holds some"
    );
    for (i, id) in all.iter().enumerate() {
        let key = Key::new(&site, "c", id).unwrap();
        store
            .create(&key, obj(json!({"even": i % 2 == 0})), "")
            .await
            .unwrap();
    }
    requests.take_calls();
    let ids = |page: &docstore::Page| {
        page.documents
            .iter()
            .map(|d| d.id.clone())
            .collect::<Vec<_>>()
    };

    let mut seen = Vec::new();
    let mut next = None;
    loop {
        let page = store
            .query(&site, "c", &Query::new().limit(7).after(next))
            .await
            .unwrap();
        seen.extend(ids(&page));
        next = page.next;
        if next.is_none() {
            break;
        }
    }
    assert_eq!(seen, all, "every document once, in id order");
    let first = store
        .query(&site, "c", &Query::new().limit(5))
        .await
        .unwrap();
    assert_eq!(ids(&first), all[..5]);
    requests.take_calls();
    store
        .query(&site, "c", &Query::new().limit(5).after(first.next))
        .await
        .unwrap();
    assert_eq!(
        requests.take_calls(),
        counts(&[("Query", support::PARTITIONS)]),
        "a page: one request per partition"
    );

    let down = Query::new().order_by_desc("$id").limit(4);
    let page = store.query(&site, "c", &down).await.unwrap();
    assert_eq!(ids(&page), ["d59", "d58", "d57", "d56"]);
    let page = store
        .query(&site, "c", &down.clone().after(page.next))
        .await
        .unwrap();
    assert_eq!(ids(&page), ["d55", "d54", "d53", "d52"]);

    let odd = Query::new().filter(Filter::eq("even", false)).limit(40);
    let page = store.query(&site, "c", &odd).await.unwrap();
    assert_eq!(page.documents.len(), 30);
    assert!(page.next.is_none(), "everything read: the page is the last");
    let whole = store.query(&site, "c", &Query::new()).await.unwrap();
    assert_eq!(ids(&whole), all);
    assert!(whole.next.is_none());
}

/// A partition holding far more than its share of a page (ids that hash unevenly) is read
/// once for its share and once for everything the page still takes, alongside one read of
/// each other partition: never a run of ever smaller reads (`docs/contract.md`, "Partitions
/// on DynamoDB").
async fn an_uneven_partition_costs_a_page_one_more_query(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    let table = ensure_table(cell, emulator, "table").await;
    let (store, requests) = counted_store(emulator, &table);
    let site = site("uneven");
    // 60 ids of partition 3 and one of each other partition.
    let mut all: Vec<String> = Vec::new();
    let mut others = std::collections::BTreeSet::new();
    for id in (0..2000).map(|i| format!("d{i:04}")) {
        let partition = support::layout_shard(&id, support::PARTITIONS);
        let crowded = all.len() - others.len() < 60;
        if (partition == 3 && crowded) || (partition != 3 && others.insert(partition)) {
            all.push(id);
        }
    }
    assert_eq!(all.len(), 60 + support::PARTITIONS as usize - 1);
    for id in &all {
        let key = Key::new(&site, "c", id).unwrap();
        store.create(&key, obj(json!({})), "").await.unwrap();
    }
    requests.take_calls();

    let mut seen = Vec::new();
    let mut next = None;
    loop {
        let page = store
            .query(&site, "c", &Query::new().limit(40).after(next))
            .await
            .unwrap();
        let queries = requests.take_calls().get("Query").copied().unwrap_or(0);
        assert!(
            queries <= support::PARTITIONS + 1,
            "a page of 40 sent {queries} Queries"
        );
        seen.extend(page.documents.iter().map(|d| d.id.clone()));
        next = page.next;
        if next.is_none() {
            break;
        }
    }
    assert_eq!(seen, all, "every document once, in id order");
    let down = Query::new().order_by_desc("$id").limit(30);
    let page = store.query(&site, "c", &down).await.unwrap();
    let newest: Vec<String> = all.iter().rev().take(30).cloned().collect();
    let ids: Vec<String> = page.documents.iter().map(|d| d.id.clone()).collect();
    assert_eq!(ids, newest);
    assert!(requests.take_calls()["Query"] <= support::PARTITIONS + 1);
}

/// The table's partition count is recorded by the first store to use an empty table, and a
/// table holding items but no record — written before partitions — keeps one partition
/// whatever later stores are configured with (docs/contract.md, "Partitions on DynamoDB").
async fn a_table_written_before_partitions_keeps_one_partition(
    emulator: Emulator,
    _cell: &'static OnceCell<String>,
) {
    let table = support::fresh_table("legacy");
    let with_partitions = |collection_partitions| {
        let config = DynamoDbConfig {
            collection_partitions,
            ..support::config_for(emulator, &table)
        };
        DynamoStore::from_client(
            emulator.client(),
            emulator.streams(),
            &config,
            StoreOptions::default(),
        )
        .unwrap()
    };
    with_partitions(3).create_table().await.unwrap();
    let raw = emulator.client();
    let record = |name: &str, value: &str| (name.to_owned(), AttributeValue::S(value.into()));
    let layout_key: HashMap<String, AttributeValue> =
        [record("pk", "__docstore#layout"), record("sk", "table")].into();
    let recorded = raw
        .get_item()
        .table_name(&table)
        .set_key(Some(layout_key.clone()))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    assert_eq!(
        recorded.item.unwrap()["partitions"],
        AttributeValue::N("3".into()),
        "a new table records the creating store's count"
    );
    // Back to a table written before partitions: no record, one document of the old layout.
    raw.delete_item()
        .table_name(&table)
        .set_key(Some(layout_key.clone()))
        .send()
        .await
        .unwrap();
    let site = site("legacy");
    let old = with_partitions(1);
    let old_store = Store::new(old);
    let ids: Vec<String> = (0..12).map(|n| format!("o-{n}")).collect();
    old_store
        .create(&Key::new(&site, "c", &ids[0]).unwrap(), obj(json!({})), "")
        .await
        .unwrap();
    raw.delete_item()
        .table_name(&table)
        .set_key(Some(layout_key))
        .send()
        .await
        .unwrap();

    let store = Store::new(with_partitions(8));
    for id in &ids[1..] {
        let key = Key::new(&site, "c", id).unwrap();
        store.create(&key, obj(json!({})), "").await.unwrap();
    }
    for id in &ids {
        assert!(
            raw_item(&raw, &table, &format!("{site}#c"), id)
                .await
                .is_some(),
            "{id} is under the one partition"
        );
        let key = Key::new(&site, "c", id).unwrap();
        assert!(store.get(&key).await.unwrap().is_some());
    }
    let listed = store.query(&site, "c", &Query::new()).await.unwrap();
    assert_eq!(listed.documents.len(), ids.len());
    assert_eq!(store.count(&site).await.unwrap(), ids.len() as u64);
}

/// `ExclusiveStartKey` is the cursor's id, which need not exist any more.
async fn id_order_cursor_survives_deleting_its_document(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    let table = ensure_table(cell, emulator, "table").await;
    let store = Store::new(store_on(
        emulator.client(),
        emulator.streams(),
        &table,
        10,
        StoreOptions::default(),
    ));
    let site = site("cursor");
    for i in 0..9 {
        let key = Key::new(&site, "c", format!("d{i}")).unwrap();
        store.create(&key, obj(json!({})), "").await.unwrap();
    }
    for (query, expected) in [
        (Query::new().limit(3), ["d3", "d4", "d5"]),
        (
            Query::new().order_by_desc("$id").limit(3),
            ["d5", "d4", "d3"],
        ),
    ] {
        let page = store.query(&site, "c", &query).await.unwrap();
        let last = page.documents.last().unwrap().id.clone();
        assert!(
            store
                .delete(&Key::new(&site, "c", &last).unwrap())
                .await
                .unwrap()
        );
        let page = store
            .query(&site, "c", &query.clone().after(page.next))
            .await
            .unwrap();
        let ids: Vec<_> = page.documents.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, expected, "after deleting {last}");
        let key = Key::new(&site, "c", &last).unwrap();
        store.create(&key, obj(json!({})), "").await.unwrap();
    }
}

/// A subscriber that keeps what it logs, for the current thread.
fn capture_logs() -> (Arc<Mutex<Vec<u8>>>, tracing::subscriber::DefaultGuard) {
    #[derive(Clone)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let logs = Arc::new(Mutex::new(Vec::new()));
    let sink = Sink(logs.clone());
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    (logs, tracing::subscriber::set_default(subscriber))
}

fn text(logs: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8(logs.lock().unwrap().clone()).unwrap()
}

async fn max_scan_stops_other_orders_with_a_warning(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    let table = ensure_table(cell, emulator, "table").await;
    let store = Store::new(store_on(
        emulator.client(),
        emulator.streams(),
        &table,
        10,
        StoreOptions::default(),
    ));
    let site = site("scan");
    for i in 0..25 {
        let key = Key::new(&site, "big", format!("d{i:02}")).unwrap();
        store
            .create(&key, obj(json!({"n": 100 - i})), "")
            .await
            .unwrap();
    }
    for i in 0..10 {
        let key = Key::new(&site, "ten", format!("d{i:02}")).unwrap();
        store
            .create(&key, obj(json!({"n": 100 - i})), "")
            .await
            .unwrap();
    }
    let (logs, _guard) = capture_logs();
    let by_n = Query::new().order_by("n");

    let page = store.query(&site, "ten", &by_n).await.unwrap();
    assert_eq!(page.documents.len(), 10);
    assert!(
        !page.exhausted_scan,
        "exactly max_scan documents: all were read"
    );
    assert!(
        !text(&logs).contains("max_scan"),
        "no warning: {}",
        text(&logs)
    );

    let page = store.query(&site, "big", &by_n).await.unwrap();
    assert!(page.exhausted_scan);
    let ids: Vec<_> = page.documents.iter().map(|d| d.id.as_str()).collect();
    // Only the first 10 by id were considered, sorted by n (descending with the id).
    assert_eq!(
        ids,
        [
            "d09", "d08", "d07", "d06", "d05", "d04", "d03", "d02", "d01", "d00"
        ]
    );
    let logged = text(&logs);
    assert!(
        logged.contains("WARN") && logged.contains("exhausted_scan = true"),
        "{logged}"
    );
    assert!(
        logged.contains(&site) && logged.contains("big"),
        "names the collection: {logged}"
    );

    let all = store.query(&site, "big", &Query::new()).await.unwrap();
    assert_eq!(all.documents.len(), 25, "id order is exact beyond max_scan");
    assert!(!all.exhausted_scan);
}

/// 180 documents of 390 000 bytes: a query in another order stops after reading 64 MiB.
async fn scans_stop_after_64_mib(emulator: Emulator, cell: &'static OnceCell<String>) {
    let table = ensure_table(cell, emulator, "table").await;
    let store = Store::new(store_on(
        emulator.client(),
        emulator.streams(),
        &table,
        10_000,
        StoreOptions::default(),
    ));
    let site = site("mib");
    let pad = "x".repeat(389_990);
    for i in 0..180 {
        let key = Key::new(&site, "c", format!("d{i:03}")).unwrap();
        let data = obj(json!({"pad": pad}));
        assert_eq!(docstore::document::data_size(&data), 390_000);
        store.create(&key, data, "").await.unwrap();
    }
    let (logs, _guard) = capture_logs();
    let page = store
        .query(&site, "c", &Query::new().order_by_desc("$version"))
        .await
        .unwrap();
    assert!(page.exhausted_scan);
    // 64 MiB is 172.07 documents: the query stops with the page that passes it.
    let read = page.documents.len();
    assert!((173..180).contains(&read), "{read} documents read");
    assert!(text(&logs).contains("exhausted_scan = true"));
}

/// A document of `MAX_DOC_BYTES_LIMIT` bytes with the longest keys, the longest actors and a
/// full write history fits in one item. moto caps items at 405 000 bytes where DynamoDB (and
/// dynoxide) allow 409 600: there the write is refused, as `InvalidArgument` — an emulator
/// limit, not ours.
async fn the_largest_document_fits_in_an_item(emulator: Emulator, cell: &'static OnceCell<String>) {
    let table = ensure_table(cell, emulator, "table").await;
    let options = StoreOptions::default().with_max_doc_bytes(MAX_DOC_BYTES_LIMIT);
    let store = Store::new(store_on(
        emulator.client(),
        emulator.streams(),
        &table,
        10,
        options,
    ));
    let site = format!("{}{}", site("big"), "s".repeat(64))
        .chars()
        .take(64)
        .collect::<String>();
    let key = Key::new(&site, "c".repeat(64), "i".repeat(512)).unwrap();
    let data = obj(json!({"pad": "x".repeat(MAX_DOC_BYTES_LIMIT - 10)}));
    assert_eq!(docstore::document::data_size(&data), MAX_DOC_BYTES_LIMIT);
    let actor = "a".repeat(docstore::document::MAX_ACTOR_BYTES);
    let result = store.create(&key, data, &actor).await;
    match emulator {
        Emulator::Dynoxide => {
            let mut doc = result.unwrap();
            // Fill the write history: 16 more writes of the same size.
            for _ in 0..16 {
                doc = store.update(&key, &obj(json!({})), &actor).await.unwrap();
            }
            assert_eq!(doc.version, 17);
            assert_eq!(store.get(&key).await.unwrap(), Some(doc));
        }
        Emulator::Moto => {
            let err = result.unwrap_err();
            assert!(
                matches!(&err, Error::InvalidArgument(m) if m.contains("size")),
                "{err}"
            );
            assert_eq!(store.get(&key).await.unwrap(), None);
        }
    }
    let too_long_actor = "a".repeat(4096);
    let small = obj(json!({"pad": "x".repeat(MAX_DOC_BYTES_LIMIT - 10)}));
    let other = Key::new(&site, "c", "other").unwrap();
    let err = store
        .create(&other, small, &too_long_actor)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("actor")),
        "{err}"
    );
}

/// Replaces every counter shard of `collection` in `site` by one item, shard 0, counting `n`
/// (`None`: no counter item at all), with the raw SDK: drift planted by hand.
async fn replace_counter(
    raw: &aws_sdk_dynamodb::Client,
    table: &str,
    site: &str,
    collection: &str,
    n: Option<i64>,
) {
    for item in counter_shards(raw, table, site, collection).await {
        let key = [("pk", &item["pk"]), ("sk", &item["sk"])]
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value.clone()))
            .collect();
        let deleted = raw.delete_item().table_name(table).set_key(Some(key));
        deleted.send().await.unwrap();
    }
    if let Some(n) = n {
        raw.put_item()
            .table_name(table)
            .item("pk", AttributeValue::S(format!("{site}#__collections")))
            .item("sk", AttributeValue::S(collection.to_owned()))
            .item("n", AttributeValue::N(n.to_string()))
            .send()
            .await
            .unwrap();
    }
}

/// The counter shard items of `collection` in `site`, in every counter partition (raw SDK,
/// strongly consistent).
async fn counter_shards(
    raw: &aws_sdk_dynamodb::Client,
    table: &str,
    site: &str,
    collection: &str,
) -> Vec<Item> {
    let of_collection = |item: &Item| {
        let sort_key = item["sk"].as_s().unwrap();
        sort_key == collection || sort_key.starts_with(&format!("{collection}#"))
    };
    let mut shards = Vec::new();
    for pk in support::counter_pks(site) {
        let page = raw
            .query()
            .table_name(table)
            .consistent_read(true)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(pk))
            .send()
            .await
            .unwrap();
        shards.extend(page.items().iter().filter(|i| of_collection(i)).cloned());
    }
    shards
}

/// A collection's creates spread over its counter shards; a table written with one counter
/// item per collection (the layout before shards: `counter_shards = 1`) keeps counting
/// exactly after shards are on — its deletes take shards below zero, the sum stays right, no
/// migration — and `recount` with repair folds the shards back into shard 0.
async fn counters_spread_over_shards_and_an_unsharded_table_keeps_counting(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    use docstore::RecountMode;
    let table = ensure_table(cell, emulator, "table").await;
    let with_shards = |counter_shards| {
        let config = DynamoDbConfig {
            counter_shards,
            ..support::config_for(emulator, &table)
        };
        let driver = DynamoStore::from_client(
            emulator.client(),
            emulator.streams(),
            &config,
            StoreOptions::default(),
        );
        Store::new(driver.expect("valid settings"))
    };
    let raw = emulator.client();
    let site = site("shards");
    let key = |n: usize| Key::new(&site, "orders", format!("order-{n}")).unwrap();
    let unsharded = with_shards(1);
    for n in 0..20 {
        unsharded.create(&key(n), obj(json!({})), "").await.unwrap();
    }
    let items = counter_shards(&raw, &table, &site, "orders").await;
    assert_eq!(items.len(), 1, "one counter item before shards: {items:?}");

    let sharded = with_shards(32);
    for n in 20..36 {
        sharded.create(&key(n), obj(json!({})), "").await.unwrap();
    }
    // Deleting a document counted in shard 0 takes its own shard below zero when no newer
    // document moved that shard up.
    let new_shards: Vec<String> = (20..36)
        .map(|n| counter_sort_key("orders", &format!("order-{n}")))
        .collect();
    let alone = (0..20)
        .find(|n| !new_shards.contains(&counter_sort_key("orders", &format!("order-{n}"))))
        .expect("an old document whose shard no new one moved");
    assert!(sharded.delete(&key(alone)).await.unwrap());
    for n in (20..36).step_by(3) {
        assert!(sharded.delete(&key(n)).await.unwrap());
    }
    let items = counter_shards(&raw, &table, &site, "orders").await;
    assert!(
        items.len() > 12,
        "creates spread over the shards: {items:?}"
    );
    let below_zero = |item: &Item| item["n"] == AttributeValue::N("-1".into());
    assert!(items.iter().any(below_zero), "{items:?}");
    let shard_zero = items
        .iter()
        .find(|item| item["sk"].as_s().unwrap() == "orders");
    let in_shard_zero = (20..36)
        .filter(|n| (n - 20) % 3 != 0 && new_shards[n - 20] == "orders")
        .count();
    let old_count = (20 + in_shard_zero).to_string();
    assert_eq!(
        shard_zero.unwrap()["n"],
        AttributeValue::N(old_count),
        "not migrated"
    );
    let expected = 20 + 16 - 1 - 6;
    assert_eq!(sharded.count(&site).await.unwrap(), expected);
    assert_eq!(unsharded.count(&site).await.unwrap(), expected);
    let report = sharded.recount(&site, RecountMode::Report).await.unwrap();
    assert_eq!(report.changes, vec![], "the sum is exact");

    // Drift below zero reads as 0 and is repaired into shard 0.
    replace_counter(&raw, &table, &site, "orders", Some(-3)).await;
    assert_eq!(sharded.count(&site).await.unwrap(), 0);
    let repaired = sharded.recount(&site, RecountMode::Repair).await.unwrap();
    assert_eq!(repaired.changes.len(), 1, "{repaired:?}");
    let items = counter_shards(&raw, &table, &site, "orders").await;
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["n"], AttributeValue::N(expected.to_string()));
    assert_eq!(sharded.count(&site).await.unwrap(), expected);
    sharded
        .create(&key(alone), obj(json!({})), "")
        .await
        .unwrap();
    assert_eq!(sharded.count(&site).await.unwrap(), expected + 1);
}

/// `recount` finds counters drifted by hand (raw SDK), a collection whose counter item is
/// gone and a counter left for an empty collection; `Report` changes nothing, `Repair` fixes
/// every one.
async fn recount_finds_and_repairs_drift(emulator: Emulator, cell: &'static OnceCell<String>) {
    use docstore::{CounterChange, RecountMode};
    let table = ensure_table(cell, emulator, "table").await;
    let store = Store::new(store_on(
        emulator.client(),
        emulator.streams(),
        &table,
        10_000,
        StoreOptions::default(),
    ));
    let raw = emulator.client();
    let site = site("recount");
    for (collection, n) in [("a", 3), ("b", 2)] {
        for i in 0..n {
            let key = Key::new(&site, collection, format!("d{i}")).unwrap();
            store.create(&key, obj(json!({})), "").await.unwrap();
        }
    }
    // Another site's documents are not counted.
    store
        .create(
            &Key::new(format!("{site}x"), "a", "o").unwrap(),
            obj(json!({})),
            "",
        )
        .await
        .unwrap();
    replace_counter(&raw, &table, &site, "a", Some(1)).await;
    replace_counter(&raw, &table, &site, "c", Some(5)).await;
    replace_counter(&raw, &table, &site, "b", None).await;
    assert_eq!(
        store.collections(&site).await.unwrap(),
        vec![("a".to_owned(), 1), ("c".to_owned(), 5)],
        "the drifted counters"
    );
    let expected_changes = vec![
        CounterChange {
            collection: "a".into(),
            counter: Some(1),
            documents: 3,
        },
        CounterChange {
            collection: "b".into(),
            counter: None,
            documents: 2,
        },
        CounterChange {
            collection: "c".into(),
            counter: Some(5),
            documents: 0,
        },
    ];
    let report = store.recount(&site, RecountMode::Report).await.unwrap();
    let real = vec![("a".to_owned(), 3), ("b".to_owned(), 2)];
    assert_eq!(report.collections, real, "counted from the documents");
    assert_eq!(report.changes, expected_changes);
    assert_eq!(
        store.count(&site).await.unwrap(),
        6,
        "a report changes nothing"
    );

    let repaired = store.recount(&site, RecountMode::Repair).await.unwrap();
    assert_eq!(repaired.changes, expected_changes);
    assert_eq!(store.collections(&site).await.unwrap(), real);
    assert_eq!(store.count(&site).await.unwrap(), 5);
    let again = store.recount(&site, RecountMode::Report).await.unwrap();
    assert_eq!(again.changes, vec![], "nothing left to repair");
}

/// `sites` lists a site whose last document is deleted while its counter drifted (left at 1
/// by hand, raw SDK), so a whole-store `fsck` visits it; a counter back at 0 lists nothing.
async fn sites_lists_a_counter_left_without_documents(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    use docstore::RecountMode;
    let table = ensure_table(cell, emulator, "table").await;
    let store = Store::new(store_on(
        emulator.client(),
        emulator.streams(),
        &table,
        10_000,
        StoreOptions::default(),
    ));
    let drifted = site("drifted");
    let emptied = site("emptied");
    for site in [&drifted, &emptied] {
        let key = Key::new(site, "t", "a").unwrap();
        store.create(&key, obj(json!({})), "").await.unwrap();
    }
    emulator
        .client()
        .update_item()
        .table_name(&table)
        .key("pk", AttributeValue::S(format!("{drifted}#__collections")))
        .key("sk", AttributeValue::S("t".into()))
        .update_expression("ADD n :one")
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .send()
        .await
        .unwrap();
    for site in [&drifted, &emptied] {
        let key = Key::new(site, "t", "a").unwrap();
        assert!(store.delete(&key).await.unwrap());
    }
    assert_eq!(
        store.count(&drifted).await.unwrap(),
        1,
        "the drifted counter"
    );
    let sites = store.sites().await.unwrap();
    assert!(sites.contains(&drifted), "{drifted} missing: {sites:?}");
    assert!(!sites.contains(&emptied), "{emptied} listed: {sites:?}");
    let repaired = store.recount(&drifted, RecountMode::Repair).await.unwrap();
    assert_eq!(repaired.changes.len(), 1, "{repaired:?}");
    let sites = store.sites().await.unwrap();
    assert!(
        !sites.contains(&drifted),
        "{drifted} still listed: {sites:?}"
    );
}

async fn a_missing_table_is_named(emulator: Emulator, _cell: &'static OnceCell<String>) {
    let store = Store::new(store_on(
        emulator.client(),
        emulator.streams(),
        "docstore-no-such-table",
        10,
        StoreOptions::default(),
    ));
    let key = Key::new("s", "c", "i").unwrap();
    for err in [
        store.get(&key).await.unwrap_err(),
        store.create(&key, obj(json!({})), "").await.unwrap_err(),
        store.query("s", "c", &Query::new()).await.unwrap_err(),
    ] {
        assert!(matches!(&err, Error::Backend { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("`docstore-no-such-table` does not exist"),
            "{err}"
        );
    }
}

async fn connect_uses_the_standard_chain(emulator: Emulator, _cell: &'static OnceCell<String>) {
    // Credentials and region come from the environment the script sets.
    let config = DynamoDbConfig {
        region: Some("us-east-1".into()),
        endpoint: Some(emulator.endpoint()),
        max_scan: 10,
        ..DynamoDbConfig::new(support::fresh_table("connect"))
    };
    let driver = DynamoStore::connect(&config, StoreOptions::default())
        .await
        .unwrap();
    driver.create_table().await.unwrap();
    driver.create_table().await.unwrap(); // idempotent
    let store = Store::new(driver);
    let key = Key::new("s", "c", "i").unwrap();
    let doc = store.create(&key, obj(json!({"a": 1})), "").await.unwrap();
    assert_eq!(store.get(&key).await.unwrap(), Some(doc));

    let too_big = StoreOptions::default().with_max_doc_bytes(MAX_DOC_BYTES_LIMIT + 1);
    let err = DynamoStore::connect(&config, too_big).await.unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("max_doc_bytes")),
        "{err}"
    );
}

/// Emulator fidelity the change feed's tests rest on: a stream iterator handed out before a
/// cancelled `TransactWriteItems` shows neither the cancelled writes nor hides a later one,
/// as on DynamoDB. moto 5.2.5 undoes a cancelled transaction by swapping in a copy of the
/// table taken before it, stream included, and its older iterators kept reading the swapped
/// out stream: the cancelled put, in the sequence number the next write then took.
/// `scripts/with-dynamodb-emulators` makes them read the table's current stream.
async fn a_stream_iterator_never_shows_a_cancelled_transaction(
    emulator: Emulator,
    _cell: &'static OnceCell<String>,
) {
    let table = support::new_table(emulator, "cancelled").await;
    let client = emulator.client();
    let streams = emulator.streams();
    let described = client.describe_table().table_name(&table).send().await;
    let arn = described.unwrap().table.unwrap().latest_stream_arn.unwrap();
    let stream = streams.describe_stream().stream_arn(&arn).send().await;
    let shard = stream.unwrap().stream_description.unwrap().shards()[0]
        .shard_id
        .clone()
        .unwrap();
    let iterator = streams
        .get_shard_iterator()
        .stream_arn(&arn)
        .shard_id(shard)
        .shard_iterator_type(ShardIteratorType::TrimHorizon)
        .send()
        .await
        .unwrap()
        .shard_iterator
        .unwrap();

    let key = |pk: &str| {
        HashMap::from([
            ("pk".to_owned(), AttributeValue::S(pk.into())),
            ("sk".to_owned(), AttributeValue::S("x".into())),
        ])
    };
    let put = Put::builder()
        .table_name(&table)
        .set_item(Some(key("cancelled")))
        .build()
        .unwrap();
    let check = ConditionCheck::builder()
        .table_name(&table)
        .set_key(Some(key("absent")))
        .condition_expression("attribute_exists(pk)")
        .build()
        .unwrap();
    let cancelled = client
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().put(put).build())
        .transact_items(TransactWriteItem::builder().condition_check(check).build())
        .send()
        .await;
    assert!(cancelled.is_err(), "the check fails: {cancelled:?}");
    let kept = client
        .put_item()
        .table_name(&table)
        .set_item(Some(key("kept")));
    kept.send().await.unwrap();

    let mut seen = Vec::new();
    let mut next = Some(iterator);
    // A record may reach the stream a moment after its write: read until one shows.
    for _ in 0..20 {
        let Some(iterator) = next.take() else { break };
        let page = streams.get_records().shard_iterator(iterator).send().await;
        let page = page.unwrap();
        for record in page.records() {
            let keys = record.dynamodb.as_ref().and_then(|r| r.keys.as_ref());
            // The store's own layout item, written when it made the table, is passed over.
            match keys.and_then(|keys| keys.get("pk")) {
                Some(StreamValue::S(pk)) if !pk.starts_with("__docstore") => seen.push(pk.clone()),
                _ => {}
            }
        }
        next = page.next_shard_iterator;
        if seen.iter().any(|pk| pk == "kept") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(seen, ["kept"]);
}

macro_rules! on_both_emulators {
    ($($case:ident),* $(,)?) => {
        mod dynoxide {
            $(
                #[tokio::test]
                async fn $case() {
                    super::$case(super::Emulator::Dynoxide, &super::DYNOXIDE).await;
                }
            )*
        }
        mod moto {
            $(
                #[tokio::test]
                async fn $case() {
                    super::$case(super::Emulator::Moto, &super::MOTO).await;
                }
            )*
        }
    };
}

on_both_emulators!(
    layout_is_the_seed_layout,
    recount_finds_and_repairs_drift,
    counters_spread_over_shards_and_an_unsharded_table_keeps_counting,
    sites_lists_a_counter_left_without_documents,
    each_call_costs_its_minimum,
    id_order_queries_on_one_partition_read_only_the_pages_they_need,
    id_order_queries_merge_the_partitions,
    an_uneven_partition_costs_a_page_one_more_query,
    a_table_written_before_partitions_keeps_one_partition,
    id_order_cursor_survives_deleting_its_document,
    max_scan_stops_other_orders_with_a_warning,
    scans_stop_after_64_mib,
    the_largest_document_fits_in_an_item,
    a_missing_table_is_named,
    connect_uses_the_standard_chain,
    a_stream_iterator_never_shows_a_cancelled_transaction,
);
