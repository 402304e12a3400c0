//! What a unique index costs a write (the figures in `docs/benchmarks.md`, "Unique
//! indexes"): the same writes of ~1 KB documents in a collection with one declared index on
//! `email`, plain and unique, on memory and on SQLite (`synchronous=NORMAL`), each
//! document's write going to the two stores in turn, so that drift and load hit both. Each run creates the documents, then updates
//! each one's `email` (a new value: the unique index checks it), then updates another field
//! (the email left alone). Goal (`docs/contract.md`, "Unique indexes"): unique / plain ≤ 1.3×
//! in time per write; the run fails (exit 1) when a median ratio is above it.
//!
//! ```sh
//! cargo run --release -p docstore-bench --bin unique_cost
//! ```

use clap::Parser;
use docstore::{Data, Index, IndexSet, Key, Store, StoreOptions};
use docstore_memory::MemoryStore;
use docstore_sqlite::{Durability, SqliteOptions, SqliteStore};
use serde_json::json;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The most a unique index may cost a write, as a ratio of the time per write.
const GOAL: f64 = 1.3;

/// The cost of a unique index on single-document writes.
#[derive(Debug, Parser)]
struct Args {
    /// Documents per run (each created, then updated twice).
    #[arg(long, default_value_t = 5_000)]
    documents: usize,
    /// Runs of each setting (alternating plain and unique).
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

/// Which write a figure is for.
#[derive(Clone, Copy, Debug)]
enum Workload {
    Create,
    UpdateUniqueField,
    UpdateOtherField,
}

const WORKLOADS: [Workload; 3] = [
    Workload::Create,
    Workload::UpdateUniqueField,
    Workload::UpdateOtherField,
];

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Create => "create",
            Workload::UpdateUniqueField => "update of the email",
            Workload::UpdateOtherField => "update of another field",
        }
    }
}

/// Time per write of each workload in one run, in [`WORKLOADS`] order.
type RunTimes = [Duration; 3];

fn options(unique: bool) -> StoreOptions {
    let index = Index::parse("users", "by_email", ["email"]).expect("a valid declaration");
    let index = if unique { index.unique() } else { index };
    StoreOptions::default().with_indexes(IndexSet::new([index]).expect("one index"))
}

fn body(i: usize) -> Data {
    let filler = "x".repeat(900);
    docstore::object(json!({"email": format!("user{i}@example.com"), "age": i, "bio": filler}))
        .expect("an object")
}

/// One write of `workload` to document `i`.
async fn write(store: &Store, workload: Workload, i: usize) {
    let key = Key::new("bench", "users", format!("u{i:06}")).expect("a valid key");
    let result = match workload {
        Workload::Create => store.create(&key, body(i), "b").await,
        Workload::UpdateUniqueField => {
            let patch = docstore::object(json!({"email": format!("new{i}@example.com")}));
            store.update(&key, &patch.unwrap(), "b").await
        }
        Workload::UpdateOtherField => {
            let patch = docstore::object(json!({"age": i + 1})).unwrap();
            store.update(&key, &patch, "b").await
        }
    };
    result.expect("the write");
}

/// Time per write of each workload on the two stores, `[plain, unique]`: every document's
/// write goes to one store then the other, in alternating order, so that whatever else the
/// machine does hits both alike.
async fn run(stores: [&Store; 2], documents: usize) -> [RunTimes; 2] {
    let mut totals = [[Duration::ZERO; 3]; 2];
    for (w, workload) in WORKLOADS.iter().enumerate() {
        for i in 0..documents {
            let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
            for which in order {
                let started = Instant::now();
                write(stores[which], *workload, i).await;
                totals[which][w] += started.elapsed();
            }
        }
    }
    totals.map(|times| times.map(|total| total / documents as u32))
}

async fn open(backend: &str, unique: bool, dir: &std::path::Path, round: usize) -> Store {
    match backend {
        "memory" => Store::new(MemoryStore::with_options(options(unique))),
        _ => {
            let path = dir.join(format!("unique-{unique}-{round}.db"));
            let sqlite = SqliteOptions::default().with_durability(Durability::Normal);
            Store::new(SqliteStore::open_with(path, options(unique), sqlite).expect("open"))
        }
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut missed = Vec::new();
    println!(
        "unique index cost: {} documents of ~1 KB, {} runs each",
        args.documents, args.runs
    );
    for backend in ["memory", "sqlite NORMAL"] {
        let mut ratios: [Vec<f64>; 3] = Default::default();
        let mut plain_times: [Vec<f64>; 3] = Default::default();
        for round in 0..args.runs {
            let plain = open(backend, false, dir.path(), round).await;
            let unique = open(backend, true, dir.path(), round).await;
            let [plain, unique] = run([&plain, &unique], args.documents).await;
            for (w, (p, u)) in plain.iter().zip(&unique).enumerate() {
                ratios[w].push(u.as_secs_f64() / p.as_secs_f64());
                plain_times[w].push(p.as_secs_f64() * 1e6);
            }
        }
        for (w, workload) in WORKLOADS.iter().enumerate() {
            let ratio = median(ratios[w].clone());
            let plain_us = median(plain_times[w].clone());
            let verdict = if ratio <= GOAL { "ok" } else { "MISSED" };
            println!(
                "{backend:14} {:26} plain {plain_us:8.2} µs/write  unique/plain {ratio:5.2}x \
                 (runs {:?})  goal <= {GOAL}x: {verdict}",
                workload.name(),
                ratios[w]
                    .iter()
                    .map(|r| format!("{r:.2}"))
                    .collect::<Vec<_>>()
            );
            if ratio > GOAL {
                missed.push(format!("{backend} {}", workload.name()));
            }
        }
    }
    if missed.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("unique_cost: goal missed for {}", missed.join(", "));
        ExitCode::FAILURE
    }
}
