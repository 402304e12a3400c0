//! Concurrent creates into ONE collection on DynamoDB, through the capacity model
//! (`docstore-dynamodb-model`: DynamoDB's per-partition-key and per-item write limits and
//! transaction conflicts, between the SDK and the emulator): the figures of `docs/benchmarks.md`,
//! "Hot collection on DynamoDB".
//!
//! For each number of writers (16, 64, 256) three runs, each on a fresh table with one declared
//! index (`by_status`, a field of 4 values) and a fresh model:
//!
//! - **before**: `counter_shards = 1, collection_partitions = 1, index_partitions = 1` — one
//!   counter item every create writes, one partition key for the collection's documents and
//!   one GSI partition key value for the whole collection;
//! - **after**: the defaults (32 counter shards, 8 collection partitions, 8 index partitions);
//! - **raw PutItem**: the floor, one conditional `PutItem` per document of the very item the
//!   store wrote, at the partition the store puts it in (no counter, no transaction), through
//!   the same model.
//!
//! Each run: creates/s in DynamoDB seconds (the model's clock), throttles, transaction
//! conflicts, p50/p99 latency, write units and requests per create, and — for the store —
//! `count()` against the documents actually in the table. The targets are checks: the run
//! exits non-zero when "after" is throttled by the model (more than 2% of its requests) or
//! makes less than half the creates/s of raw `PutItem`s at any number of writers, when
//! `count()` differs from the documents stored, when a create failed, or
//! when "after" makes fewer than 10× the creates/s of "before" with the most writers.
//!
//! ```sh
//! scripts/with-dynamodb-emulators cargo run -p docstore-bench --bin hot_collection
//! ```

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, Select};
use clap::Parser;
use docstore::config::DynamoDbConfig;
use docstore::{Data, Index, IndexSet, Key, Store, StoreOptions};
use docstore_bench::measure::Latencies;
use docstore_bench::{BenchResult, dynamo};
use docstore_dynamodb::DynamoStore;
use docstore_dynamodb_model::{CapacityModel, Clock, Direction, Report, Target};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Concurrent creates into one collection through the capacity model, before and after the
/// sharded layout, and raw PutItems.
#[derive(Debug, Parser)]
struct Args {
    /// A DynamoDB endpoint (an emulator: `scripts/with-dynamodb-emulators` sets the
    /// variable); fresh tables are made there for every run.
    #[arg(long, env = "DOCSTORE_DYNOXIDE_ENDPOINT")]
    endpoint: String,
    /// The numbers of concurrent writers, one set of runs each.
    #[arg(long, value_delimiter = ',', default_value = "16,64,256")]
    writers: Vec<usize>,
    /// Real seconds during which each run's writers start creates.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// DynamoDB seconds per real second of the model's clock (its limits per real second
    /// are DynamoDB's times this).
    #[arg(long, default_value_t = 0.25)]
    model_seconds_per_second: f64,
    /// How long a transaction is ongoing (its items conflicting with other transactions'),
    /// in DynamoDB milliseconds; the emulator's own time counts when longer.
    #[arg(long, default_value_t = 10.0)]
    transaction_ms: f64,
    /// Requests admitted and at the emulator at once, at most (the others wait before the
    /// model admits them, so that queueing in the emulator is not time a transaction holds
    /// its items).
    #[arg(long, default_value_t = 8)]
    at_emulator: usize,
    /// The least creates/s "after" must make, as a multiple of "before", with the most
    /// writers (0: no such check, e.g. for a smoke run).
    #[arg(long, default_value_t = 10.0)]
    min_speedup: f64,
    /// The least creates/s "after" must make at every number of writers, as a share of raw
    /// `PutItem`s' through the same emulator (0: no such check, e.g. for a smoke run).
    #[arg(long, default_value_t = 0.5)]
    min_floor_share: f64,
}

const SITE: &str = "bench";
const COLLECTION: &str = "tickets";
/// The indexed field's values.
const STATUSES: [&str; 4] = ["open", "closed", "pending", "done"];

/// A layout under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// One counter item, one partition key for the documents, one GSI partition.
    Before,
    /// The defaults: 32 counter shards, 8 collection partitions, 8 index partitions.
    After,
    /// Raw conditional PutItems of the store's item: the floor.
    RawPutItem,
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Layout::Before => "before (1 counter item, 1 partition, 1 GSI partition)",
            Layout::After => "after (32 counter shards, 8 partitions, 8 GSI partitions)",
            Layout::RawPutItem => "raw PutItem (floor)",
        }
    }

    /// Over how many partition keys the collection's documents are.
    fn collection_partitions(self) -> u32 {
        match self {
            Layout::Before => 1,
            Layout::After | Layout::RawPutItem => docstore::config::DEFAULT_COLLECTION_PARTITIONS,
        }
    }
}

/// What one run measured.
#[derive(Debug)]
struct Figures {
    layout: Layout,
    writers: usize,
    created: u64,
    failed: u64,
    first_failure: Option<String>,
    /// Creates per DynamoDB second (the model's clock).
    creates_per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
    throttles: u64,
    conflicts: u64,
    write_units_per_create: f64,
    /// Requests sent per create, throttled and conflicted ones included.
    requests_per_create: f64,
    /// Requests the model admitted (sent on to the emulator) per create.
    admitted_per_create: f64,
    /// The collection's counter (`None` for raw PutItems, which keep none).
    counted: Option<u64>,
    /// Documents in the table.
    stored: u64,
}

/// The declared index: `status`, 4 values.
fn options() -> StoreOptions {
    let index = Index::parse(COLLECTION, "by_status", ["status"]).expect("index");
    StoreOptions::default().with_indexes(IndexSet::new(vec![index]).expect("indexes"))
}

/// Document `n`: the benchmarks' ~1 KB document with `status` one of 4 values.
fn document(n: usize) -> Data {
    let mut data = docstore_bench::data::document(n, 0);
    data.insert("status".into(), STATUSES[n % STATUSES.len()].into());
    data
}

/// The settings of `layout` on `table`.
fn config(layout: Layout, table: &str) -> DynamoDbConfig {
    let config = DynamoDbConfig {
        trust_request_tokens: true,
        ..DynamoDbConfig::new(table)
    };
    match layout {
        Layout::Before => DynamoDbConfig {
            counter_shards: 1,
            collection_partitions: 1,
            index_partitions: 1,
            ..config
        },
        _ => config,
    }
}

/// A fresh table for `layout` (made with the index's GSIs through a client outside the model).
async fn fresh_table(endpoint: &str, layout: Layout) -> BenchResult<String> {
    let table = dynamo::fresh_table_name();
    let (client, streams) = plain_clients(endpoint).await;
    let store = DynamoStore::from_client(client, streams, &config(layout, &table), options())?;
    store.create_table().await?;
    Ok(table)
}

async fn plain_clients(
    endpoint: &str,
) -> (Client, docstore_dynamodb::aws_sdk_dynamodbstreams::Client) {
    let client = dynamo::client(endpoint, &dynamo::RequestCounter::default()).await;
    (client, dynamo::streams_client(endpoint).await)
}

/// An SDK client whose requests go through `model`, with the store's retry settings.
async fn model_client(endpoint: &str, model: &CapacityModel) -> Client {
    let plain = dynamo::client(endpoint, &dynamo::RequestCounter::default()).await;
    let (retry, partition) = model.retry_config();
    let config = plain
        .config()
        .to_builder()
        .http_client(model.http_client())
        .retry_config(retry)
        .retry_partition(partition)
        .build();
    Client::from_conf(config)
}

/// The documents in the collection's `partitions` partition keys: consistent `COUNT` queries,
/// page by page.
async fn stored(client: &Client, table: &str, partitions: u32) -> BenchResult<u64> {
    let mut count = 0u64;
    for partition in 0..partitions {
        let pk = match partition {
            0 => format!("{SITE}#{COLLECTION}"),
            partition => format!("{SITE}#{COLLECTION}#{partition}"),
        };
        count += stored_in(client, table, pk).await?;
    }
    Ok(count)
}

/// The documents under the partition key `pk`.
async fn stored_in(client: &Client, table: &str, pk: String) -> BenchResult<u64> {
    let mut count = 0u64;
    let mut start = None;
    loop {
        let page = client
            .query()
            .table_name(table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(pk.clone()))
            .consistent_read(true)
            .select(Select::Count)
            .set_exclusive_start_key(start)
            .send()
            .await?;
        count += page.count() as u64;
        start = page.last_evaluated_key;
        if start.is_none() {
            return Ok(count);
        }
    }
}

/// What a creating writer did.
#[derive(Default)]
struct Tally {
    latencies: Latencies,
    /// When each successful create finished, from the run's start.
    finished: Vec<Duration>,
    created: u64,
    failed: u64,
    first_failure: Option<String>,
}

impl Tally {
    fn record(&mut self, run_start: Instant, started: Instant, outcome: Result<(), String>) {
        self.latencies.record(started.elapsed());
        match outcome {
            Ok(()) => {
                self.created += 1;
                self.finished.push(run_start.elapsed());
            }
            Err(err) => {
                self.failed += 1;
                self.first_failure.get_or_insert(err);
            }
        }
    }

    fn merge(&mut self, other: Tally) {
        self.latencies.extend(other.latencies);
        self.finished.extend(other.finished);
        self.created += other.created;
        self.failed += other.failed;
        if self.first_failure.is_none() {
            self.first_failure = other.first_failure;
        }
    }
}

/// One create: through the store, or a raw conditional PutItem of `template` as document `id`.
#[derive(Clone)]
enum Creator {
    Store(Store),
    Raw {
        client: Client,
        table: String,
        template: Arc<HashMap<String, AttributeValue>>,
    },
}

impl Creator {
    async fn create(&self, id: &str, n: usize) -> Result<(), String> {
        match self {
            Creator::Store(store) => {
                let key = Key::new(SITE, COLLECTION, id).map_err(|e| e.to_string())?;
                let created = store.create(&key, document(n), "bench").await;
                created.map(drop).map_err(|e| e.to_string())
            }
            Creator::Raw {
                client,
                table,
                template,
            } => raw_put(client, table, raw_item(template, id)).await,
        }
    }
}

/// A conditional PutItem of `item`, sent again with jittered exponential backoff (20 ms
/// doubling up to 1 s) while throttled, for up to [`RAW_DEADLINE`]: what a careful caller of
/// the SDK does once its own retries are spent.
async fn raw_put(
    client: &Client,
    table: &str,
    item: HashMap<String, AttributeValue>,
) -> Result<(), String> {
    use aws_sdk_dynamodb::error::ProvideErrorMetadata;
    let started = Instant::now();
    let sk = match item.get("sk") {
        Some(AttributeValue::S(sk)) => docstore::driver::stable_hash(sk.as_bytes()),
        _ => 0,
    };
    let mut jitter = docstore_bench::data::Rng::new(sk);
    for attempt in 0u32.. {
        let sent = client
            .put_item()
            .table_name(table)
            .set_item(Some(item.clone()))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        let err = match sent {
            Ok(_) => return Ok(()),
            Err(err) => err,
        };
        let throttled = matches!(
            err.code(),
            Some("ProvisionedThroughputExceededException" | "ThrottlingException")
        );
        if !throttled || started.elapsed() > RAW_DEADLINE {
            return Err(format!(
                "{}",
                aws_sdk_dynamodb::error::DisplayErrorContext(err)
            ));
        }
        let ceiling = 20.0 * 2f64.powi(attempt.min(6) as i32);
        let millis = ceiling.min(1_000.0) * (0.5 + (jitter.below(1_000) as f64) / 2_000.0);
        tokio::time::sleep(Duration::from_secs_f64(millis / 1e3)).await;
    }
    unreachable!("the loop returns")
}

/// How long a raw PutItem is sent again while throttled (the store's default operation
/// deadline).
const RAW_DEADLINE: Duration = Duration::from_secs(30);

/// `writers` tasks creating documents in the collection until `seconds` have passed (a create
/// started is finished); what they did.
async fn create_for(creator: &Creator, writers: usize, seconds: f64) -> Tally {
    let start = Instant::now();
    let until = Duration::from_secs_f64(seconds);
    let tasks: Vec<_> = (0..writers)
        .map(|writer| {
            let creator = creator.clone();
            tokio::spawn(async move {
                let mut tally = Tally::default();
                let mut n = 0;
                while start.elapsed() < until {
                    let id = format!("w{writer:03}-{n:06}");
                    let started = Instant::now();
                    let outcome = creator.create(&id, writer * 1_000_000 + n).await;
                    tally.record(start, started, outcome);
                    n += 1;
                }
                tally
            })
        })
        .collect();
    let mut tally = Tally::default();
    for task in tasks {
        tally.merge(task.await.expect("a writer"));
    }
    tally
}

/// The write units the run's creates consumed: the collection's documents and counter items
/// and every GSI partition key (the warm-up's collection has no index).
fn write_units(report: &Report) -> f64 {
    let (documents_pk, counter_pk) = (
        format!("{SITE}#{COLLECTION}"),
        format!("{SITE}#__collections"),
    );
    report
        .targets
        .iter()
        .filter(|(target, _)| match target {
            Target::Item(item) => {
                in_partitions(&item.pk, &documents_pk)
                    || (in_partitions(&item.pk, &counter_pk) && item.sk.starts_with(COLLECTION))
            }
            Target::Partition { index, .. } => index.is_some(),
        })
        .map(|(_, usage)| usage.write_units)
        .sum()
}

/// Whether `pk` is `base` or one of its partitions `<base>#<p>`.
fn in_partitions(pk: &str, base: &str) -> bool {
    match pk.strip_prefix(base) {
        Some("") => true,
        Some(suffix) => suffix
            .strip_prefix('#')
            .is_some_and(|p| p.parse::<u32>().is_ok()),
        None => false,
    }
}

/// Requests, throttled requests and conflicted requests in `report` since `earlier`.
fn requests_since(report: &Report, earlier: &Report) -> (u64, u64, u64) {
    let mut totals = (0, 0, 0);
    for (operation, counts) in &report.operations {
        let before = earlier.operation(operation);
        totals.0 += counts.requests - before.requests;
        totals.1 += counts.throttled - before.throttled;
        totals.2 += counts.conflicted - before.conflicted;
    }
    totals
}

/// The item of a raw PutItem: the store's item of document `w000-000000` as document `id`,
/// its partition key and GSI partition key moved to `id`'s partitions as the store does
/// (FNV-1a of the id).
fn raw_item(
    template: &HashMap<String, AttributeValue>,
    id: &str,
) -> HashMap<String, AttributeValue> {
    let mut item = template.clone();
    item.insert("sk".into(), AttributeValue::S(id.to_owned()));
    if let Some(AttributeValue::S(pk)) = item.get_mut("pk") {
        // `<site>#<collection>`, then `#<partition>` past partition 0.
        let base = pk.splitn(3, '#').take(2).collect::<Vec<_>>().join("#");
        *pk = match shard(id, docstore::config::DEFAULT_COLLECTION_PARTITIONS) {
            0 => base,
            partition => format!("{base}#{partition}"),
        };
    }
    for (name, value) in item.iter_mut() {
        let is_gsi_pk = name.starts_with('g') && name.ends_with("pk");
        if let (true, AttributeValue::S(pk)) = (is_gsi_pk, value)
            && let Some((prefix, _)) = pk.rsplit_once('#')
        {
            *pk = format!(
                "{prefix}#{}",
                shard(id, docstore::config::DEFAULT_INDEX_PARTITIONS)
            );
        }
    }
    item
}

/// The shard in `0..shards` of `id` (docstore-dynamodb's crate docs).
fn shard(id: &str, shards: u32) -> u64 {
    docstore::driver::stable_hash(id.as_bytes()) % u64::from(shards)
}

/// The store's item of the first document of the "after" run on `table`.
async fn template(endpoint: &str, table: &str) -> BenchResult<HashMap<String, AttributeValue>> {
    let (client, _) = plain_clients(endpoint).await;
    let id = "w000-000000";
    let pk = match shard(id, Layout::After.collection_partitions()) {
        0 => format!("{SITE}#{COLLECTION}"),
        partition => format!("{SITE}#{COLLECTION}#{partition}"),
    };
    let item = client
        .get_item()
        .table_name(table)
        .key("pk", AttributeValue::S(pk))
        .key("sk", AttributeValue::S(id.into()))
        .consistent_read(true)
        .send()
        .await?
        .item
        .ok_or("the after run stored no document w000-000000")?;
    Ok(item)
}

/// One run of `layout` with `writers` on a fresh table and model.
async fn run(
    args: &Args,
    layout: Layout,
    writers: usize,
    raw_template: Option<&HashMap<String, AttributeValue>>,
) -> BenchResult<(Figures, String)> {
    let table = fresh_table(&args.endpoint, layout).await?;
    let model = CapacityModel::new(Clock::scaled(args.model_seconds_per_second))
        .with_transaction_seconds(args.transaction_ms / 1e3)
        .with_concurrency(args.at_emulator);
    let client = model_client(&args.endpoint, &model).await;
    let (plain, streams) = plain_clients(&args.endpoint).await;
    let store = Store::new(DynamoStore::from_client(
        client.clone(),
        streams,
        &config(layout, &table),
        options(),
    )?);
    let creator = match (layout, raw_template) {
        (Layout::RawPutItem, Some(template)) => Creator::Raw {
            client,
            table: table.clone(),
            template: Arc::new(template.clone()),
        },
        (Layout::RawPutItem, None) => return Err("raw PutItems need the store's item".into()),
        _ => {
            // The store's first write reads the table's index records: done before the run.
            let warm_up = Key::new(SITE, "warm-up", "w")?;
            store.create(&warm_up, Data::new(), "bench").await?;
            Creator::Store(store.clone())
        }
    };
    // No burst: the documents' partition key, the one every layout here is held to, starts
    // the run with its second of units spent, as under a load that has gone on for a while.
    let documents = Target::Partition {
        index: None,
        value: format!("{SITE}#{COLLECTION}"),
    };
    model.drain(&documents, Direction::Write);
    let earlier = model.report();
    let mut tally = create_for(&creator, writers, args.seconds).await;
    let report = model.report();
    let counted = match layout {
        Layout::RawPutItem => None,
        _ => Some(counted(&store).await?),
    };
    let (requests, throttles, conflicts) = requests_since(&report, &earlier);
    let created = tally.created.max(1) as f64;
    let figures = Figures {
        layout,
        writers,
        created: tally.created,
        failed: tally.failed,
        first_failure: tally.first_failure.take(),
        creates_per_second: run_rate(&tally.finished, args.seconds) / args.model_seconds_per_second,
        p50_ms: tally.latencies.percentile_us(0.50) / 1e3,
        p99_ms: tally.latencies.percentile_us(0.99) / 1e3,
        throttles,
        conflicts,
        write_units_per_create: write_units(&report) / created,
        requests_per_create: requests as f64 / created,
        admitted_per_create: (requests - throttles - conflicts) as f64 / created,
        counted,
        stored: stored(&plain, &table, layout.collection_partitions()).await?,
    };
    Ok((figures, table))
}

/// Creates finished per real second within the `seconds` the writers start creates in (the
/// time after it only finishes creates started: those are stored and counted, not timed).
fn run_rate(finished: &[Duration], seconds: f64) -> f64 {
    let within = finished
        .iter()
        .filter(|at| at.as_secs_f64() < seconds)
        .count();
    within as f64 / seconds
}

/// The collection's `count()` (its counter, summed over shards).
async fn counted(store: &Store) -> BenchResult<u64> {
    let collections = store.collections(SITE).await?;
    Ok(collections
        .into_iter()
        .find(|(name, _)| name == COLLECTION)
        .map_or(0, |(_, count)| count))
}

fn print_header(args: &Args) {
    println!(
        "Hot collection: concurrent creates into one collection, {} real s a run, model clock \
         {} DynamoDB s per real s, transactions ongoing {} DynamoDB ms, dynoxide at {}",
        args.seconds, args.model_seconds_per_second, args.transaction_ms, args.endpoint
    );
    println!(
        "| writers | layout | creates | creates/s (DynamoDB s) | throttles | conflicts | p50 | \
         p99 | WCU/create | requests/create | count() | stored |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
}

fn print_row(f: &Figures) {
    println!(
        "| {} | {} | {} | {:.0} | {} | {} | {:.1} ms | {:.1} ms | {:.2} | {:.2} | {} | {} |",
        f.writers,
        f.layout.name(),
        f.created,
        f.creates_per_second,
        f.throttles,
        f.conflicts,
        f.p50_ms,
        f.p99_ms,
        f.write_units_per_create,
        f.requests_per_create,
        f.counted.map_or("-".to_owned(), |n| n.to_string()),
        f.stored,
    );
    if let Some(failure) = &f.first_failure {
        println!("  {} creates failed; the first: {failure}", f.failed);
    }
}

/// The targets a run must meet on its own: `count()` is the documents stored, every create
/// that succeeded and none that failed is stored, and no create failed but with one counter
/// item (where creates giving up at their deadline is what the sharded layout removes).
fn run_misses(f: &Figures) -> Vec<String> {
    let what = format!("{} writers, {}", f.writers, f.layout.name());
    let mut misses = Vec::new();
    if f.failed > 0 && f.layout != Layout::Before {
        misses.push(format!("{what}: {} creates failed", f.failed));
    }
    if let Some(counted) = f.counted
        && counted != f.stored
    {
        misses.push(format!("{what}: count() {counted} != {} stored", f.stored));
    }
    if f.stored != f.created {
        misses.push(format!(
            "{what}: {} stored != {} created",
            f.stored, f.created
        ));
    }
    misses
}

/// The ratios of one number of writers, printed; the targets they miss.
fn compare(args: &Args, rows: &[Figures], writers: usize, most: bool) -> Vec<String> {
    let find = |layout| {
        rows.iter()
            .find(|f| f.writers == writers && f.layout == layout)
    };
    let (Some(before), Some(after), Some(raw)) = (
        find(Layout::Before),
        find(Layout::After),
        find(Layout::RawPutItem),
    ) else {
        return Vec::new();
    };
    let speedup = after.creates_per_second / before.creates_per_second.max(f64::MIN_POSITIVE);
    println!(
        "{writers} writers: after / before creates/s {speedup:.1}x; after / raw PutItem {:.2}x \
         (WCU per create {:.2} vs {:.2}; requests per create {:.2} vs {:.2} sent, {:.2} vs {:.2} \
         admitted)",
        after.creates_per_second / raw.creates_per_second.max(f64::MIN_POSITIVE),
        after.write_units_per_create,
        raw.write_units_per_create,
        after.requests_per_create,
        raw.requests_per_create,
        after.admitted_per_create,
        raw.admitted_per_create,
    );
    match most && speedup < args.min_speedup {
        true => vec![format!(
            "{writers} writers: after makes {speedup:.1}x the creates/s of before, not {}x",
            args.min_speedup
        )],
        false => Vec::new(),
    }
}

async fn bench(args: &Args) -> BenchResult<Vec<String>> {
    print_header(args);
    let mut rows = Vec::new();
    let mut misses = Vec::new();
    for &writers in &args.writers {
        let mut template = None;
        for layout in [Layout::Before, Layout::After, Layout::RawPutItem] {
            let (figures, table) = run(args, layout, writers, template.as_ref()).await?;
            if layout == Layout::After {
                template = Some(self::template(&args.endpoint, &table).await?);
            }
            print_row(&figures);
            misses.extend(run_misses(&figures));
            rows.push(figures);
        }
    }
    let most = args.writers.iter().copied().max().unwrap_or(0);
    for &writers in &args.writers {
        misses.extend(compare(args, &rows, writers, writers == most));
    }
    misses.extend(scaling_misses(args, &rows));
    Ok(misses)
}

/// "After" must scale with the writers until the emulator, not DynamoDB's limits, holds it:
/// at every number of writers the model throttles at most [`MAX_THROTTLED`] of its requests
/// (the partition keys keep up), and it makes at least `--min-floor-share` of the creates/s
/// of raw `PutItem`s through the same emulator (the floor, which the emulator's own speed
/// holds).
fn scaling_misses(args: &Args, rows: &[Figures]) -> Vec<String> {
    let mut misses = Vec::new();
    for after in rows.iter().filter(|f| f.layout == Layout::After) {
        let writers = after.writers;
        let requests = after.requests_per_create * after.created as f64;
        let throttled = after.throttles as f64 / requests.max(1.0);
        if throttled > MAX_THROTTLED {
            misses.push(format!(
                "after with {writers} writers: {:.1}% of its requests throttled by the model",
                100.0 * throttled
            ));
        }
        let floor = rows
            .iter()
            .find(|f| f.writers == writers && f.layout == Layout::RawPutItem);
        if let Some(floor) = floor
            && after.creates_per_second < args.min_floor_share * floor.creates_per_second
        {
            misses.push(format!(
                "after with {writers} writers makes {:.0} creates/s, under {:.0}% of raw \
                 PutItems' {:.0}",
                after.creates_per_second,
                100.0 * args.min_floor_share,
                floor.creates_per_second
            ));
        }
    }
    misses
}

/// The share of its requests the model may throttle in an "after" run.
const MAX_THROTTLED: f64 = 0.02;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    match bench(&args).await {
        Ok(misses) if misses.is_empty() => std::process::ExitCode::SUCCESS,
        Ok(misses) => {
            for miss in misses {
                eprintln!("hot_collection: target missed: {miss}");
            }
            std::process::ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("hot_collection: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}
