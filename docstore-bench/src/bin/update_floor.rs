//! The floor of a versioned in-memory update: what one merge patch costs when the version it
//! replaces must stay intact (a change log keeping every version as written, for the
//! contract's `previous`: `docs/contract.md`, "Change feed"), against the memory baseline's
//! merge in place, and what the memory driver, whose log keeps reverse patches instead (an
//! update merges in place), costs under the same conditions (the figures in
//! `docs/benchmarks.md`, "Memory: the update floor" and "Memory: a log of reverse patches").
//!
//! On the benchmark's ~1 KB documents and patches (`docstore_bench::data`), per update:
//!
//! - **in place**: the baseline's work, [`data::merge`] into the only holder of the map;
//! - **copy + merge**: the least a store keeping versions does — copy the stored map
//!   ([`docstore::Data`] is copied on write: the log holds the stored version), merge into
//!   the copy, store it, and keep the replaced version in a log of the default retention,
//!   dropping (freeing) the version that falls out of it; timed in parts: the copy, the
//!   merge, the free;
//! - **driver**: `MemoryStore::apply` of the update request, without the front end;
//! - **store**: `Store::update`, front end included (what the benchmark's memory rows time,
//!   minus the adapter's `Key`).
//!
//! Each on `--docs` documents visited in a shuffled order (cold: the benchmark's update
//! workload) and on 16 documents in turn (hot: its 16-task workload, on one thread), the
//! log first filled so that every timed update frees a version (for the driver and the store,
//! a `put`'s whole replaced version: what the retention lets go after a run of puts). Rounds
//! alternate; the median round is printed.
//!
//! ```sh
//! cargo run --release -p docstore-bench --no-default-features --bin update_floor
//! ```

use clap::Parser;
use docstore::batch::Write;
use docstore::driver::{Driver, Origin};
use docstore::request::{Op, Request};
use docstore::{Data, Key, Store};
use docstore_bench::data::{self, ACTOR, Rng, SITE};
use docstore_memory::{DEFAULT_FEED_RETENTION, MemoryStore};
use std::collections::VecDeque;
use std::ops::DerefMut;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The floor of a versioned update against a merge in place.
#[derive(Debug, Parser)]
struct Args {
    /// Documents of the cold run (visited in a shuffled order).
    #[arg(long, default_value_t = 50_000)]
    docs: usize,
    /// Updates per hot run (over 16 documents in turn).
    #[arg(long, default_value_t = 50_000)]
    hot_ops: usize,
    /// Rounds of each measurement (the median is printed).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

/// Which documents a run updates, in order.
#[derive(Clone, Copy, Debug)]
enum Visit {
    /// Every document once, shuffled.
    Cold,
    /// 16 documents in turn, this many updates.
    Hot(usize),
}

impl Visit {
    fn order(self, docs: usize) -> Vec<usize> {
        match self {
            Visit::Cold => {
                let mut order: Vec<usize> = (0..docs).collect();
                Rng::new(3).shuffle(&mut order);
                order
            }
            Visit::Hot(ops) => (0..ops).map(|k| k % 16).collect(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Visit::Cold => "cold",
            Visit::Hot(_) => "hot (16 docs)",
        }
    }
}

/// Nanoseconds per update of one round, whole and by part (zero where not split).
#[derive(Clone, Copy, Debug, Default)]
struct Round {
    total: f64,
    copy: f64,
    merge: f64,
    free: f64,
}

fn per_op(d: Duration, ops: usize) -> f64 {
    d.as_nanos() as f64 / ops.max(1) as f64
}

/// The baseline's merge in place into maps nobody else holds.
fn in_place(docs: usize, order: &[usize]) -> Round {
    let mut stored: Vec<Data> = (0..docs).map(|n| data::document(n, 0)).collect();
    let patches: Vec<Data> = (0..order.len()).map(|k| data::patch(k as u64)).collect();
    let started = Instant::now();
    for (k, &n) in order.iter().enumerate() {
        data::merge(&mut stored[n], &patches[k]);
    }
    Round {
        total: per_op(started.elapsed(), order.len()),
        ..Round::default()
    }
}

/// Copy, merge into the copy, keep the replaced version in a log of the default retention
/// (filled first), free what falls out; each part timed.
fn copy_and_merge(docs: usize, order: &[usize]) -> Round {
    let mut stored: Vec<Data> = (0..docs).map(|n| data::document(n, 0)).collect();
    let mut log: VecDeque<Data> = VecDeque::with_capacity(DEFAULT_FEED_RETENTION + 1);
    // Fill the log with versions of the documents, so every timed update frees one.
    let mut generation = 1;
    while log.len() < DEFAULT_FEED_RETENTION {
        let room = DEFAULT_FEED_RETENTION - log.len();
        for (n, slot) in stored.iter_mut().enumerate().take(room) {
            log.push_back(std::mem::replace(slot, data::document(n, generation)));
        }
        generation += 1;
    }
    let patches: Vec<Data> = (0..order.len()).map(|k| data::patch(k as u64)).collect();
    let (mut copy, mut merge, mut free) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let started = Instant::now();
    for (k, &n) in order.iter().enumerate() {
        let t0 = Instant::now();
        let mut next = stored[n].clone();
        next.deref_mut(); // the copy on write: `stored[n]` still holds the map
        let t1 = Instant::now();
        docstore::merge_patch(&mut next, &patches[k]);
        let t2 = Instant::now();
        log.push_back(std::mem::replace(&mut stored[n], next));
        let evicted = log.pop_front();
        drop(evicted);
        let t3 = Instant::now();
        copy += t1 - t0;
        merge += t2 - t1;
        free += t3 - t2;
    }
    let ops = order.len();
    Round {
        total: per_op(started.elapsed(), ops),
        copy: per_op(copy, ops),
        merge: per_op(merge, ops),
        free: per_op(free, ops),
    }
}

fn key(n: usize) -> Key {
    Key::new(SITE, "floor", data::id(n)).expect("a valid key")
}

/// A memory store holding `docs` documents whose log is full (every later write evicts).
async fn filled_store(docs: usize) -> Arc<MemoryStore> {
    let memory = Arc::new(MemoryStore::new());
    let store = Store::from_driver(memory.clone());
    for n in 0..docs {
        store
            .create(&key(n), data::document(n, 0), ACTOR)
            .await
            .expect("created");
    }
    let mut written = docs;
    let mut generation = 1;
    while written < DEFAULT_FEED_RETENTION {
        for n in 0..docs.min(DEFAULT_FEED_RETENTION - written) {
            store
                .put(&key(n), data::document(n, generation), ACTOR)
                .await
                .expect("put");
            written += 1;
        }
        generation += 1;
    }
    memory
}

/// `MemoryStore::apply` of update requests, without the front end.
async fn driver(docs: usize, order: &[usize]) -> Round {
    let memory = filled_store(docs).await;
    let keys: Vec<Key> = (0..docs).map(key).collect();
    let patches: Vec<Data> = (0..order.len()).map(|k| data::patch(k as u64)).collect();
    let started = Instant::now();
    for (k, &n) in order.iter().enumerate() {
        let write = Write::update(keys[n].clone(), patches[k].clone());
        let request = Request::single(Op::Write(&write), Origin::actor(ACTOR));
        let answer = memory.apply(request).await.expect("updated");
        drop(answer);
    }
    Round {
        total: per_op(started.elapsed(), order.len()),
        ..Round::default()
    }
}

/// `Store::update`, front end included.
async fn store(docs: usize, order: &[usize]) -> Round {
    let store = Store::from_driver(filled_store(docs).await);
    let keys: Vec<Key> = (0..docs).map(key).collect();
    let patches: Vec<Data> = (0..order.len()).map(|k| data::patch(k as u64)).collect();
    let started = Instant::now();
    for (k, &n) in order.iter().enumerate() {
        let doc = store.update(&keys[n], &patches[k], ACTOR).await;
        drop(doc.expect("updated"));
    }
    Round {
        total: per_op(started.elapsed(), order.len()),
        ..Round::default()
    }
}

fn median(mut rounds: Vec<Round>) -> (Round, f64, f64) {
    rounds.sort_by(|a, b| a.total.total_cmp(&b.total));
    let (low, high) = (rounds[0].total, rounds[rounds.len() - 1].total);
    (rounds[rounds.len() / 2], low, high)
}

fn main() {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    println!("ns per update (median of {} rounds, range)", args.rounds);
    for visit in [Visit::Cold, Visit::Hot(args.hot_ops)] {
        let docs = match visit {
            Visit::Cold => args.docs,
            Visit::Hot(_) => 16,
        };
        let order = visit.order(docs);
        let mut rounds: [Vec<Round>; 4] = Default::default();
        for _ in 0..args.rounds {
            rounds[0].push(in_place(docs, &order));
            rounds[1].push(copy_and_merge(docs, &order));
            rounds[2].push(runtime.block_on(driver(docs, &order)));
            rounds[3].push(runtime.block_on(store(docs, &order)));
        }
        let [a, b, c, d] = rounds.map(median);
        println!("{}:", visit.name());
        let line = |name: &str, (r, lo, hi): (Round, f64, f64)| {
            print!("  {name:<14} {:>7.0} ({lo:.0}–{hi:.0})", r.total);
            if r.copy > 0.0 {
                print!(
                    "  copy {:.0}, merge {:.0}, store + log + free {:.0}",
                    r.copy, r.merge, r.free
                );
            }
            println!("  = {:.2}× in place", a.0.total / r.total);
        };
        line("in place", a);
        line("copy + merge", b);
        line("driver", c);
        line("store", d);
    }
}
