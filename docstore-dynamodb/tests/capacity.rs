//! The capacity model (crate `docstore-dynamodb-model`: DynamoDB's per-partition-key and
//! per-item limits, transactional 2×, transaction conflicts, throttling errors) and what it says
//! of the table layout: nothing every create of a collection writes may be a single item
//! (docs/contract.md, "Collection counters and the quota").
//!
//! `model::` tests check the model itself on a hand-set clock (no timing); `wire::` tests check
//! that the SDK reads the model's refusals as DynamoDB's; `layout::` tests run the store
//! through the model against dynoxide.

mod support;

use support::capacity::{
    Admission, CapacityModel, Clock, Direction, ItemKey, Kind, Target, ThrottleError,
    WRITE_UNITS_PER_SECOND, item_size,
};

/// A `PutItem` body of an item in partition `pk` with sort key `sk` and `extra` attributes.
fn put_body(pk: &str, sk: &str, extra: serde_json::Value) -> Vec<u8> {
    let mut item = serde_json::json!({"pk": {"S": pk}, "sk": {"S": sk}});
    item.as_object_mut()
        .unwrap()
        .extend(extra.as_object().cloned().unwrap_or_default());
    serde_json::json!({"TableName": "t", "Item": item})
        .to_string()
        .into_bytes()
}

/// A `TransactWriteItems` body of one `Put` per (pk, sk).
fn transaction_body(items: &[(&str, &str)]) -> Vec<u8> {
    let actions: Vec<serde_json::Value> = items
        .iter()
        .map(|(pk, sk)| {
            serde_json::json!({"Put": {
                "TableName": "t",
                "Item": {"pk": {"S": pk}, "sk": {"S": sk}},
            }})
        })
        .collect();
    serde_json::json!({"TransactItems": actions})
        .to_string()
        .into_bytes()
}

/// Whether `model` admits a request of `operation` with `body` (tickets dropped at once).
fn admitted(model: &CapacityModel, operation: &str, body: &[u8]) -> bool {
    matches!(
        model.admit(&model.parse(operation, body)),
        Admission::Admitted(_)
    )
}

/// How many of `count` requests in a row are admitted.
fn admitted_of(model: &CapacityModel, count: usize, body: impl Fn(usize) -> Vec<u8>) -> usize {
    (0..count)
        .filter(|&n| admitted(model, "PutItem", &body(n)))
        .count()
}

mod model {
    use super::*;

    #[test]
    fn a_partition_key_takes_a_thousand_write_units_a_second() {
        let model = CapacityModel::new(Clock::manual());
        let small = |n: usize| put_body("hot", &format!("item-{n}"), serde_json::json!({}));
        assert_eq!(admitted_of(&model, 1_000, small), 1_000);
        assert!(!admitted(&model, "PutItem", &small(1_000)), "unit 1 001");
        // A millisecond refills one unit.
        model.clock().advance(0.001);
        assert!(admitted(&model, "PutItem", &small(1_001)));
        assert!(!admitted(&model, "PutItem", &small(1_002)));
        // A quiet minute refills one second's units, no more (no burst past the limit).
        model.clock().advance(60.0);
        assert_eq!(admitted_of(&model, 1_200, small), 1_000);
        // Another partition key has its own units.
        assert!(admitted(
            &model,
            "PutItem",
            &put_body("cold", "x", serde_json::json!({}))
        ));
    }

    #[test]
    fn a_write_costs_a_unit_per_started_kilobyte() {
        let model = CapacityModel::new(Clock::manual());
        // 1 024 bytes in all: one unit; one byte more: two.
        let fill = |total: usize| {
            let overhead = item_size(&serde_json::json!({
                "pk": {"S": "p"}, "sk": {"S": "s"}, "d": {"S": ""},
            }));
            serde_json::json!({"d": {"S": "x".repeat(total - overhead)}})
        };
        for (total, units) in [(1_024, 1.0), (1_025, 2.0), (3_000, 3.0)] {
            let model = CapacityModel::new(model.clock().clone());
            assert!(admitted(
                &model,
                "PutItem",
                &put_body("p", "s", fill(total))
            ));
            let item = Target::Item(ItemKey {
                pk: "p".into(),
                sk: "s".into(),
            });
            assert_eq!(
                model.report().targets[&item].write_units,
                units,
                "{total} bytes"
            );
        }
    }

    #[test]
    fn transactional_writes_cost_twice() {
        let model = CapacityModel::new(Clock::manual());
        let one = |n: usize| transaction_body(&[("hot", &format!("item-{n}"))]);
        let transactions = (0..600)
            .filter(|&n| admitted(&model, "TransactWriteItems", &one(n)))
            .count();
        assert_eq!(transactions, 500, "1 000 units at 2 a transactional write");
        let report = model.report();
        let partition = Target::Partition {
            index: None,
            value: "hot".into(),
        };
        assert_eq!(report.targets[&partition].write_units, 1_000.0);
        assert_eq!(report.targets[&partition].throttles, 100);
        assert_eq!(report.operation("TransactWriteItems").throttled, 100);
    }

    #[test]
    fn reads_take_three_thousand_units_and_eventual_reads_half() {
        let model = CapacityModel::new(Clock::manual());
        let get = |consistent: bool, n: usize| {
            serde_json::json!({
                "TableName": "t",
                "Key": {"pk": {"S": "hot"}, "sk": {"S": format!("item-{n}")}},
                "ConsistentRead": consistent,
            })
            .to_string()
            .into_bytes()
        };
        let reads = |consistent: bool| {
            (0..7_000)
                .filter(|&n| admitted(&model, "GetItem", &get(consistent, n)))
                .count()
        };
        assert_eq!(reads(true), 3_000);
        model.clock().advance(1.0);
        assert_eq!(reads(false), 6_000);
        // Reads and writes have separate limits.
        assert!(admitted(
            &model,
            "PutItem",
            &put_body("hot", "w", serde_json::json!({}))
        ));
    }

    #[test]
    fn a_gsi_partition_key_has_the_same_limit() {
        let model = CapacityModel::new(Clock::manual());
        // Every item in a partition of its own, all under one GSI key.
        let indexed = |n: usize| {
            put_body(
                &format!("p{n}"),
                "s",
                serde_json::json!({"g0pk": {"S": "acme#tickets#status"}}),
            )
        };
        assert_eq!(admitted_of(&model, 1_100, indexed), 1_000);
        let gsi = Target::Partition {
            index: Some("docstore-g0".into()),
            value: "acme#tickets#status".into(),
        };
        assert_eq!(model.report().targets[&gsi].throttles, 100);
        // An update that sets the GSI key through a placeholder is charged to it too.
        let update = serde_json::json!({
            "TableName": "t",
            "Key": {"pk": {"S": "other"}, "sk": {"S": "s"}},
            "UpdateExpression": "SET #g = :g, #n = if_not_exists(#n, :zero) ADD #c :one",
            "ExpressionAttributeNames": {"#g": "g0pk", "#n": "n", "#c": "c"},
            "ExpressionAttributeValues": {
                ":g": {"S": "acme#tickets#status"}, ":zero": {"N": "0"}, ":one": {"N": "1"},
            },
        });
        let request = model.parse("UpdateItem", update.to_string().as_bytes());
        assert!(
            request.actions[0]
                .charges
                .iter()
                .any(|charge| charge.target == gsi && charge.direction == Direction::Write),
            "{request:?}"
        );
        assert!(!admitted(
            &model,
            "UpdateItem",
            update.to_string().as_bytes()
        ));
    }

    #[test]
    fn overlapping_transactions_conflict_on_their_shared_items() {
        let model = CapacityModel::new(Clock::manual());
        let first = model.admit(&model.parse(
            "TransactWriteItems",
            &transaction_body(&[("p", "counter"), ("p", "a")]),
        ));
        let Admission::Admitted(ongoing) = first else {
            panic!("the first transaction is admitted: {first:?}")
        };
        // A second transaction on the counter and an item of its own: cancelled, with the
        // conflict named on the counter's action only.
        let second = model.parse(
            "TransactWriteItems",
            &transaction_body(&[("p", "b"), ("p", "counter")]),
        );
        assert_eq!(second.kind, Kind::TransactWrite);
        let Admission::Refused(error) = model.admit(&second) else {
            panic!("the overlapping transaction is cancelled")
        };
        assert_eq!(
            error["__type"],
            "com.amazonaws.dynamodb.v20120810#TransactionCanceledException"
        );
        let codes: Vec<&str> = error["CancellationReasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|reason| reason["Code"].as_str().unwrap())
            .collect();
        assert_eq!(codes, ["None", "TransactionConflict"]);
        // A lone write of the held item fails; of another item it goes through.
        let Admission::Refused(error) =
            model.admit(&model.parse("PutItem", &put_body("p", "counter", serde_json::json!({}))))
        else {
            panic!("a lone write of a held item conflicts")
        };
        assert_eq!(
            error["__type"],
            "com.amazonaws.dynamodb.v20120810#TransactionConflictException"
        );
        assert!(admitted(
            &model,
            "PutItem",
            &put_body("p", "c", serde_json::json!({}))
        ));
        // Once the first transaction has its answer, the item is free.
        drop(ongoing);
        assert!(admitted(
            &model,
            "TransactWriteItems",
            &transaction_body(&[("p", "b"), ("p", "counter")])
        ));
        let report = model.report();
        let counter = ItemKey {
            pk: "p".into(),
            sk: "counter".into(),
        };
        assert_eq!(report.targets[&Target::Item(counter.clone())].conflicts, 2);
        assert_eq!(report.most_refused_item(), Some((&counter, 2)));
        assert_eq!(report.operation("TransactWriteItems").conflicted, 1);
        // Cancelled transactions consume nothing: 2 transactional writes of the counter.
        assert_eq!(report.targets[&Target::Item(counter)].write_units, 4.0);
    }

    #[test]
    fn a_lone_write_does_not_block_a_transaction() {
        let model = CapacityModel::new(Clock::manual());
        let lone = model.admit(&model.parse("PutItem", &put_body("p", "x", serde_json::json!({}))));
        assert!(matches!(lone, Admission::Admitted(_)));
        assert!(admitted(
            &model,
            "TransactWriteItems",
            &transaction_body(&[("p", "x")])
        ));
        drop(lone);
    }

    #[test]
    fn a_throttled_transaction_names_its_throttled_items() {
        let model = CapacityModel::new(Clock::manual());
        let fill = |n: usize| put_body("hot", &format!("i{n}"), serde_json::json!({}));
        assert_eq!(admitted_of(&model, 1_000, fill), 1_000);
        let request = model.parse(
            "TransactWriteItems",
            &transaction_body(&[("cold", "a"), ("hot", "b")]),
        );
        let Admission::Refused(error) = model.admit(&request) else {
            panic!("the hot partition has no units left")
        };
        let codes: Vec<&str> = error["CancellationReasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|reason| reason["Code"].as_str().unwrap())
            .collect();
        assert_eq!(codes, ["None", "ThrottlingError"]);
        // A lone write is refused with the chosen throttling error and reason.
        let model =
            CapacityModel::new(Clock::manual()).with_throttle_error(ThrottleError::Throttling);
        assert_eq!(admitted_of(&model, 1_001, fill), 1_000);
        let Admission::Refused(error) = model.admit(&model.parse("PutItem", &fill(0))) else {
            panic!("throttled")
        };
        assert_eq!(
            error["__type"],
            "com.amazonaws.dynamodb.v20120810#ThrottlingException"
        );
        assert_eq!(
            error["ThrottlingReasons"][0]["reason"],
            "TableWriteKeyRangeThroughputExceeded"
        );
    }

    #[test]
    fn the_limits_are_dynamodbs() {
        assert_eq!(WRITE_UNITS_PER_SECOND, 1_000.0);
        assert_eq!(support::capacity::READ_UNITS_PER_SECOND, 3_000.0);
        assert_eq!(support::capacity::write_units(1), 1.0);
        assert_eq!(support::capacity::read_units(4_096), 1.0);
        assert_eq!(support::capacity::read_units(4_097), 2.0);
        assert_eq!(support::capacity::TRANSACTION_FACTOR, 2.0);
        assert_eq!(support::capacity::EVENTUAL_FACTOR, 0.5);
    }
}

/// The SDK reads the model's refusals as DynamoDB's, and a refused request never reaches the
/// emulator. The model's clock stands still, so nothing refills.
mod wire {
    use super::*;
    use aws_sdk_dynamodb::Client;
    use aws_sdk_dynamodb::config::retry::RetryConfig;
    use aws_sdk_dynamodb::operation::put_item::PutItemError;
    use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
    use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
    use support::Emulator;
    use tokio::sync::OnceCell;

    pub(super) static TABLE: OnceCell<String> = OnceCell::const_new();

    /// A plain client and a client through `model` without retries, on the binary's table.
    async fn clients(model: &CapacityModel) -> (Client, Client, String) {
        let table = support::ensure_table(&TABLE, Emulator::Dynoxide, "capacity").await;
        let through = Emulator::Dynoxide.client_with(|config| {
            config
                .http_client(model.http_client())
                .retry_config(RetryConfig::disabled())
        });
        (Emulator::Dynoxide.client(), through, table)
    }

    fn item(pk: &str, sk: &str, bytes: usize) -> std::collections::HashMap<String, AttributeValue> {
        [
            ("pk", AttributeValue::S(pk.into())),
            ("sk", AttributeValue::S(sk.into())),
            ("d", AttributeValue::S("x".repeat(bytes))),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect()
    }

    async fn stored(client: &Client, table: &str, pk: &str, sk: &str) -> bool {
        let output = client
            .get_item()
            .table_name(table)
            .key("pk", AttributeValue::S(pk.into()))
            .key("sk", AttributeValue::S(sk.into()))
            .consistent_read(true)
            .send()
            .await
            .unwrap();
        output.item().is_some()
    }

    #[tokio::test]
    async fn a_throttled_write_is_provisioned_throughput_exceeded_and_not_applied() {
        let model = CapacityModel::new(Clock::manual());
        let (plain, through, table) = clients(&model).await;
        let pk = support::site("throttle");
        // Two items of 342 KB take 684 units of the partition key's 1 000; a third is refused.
        for sk in ["a", "b", "c"] {
            let result = through
                .put_item()
                .table_name(&table)
                .set_item(Some(item(&pk, sk, 350_000)))
                .send()
                .await;
            match sk {
                "c" => {
                    let err = result.expect_err("the third write is throttled");
                    let Some(PutItemError::ProvisionedThroughputExceededException(e)) =
                        err.as_service_error()
                    else {
                        panic!("not a throttle: {err:?}")
                    };
                    let reasons = e.throttling_reasons();
                    assert_eq!(
                        reasons[0].reason(),
                        Some("TableWriteKeyRangeThroughputExceeded")
                    );
                }
                _ => {
                    result.expect("admitted");
                }
            }
        }
        assert!(stored(&plain, &table, &pk, "b").await);
        assert!(
            !stored(&plain, &table, &pk, "c").await,
            "a throttled write is not applied"
        );
        let usage = model.report().targets[&Target::Partition {
            index: None,
            value: pk.clone(),
        }];
        assert_eq!((usage.write_units, usage.throttles), (684.0, 1));
    }

    /// `with_transaction_seconds`: an answered `TransactWriteItems` stays ongoing, its answer
    /// held, until its duration has passed in model time, so a write of one of its items in
    /// the meantime conflicts (the emulator answers in milliseconds; the hold is 3 s).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_transaction_stays_ongoing_for_the_models_transaction_duration() {
        let model = CapacityModel::new(Clock::scaled(1.0)).with_transaction_seconds(3.0);
        let (plain, through, table) = clients(&model).await;
        let pk = support::site("held");
        let put = TransactWriteItem::builder()
            .put(
                Put::builder()
                    .table_name(&table)
                    .set_item(Some(item(&pk, "counter", 10)))
                    .build()
                    .unwrap(),
            )
            .build();
        let transaction = tokio::spawn(through.transact_write_items().transact_items(put).send());
        while model.report().operation("TransactWriteItems").requests == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let err = through
            .put_item()
            .table_name(&table)
            .set_item(Some(item(&pk, "counter", 10)))
            .send()
            .await
            .expect_err("the transaction is still ongoing");
        assert!(
            matches!(
                err.as_service_error(),
                Some(PutItemError::TransactionConflictException(_))
            ),
            "{err:?}"
        );
        transaction.await.unwrap().expect("the transaction commits");
        assert!(stored(&plain, &table, &pk, "counter").await);
    }

    #[tokio::test]
    async fn a_conflicting_transaction_is_cancelled_with_transaction_conflict() {
        let model = CapacityModel::new(Clock::manual());
        let (plain, through, table) = clients(&model).await;
        let pk = support::site("conflict");
        // Another transaction holds `counter` (admitted by the model, its answer not yet in).
        let ongoing =
            model.admit(&model.parse("TransactWriteItems", &transaction_body(&[(&pk, "counter")])));
        assert!(matches!(ongoing, Admission::Admitted(_)));
        let put = |sk: &str| {
            TransactWriteItem::builder()
                .put(
                    Put::builder()
                        .table_name(&table)
                        .set_item(Some(item(&pk, sk, 10)))
                        .build()
                        .unwrap(),
                )
                .build()
        };
        let err = through
            .transact_write_items()
            .transact_items(put("doc"))
            .transact_items(put("counter"))
            .send()
            .await
            .expect_err("cancelled");
        let Some(TransactWriteItemsError::TransactionCanceledException(e)) = err.as_service_error()
        else {
            panic!("not a cancellation: {err:?}")
        };
        let codes: Vec<Option<&str>> = e.cancellation_reasons().iter().map(|r| r.code()).collect();
        assert_eq!(codes, [Some("None"), Some("TransactionConflict")]);
        let err = through
            .put_item()
            .table_name(&table)
            .set_item(Some(item(&pk, "counter", 10)))
            .send()
            .await
            .expect_err("a lone write of a held item conflicts");
        assert!(
            matches!(
                err.as_service_error(),
                Some(PutItemError::TransactionConflictException(_))
            ),
            "{err:?}"
        );
        assert!(
            !stored(&plain, &table, &pk, "doc").await,
            "nothing was applied"
        );
        drop(ongoing);
        through
            .transact_write_items()
            .transact_items(put("doc"))
            .transact_items(put("counter"))
            .send()
            .await
            .expect("the item is free once the other transaction answered");
        assert!(stored(&plain, &table, &pk, "doc").await);
    }

    /// A read is charged by what it returned (a 10 KB item: 3 units consistent), and a
    /// `BatchGetItem` answers the keys of a throttled partition key as unprocessed, or is
    /// refused when every key is throttled.
    #[tokio::test]
    async fn reads_are_charged_by_size_and_throttled_batch_keys_come_back_unprocessed() {
        let model = CapacityModel::new(Clock::manual());
        let (plain, through, table) = clients(&model).await;
        let (hot, cold) = (support::site("hot"), support::site("cold"));
        for pk in [&hot, &cold] {
            plain
                .put_item()
                .table_name(&table)
                .set_item(Some(item(pk, "s", 10_000)))
                .send()
                .await
                .unwrap();
        }
        let read = through
            .get_item()
            .table_name(&table)
            .key("pk", AttributeValue::S(cold.clone()))
            .key("sk", AttributeValue::S("s".into()))
            .consistent_read(true)
            .send()
            .await
            .unwrap();
        assert!(read.item().is_some());
        let cold_item = Target::Item(ItemKey {
            pk: cold.clone(),
            sk: "s".into(),
        });
        assert_eq!(model.report().targets[&cold_item].read_units, 3.0);
        let hot_partition = Target::Partition {
            index: None,
            value: hot.clone(),
        };
        model.drain(&hot_partition, Direction::Read);
        let keys = |pks: &[&String]| {
            let mut keys =
                aws_sdk_dynamodb::types::KeysAndAttributes::builder().consistent_read(true);
            for pk in pks {
                keys = keys.keys(
                    [
                        ("pk".to_owned(), AttributeValue::S((*pk).clone())),
                        ("sk".to_owned(), AttributeValue::S("s".into())),
                    ]
                    .into(),
                );
            }
            keys.build().unwrap()
        };
        let batch = through
            .batch_get_item()
            .request_items(&table, keys(&[&hot, &cold]))
            .send()
            .await
            .unwrap();
        let returned: Vec<&AttributeValue> = batch.responses().unwrap()[&table]
            .iter()
            .map(|item| &item["pk"])
            .collect();
        assert_eq!(returned, [&AttributeValue::S(cold.clone())]);
        let unprocessed = &batch.unprocessed_keys().unwrap()[&table];
        assert_eq!(unprocessed.keys()[0]["pk"], AttributeValue::S(hot.clone()));
        assert_eq!(unprocessed.consistent_read(), Some(true));
        let err = through
            .batch_get_item()
            .request_items(&table, keys(&[&hot]))
            .send()
            .await
            .expect_err("every key throttled");
        assert!(
            err.as_service_error()
                .is_some_and(|e| e.is_provisioned_throughput_exceeded_exception()),
            "{err:?}"
        );
        assert_eq!(model.report().targets[&hot_partition].throttles, 2);
    }
}

/// The store's layout through the model: 64 writers creating documents in one collection at
/// once, exact counters (each create one `TransactWriteItems`: the document and a counter
/// item). The clock runs at a hundredth of real time; 256 creates stay within the partitions'
/// units, so what the model finds is where writes and conflicts pile up. One run at a time:
/// they share the emulator, and a throttling run needs its writers faster than the refill.
mod layout {
    use super::*;
    use docstore::config::DynamoDbConfig;
    use docstore::{Key, Store, StoreOptions};
    use docstore_dynamodb::DynamoStore;
    use support::Emulator;
    use support::capacity::Report;

    const CREATES_EACH: usize = 4;

    /// Held by the run in progress.
    static ONE_RUN_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    /// What a run of concurrent creates did.
    struct Run {
        report: Report,
        site: String,
        collection: String,
        created: usize,
        failures: Vec<String>,
        counted: u64,
    }

    impl Run {
        /// The counter item of the layout's original single-item counter (shard 0 now).
        fn counter_item(&self) -> ItemKey {
            ItemKey {
                pk: format!("{}#__collections", self.site),
                sk: self.collection.clone(),
            }
        }

        /// What the layout must achieve (docs/contract.md, "Collection counters": nothing that
        /// every create of a collection writes may be a single item): every create succeeds
        /// and is counted, no item takes more than a tenth of the write units, and no item
        /// meets more than a quarter of the conflicts and throttles (or 8, when there are few).
        fn spread(&self) -> Result<(), String> {
            if !self.failures.is_empty() || self.counted != self.created as u64 {
                return Err(format!(
                    "{} creates failed ({:?}), {} counted of {}",
                    self.failures.len(),
                    self.failures.first(),
                    self.counted,
                    self.created
                ));
            }
            let report = &self.report;
            let (hottest, _) = report.hottest_item().expect("items were written");
            let share = report.write_share(hottest);
            if share > 0.10 {
                return Err(format!(
                    "{hottest:?} took {:.0}% of the write units",
                    100.0 * share
                ));
            }
            let (most_refused, refusals) = report.most_refused_item().expect("items were written");
            if refusals > (report.item_refusals() / 4).max(8) {
                return Err(format!(
                    "{most_refused:?} met {refusals} of {} conflicts and throttles",
                    report.item_refusals()
                ));
            }
            Ok(())
        }
    }

    /// A run's settings.
    struct Workload {
        /// Concurrent writers, each creating `CREATES_EACH` documents.
        writers: usize,
        /// Over how many collections the writers spread (writer `w` writes collection
        /// `w % collections`; one: `tickets`).
        collections: usize,
        /// Counter items per collection.
        counter_shards: u32,
        /// The store's options (declared indexes).
        options: StoreOptions,
        /// DynamoDB seconds per real second.
        model_seconds_per_second: f64,
        /// Bytes of padding in each document.
        padding: usize,
        /// Whether the collection's partition key starts with no units left (another client
        /// just took them).
        drained: bool,
    }

    impl Default for Workload {
        fn default() -> Self {
            Workload {
                writers: 64,
                collections: 1,
                counter_shards: docstore::config::DEFAULT_COUNTER_SHARDS,
                options: StoreOptions::default(),
                model_seconds_per_second: 0.01,
                padding: 0,
                drained: false,
            }
        }
    }

    /// `workload.writers` tasks creating `CREATES_EACH` documents each in one collection,
    /// through a model, on a table made for `workload`'s options.
    async fn concurrent_creates(workload: Workload) -> Run {
        let _serial = ONE_RUN_AT_A_TIME.lock().await;
        let emulator = Emulator::Dynoxide;
        let table = match workload.options.indexes.is_empty() {
            true => support::ensure_table(&super::wire::TABLE, emulator, "capacity").await,
            false => {
                let table = support::fresh_table("capacity-idx");
                let plain = support::store_on(
                    emulator.client(),
                    emulator.streams(),
                    &table,
                    10_000,
                    workload.options.clone(),
                );
                plain.create_table().await.expect("table created");
                table
            }
        };
        let model = CapacityModel::new(Clock::scaled(workload.model_seconds_per_second));
        let config = DynamoDbConfig {
            counter_shards: workload.counter_shards,
            ..support::config_for(emulator, &table)
        };
        let store = Store::new(
            DynamoStore::from_client(
                emulator.capacity_client(&model),
                emulator.streams(),
                &config,
                workload.options,
            )
            .expect("valid settings"),
        );
        let (site, collection) = (support::site("capacity"), "tickets".to_owned());
        if workload.drained {
            // The store's first write reads the table's index records: done before, so that
            // the writers' first creates all come at once.
            let warm_up = Key::new(&site, "warm-up", "w").unwrap();
            let data = support::obj(serde_json::json!({}));
            store.create(&warm_up, data, "writer").await.unwrap();
            for value in support::document_pks(&site, &collection) {
                let documents = Target::Partition { index: None, value };
                model.drain(&documents, Direction::Write);
            }
        }
        let padding = "x".repeat(workload.padding);
        let writers: Vec<_> = (0..workload.writers)
            .map(|writer| {
                let (store, site) = (store.clone(), site.clone());
                let collection = match workload.collections {
                    1 => collection.clone(),
                    n => format!("c{}", writer % n),
                };
                let padding = padding.clone();
                tokio::spawn(async move {
                    let mut failures = Vec::new();
                    for n in 0..CREATES_EACH {
                        let id = format!("w{writer}-{n}");
                        let key = Key::new(&site, &collection, &id).unwrap();
                        let data = serde_json::json!({"writer": writer, "n": n, "pad": padding});
                        if let Err(err) = store.create(&key, support::obj(data), "writer").await {
                            failures.push(format!("{key:?}: {err}"));
                        }
                    }
                    failures
                })
            })
            .collect();
        let mut failures = Vec::new();
        for writer in writers {
            failures.extend(writer.await.unwrap());
        }
        let counted = store
            .collections(&site)
            .await
            .unwrap()
            .into_iter()
            .filter(|(name, _)| workload.collections > 1 || *name == collection)
            .map(|(_, count)| count)
            .sum();
        Run {
            report: model.report(),
            site,
            collection,
            created: workload.writers * CREATES_EACH - failures.len(),
            failures,
            counted,
        }
    }

    /// The layout with one counter item per collection (the original one, `counter_shards =
    /// 1`), as the model sees it: every create writes that item, so it takes half of all write
    /// units and meets every conflict — and the layout fails [`Run::spread`].
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn with_one_counter_item_every_create_writes_it_and_conflicts_on_it() {
        let run = concurrent_creates(Workload {
            counter_shards: 1,
            ..Workload::default()
        })
        .await;
        let counter = run.counter_item();
        let report = &run.report;
        let (hottest, usage) = report.hottest_item().expect("items were written");
        assert_eq!(hottest, &counter);
        // Two transactional write units per create that committed (cancelled ones cost none).
        assert_eq!(usage.write_units, 2.0 * run.created as f64);
        assert!(
            report.write_share(&counter) >= 0.4,
            "{}",
            report.write_share(&counter)
        );
        let (most_refused, refusals) = report.most_refused_item().expect("items were written");
        assert_eq!(most_refused, &counter);
        assert!(refusals > 0, "64 writers on one item met no conflict");
        assert_eq!(
            report.item_refusals(),
            refusals,
            "documents' own items never conflict"
        );
        let spread = run.spread();
        assert!(
            spread.is_err(),
            "a single counter item passed the spread test"
        );
        eprintln!(
            "one counter item: {} creates, {} failed; counter: {} write units ({:.0}% of all), \
             {refusals} conflicts; TransactWriteItems {:?}; {}",
            run.created,
            run.failures.len(),
            usage.write_units,
            100.0 * report.write_share(&counter),
            report.operation("TransactWriteItems"),
            spread.unwrap_err(),
        );
    }

    /// The default layout (32 counter shards per collection) spreads the creates of one
    /// collection over many items (see [`Run::spread`]).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn creates_in_one_collection_spread_over_many_items() {
        let run = concurrent_creates(Workload::default()).await;
        let report = &run.report;
        let (hottest, usage) = report.hottest_item().expect("items were written");
        eprintln!(
            "{} counter shards: {} creates; hottest item {hottest:?}: {} write units ({:.1}%); \
             most refused: {:?} of {}; TransactWriteItems {:?}",
            docstore::config::DEFAULT_COUNTER_SHARDS,
            run.created,
            usage.write_units,
            100.0 * report.write_share(hottest),
            report.most_refused_item(),
            report.item_refusals(),
            report.operation("TransactWriteItems"),
        );
        run.spread().unwrap();
        // Nor one partition key: the documents and the counter shards spread over the table's
        // partitions (one key took half of the write units before).
        let base_writes = base_partition_units(report);
        let total: f64 = base_writes.iter().map(|(_, units)| units).sum();
        let (hottest_key, units) = hottest_partition(&base_writes);
        let share = units / total;
        assert!(share <= 0.25, "{hottest_key} took {:.0}%", 100.0 * share);
    }

    /// Past a partition key's limit: the collection's partition keys start with no units
    /// left, and documents of about 3 KB cost 6 transactional units each, so 32 writers (192
    /// units at once) are held to their refill (1 000 units a DynamoDB second each, 4 real
    /// seconds here). The throttled transactions are cancelled, retried
    /// by the store, and every create is applied once and counted once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn throttled_creates_are_retried_and_applied_once() {
        let run = concurrent_creates(Workload {
            writers: 32,
            padding: 2_800,
            model_seconds_per_second: 0.25,
            drained: true,
            ..Workload::default()
        })
        .await;
        let report = &run.report;
        let partitions = support::document_pks(&run.site, &run.collection);
        let throttles: u64 = partitions
            .iter()
            .map(|value| {
                let documents = Target::Partition {
                    index: None,
                    value: value.clone(),
                };
                report.targets[&documents].throttles
            })
            .sum();
        assert!(throttles > 0, "no create was throttled");
        assert!(report.operation("TransactWriteItems").throttled > 0);
        assert_eq!(run.failures, Vec::<String>::new());
        assert_eq!(run.counted, (32 * CREATES_EACH) as u64);
        // Each document was written by exactly one transaction: a throttled one costs nothing.
        let document_units: Vec<f64> = report
            .items()
            .filter(|(key, _)| partitions.contains(&key.pk))
            .map(|(_, usage)| usage.write_units)
            .collect();
        assert_eq!(document_units, vec![6.0; 32 * CREATES_EACH]);
        eprintln!(
            "throttled: {throttles} on the documents' partition keys; TransactWriteItems {:?}",
            report.operation("TransactWriteItems")
        );
    }

    /// A declared index's GSI partition key must not take all the GSI writes of a collection
    /// (docs/contract.md: a GSI partition key carries the document id's partition among the
    /// index's 8): no GSI partition key value takes more than a quarter of them, so the index's
    /// writes may go at least 4 times one key's 1 000 WCU/s. (Before partitions every document
    /// of the collection had the same GSI partition key value: 100%.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn index_writes_spread_over_many_gsi_partition_keys() {
        let index = docstore::index::Index::parse("tickets", "by_n", ["n"]).unwrap();
        let options =
            StoreOptions::default().with_indexes(docstore::index::IndexSet::new([index]).unwrap());
        let run = concurrent_creates(Workload {
            options,
            ..Workload::default()
        })
        .await;
        assert_eq!(run.failures, Vec::<String>::new());
        let gsi_units: Vec<(&String, f64)> = run
            .report
            .targets
            .iter()
            .filter_map(|(target, usage)| match target {
                Target::Partition {
                    index: Some(_),
                    value,
                } => Some((value, usage.write_units)),
                _ => None,
            })
            .collect();
        let total: f64 = gsi_units.iter().map(|(_, units)| units).sum();
        assert_eq!(
            total,
            (64 * CREATES_EACH) as f64,
            "one GSI write per create"
        );
        let (hottest, units) = gsi_units
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .expect("GSI writes");
        assert!(
            units / total <= 0.25,
            "GSI partition key {hottest} took {:.0}% of the GSI write units",
            100.0 * units / total
        );
    }

    /// Creates spread over 16 collections of one site: every create also writes a counter
    /// shard of the site, and the shards are spread over the table's partitions
    /// (docs/contract.md, "Partitions on DynamoDB"), so no base-table partition key takes more
    /// than a tenth of the site's write units. (With every counter shard of a site under one
    /// partition key, `<site>#__collections`, that key took half of them: DynamoDB's 1 000
    /// WCU/s per partition key value then bounded the creates of the whole site to 500 a
    /// second.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_sites_counter_shards_spread_over_partition_keys() {
        let run = concurrent_creates(Workload {
            collections: 16,
            ..Workload::default()
        })
        .await;
        assert_eq!(run.failures, Vec::<String>::new());
        assert_eq!(run.counted, run.created as u64);
        let base_writes = base_partition_units(&run.report);
        let total: f64 = base_writes.iter().map(|(_, units)| units).sum();
        let (hottest, units) = hottest_partition(&base_writes);
        assert!(
            units / total <= 0.1,
            "{hottest} took {:.0}% of the write units",
            100.0 * units / total
        );
        // No item of it is hot: the shards spread the conflicts.
        run.spread().unwrap();
        eprintln!(
            "16 collections: {} creates; {hottest}: {units} write units ({:.0}% of all)",
            run.created,
            100.0 * units / total
        );
    }

    /// The write units each base-table partition key value took.
    fn base_partition_units(report: &Report) -> Vec<(&String, f64)> {
        report
            .targets
            .iter()
            .filter_map(|(target, usage)| match target {
                Target::Partition { index: None, value } => Some((value, usage.write_units)),
                _ => None,
            })
            .collect()
    }

    /// The partition key value that took the most write units, and how many.
    fn hottest_partition<'a>(units: &[(&'a String, f64)]) -> (&'a String, f64) {
        units
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(value, units)| (*value, *units))
            .expect("writes")
    }
}
