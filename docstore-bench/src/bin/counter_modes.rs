//! Exact against fast collection counters on DynamoDB, side by side in one run: for each mode,
//! `creates` then `deletes` of ~1 KB documents through `DynamoStore`, with the requests each
//! call sent, its latency (p50 / p99) and the write capacity it costs by DynamoDB's pricing
//! rules (a standard write costs 1 WCU per started KB of the item, a transactional write
//! twice that).
//!
//! ```sh
//! scripts/with-dynamodb-emulators cargo run --release -p docstore-bench --bin counter_modes
//! ```
//!
//! Runs against dynoxide (`DOCSTORE_DYNOXIDE_ENDPOINT`, or the first argument).

use docstore::config::{CounterMode, DynamoDbConfig};
use docstore::{Key, Store, StoreOptions};
use docstore_bench::data::{SITE, document, id};
use docstore_bench::dynamo::{self, RequestCounter};
use docstore_dynamodb::DynamoStore;
use std::time::{Duration, Instant};

const CALLS: usize = 300;

/// The size DynamoDB counts for a document item of `data_len` bytes of JSON: the data, the
/// keys, the other attributes, a creation's one write identity (no `wh` yet).
fn item_bytes(data_len: usize, id_len: usize) -> usize {
    let pk = SITE.len() + 1 + "c".len();
    2 + pk + 2 + id_len + 4 + data_len + 2 * (10 + 20) + 2 * (10 + 5) + 7 + 2 + 1 + 32
}

fn wcu(bytes: usize) -> usize {
    bytes.div_ceil(1024)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

struct Figures {
    requests: String,
    p50: Duration,
    p99: Duration,
    wcu: usize,
}

async fn run(store: &Store, counter: &RequestCounter, mode: CounterMode, delete: bool) -> Figures {
    let mut latencies = Vec::with_capacity(CALLS);
    let mut data_bytes = 0;
    counter.take();
    for n in 0..CALLS {
        let key = Key::new(SITE, format!("c-{mode:?}"), id(n)).unwrap();
        let data = document(n, 0);
        data_bytes = docstore::document::data_size(&data);
        let started = Instant::now();
        if delete {
            assert!(store.delete(&key).await.unwrap());
        } else {
            store.create(&key, data, "bench").await.unwrap();
        }
        latencies.push(started.elapsed());
    }
    latencies.sort();
    let requests = counter.take();
    let per_call: Vec<String> = requests
        .iter()
        .map(|(op, r)| format!("{op} {:.1}", r.count as f64 / CALLS as f64))
        .collect();
    let document = wcu(item_bytes(data_bytes, id(0).len()));
    // The counter item is tiny: 1 WCU. A delete costs what a write of the item costs.
    let wcu = match mode {
        CounterMode::Exact => 2 * document + 2,
        _ => document + 1,
    };
    Figures {
        requests: per_call.join(" + "),
        p50: percentile(&latencies, 0.5),
        p99: percentile(&latencies, 0.99),
        wcu,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let endpoint = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("DOCSTORE_DYNOXIDE_ENDPOINT").ok())
        .expect("pass the dynoxide endpoint or set DOCSTORE_DYNOXIDE_ENDPOINT");
    let counter = RequestCounter::default();
    let client = dynamo::client(&endpoint, &counter).await;
    let table = dynamo::fresh_table_name();
    let mut rows = Vec::new();
    for mode in [CounterMode::Exact, CounterMode::Fast] {
        let config = DynamoDbConfig {
            counters: mode,
            ..DynamoDbConfig::new(&table)
        };
        let streams = dynamo::streams_client(&endpoint).await;
        let driver =
            DynamoStore::from_client(client.clone(), streams, &config, StoreOptions::default())
                .expect("valid settings");
        driver.create_table().await.expect("table");
        let store = Store::new(driver);
        for (call, delete) in [("create", false), ("delete", true)] {
            let figures = run(&store, &counter, mode, delete).await;
            rows.push((mode, call, figures));
        }
        let recount = store
            .recount(SITE, docstore::RecountMode::Report)
            .await
            .expect("recount");
        assert!(recount.changes.is_empty(), "{:?}", recount.changes);
    }
    println!("DynamoDB counters, {CALLS} calls each, dynoxide at {endpoint}");
    println!("| mode | call | requests per call | p50 | p99 | WCU per call |");
    println!("|---|---|---|---|---|---|");
    for (mode, call, f) in &rows {
        println!(
            "| {mode:?} | {call} | {} | {:.2} ms | {:.2} ms | {} |",
            f.requests,
            f.p50.as_secs_f64() * 1e3,
            f.p99.as_secs_f64() * 1e3,
            f.wcu
        );
    }
    for call in ["create", "delete"] {
        let exact = rows
            .iter()
            .find(|r| r.0 == CounterMode::Exact && r.1 == call);
        let fast = rows
            .iter()
            .find(|r| r.0 == CounterMode::Fast && r.1 == call);
        if let (Some(e), Some(f)) = (exact, fast) {
            println!(
                "{call}: exact / fast latency p50 {:.2}x, WCU {:.1}x",
                e.2.p50.as_secs_f64() / f.2.p50.as_secs_f64(),
                e.2.wcu as f64 / f.2.wcu as f64
            );
        }
    }
}
