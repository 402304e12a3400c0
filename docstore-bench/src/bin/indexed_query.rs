//! Issue 10's figure: `status = "open" and priority >= 50 order by score desc limit 20` over
//! 100 000 documents of ~1 KB, on memory and SQLite, without and with a declared index
//! `(status, -score)`, next to hand-written rusqlite with the equivalent index.
//!
//! ```sh
//! cargo run --release -p docstore-bench --bin indexed_query [DOCUMENTS]
//! ```
//!
//! Each figure is the median (and p99) of 200 runs of the query after 20 warm-up runs; every
//! store's answer is checked against the reference evaluator's first.

use docstore::query::evaluate;
use docstore::{Filter, Index, IndexSet, Query, Store, StoreOptions, Write};
use docstore_bench::data::{SITE, document, id};
use docstore_memory::MemoryStore;
use docstore_sqlite::{Durability, SqliteOptions, SqliteStore};
use std::time::{Duration, Instant};

const RUNS: usize = 200;
const WARMUP: usize = 20;
const COLLECTION: &str = "tickets";

fn query() -> Query {
    Query::new()
        .filter(Filter::eq("status", "open").and(Filter::gte("priority", 50)))
        .order_by_desc("score")
        .limit(20)
}

fn indexes() -> IndexSet {
    IndexSet::new([Index::parse(COLLECTION, "by_status_score", ["status", "-score"]).unwrap()])
        .unwrap()
}

fn figures(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() * 99 / 100]),
    )
}

async fn time_store(name: &str, store: &dyn Store, expected: &[String]) -> f64 {
    let q = query();
    let got: Vec<String> = store
        .query(SITE, COLLECTION, &q)
        .await
        .unwrap()
        .documents
        .into_iter()
        .map(|d| d.id)
        .collect();
    assert_eq!(got, expected, "{name} answers differently");
    let plan = store.explain(SITE, COLLECTION, &q).await.unwrap();
    let mut samples = Vec::with_capacity(RUNS);
    for i in 0..WARMUP + RUNS {
        let start = Instant::now();
        let page = store.query(SITE, COLLECTION, &q).await.unwrap();
        let elapsed = start.elapsed();
        assert_eq!(page.documents.len(), expected.len());
        if i >= WARMUP {
            samples.push(elapsed);
        }
    }
    let (p50, p99) = figures(samples);
    println!("| {name} | {p50:.3} | {p99:.3} | {plan} |");
    p50
}

/// Loads `n` documents in batches of the largest size; returns the time per document.
async fn load(store: &dyn Store, n: usize) -> Duration {
    let start = Instant::now();
    load_batches(store, n).await;
    start.elapsed() / u32::try_from(n.max(1)).unwrap_or(u32::MAX)
}

async fn load_batches(store: &dyn Store, n: usize) {
    let writes: Vec<Write> = (0..n)
        .map(|i| {
            Write::create(
                docstore::Key::new(SITE, COLLECTION, id(i)).unwrap(),
                document(i, 0),
            )
        })
        .collect();
    for chunk in writes.chunks(docstore::batch::MAX_BATCH_WRITES) {
        store.write_all(chunk, "bench").await.unwrap();
    }
}

fn raw_sqlite(path: &std::path::Path, n: usize, expected: &[String]) -> f64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE TABLE t (id TEXT PRIMARY KEY, data TEXT NOT NULL) STRICT;
         CREATE INDEX t_status_score ON t (data ->> '$.status', data ->> '$.score' DESC);
         CREATE TABLE u (id TEXT PRIMARY KEY, data TEXT NOT NULL) STRICT;",
    )
    .unwrap();
    let texts: Vec<String> = (0..n)
        .map(|i| serde_json::to_string(&document(i, 0)).unwrap())
        .collect();
    let mut per_doc = Vec::new();
    for table in ["u", "t"] {
        let start = Instant::now();
        let tx = conn.unchecked_transaction().unwrap();
        {
            let mut insert = tx
                .prepare(&format!("INSERT INTO {table} (id, data) VALUES (?1, ?2)"))
                .unwrap();
            for (i, data) in texts.iter().enumerate() {
                insert.execute(rusqlite::params![id(i), data]).unwrap();
            }
        }
        tx.commit().unwrap();
        per_doc.push(start.elapsed().as_secs_f64() * 1e6 / n.max(1) as f64);
    }
    println!(
        "| (hand-written rusqlite inserts, one transaction: {:.1} µs per document without the \
         expression index, {:.1} µs with it) | | | |",
        per_doc[0], per_doc[1]
    );
    let sql = "SELECT id, data FROM t WHERE data ->> '$.status' = 'open' \
               AND data ->> '$.priority' >= 50 ORDER BY data ->> '$.score' DESC, id LIMIT 20";
    let mut stmt = conn.prepare(sql).unwrap();
    let run = |stmt: &mut rusqlite::Statement<'_>| -> Vec<String> {
        stmt.query_map([], |row| {
            let _data: String = row.get(1)?;
            row.get::<_, String>(0)
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    };
    assert_eq!(
        run(&mut stmt),
        expected,
        "the hand-written query answers differently"
    );
    let mut samples = Vec::with_capacity(RUNS);
    for i in 0..WARMUP + RUNS {
        let start = Instant::now();
        let ids = run(&mut stmt);
        let elapsed = start.elapsed();
        assert_eq!(ids.len(), expected.len());
        if i >= WARMUP {
            samples.push(elapsed);
        }
    }
    let plan: String = conn
        .query_row(&format!("EXPLAIN QUERY PLAN {sql}"), [], |row| row.get(3))
        .unwrap();
    let (p50, p99) = figures(samples);
    println!("| hand-written rusqlite, expression index | {p50:.3} | {p99:.3} | {plan} |");
    p50
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(100_000, |a| a.parse().expect("DOCUMENTS is a number"));
    let docs: Vec<docstore::Document> = (0..n)
        .map(|i| docstore::Document {
            id: id(i),
            data: document(i, 0),
            created_at: 0,
            updated_at: 0,
            created_by: String::new(),
            updated_by: String::new(),
            version: 1,
        })
        .collect();
    let expected: Vec<String> = evaluate(&docs, &query())
        .unwrap()
        .documents
        .into_iter()
        .map(|d| d.id)
        .collect();
    drop(docs);
    println!("{n} documents; median and p99 of {RUNS} runs, in ms\n");
    println!("| store | p50 ms | p99 ms | explain |");
    println!("|---|---:|---:|---|");
    let mut writes = Vec::new();
    let memory = MemoryStore::new();
    writes.push(("memory, no index", load(&memory, n).await));
    time_store("memory, no index", &memory, &expected).await;
    drop(memory);
    let memory = MemoryStore::with_options(StoreOptions::default().with_indexes(indexes()));
    writes.push(("memory, index (status, -score)", load(&memory, n).await));
    time_store("memory, index (status, -score)", &memory, &expected).await;
    drop(memory);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.db");
    let sqlite_options = SqliteOptions::default().with_durability(Durability::Normal);
    {
        let store =
            SqliteStore::open_with(&path, StoreOptions::default(), sqlite_options.clone()).unwrap();
        writes.push(("SQLite, no index", load(&store, n).await));
        time_store("SQLite, no index", &store, &expected).await;
    }
    {
        let store = SqliteStore::open_with(
            dir.path().join("indexed-load.db"),
            StoreOptions::default().with_indexes(indexes()),
            sqlite_options.clone(),
        )
        .unwrap();
        writes.push(("SQLite, index (status, -score)", load(&store, n).await));
    }
    let start = Instant::now();
    let store = SqliteStore::open_with(
        &path,
        StoreOptions::default().with_indexes(indexes()),
        sqlite_options,
    )
    .unwrap();
    let build = start.elapsed();
    time_store("SQLite, index (status, -score)", &store, &expected).await;
    drop(store);
    raw_sqlite(&dir.path().join("raw.db"), n, &expected);
    println!("\nCreating the documents (write_all batches of 50), per document:\n");
    println!("| store | µs per document |");
    println!("|---|---:|");
    for (name, per_doc) in writes {
        println!("| {name} | {:.1} |", per_doc.as_secs_f64() * 1e6);
    }
    println!(
        "\nBuilding the SQLite index over {n} documents at open: {:.0} ms",
        build.as_secs_f64() * 1e3
    );
}
