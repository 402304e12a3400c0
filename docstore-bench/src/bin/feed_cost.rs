//! What the SQLite change feed costs and delivers, in one run (the figures in
//! `docs/benchmarks.md`, "Change feed (SQLite)"):
//!
//! 1. **Write cost of the feed**: single `create` then `update` calls (a merge patch of 3
//!    fields) of ~1 KB documents, with the feed on and off, for both durabilities; runs of
//!    each setting alternate so that drift hits both. Goal: on / off ≤ 1.15×.
//! 2. **The floor in SQLite itself**: raw `rusqlite` updates in place, alone and with a
//!    change row holding no document or the document (NORMAL): a second WAL page per commit.
//! 3. **Update cost of declared indexes**: updates not touching an indexed field, in a
//!    collection with 0 and with 3 declared indexes (feed on, `Normal`). Goal: ≤ 2×.
//! 4. **Feed read throughput**, per backend: the whole feed read in pages of 1 000,
//!    store-wide and for one site among ten.
//! 5. **Commit-to-watch latency**, per backend: from the start of a write call to a `watch`
//!    stream yielding its change — in the same store (woken by the commit) and, for SQLite,
//!    in a second store on the same file (another process's view: found by polling, 200 ms by
//!    default); on DynamoDB a second store on the table, polling Streams every second.
//!
//! 6. **Previous values** (`SqliteOptions::feed_previous`): the same creates and updates with
//!    the feed on, the option off and on, for both durabilities (`--only-previous` runs this
//!    section alone).
//!
//! DynamoDB runs only with an endpoint (`--dynamodb-endpoint`, or
//! `DOCSTORE_DYNOXIDE_ENDPOINT` as `scripts/with-dynamodb-emulators` sets it).
//!
//! ```sh
//! scripts/with-dynamodb-emulators cargo run --release -p docstore-bench --bin feed_cost
//! ```

use clap::Parser;
use docstore::feed::{FeedScope, FeedStart};
use docstore::{Data, Index, IndexSet, Key, Store, StoreOptions};
use docstore_bench::dynamo;
use docstore_sqlite::{Durability, SqliteOptions, SqliteStore};
use futures_util::StreamExt;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// The feed's write cost, index update cost, read throughput and watch latency.
#[derive(Debug, Parser)]
struct Args {
    /// Writes per run with `synchronous=NORMAL` (creates, then as many updates).
    #[arg(long, default_value_t = 5_000)]
    normal_writes: usize,
    /// Writes per run with `synchronous=FULL` (each waits for an fsync).
    #[arg(long, default_value_t = 500)]
    full_writes: usize,
    /// Runs of each setting (alternating on and off).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Changes in the feed that is read.
    #[arg(long, default_value_t = 50_000)]
    feed_changes: usize,
    /// Writes whose watch latency is measured (each path).
    #[arg(long, default_value_t = 300)]
    watched: usize,
    /// Backends whose feed reads and watch latency are measured (DynamoDB only with an
    /// endpoint). The write and index costs are SQLite's alone.
    #[arg(long, value_delimiter = ',', default_value = "memory,sqlite,dynamodb")]
    backends: Vec<Backend>,
    /// A DynamoDB endpoint with Streams (an emulator: `scripts/with-dynamodb-emulators` sets
    /// the variable); a fresh table is made there for the run.
    #[arg(long, env = "DOCSTORE_DYNOXIDE_ENDPOINT")]
    dynamodb_endpoint: Option<String>,
    /// Changes in the feed that is read, on DynamoDB (written through an emulator, slower).
    #[arg(long, default_value_t = 5_000)]
    dynamodb_feed_changes: usize,
    /// Writes whose watch latency is measured on DynamoDB (each waits for a poll).
    #[arg(long, default_value_t = 40)]
    dynamodb_watched: usize,
    /// Runs only the cost of previous values (section 6).
    #[arg(long)]
    only_previous: bool,
}

/// A backend whose feed is read and watched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Backend {
    Memory,
    Sqlite,
    Dynamodb,
}

const SITE: &str = "bench";
const COLLECTION: &str = "docs";
/// Sites the feed that is read spreads its changes over.
const SITES: usize = 10;
/// The page size of feed reads (the feed's maximum).
const PAGE: usize = docstore::feed::MAX_CHANGE_PAGE;

fn key(collection: &str, n: usize) -> Key {
    Key::new(SITE, collection, format!("doc-{n:07}")).expect("a valid key")
}

/// A ~1 KB document with the fields the indexes read.
fn document(n: usize) -> Data {
    let status = ["open", "closed", "pending"][n % 3];
    docstore::object(json!({
        "status": status,
        "score": (n * 7919) % 1000,
        "category": format!("c{}", n % 20),
        "priority": n % 100,
        "owner": format!("user{}", n % 50),
        "title": format!("document {n}"),
        "body": "lorem ipsum dolor sit amet ".repeat(30),
        "counter": 0,
    }))
    .expect("an object")
}

/// A patch of 3 fields no index reads.
fn patch(n: usize) -> Data {
    docstore::object(json!({"counter": n, "title": format!("updated {n}"), "seen": true}))
        .expect("an object")
}

fn open(path: &Path, durability: Durability, feed: bool, indexes: Vec<Index>) -> Store {
    let options = StoreOptions::default().with_indexes(IndexSet::new(indexes).expect("indexes"));
    let sqlite = SqliteOptions::default()
        .with_durability(durability)
        .with_feed(feed);
    Store::new(SqliteStore::open_with(path, options, sqlite).expect("open"))
}

/// A store with the feed on and `feed_previous` as given, no index.
fn open_previous(path: &Path, durability: Durability, previous: bool) -> Store {
    let sqlite = SqliteOptions::default()
        .with_durability(durability)
        .with_feed_previous(previous);
    let options = StoreOptions::default();
    Store::new(SqliteStore::open_with(path, options, sqlite).expect("open"))
}

/// Mean µs per create and per update of `writes` documents in `collection`.
async fn write_costs(store: &Store, collection: &str, writes: usize) -> (f64, f64) {
    let start = Instant::now();
    for n in 0..writes {
        store
            .create(&key(collection, n), document(n), "bench")
            .await
            .expect("create");
    }
    let create = start.elapsed().as_secs_f64() * 1e6 / writes as f64;
    let start = Instant::now();
    for n in 0..writes {
        store
            .update(&key(collection, n), &patch(n), "bench")
            .await
            .expect("update");
    }
    let update = start.elapsed().as_secs_f64() * 1e6 / writes as f64;
    (create, update)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Runs `measure` with setting A and setting B alternately, `runs` times each, each run on
/// a new file; the median (create, update) of each.
async fn alternate<F, Fut>(runs: usize, mut measure: F) -> [(f64, f64); 2]
where
    F: FnMut(bool, std::path::PathBuf) -> Fut,
    Fut: std::future::Future<Output = (f64, f64)>,
{
    let mut samples = [Vec::new(), Vec::new()];
    for run in 0..runs {
        for (i, setting) in [false, true].into_iter().enumerate() {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let path = dir.path().join(format!("run-{run}-{i}.db"));
            samples[i].push(measure(setting, path).await);
        }
    }
    samples.map(|runs| {
        let creates = runs.iter().map(|r| r.0).collect();
        let updates = runs.iter().map(|r| r.1).collect();
        (median(creates), median(updates))
    })
}

async fn feed_write_cost(args: &Args) {
    println!(
        "## Write cost of the feed (mean µs per call, median of {} runs)",
        args.runs
    );
    println!("| durability | call | feed off | feed on | on / off |");
    println!("|---|---|--:|--:|--:|");
    for (name, durability, writes) in [
        ("NORMAL", Durability::Normal, args.normal_writes),
        ("FULL", Durability::Full, args.full_writes),
    ] {
        let [off, on] = alternate(args.runs, |feed, path| async move {
            let store = open(&path, durability, feed, Vec::new());
            write_costs(&store, COLLECTION, writes).await
        })
        .await;
        for (call, off, on) in [("create", off.0, on.0), ("update", off.1, on.1)] {
            println!(
                "| {name} | {call} | {off:.1} | {on:.1} | {:.2}x |",
                on / off
            );
        }
    }
}

/// What recording previous values costs a write (feed on either way): an update reads the
/// document before it and its change row holds both versions; a create has none to read.
async fn previous_write_cost(args: &Args) {
    println!(
        "## Write cost of previous values (feed on; mean µs per call, median of {} runs)",
        args.runs
    );
    println!("| durability | call | feed_previous off | on | on / off |");
    println!("|---|---|--:|--:|--:|");
    for (name, durability, writes) in [
        ("NORMAL", Durability::Normal, args.normal_writes),
        ("FULL", Durability::Full, args.full_writes),
    ] {
        let [off, on] = alternate(args.runs, |previous, path| async move {
            let store = open_previous(&path, durability, previous);
            write_costs(&store, COLLECTION, writes).await
        })
        .await;
        for (call, off, on) in [("create", off.0, on.0), ("update", off.1, on.1)] {
            println!(
                "| {name} | {call} | {off:.1} | {on:.1} | {:.2}x |",
                on / off
            );
        }
    }
}

/// How a raw-SQLite update logs its change, for the floor of the feed's write cost.
#[derive(Clone, Copy)]
enum RawLog {
    /// No change row: the update in place alone.
    Nothing,
    /// A change row with the key, kind and version, no document.
    KeyOnly,
    /// A change row copying the document as written (what the feed stores).
    Document,
}

/// `rusqlite` alone, `synchronous=NORMAL`, WAL: a table of `writes` ~1 KB JSONB documents,
/// then mean µs per update (a `jsonb_patch` of 3 fields in one transaction) logged as `log`
/// says. What no schema of ours can go below: the change row's page is a second WAL frame
/// per commit whatever the row holds.
fn raw_update_cost(path: &Path, writes: usize, log: RawLog) -> f64 {
    let conn = rusqlite::Connection::open(path).expect("open");
    conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
        .expect("WAL");
    conn.execute_batch(
        "PRAGMA synchronous = NORMAL;
         CREATE TABLE documents (id TEXT PRIMARY KEY, data BLOB NOT NULL,
             version INTEGER NOT NULL) STRICT;
         CREATE TABLE changes (position INTEGER PRIMARY KEY, id TEXT NOT NULL,
             kind TEXT NOT NULL, version INTEGER NOT NULL, data BLOB) STRICT;",
    )
    .expect("schema");
    let tx = conn.unchecked_transaction().expect("begin");
    for n in 0..writes {
        let text = serde_json::to_string(&document(n)).expect("json");
        conn.execute(
            "INSERT INTO documents VALUES (?1, jsonb(?2), 1)",
            rusqlite::params![format!("doc-{n:07}"), text],
        )
        .expect("insert");
    }
    tx.commit().expect("commit");
    let patches: Vec<String> = (0..writes)
        .map(|n| serde_json::to_string(&patch(n)).expect("json"))
        .collect();
    let insert_change = match log {
        RawLog::Nothing => None,
        RawLog::KeyOnly => Some(
            "INSERT INTO changes (id, kind, version) \
             SELECT id, 'updated', version FROM documents WHERE id = ?1",
        ),
        RawLog::Document => Some(
            "INSERT INTO changes (id, kind, version, data) \
             SELECT id, 'updated', version, data FROM documents WHERE id = ?1",
        ),
    };
    let start = Instant::now();
    for (n, patch) in patches.iter().enumerate() {
        let id = format!("doc-{n:07}");
        let tx = conn.unchecked_transaction().expect("begin");
        conn.prepare_cached(
            "UPDATE documents SET data = jsonb_patch(data, ?2), version = version + 1 \
             WHERE id = ?1",
        )
        .and_then(|mut update| update.execute(rusqlite::params![id, patch]))
        .expect("update");
        if let Some(sql) = insert_change {
            conn.prepare_cached(sql)
                .and_then(|mut insert| insert.execute([&id]))
                .expect("change row");
        }
        tx.commit().expect("commit");
    }
    start.elapsed().as_secs_f64() * 1e6 / writes as f64
}

/// The floor under the feed's write cost with `synchronous=NORMAL`: raw SQLite updates
/// without a change row, with one holding no document, and with one copying it; runs
/// alternate, each on a new file, and the median is shown.
fn raw_sqlite_floor(args: &Args) {
    println!(
        "\n## SQLite alone: an update in place and its change row (NORMAL; mean µs per update, \
         median of {} runs)",
        args.runs
    );
    println!("| change row | µs per update | vs none |");
    println!("|---|--:|--:|");
    let logs = [
        ("none", RawLog::Nothing),
        ("key and version only", RawLog::KeyOnly),
        ("with the document", RawLog::Document),
    ];
    let mut samples = vec![Vec::new(); logs.len()];
    for run in 0..args.runs {
        for (i, (_, log)) in logs.iter().enumerate() {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let path = dir.path().join(format!("raw-{run}-{i}.db"));
            samples[i].push(raw_update_cost(&path, args.normal_writes, *log));
        }
    }
    let medians: Vec<f64> = samples.into_iter().map(median).collect();
    for ((name, _), cost) in logs.iter().zip(&medians) {
        println!("| {name} | {cost:.1} | {:.2}x |", cost / medians[0]);
    }
}

fn three_indexes() -> Vec<Index> {
    [
        ("by_status", ["status", "-score"]),
        ("by_category", ["category", "priority"]),
        ("by_owner", ["owner", "-score"]),
    ]
    .into_iter()
    .map(|(name, fields)| Index::parse(COLLECTION, name, fields).expect("an index"))
    .collect()
}

async fn index_update_cost(args: &Args) {
    let [none, three] = alternate(args.runs, |indexed, path| async move {
        let indexes = if indexed { three_indexes() } else { Vec::new() };
        let store = open(&path, Durability::Normal, true, indexes);
        write_costs(&store, COLLECTION, args.normal_writes).await
    })
    .await;
    println!();
    println!("## Declared indexes (NORMAL, feed on; mean µs per call)");
    println!("| call | 0 indexes | 3 indexes | 3 vs 0 |");
    println!("|---|--:|--:|--:|");
    println!(
        "| create | {:.1} | {:.1} | {:.2}x |",
        none.0,
        three.0,
        three.0 / none.0
    );
    println!(
        "| update (no indexed field) | {:.1} | {:.1} | {:.2}x |",
        none.1,
        three.1,
        three.1 / none.1
    );
}

/// Reads the whole feed of `site` (or the store's) from the oldest; changes read and seconds.
async fn read_all(store: &Store, site: Option<&str>) -> (usize, f64) {
    let start = Instant::now();
    let (mut read, mut from) = (0, FeedStart::Oldest);
    loop {
        let page = match site {
            Some(site) => store.site(site).expect("a site").changes(&from, PAGE).await,
            None => store.changes(&FeedScope::whole_store(), &from, PAGE).await,
        }
        .expect("a feed page");
        read += page.changes.len();
        if page.caught_up {
            return (read, start.elapsed().as_secs_f64());
        }
        from = FeedStart::After(page.next);
    }
}

/// Writes `changes` creates spread over [`SITES`] sites, in batches.
async fn fill_feed(store: &Store, changes: usize) {
    let writes: Vec<docstore::Write> = (0..changes)
        .map(|n| docstore::Write::Create {
            key: Key::new(format!("site-{}", n % SITES), COLLECTION, format!("d{n}"))
                .expect("a key"),
            data: document(n),
        })
        .collect();
    for chunk in writes.chunks(docstore::batch::MAX_BATCH_WRITES) {
        store.write_all(chunk, "bench").await.expect("a batch");
    }
}

/// A store of `backend` for the feed reads, and how many changes to write into it; `None`
/// for DynamoDB without an endpoint.
async fn feed_store(args: &Args, backend: Backend, dir: &Path) -> Option<(Store, usize)> {
    match backend {
        Backend::Memory => Some((
            Store::new(docstore_memory::MemoryStore::new()),
            args.feed_changes,
        )),
        Backend::Sqlite => Some((
            open(&dir.join("read.db"), Durability::Normal, true, Vec::new()),
            args.feed_changes,
        )),
        Backend::Dynamodb => {
            let endpoint = args.dynamodb_endpoint.as_deref()?;
            let table = dynamo::fresh_table_name();
            Some((
                dynamo_store(endpoint, &table, true).await,
                args.dynamodb_feed_changes,
            ))
        }
    }
}

/// A store on DynamoDB table `table` at `endpoint`, the table made first when `create`.
async fn dynamo_store(endpoint: &str, table: &str, create: bool) -> Store {
    let client = dynamo::client(endpoint, &dynamo::RequestCounter::default()).await;
    let streams = dynamo::streams_client(endpoint).await;
    let store = dynamo::store(client, streams, table).expect("a DynamoDB store");
    if create {
        store.create_table().await.expect("the table");
    }
    Store::new(store)
}

async fn read_throughput(args: &Args) {
    println!();
    println!("## Feed reads (~1 KB documents in {SITES} sites, pages of {PAGE})");
    println!("| backend | scope | changes read | changes/s |");
    println!("|---|---|--:|--:|");
    let dir = tempfile::tempdir().expect("a temporary directory");
    for &backend in &args.backends {
        let Some((store, changes)) = feed_store(args, backend, dir.path()).await else {
            println!("| {backend:?} | (no endpoint: not run) | | |");
            continue;
        };
        fill_feed(&store, changes).await;
        for (name, site) in [("whole store", None), ("one site of ten", Some("site-3"))] {
            let (read, seconds) = read_all(&store, site).await;
            let rate = read as f64 / seconds;
            println!("| {backend:?} | {name} | {read} | {rate:.0} |");
        }
    }
}

/// p50 and p99 of the time from each write call's start to `watcher`'s stream yielding its
/// change: the stream runs in its own task, waiting at the end of the feed when each write
/// starts; writes are `gap_ms` apart at most (at random points of a poll interval).
async fn watch_latency(
    writer: &Store,
    watcher: &Store,
    writes: usize,
    tag: &'static str,
    gap_ms: u64,
) -> (f64, f64) {
    // A stream reads its start when first polled: pin "now" before the first write.
    let now = watcher
        .changes(&FeedScope::whole_store(), &FeedStart::Now, 1)
        .await
        .expect("the feed");
    let mut stream = watcher.watch(FeedScope::whole_store(), FeedStart::After(now.next));
    let arrivals = tokio::spawn(async move {
        let mut arrivals = Vec::with_capacity(writes);
        for n in 0..writes {
            let change = tokio::time::timeout(Duration::from_secs(10), stream.next())
                .await
                .expect("the change arrives")
                .expect("the stream goes on")
                .expect("a change");
            assert_eq!(change.key, key(tag, n));
            arrivals.push(Instant::now());
        }
        arrivals
    });
    let mut starts = Vec::with_capacity(writes);
    for n in 0..writes {
        tokio::time::sleep(Duration::from_micros((n as u64 * 7919) % (gap_ms * 1000))).await;
        starts.push(Instant::now());
        writer
            .create(&key(tag, n), document(n), "bench")
            .await
            .expect("create");
    }
    let arrivals = arrivals.await.expect("the watcher task");
    let mut latencies: Vec<f64> = arrivals
        .iter()
        .zip(&starts)
        .map(|(arrived, started)| arrived.duration_since(*started).as_secs_f64() * 1e3)
        .collect();
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    (at(0.5), at(0.99))
}

async fn watch_latencies(args: &Args) {
    println!();
    println!("## Commit-to-watch latency (ms from the write call's start)");
    println!("| backend | watcher | p50 | p99 |");
    println!("|---|---|--:|--:|");
    for &backend in &args.backends {
        match backend {
            Backend::Memory => {
                let store = Store::new(docstore_memory::MemoryStore::new());
                let (p50, p99) = watch_latency(&store, &store, args.watched, "same", 5).await;
                println!("| Memory | same store (woken by the commit) | {p50:.3} | {p99:.3} |");
            }
            Backend::Sqlite => sqlite_watch_latencies(args).await,
            Backend::Dynamodb => dynamo_watch_latency(args).await,
        }
    }
}

async fn sqlite_watch_latencies(args: &Args) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("watch.db");
    let store = open(&path, Durability::Normal, true, Vec::new());
    let other = open(&path, Durability::Normal, true, Vec::new());
    let (p50, p99) = watch_latency(&store, &store, args.watched, "same", 5).await;
    println!("| Sqlite (NORMAL) | same store (woken by the commit) | {p50:.3} | {p99:.3} |");
    let few = args.watched.min(100);
    let (p50, p99) = watch_latency(&store, &other, few, "other", 400).await;
    println!(
        "| Sqlite (NORMAL) | another store on the file (polls every 200 ms) | {p50:.1} | {p99:.1} |"
    );
}

/// DynamoDB Streams has no push: a watcher polls (every `feed_poll_ms`, 1 000 ms by
/// default), so the writer and the watcher are two stores, as two processes would be.
async fn dynamo_watch_latency(args: &Args) {
    let Some(endpoint) = args.dynamodb_endpoint.as_deref() else {
        println!("| Dynamodb | (no endpoint: not run) | | |");
        return;
    };
    let table = dynamo::fresh_table_name();
    let writer = dynamo_store(endpoint, &table, true).await;
    let watcher = dynamo_store(endpoint, &table, false).await;
    let (p50, p99) = watch_latency(&writer, &watcher, args.dynamodb_watched, "dynamo", 1_100).await;
    println!(
        "| Dynamodb | another store on the table (polls every 1 000 ms) | {p50:.1} | {p99:.1} |"
    );
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args = Args::parse();
    if args.only_previous {
        previous_write_cost(&args).await;
        return;
    }
    feed_write_cost(&args).await;
    previous_write_cost(&args).await;
    raw_sqlite_floor(&args);
    index_update_cost(&args).await;
    read_throughput(&args).await;
    watch_latencies(&args).await;
}
