//! What every test binary shares: the emulator endpoints (set by
//! `scripts/with-dynamodb-emulators`), SDK clients for them, one table per test binary and
//! the conformance harness.

#![allow(dead_code)] // each test binary uses its own part

pub mod faults;
pub mod requests;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::{Credentials, Region};
use docstore::config::DynamoDbConfig;
use docstore::{Store, StoreOptions};
use docstore_dynamodb::{DynamoStore, aws_sdk_dynamodbstreams};
/// The capacity model (its own crate, shared with docstore-bench).
pub use docstore_dynamodb_model as capacity;
use tokio::sync::OnceCell;

/// One of the two emulators the script starts.
#[derive(Clone, Copy, Debug)]
pub enum Emulator {
    /// dynoxide (crates.io `dynoxide-rs`).
    Dynoxide,
    /// moto (PyPI `moto[server]`).
    Moto,
}

impl Emulator {
    /// The emulator's endpoint; panics, naming the script, when the variable is missing.
    pub fn endpoint(self) -> String {
        let var = match self {
            Emulator::Dynoxide => "DOCSTORE_DYNOXIDE_ENDPOINT",
            Emulator::Moto => "DOCSTORE_MOTO_ENDPOINT",
        };
        std::env::var(var).unwrap_or_else(|_| {
            panic!(
                "{var} is not set: these tests need the DynamoDB emulators; run them through \
                 `scripts/with-dynamodb-emulators cargo test -p docstore-dynamodb`"
            )
        })
    }

    /// A plain SDK client for the emulator.
    pub fn client(self) -> Client {
        self.client_with(|config| config)
    }

    /// An SDK client for the emulator, with its configuration adjusted by `customize` (HTTP
    /// client, interceptors, retries).
    pub fn client_with(
        self,
        customize: impl FnOnce(aws_sdk_dynamodb::config::Builder) -> aws_sdk_dynamodb::config::Builder,
    ) -> Client {
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .endpoint_url(self.endpoint())
            .credentials_provider(Credentials::new(
                "docstore-test",
                "docstore-test",
                None,
                None,
                "test",
            ));
        Client::from_conf(customize(config).build())
    }

    /// A DynamoDB Streams client for the emulator (same region and credentials as
    /// [`client`](Self::client): moto keeps a stream per region).
    pub fn streams(self) -> aws_sdk_dynamodbstreams::Client {
        aws_sdk_dynamodbstreams::Client::from_conf(
            aws_sdk_dynamodbstreams::Config::builder()
                .behavior_version(aws_sdk_dynamodbstreams::config::BehaviorVersion::latest())
                .region(Region::new("us-east-1"))
                .endpoint_url(self.endpoint())
                .credentials_provider(Credentials::new(
                    "docstore-test",
                    "docstore-test",
                    None,
                    None,
                    "test",
                ))
                .build(),
        )
    }

    /// Whether the emulator honours `TransactWriteItems`' client request token (dynoxide
    /// does; moto ignores it).
    pub fn honours_request_tokens(self) -> bool {
        matches!(self, Emulator::Dynoxide)
    }

    /// A client whose requests go through the capacity model `model` (DynamoDB's throughput
    /// limits and transaction conflicts), with the store's own retry settings.
    pub fn capacity_client(self, model: &capacity::CapacityModel) -> Client {
        let (retry, partition) = model.retry_config();
        self.client_with(|config| {
            config
                .http_client(model.http_client())
                .retry_config(retry)
                .retry_partition(partition)
        })
    }

    /// A client whose answers are lost as `faults` says, with quick, unmetered retries.
    pub fn faulty_client(self, faults: &faults::Faults) -> Client {
        let (retry, partition) = faults::Faults::retry_config();
        self.client_with(|config| {
            config
                .http_client(faults.http_client())
                .retry_config(retry)
                .retry_partition(partition)
        })
    }
}

/// A fresh table name for one test binary.
pub fn fresh_table(tag: &str) -> String {
    format!(
        "docstore-{tag}-{}",
        &docstore::WriteId::random().as_str()[..12]
    )
}

/// The settings of a store on `table` with `max_scan`.
///
/// A call may go on retrying conflicts for 120 s instead of the default 30: moto answers from
/// one Python thread, and under the suite's 16 writers on one document (8 of them in
/// batches) a call's tries there outlast 30 s; the contract is that they all get through.
pub fn config(table: &str, max_scan: usize) -> DynamoDbConfig {
    DynamoDbConfig {
        max_scan,
        operation_timeout_ms: 120_000,
        ..DynamoDbConfig::new(table)
    }
}

/// The settings of a store on `table` for `emulator`: client request tokens trusted only
/// where the emulator honours them.
pub fn config_for(emulator: Emulator, table: &str) -> DynamoDbConfig {
    DynamoDbConfig {
        trust_request_tokens: emulator.honours_request_tokens(),
        ..config(table, 10_000)
    }
}

/// Creates a table of its own named after `tag` (as a store does, stream included) and
/// returns its name.
pub async fn new_table(emulator: Emulator, tag: &str) -> String {
    let table = fresh_table(tag);
    let store = DynamoStore::from_client(
        emulator.client(),
        emulator.streams(),
        &config(&table, 10_000),
        StoreOptions::default(),
    )
    .expect("valid settings");
    store.create_table().await.expect("table created");
    table
}

/// Creates `table` once per test binary (the first caller does it, the rest wait).
pub async fn ensure_table(cell: &OnceCell<String>, emulator: Emulator, tag: &str) -> String {
    cell.get_or_init(|| new_table(emulator, tag)).await.clone()
}

/// The table made with the GSIs of `options`' declared indexes, created by the first store
/// that declares exactly these (a property test opens hundreds of stores with the same
/// declarations: one table each made the indexed suite spend most of its time creating them).
async fn indexed_table(emulator: Emulator, options: &StoreOptions) -> String {
    type Tables =
        std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<OnceCell<String>>>>;
    static TABLES: std::sync::OnceLock<Tables> = std::sync::OnceLock::new();
    let declarations = format!("{emulator:?} {:?}", options.indexes.declarations());
    let cell = TABLES
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(declarations)
        .or_default()
        .clone();
    cell.get_or_init(|| async {
        let table = fresh_table("idx");
        let store = store_on(
            emulator.client(),
            emulator.streams(),
            &table,
            10_000,
            options.clone(),
        );
        store.create_table().await.expect("table created");
        table
    })
    .await
    .clone()
}

/// The conformance harness: a new client (for the calling test's runtime) on the binary's
/// one table, or on a table of its own per store; every case works in its own site.
pub struct Harness {
    pub emulator: Emulator,
    /// The binary's shared table; `None`: a new table for every store opened (for moto, whose
    /// Query reads its whole table, so small tables keep it fast).
    pub table: Option<&'static OnceCell<String>>,
}

#[async_trait]
impl conformance_tests::Harness for Harness {
    async fn open(&self, options: StoreOptions) -> Store {
        let client = self.emulator.client();
        let streams = self.emulator.streams();
        let store = match self.table {
            // A store without background sweeps is an expiry case's, on a manual clock: its
            // documents would read as expired long ago to the other cases' stores on the
            // system clock, whose background sweeps would remove them from a shared table.
            Some(_) if options.sweep_interval.is_none() => {
                let store = store_on(client, streams, &fresh_table("exp"), 10_000, options);
                store.create_table().await.expect("table created");
                store
            }
            // Declared indexes need their GSIs: a table made with them, shared by the stores
            // declaring the same indexes (every case works in its own site).
            Some(_) if !options.indexes.is_empty() => {
                let table = indexed_table(self.emulator, &options).await;
                store_on(client, streams, &table, 10_000, options)
            }
            Some(cell) => {
                let table = ensure_table(cell, self.emulator, "conformance").await;
                store_on(client, streams, &table, 10_000, options)
            }
            None => {
                // Two partitions rather than the default 8: moto answers from one Python
                // thread and a query in id order reads every partition, so 8 made its suite
                // time out; 2 take the same merge code (the default runs on dynoxide).
                let config = DynamoDbConfig {
                    collection_partitions: 2,
                    ..config(&fresh_table("case"), 10_000)
                };
                let store = DynamoStore::from_client(client, streams, &config, options)
                    .expect("valid settings");
                store.create_table().await.expect("table created");
                store
            }
        };
        Store::new(store)
    }

    /// A filtered query in id order stops reading when its page is full, so the page after
    /// a full one may be empty.
    ///
    /// Declared indexes are served by GSIs. Both emulators update a GSI in the same request as
    /// its table, so the suite's indexed answers are exact at once; on DynamoDB itself a GSI is
    /// eventually consistent and a query right after a write may miss it.
    ///
    /// The change feed is DynamoDB Streams: ordered per shard, not across the table (the
    /// emulators keep one shard, but the contract for DynamoDB is per-shard order).
    fn capabilities(&self) -> conformance_tests::Capabilities {
        conformance_tests::Capabilities::default()
            .with_knows_last_page(false)
            .with_secondary_indexes(true)
            .with_feed_commit_order(false)
            .with_feed_previous(true)
    }

    /// moto runs a quarter of each property test's cases (64 of 256 random operation
    /// sequences, 32 of 128 random index declarations): the same driver runs them all on
    /// dynoxide, and moto (every store a table of its own, every Query reading its whole table)
    /// took 1 055 s for the suite where dynoxide takes 303 s. The quarter still checks moto's
    /// fidelity (conditions, transactions, GSIs) on random sequences.
    fn property_case_divisor(&self) -> u32 {
        match self.emulator {
            Emulator::Dynoxide => 1,
            Emulator::Moto => 4,
        }
    }
}

/// A store on `table` in a client built by `client`, with `options` and `max_scan`.
pub fn store_on(
    client: Client,
    streams: aws_sdk_dynamodbstreams::Client,
    table: &str,
    max_scan: usize,
    options: StoreOptions,
) -> DynamoStore {
    DynamoStore::from_client(client, streams, &config(table, max_scan), options)
        .expect("valid settings")
}

/// A store on `table` for `emulator` (see [`config_for`]) with the default options.
pub fn store_for(emulator: Emulator, client: Client, table: &str) -> DynamoStore {
    DynamoStore::from_client(
        client,
        emulator.streams(),
        &config_for(emulator, table),
        StoreOptions::default(),
    )
    .expect("valid settings")
}

/// A store on `table` for `emulator` with the given counter mode and default options.
pub fn store_with_counters(
    emulator: Emulator,
    client: Client,
    table: &str,
    counters: docstore::config::CounterMode,
) -> DynamoStore {
    let config = DynamoDbConfig {
        counters,
        ..config_for(emulator, table)
    };
    DynamoStore::from_client(client, emulator.streams(), &config, StoreOptions::default())
        .expect("valid settings")
}

/// A fresh site name for one test.
pub fn site(tag: &str) -> String {
    conformance_tests::unique_site(tag)
}

/// A JSON object literal as document data.
pub fn obj(value: serde_json::Value) -> docstore::Data {
    docstore::object(value).expect("an object")
}

/// The partitions of the test tables' collections (the default, recorded when a table is made).
pub const PARTITIONS: u32 = docstore::config::DEFAULT_COLLECTION_PARTITIONS;

/// The partition key of the document `id` of `collection` in a test table (docs/contract.md,
/// "Partitions on DynamoDB"): partition 0 unsuffixed, the others `#<p>`.
pub fn document_pk(site: &str, collection: &str, id: &str) -> String {
    suffixed(format!("{site}#{collection}"), layout_shard(id, PARTITIONS))
}

/// The partition keys of every document of `collection` in a test table.
pub fn document_pks(site: &str, collection: &str) -> Vec<String> {
    (0..PARTITIONS)
        .map(|partition| suffixed(format!("{site}#{collection}"), partition))
        .collect()
}

/// The partition key of counter shard `shard` of `site`'s collections in a test table.
pub fn counter_pk(site: &str, shard: u32) -> String {
    suffixed(format!("{site}#__collections"), shard % PARTITIONS)
}

/// The partition keys of every counter shard of `site` in a test table.
pub fn counter_pks(site: &str) -> Vec<String> {
    (0..PARTITIONS)
        .map(|shard| counter_pk(site, shard))
        .collect()
}

fn suffixed(base: String, partition: u32) -> String {
    match partition {
        0 => base,
        partition => format!("{base}#{partition}"),
    }
}

/// The shard in `0..shards` of the document `id` wherever the layout spreads a collection
/// (counter shards, index partitions): FNV-1a of the id (docstore-dynamodb's crate docs),
/// computed here on its own so that a change to the layout's hash fails the tests.
pub fn layout_shard(id: &str, shards: u32) -> u32 {
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash % u64::from(shards)) as u32
}
