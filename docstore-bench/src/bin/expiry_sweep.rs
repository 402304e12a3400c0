//! The sweep of expired documents on SQLite (the figures in `docs/benchmarks.md`, "Expiry"):
//! a file store holds `--expiring` documents (~200 bytes each) that expire at one instant and
//! `--kept` documents that never expire; the store clock then passes the instant, and the
//! sweep (`Store::sweep_expired`, as the background sweeper calls it, 1 000 documents a round)
//! removes them while reader tasks read all the time: `get` of expired ids, `count`, and a
//! query over the collection. The run prints the sweep's time and rate and the readers'
//! figures, and fails (exit 1) when a read saw an expired document (`docs/contract.md`,
//! "Expiry": from its instant a document reads as deleted, whatever the sweep has reached),
//! or when the sweep left one behind.
//!
//! ```sh
//! cargo run --release -p docstore-bench --bin expiry_sweep -- --expiring 100000
//! ```

use clap::Parser;
use docstore::{ManualClock, Query, Site, Store, StoreOptions};
use docstore_sqlite::{Durability, SqliteOptions, SqliteStore};
use futures_util::TryStreamExt;
use serde_json::json;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The documents a sweep round removes, as the store's background sweeper asks.
const ROUND: usize = docstore::SWEEP_LIMIT;

/// The writes of one batch while filling (the most a batch holds).
const BATCH: usize = 50;

/// The instant the expiring documents expire at (store clock, nanoseconds).
const EXPIRES_AT: i64 = 1_000_000_000_000;

/// The sweep of many expired documents, with readers running.
#[derive(Debug, Parser)]
struct Args {
    /// Documents that expire.
    #[arg(long, default_value_t = 100_000)]
    expiring: usize,
    /// Documents that never expire, in the same collection.
    #[arg(long, default_value_t = 10_000)]
    kept: usize,
    /// Reader tasks running during the sweep.
    #[arg(long, default_value_t = 2)]
    readers: usize,
}

/// What the readers did while the sweep ran.
#[derive(Debug, Default)]
struct Reads {
    gets: AtomicU64,
    counts: AtomicU64,
    queries: AtomicU64,
    /// Reads that saw an expired document, or a count other than the kept documents'.
    wrong: AtomicU64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("expiry_sweep: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: &Args) -> docstore::Result<bool> {
    let dir = tempfile::tempdir().map_err(|err| docstore::Error::backend("temp dir", err))?;
    let clock = Arc::new(ManualClock::new(1));
    // No background sweep: the run sweeps when it means to, and times it.
    let options = StoreOptions::default()
        .with_clock(clock.clone())
        .with_sweep_interval(None);
    let sqlite = SqliteOptions::default().with_durability(Durability::Normal);
    let store = Store::new(SqliteStore::open_with(
        dir.path().join("sweep.db"),
        options,
        sqlite,
    )?);
    let site = store.site("bench")?;
    let loaded = Instant::now();
    fill(&site, args).await?;
    println!(
        "filled {} expiring + {} kept documents in {:.1} s",
        args.expiring,
        args.kept,
        loaded.elapsed().as_secs_f64()
    );
    clock.set(EXPIRES_AT);
    let reads = Arc::new(Reads::default());
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..args.readers)
        .map(|n| {
            let task = read_until(site.clone(), args.sizes(), n, reads.clone(), stop.clone());
            tokio::spawn(task)
        })
        .collect();
    let started = Instant::now();
    let mut swept = 0;
    loop {
        let round = store.sweep_expired().await?;
        swept += round;
        if round < ROUND {
            break;
        }
    }
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        reader
            .await
            .map_err(|err| docstore::Error::backend("reader", err))??;
    }
    report(args, swept, took, &reads);
    let left = site.count().await?;
    let ok = swept == args.expiring && reads.wrong.load(Ordering::Relaxed) == 0;
    if left != args.kept as u64 {
        println!(
            "FAIL: {left} documents counted after the sweep, {} kept",
            args.kept
        );
        return Ok(false);
    }
    if !ok {
        println!("FAIL: a read saw an expired document, or the sweep removed {swept}");
    }
    Ok(ok)
}

impl Args {
    /// The document counts a reader needs.
    fn sizes(&self) -> Sizes {
        Sizes {
            expiring: self.expiring,
            kept: self.kept,
        }
    }
}

/// How many documents of each kind the store holds.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    expiring: usize,
    kept: usize,
}

/// Writes the documents in batches of [`BATCH`]: expiring ones `x<n>`, kept ones `k<n>`.
async fn fill(site: &Site, args: &Args) -> docstore::Result<()> {
    let docs = site.collection::<serde_json::Value>("sessions")?;
    let body = "x".repeat(160);
    for start in (0..args.expiring).step_by(BATCH) {
        let mut batch = site.batch();
        for n in start..(start + BATCH).min(args.expiring) {
            let value = json!({"n": n, "body": body});
            batch = batch.create(&docs, &format!("x{n:07}"), &value);
        }
        batch.commit().expires_at(EXPIRES_AT).await?;
    }
    for n in 0..args.kept {
        docs.create(&format!("k{n:07}"), &json!({"n": n, "body": body}))
            .await?;
    }
    Ok(())
}

/// Reads until `stop`: a `get` of an expired id, then every 10th round a `count` and a
/// query of 10 documents, each checked against what must be visible.
async fn read_until(
    site: Site,
    sizes: Sizes,
    reader: usize,
    reads: Arc<Reads>,
    stop: Arc<AtomicBool>,
) -> docstore::Result<()> {
    let docs = site.collection::<serde_json::Value>("sessions")?;
    let query = Query::parse("n < 10 order by n")?;
    let mut round = reader;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        let id = format!("x{:07}", (round * 7919) % sizes.expiring.max(1));
        if docs.get(&id).await?.is_some() {
            reads.wrong.fetch_add(1, Ordering::Relaxed);
        }
        reads.gets.fetch_add(1, Ordering::Relaxed);
        if round.is_multiple_of(10) {
            if site.count().await? != sizes.kept as u64 {
                reads.wrong.fetch_add(1, Ordering::Relaxed);
            }
            reads.counts.fetch_add(1, Ordering::Relaxed);
            let page: Vec<_> = docs.stream(&query).try_collect().await?;
            if page.iter().any(|doc| doc.id.starts_with('x')) {
                reads.wrong.fetch_add(1, Ordering::Relaxed);
            }
            reads.queries.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(())
}

fn report(args: &Args, swept: usize, took: Duration, reads: &Reads) {
    let secs = took.as_secs_f64();
    println!(
        "swept {swept} of {} expired documents in {secs:.2} s ({:.0} documents/s, {} rounds of {ROUND})",
        args.expiring,
        swept as f64 / secs.max(1e-9),
        swept.div_ceil(ROUND)
    );
    println!(
        "meanwhile {} readers: {} gets of expired ids, {} counts, {} queries; {} saw an expired document",
        args.readers,
        reads.gets.load(Ordering::Relaxed),
        reads.counts.load(Ordering::Relaxed),
        reads.queries.load(Ordering::Relaxed),
        reads.wrong.load(Ordering::Relaxed)
    );
}
