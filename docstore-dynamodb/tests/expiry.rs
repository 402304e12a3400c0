//! Expiry on DynamoDB (`docs/contract.md`, "Expiry"; the crate docs, "Expiring documents"):
//! `count` is exact at once from the expiry instant (due markers subtract what no sweep
//! removed yet), the sweep removes each document once with one `Expired` change, a document
//! item carries DynamoDB's time to live (`expires` = expiry + one day), and a document removed
//! behind the library's back (as the service's time to live does) is counter drift that
//! `recount` finds and repairs, and that the sweep settles too. Time comes from a
//! `ManualClock`: nothing sleeps for an expiry. Run on both emulators.

mod support;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use docstore::driver::CounterChange;
use docstore::{ChangeKind, FeedStart, Key, ManualClock, RecountMode, Store, StoreOptions};
use docstore_dynamodb::DynamoStore;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use support::{Emulator, PARTITIONS, document_pk, fresh_table, obj, site};

const START: i64 = 1_700_000_000_000_000_000;
const SECOND: i64 = 1_000_000_000;
/// The grace the crate docs give DynamoDB's time to live after an expiry: one day.
const GRACE_SECS: i64 = 24 * 60 * 60;

/// A new table for one test: a sweep removes what is due in its whole table by its store's
/// clock, so tests on different manual clocks each sweep a table of their own.
async fn table(emulator: Emulator) -> String {
    let table = fresh_table("expiry");
    let driver = DynamoStore::from_client(
        emulator.client(),
        emulator.streams(),
        &support::config_for(emulator, &table),
        StoreOptions::default(),
    )
    .unwrap();
    driver.create_table().await.unwrap();
    table
}

/// A store on `table` with `clock`, no background sweep (the tests sweep when they mean to).
fn store(emulator: Emulator, table: &str, clock: &Arc<ManualClock>) -> Store {
    let options = StoreOptions::default()
        .with_clock(clock.clone())
        .with_sweep_interval(None);
    Store::new(
        DynamoStore::from_client(
            emulator.client(),
            emulator.streams(),
            &support::config_for(emulator, table),
            options,
        )
        .unwrap(),
    )
}

fn key(site: &str, id: &str) -> Key {
    Key::new(site, "sessions", id).unwrap()
}

/// The item of the document at `key` as stored (raw SDK).
async fn raw_item(
    client: &Client,
    table: &str,
    key: &Key,
) -> Option<std::collections::HashMap<String, AttributeValue>> {
    client
        .get_item()
        .table_name(table)
        .key(
            "pk",
            AttributeValue::S(document_pk(key.site(), key.collection(), key.id())),
        )
        .key("sk", AttributeValue::S(key.id().to_owned()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
}

/// The expiry markers of `site` (raw SDK, every partition): their sort keys.
async fn markers(client: &Client, table: &str, site: &str) -> Vec<String> {
    let mut found = Vec::new();
    for partition in 0..PARTITIONS {
        let pk = match partition {
            0 => format!("{site}#__expiring"),
            p => format!("{site}#__expiring#{p}"),
        };
        let page = client
            .query()
            .table_name(table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(pk))
            .consistent_read(true)
            .send()
            .await
            .unwrap();
        for item in page.items() {
            found.push(item["sk"].as_s().unwrap().clone());
        }
    }
    found.sort();
    found
}

fn number(item: &std::collections::HashMap<String, AttributeValue>, name: &str) -> i64 {
    item[name].as_n().unwrap().parse().unwrap()
}

/// Right at the expiry instant, before any sweep, `count` and `collections` leave the
/// expired documents out (their counter shards still count them: the due markers subtract
/// them); the sweep then removes them and the count stays.
async fn count_is_exact_at_once_after_expiry(emulator: Emulator) {
    let clock = Arc::new(ManualClock::new(START));
    let table = table(emulator).await;
    let store = store(emulator, &table, &clock);
    let site = site("exp-count");
    for id in ["a", "b", "c"] {
        store
            .create(&key(&site, id), obj(json!({})), "t")
            .expires_at(START + 10 * SECOND)
            .await
            .unwrap();
    }
    store
        .create(&key(&site, "kept"), obj(json!({})), "t")
        .await
        .unwrap();
    let other = Key::new(&site, "users", "u").unwrap();
    store.create(&other, obj(json!({})), "t").await.unwrap();
    assert_eq!(store.count(&site).await.unwrap(), 5);
    clock.set(START + 10 * SECOND);
    assert_eq!(store.count(&site).await.unwrap(), 2, "no sweep ran");
    assert_eq!(
        store.collections(&site).await.unwrap(),
        [("sessions".to_owned(), 1), ("users".to_owned(), 1)]
    );
    let raw = emulator.client();
    assert!(
        raw_item(&raw, &table, &key(&site, "a")).await.is_some(),
        "still stored until a sweep"
    );
    assert_eq!(store.sweep_expired().await.unwrap(), 3);
    assert_eq!(store.count(&site).await.unwrap(), 2);
    assert!(raw_item(&raw, &table, &key(&site, "a")).await.is_none());
    assert_eq!(markers(&raw, &table, &site).await, Vec::<String>::new());
}

/// Two stores sweeping the same expired document remove it once: one `Expired` change at
/// the expiry instant with an empty actor, after its creation.
async fn the_sweep_shows_one_expired_change(emulator: Emulator) {
    let clock = Arc::new(ManualClock::new(START));
    let table = table(emulator).await;
    let (store, other) = (
        store(emulator, &table, &clock),
        store(emulator, &table, &clock),
    );
    let site = site("exp-feed");
    let feed = store.site(&site).unwrap();
    let start = feed.changes(&FeedStart::Now, 1).await.unwrap().next;
    store
        .create(&key(&site, "s"), obj(json!({"n": 1})), "ann")
        .expires_after(Duration::from_secs(5))
        .await
        .unwrap();
    clock.set(START + 6 * SECOND);
    let (a, b) = tokio::join!(store.sweep_expired(), other.sweep_expired());
    assert_eq!(a.unwrap() + b.unwrap(), 1, "removed once");
    assert_eq!(store.sweep_expired().await.unwrap(), 0);
    let page = feed.changes(&FeedStart::After(start), 10).await.unwrap();
    let seen: Vec<(ChangeKind, i64, &str, u64)> = page
        .changes
        .iter()
        .map(|c| (c.kind, c.time, c.actor.as_str(), c.version))
        .collect();
    assert_eq!(
        seen,
        [
            (ChangeKind::Created, START, "ann", 1),
            (ChangeKind::Expired, START + 5 * SECOND, "", 1),
        ]
    );
}

/// A document item carries `expires_at` (nanoseconds) and DynamoDB's time to live `expires`
/// (its expiry in seconds, rounded up, plus one day) with one marker; a write that removes
/// the expiry removes both and the marker.
async fn a_document_item_carries_the_ttl(emulator: Emulator) {
    let clock = Arc::new(ManualClock::new(START));
    let table = table(emulator).await;
    let store = store(emulator, &table, &clock);
    let site = site("exp-ttl");
    let k = key(&site, "s");
    let at = START + 1_500_000_000;
    store
        .create(&k, obj(json!({})), "t")
        .expires_at(at)
        .await
        .unwrap();
    let raw = emulator.client();
    let item = raw_item(&raw, &table, &k).await.unwrap();
    assert_eq!(number(&item, "expires_at"), at);
    assert_eq!(
        number(&item, "expires"),
        START / SECOND + 2 + GRACE_SECS,
        "the expiry's second, rounded up, plus the grace"
    );
    assert_eq!(
        markers(&raw, &table, &site).await,
        [format!("{at:020}#sessions#s")]
    );
    store
        .update(&k, &obj(json!({"n": 1})), "t")
        .never_expires()
        .await
        .unwrap();
    let item = raw_item(&raw, &table, &k).await.unwrap();
    assert!(!item.contains_key("expires") && !item.contains_key("expires_at"));
    assert_eq!(markers(&raw, &table, &site).await, Vec::<String>::new());
}

/// A document item deleted behind the library's back once it expired — what DynamoDB's time
/// to live does a day after a sweep missed it — leaves its counter one above the documents:
/// `count` is still exact (the due marker subtracts it), `recount` reports the drift, and
/// either `recount` with repair or the next sweep (which deletes the orphan marker with the
/// counter's decrement) settles it.
async fn recount_finds_a_document_removed_behind_the_library(emulator: Emulator) {
    let clock = Arc::new(ManualClock::new(START));
    let table = table(emulator).await;
    let store = store(emulator, &table, &clock);
    let raw = emulator.client();
    for (site, settle_by_sweep) in [(site("exp-ttl-sweep"), true), (site("exp-ttl-fsck"), false)] {
        let gone = key(&site, "gone");
        store
            .create(&gone, obj(json!({})), "t")
            .expires_at(START + SECOND)
            .await
            .unwrap();
        store
            .create(&key(&site, "kept"), obj(json!({})), "t")
            .await
            .unwrap();
        clock.set(START + SECOND);
        raw.delete_item()
            .table_name(&table)
            .key(
                "pk",
                AttributeValue::S(document_pk(&site, "sessions", "gone")),
            )
            .key("sk", AttributeValue::S("gone".into()))
            .send()
            .await
            .unwrap();
        assert_eq!(store.count(&site).await.unwrap(), 1);
        let drift = vec![CounterChange {
            collection: "sessions".into(),
            counter: Some(2),
            documents: 1,
        }];
        let report = store.recount(&site, RecountMode::Report).await.unwrap();
        assert_eq!(report.changes, drift, "{site}");
        if settle_by_sweep {
            assert_eq!(store.sweep_expired().await.unwrap(), 0, "no document left");
        } else {
            let repaired = store.recount(&site, RecountMode::Repair).await.unwrap();
            assert_eq!(repaired.changes, drift);
        }
        assert_eq!(markers(&raw, &table, &site).await, Vec::<String>::new());
        let again = store.recount(&site, RecountMode::Report).await.unwrap();
        assert_eq!(again.changes, vec![], "{site}: settled");
        assert_eq!(store.count(&site).await.unwrap(), 1);
        assert_eq!(store.sweep_expired().await.unwrap(), 0);
        assert_eq!(store.count(&site).await.unwrap(), 1);
        clock.set(START);
    }
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
    count_is_exact_at_once_after_expiry,
    the_sweep_shows_one_expired_change,
    a_document_item_carries_the_ttl,
    recount_finds_a_document_removed_behind_the_library,
);
