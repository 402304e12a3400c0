//! DynamoDB plumbing shared by the docstore subject and the baseline: the SDK client (with
//! an interceptor counting requests per operation), a fresh table, and a bulk loader that
//! writes items in docstore-dynamodb's layout (`docs/contract.md`).

use crate::BenchResult;
use crate::data::{ACTOR, SITE, document, id, now_nanos};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::interceptors::{
    BeforeDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Credentials, Intercept, Region, RuntimeComponents};
use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use docstore::StoreOptions;
use docstore::config::DynamoDbConfig;
use docstore_dynamodb::DynamoStore;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Requests sent and the time spent waiting for their answers, by operation name
/// (`"GetItem"`, ...), resends included.
#[derive(Clone, Debug, Default)]
pub struct RequestCounter(Arc<Mutex<BTreeMap<String, Requests>>>);

/// One operation's requests.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Requests {
    /// How many were sent.
    pub count: u64,
    /// From sending each to its answer's arrival, summed.
    pub waiting: Duration,
}

/// When the current attempt was handed to the HTTP client.
#[derive(Clone, Debug)]
struct SentAt(Instant);

impl Storable for SentAt {
    type Storer = StoreReplace<Self>;
}

impl RequestCounter {
    /// The figures since the last call; starts counting again.
    pub fn take(&self) -> BTreeMap<String, Requests> {
        std::mem::take(&mut *self.0.lock())
    }
}

fn operation(cfg: &ConfigBag) -> String {
    cfg.load::<Metadata>()
        .map_or("unknown", |m| m.name())
        .to_owned()
}

impl Intercept for RequestCounter {
    fn name(&self) -> &'static str {
        "docstore-bench request counter"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        self.0.lock().entry(operation(cfg)).or_default().count += 1;
        cfg.interceptor_state().store_put(SentAt(Instant::now()));
        Ok(())
    }

    fn read_after_transmit(
        &self,
        _context: &BeforeDeserializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        if let Some(SentAt(sent)) = cfg.load::<SentAt>() {
            let waited = sent.elapsed();
            self.0.lock().entry(operation(cfg)).or_default().waiting += waited;
        }
        Ok(())
    }
}

/// An SDK client for `endpoint` that counts its requests in `counter`. Region and
/// credentials come from the environment when set, else dummies (emulators accept any).
pub async fn client(endpoint: &str, counter: &RequestCounter) -> Client {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new(
            std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".to_owned()),
        ));
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
        loader =
            loader.credentials_provider(Credentials::new("bench", "bench", None, None, "bench"));
    }
    let shared = loader.load().await;
    let config = aws_sdk_dynamodb::config::Builder::from(&shared)
        .interceptor(counter.clone())
        .build();
    Client::from_conf(config)
}

/// A DynamoDB Streams client for `endpoint`, configured like [`client`] (the store's change
/// feed reads through it).
pub async fn streams_client(endpoint: &str) -> docstore_dynamodb::aws_sdk_dynamodbstreams::Client {
    use docstore_dynamodb::aws_sdk_dynamodbstreams as streams;
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new(
            std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".to_owned()),
        ));
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
        loader =
            loader.credentials_provider(Credentials::new("bench", "bench", None, None, "bench"));
    }
    streams::Client::new(&loader.load().await)
}

/// A `DynamoStore` on `table` through `client` and `streams`, with the default options and
/// `max_scan`.
pub fn store(
    client: Client,
    streams: docstore_dynamodb::aws_sdk_dynamodbstreams::Client,
    table: &str,
) -> BenchResult<DynamoStore> {
    let config = DynamoDbConfig::new(table);
    Ok(DynamoStore::from_client(
        client,
        streams,
        &config,
        StoreOptions::default(),
    )?)
}

/// A table name no earlier run used.
pub fn fresh_table_name() -> String {
    format!("docstore-bench-{}-{}", std::process::id(), now_nanos())
}

/// How many partition keys docstore-dynamodb spreads each collection of a new table over:
/// its default `collection_partitions`, which the bench's tables keep.
pub fn partitions() -> u32 {
    DynamoDbConfig::new("bench").collection_partitions.max(1)
}

/// The partition key the table layout (`docs/contract.md`, "Partitions on DynamoDB") keeps
/// document `id` of `collection` under: `<site>#<collection>`, then `#<p>` for the id's
/// partition `p > 0` — FNV-1a of the id's bytes, modulo [`partitions`].
pub fn document_pk(collection: &str, id: &str) -> String {
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    match hash % u64::from(partitions()) {
        0 => format!("{SITE}#{collection}"),
        partition => format!("{SITE}#{collection}#{partition}"),
    }
}

/// Every partition key of `collection`'s documents, partition 0 first.
pub fn document_pks(collection: &str) -> Vec<String> {
    let base = format!("{SITE}#{collection}");
    let suffixed = (1..partitions()).map(|partition| format!("{base}#{partition}"));
    std::iter::once(base.clone()).chain(suffixed).collect()
}

/// The item of document number `n` (generation 0, version 1) in `collection`, exactly as
/// docstore-dynamodb's `put` leaves it, under its partition ([`document_pk`]).
pub fn item(collection: &str, n: usize) -> HashMap<String, AttributeValue> {
    let now = AttributeValue::N(now_nanos().to_string());
    let data = serde_json::to_string(&document(n, 0)).expect("serializes");
    HashMap::from([
        (
            "pk".to_owned(),
            AttributeValue::S(document_pk(collection, &id(n))),
        ),
        ("sk".to_owned(), AttributeValue::S(id(n))),
        ("data".to_owned(), AttributeValue::S(data)),
        ("created_at".to_owned(), now.clone()),
        ("updated_at".to_owned(), now),
        ("created_by".to_owned(), AttributeValue::S(ACTOR.to_owned())),
        ("updated_by".to_owned(), AttributeValue::S(ACTOR.to_owned())),
        ("version".to_owned(), AttributeValue::N("1".to_owned())),
    ])
}

/// Writes `items` into `table` with BatchWriteItem, 25 at a time, sending unprocessed items
/// again.
pub async fn put_items(
    client: &Client,
    table: &str,
    items: impl IntoIterator<Item = HashMap<String, AttributeValue>>,
) -> BenchResult<()> {
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        let mut requests: Vec<WriteRequest> = Vec::with_capacity(25);
        for item in items.by_ref().take(25) {
            let put = PutRequest::builder().set_item(Some(item)).build()?;
            requests.push(WriteRequest::builder().put_request(put).build());
        }
        let mut pending = HashMap::from([(table.to_owned(), requests)]);
        while !pending.is_empty() {
            let output = client
                .batch_write_item()
                .set_request_items(Some(pending))
                .send()
                .await?;
            pending = output.unprocessed_items.unwrap_or_default();
            pending.retain(|_, requests| !requests.is_empty());
        }
    }
    Ok(())
}

/// Writes documents `0..count` into `collection` with BatchWriteItem ([`put_items`]) and sets
/// the collection counter; the bytes of data written (for the minimum number of Query
/// pages).
pub async fn bulk_load(
    client: &Client,
    table: &str,
    collection: &str,
    count: usize,
) -> BenchResult<usize> {
    let mut bytes = 0;
    let items = (0..count).map(|n| {
        let item = item(collection, n);
        bytes += item_size(&item);
        item
    });
    put_items(client, table, items).await?;
    client
        .put_item()
        .table_name(table)
        .item("pk", AttributeValue::S(format!("{SITE}#__collections")))
        .item("sk", AttributeValue::S(collection.to_owned()))
        .item("n", AttributeValue::N(count.to_string()))
        .send()
        .await?;
    Ok(bytes)
}

/// The size DynamoDB counts for an item: attribute names plus values (numbers counted as
/// their text, an upper bound).
pub fn item_size(item: &HashMap<String, AttributeValue>) -> usize {
    item.iter()
        .map(|(name, value)| {
            name.len()
                + match value {
                    AttributeValue::S(s) | AttributeValue::N(s) => s.len(),
                    _ => 0,
                }
        })
        .sum()
}
