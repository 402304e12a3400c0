//! What a walk of every match costs as the collection grows (the figures in
//! `docs/benchmarks.md`, "Walks at scale"): `status = "open"` (a quarter of the documents)
//! walked through [`Store::stream`] — what `docstore query --all` does, page by page or
//! sorted once as the plan asks — in id order and in `score` order, each with no index and with the index
//! `(status, -score)` declared. One run prints, per backend, each walk's time, the rows (SQLite)
//! or requests (DynamoDB) it read, its peak memory, and two ratios:
//!
//! - id order with the index declared ÷ without it (goal ≤ 2×: declaring an index never makes
//!   a query much slower);
//! - `order by score desc` without an index ÷ with it (goal ≤ 3×).
//!
//! ```sh
//! cargo run --release -p docstore-bench --no-default-features --bin walk_at_scale -- \
//!     --docs 1000000
//! scripts/with-dynamodb-emulators cargo run --release -p docstore-bench \
//!     --no-default-features --bin walk_at_scale -- --backends dynamodb
//! ```

use clap::Parser;
use docstore::{Data, Index, IndexSet, Key, Query, Store, StoreOptions};
use docstore_bench::{dynamo, peak::PeakWindow};
use docstore_sqlite::{SqliteOptions, SqliteStore};
use futures_util::TryStreamExt;
use serde_json::json;
use std::time::Instant;

/// Walks of a quarter of the collection, in two orders, with and without an index.
#[derive(Debug, Parser)]
struct Args {
    /// Documents in the collection on memory and SQLite.
    #[arg(long, default_value_t = 100_000)]
    docs: usize,
    /// Documents in the collection on DynamoDB (written through an emulator, slower).
    #[arg(long, default_value_t = 20_000)]
    dynamodb_docs: usize,
    /// The page size of each walk.
    #[arg(long, default_value_t = 1_000)]
    page: usize,
    /// Backends to walk (DynamoDB only with an endpoint).
    #[arg(long, value_delimiter = ',', default_value = "memory,sqlite,dynamodb")]
    backends: Vec<Backend>,
    /// A DynamoDB endpoint (an emulator: `scripts/with-dynamodb-emulators` sets the
    /// variable); fresh tables are made there for the run.
    #[arg(long, env = "DOCSTORE_DYNOXIDE_ENDPOINT")]
    dynamodb_endpoint: Option<String>,
}

/// A backend whose walks are measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Backend {
    Memory,
    Sqlite,
    Dynamodb,
}

const SITE: &str = "bench";
const COLLECTION: &str = "tickets";
/// Rows added per batch while loading.
const LOAD_BATCH: usize = docstore::batch::MAX_BATCH_WRITES;

/// A ticket: a quarter of them open, scores spread over 0..1 000 000.
fn ticket(n: usize) -> Data {
    let status = ["open", "closed", "pending", "resolved"][n % 4];
    docstore::object(json!({
        "status": status,
        "score": (n * 7919 + 13) % 1_000_003,
        "title": format!("ticket {n}"),
        "body": "lorem ipsum dolor sit amet ".repeat(8),
    }))
    .expect("an object")
}

/// The declared index of the walks that have one.
fn by_status_score() -> IndexSet {
    let index = Index::parse(COLLECTION, "by_status_score", ["status", "-score"]).expect("index");
    IndexSet::new(vec![index]).expect("indexes")
}

/// Writes `docs` tickets, in batches.
async fn load(store: &Store, docs: usize) {
    let mut writes = Vec::with_capacity(LOAD_BATCH);
    for n in 0..docs {
        let key = Key::new(SITE, COLLECTION, format!("t{n:08}")).expect("a key");
        writes.push(docstore::Write::Create {
            key,
            data: ticket(n),
        });
        if writes.len() == LOAD_BATCH || n + 1 == docs {
            store.write_all(&writes, "bench").await.expect("a batch");
            writes.clear();
        }
    }
}

/// What one walk cost.
struct Walked {
    matches: usize,
    seconds: f64,
    /// Rows (SQLite) or requests (DynamoDB) read; `None` where not counted.
    reads: Option<u64>,
    peak_kib: Option<u64>,
}

/// Reads what the store has read so far (rows or requests), where it can be counted.
type ReadCount = Box<dyn Fn() -> u64>;

/// Walks every match of `query` page by page; what it cost.
async fn walk(store: &Store, query: &Query, reads: Option<&ReadCount>) -> Walked {
    let before = reads.map(|count| count());
    let window = PeakWindow::open();
    let start = Instant::now();
    let matches = store
        .stream(SITE, COLLECTION, query)
        .try_fold(0usize, |n, _| async move { Ok(n + 1) })
        .await
        .expect("the walk");
    Walked {
        matches,
        seconds: start.elapsed().as_secs_f64(),
        reads: reads.zip(before).map(|(count, before)| count() - before),
        peak_kib: window.growth_kib(),
    }
}

/// A store of `backend` holding `docs` tickets, `indexed` or not, and its read counter.
async fn loaded_store(
    args: &Args,
    backend: Backend,
    indexed: bool,
    dir: &std::path::Path,
) -> Option<(Store, Option<ReadCount>, usize)> {
    let indexes = if indexed {
        by_status_score()
    } else {
        IndexSet::default()
    };
    let options = StoreOptions::default().with_indexes(indexes);
    let (store, reads, docs): (Store, Option<ReadCount>, usize) = match backend {
        Backend::Memory => (
            Store::new(docstore_memory::MemoryStore::with_options(options)),
            None,
            args.docs,
        ),
        Backend::Sqlite => {
            let path = dir.join(format!("walk-{indexed}.db"));
            let sqlite =
                SqliteStore::open_with(&path, options, SqliteOptions::default().with_feed(false))
                    .expect("open");
            let counter = sqlite.clone();
            let reads: ReadCount = Box::new(move || counter.documents_read());
            (Store::new(sqlite), Some(reads), args.docs)
        }
        Backend::Dynamodb => {
            let endpoint = args.dynamodb_endpoint.as_deref()?;
            let counter = dynamo::RequestCounter::default();
            let client = dynamo::client(endpoint, &counter).await;
            let streams = dynamo::streams_client(endpoint).await;
            let table = dynamo::fresh_table_name();
            let config = docstore::config::DynamoDbConfig::new(&table);
            let dynamodb =
                docstore_dynamodb::DynamoStore::from_client(client, streams, &config, options)
                    .expect("a DynamoDB store");
            dynamodb.create_table().await.expect("the table");
            let requests = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let total = requests.clone();
            let reads: ReadCount = Box::new(move || {
                let taken: u64 = counter.take().values().map(|r| r.count).sum();
                total.fetch_add(taken, std::sync::atomic::Ordering::Relaxed) + taken
            });
            (Store::new(dynamodb), Some(reads), args.dynamodb_docs)
        }
    };
    load(&store, docs).await;
    Some((store, reads, docs))
}

/// The walks of one backend, printed as rows, the two ratios after them; returns what
/// `explain` said of each walk's query.
async fn walk_backend(args: &Args, backend: Backend) -> Vec<String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let open = |order: &str| {
        Query::parse(&format!(r#"status = "open" {order} limit {}"#, args.page)).expect("query")
    };
    let (id_order, by_score) = (open(""), open("order by score desc"));
    let mut seconds = std::collections::BTreeMap::new();
    let mut plans = Vec::new();
    for indexed in [false, true] {
        let Some((store, reads, docs)) = loaded_store(args, backend, indexed, dir.path()).await
        else {
            println!("| {backend:?} | (no endpoint: not run) | | | | | | |");
            return plans;
        };
        for (order, query) in [("id order", &id_order), ("order by score desc", &by_score)] {
            let plan = store
                .explain(SITE, COLLECTION, query)
                .await
                .expect("explain");
            let walked = walk(&store, query, reads.as_ref()).await;
            let index = if indexed { "(status, -score)" } else { "none" };
            let reads = walked.reads.map_or("-".into(), |n| n.to_string());
            let peak = walked
                .peak_kib
                .map_or("-".into(), |k| format!("{:.1}", k as f64 / 1024.0));
            let how = if plan.walk_sorts_once() {
                "sorted once"
            } else {
                "page by page"
            };
            println!(
                "| {backend:?} {docs} | {order} | {index} | {} | {:.2} | {reads} | {peak} | {} | {how} |",
                walked.matches,
                walked.seconds,
                plan.index.as_deref().unwrap_or("scan")
            );
            seconds.insert((order, indexed), walked.seconds);
            plans.push(format!("- {backend:?}, {order}, index {index}: `{plan}`"));
        }
    }
    println!(
        "| {backend:?} | ratios | | id order, index ÷ none: **{:.2}×** (goal ≤ 2) | order by score, none ÷ index: **{:.2}×** (goal ≤ 3) | | | | |",
        seconds[&("id order", true)] / seconds[&("id order", false)],
        seconds[&("order by score desc", false)] / seconds[&("order by score desc", true)],
    );
    plans
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args = Args::parse();
    println!(
        "## Walks of status = \"open\" (a quarter of the documents), pages of {}",
        args.page
    );
    println!(
        "| backend, documents | order | index declared | matches | seconds | rows or requests read | peak MiB | plan | walk |"
    );
    println!("|---|---|---|--:|--:|--:|--:|---|---|");
    let mut plans = Vec::new();
    for &backend in &args.backends {
        plans.extend(walk_backend(&args, backend).await);
    }
    println!(
        "\nWhat `explain` says of each walk's query:\n\n{}",
        plans.join("\n")
    );
}
