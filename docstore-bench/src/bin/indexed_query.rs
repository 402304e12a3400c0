//! Declared indexes, measured against hand-written code using the same kind of index, in one
//! run (the figures in `docs/benchmarks.md`):
//!
//! 1. **The served query** `status = "open" and priority >= 50 order by score desc limit 20`
//!    over ~1 KB documents, on each backend without and with a declared index
//!    `(status, -score)`, next to its baseline: for memory a `BTreeMap` keyed by
//!    `(status, score descending, id)`; for SQLite hand-written rusqlite with the equivalent
//!    expression index; for DynamoDB raw aws-sdk `Query` calls on an equivalent GSI
//!    (`status` S / `score` N as top-level attributes of the same seed-001 items), paged like
//!    docstore's (the page and one more, then twice as many each time). Every baseline
//!    returns the same `Document`s docstore returns (data parsed, metadata read), and every
//!    answer is checked against the reference evaluator's before it is timed.
//! 2. **The write cost of each declared index**: single `create` and `update` calls into
//!    collections with 0, 1 and 3 declared indexes.
//!
//! ```sh
//! # memory and SQLite:
//! cargo run --release -p docstore-bench --bin indexed_query -- --backends memory,sqlite
//! # all three (starts dynoxide):
//! scripts/with-dynamodb-emulators cargo run --release -p docstore-bench --bin indexed_query
//! ```
//!
//! Each query figure is the median (and p99) of `--runs` runs after a tenth as many warm-up
//! runs; the ratio is docstore's median over the baseline's.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType,
};
use clap::Parser;
use docstore::query::evaluate;
use docstore::{Data, Document, Filter, Index, IndexSet, Key, Query, Store, StoreOptions, Write};
use docstore_bench::data::{SITE, document, id, patch};
use docstore_bench::dynamo::{self, RequestCounter};
use docstore_dynamodb::DynamoStore;
use docstore_memory::MemoryStore;
use docstore_sqlite::{Durability, SqliteOptions, SqliteStore};
use parking_lot::RwLock;
use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

/// Declared indexes against hand-written code with the same index.
#[derive(Debug, Parser)]
struct Args {
    /// Backends to run.
    #[arg(long, value_delimiter = ',', default_value = "memory,sqlite,dynamodb")]
    backends: Vec<String>,
    /// Documents in the queried collection, memory and SQLite.
    #[arg(long, default_value_t = 100_000)]
    documents: usize,
    /// Documents in the queried collection, DynamoDB.
    #[arg(long, default_value_t = 20_000)]
    dynamodb_documents: usize,
    /// Timed runs of the served query (the unindexed query runs a tenth as often).
    #[arg(long, default_value_t = 200)]
    runs: usize,
    /// Creates and updates per index count, memory and SQLite.
    #[arg(long, default_value_t = 5_000)]
    write_ops: usize,
    /// Creates and updates per index count, DynamoDB.
    #[arg(long, default_value_t = 300)]
    dynamodb_write_ops: usize,
    /// The dynoxide endpoint (set by `scripts/with-dynamodb-emulators`).
    #[arg(long, env = "DOCSTORE_DYNOXIDE_ENDPOINT")]
    endpoint: Option<String>,
}

/// The queried collection (indexed) and its twin without an index.
const TICKETS: &str = "tickets";
const PLAIN: &str = "plain";
/// The collections of the write-cost rows: `w0` no index, `w1` one, `w3` three.
const WRITE_COLLECTIONS: [(&str, usize); 3] = [("w0", 0), ("w1", 1), ("w3", 3)];
/// The page size and what makes a document match besides its status.
const LIMIT: usize = 20;
const PRIORITY_MIN: u64 = 50;

fn query() -> Query {
    Query::new()
        .filter(Filter::eq("status", "open").and(Filter::gte("priority", PRIORITY_MIN)))
        .order_by_desc("score")
        .limit(LIMIT)
}

fn indexes() -> IndexSet {
    let index = |collection: &str, name: &str, fields: &[&str]| {
        Index::parse(collection, name, fields.iter().copied()).expect("valid index")
    };
    IndexSet::new([
        index(TICKETS, "by_status_score", &["status", "-score"]),
        index("w1", "by_status_score", &["status", "-score"]),
        index("w3", "by_status_score", &["status", "-score"]),
        index("w3", "by_category_priority", &["category", "priority"]),
        index("w3", "by_owner_score", &["owner", "-score"]),
    ])
    .expect("valid indexes")
}

/// Median and p99 in milliseconds.
#[derive(Clone, Copy, Debug)]
struct Timing {
    p50: f64,
    p99: f64,
}

impl Timing {
    fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        Timing {
            p50: ms(samples[samples.len() / 2]),
            p99: ms(samples[(samples.len() * 99 / 100).min(samples.len() - 1)]),
        }
    }
}

/// Times `runs` calls of `f` after `runs / 10` warm-up calls.
async fn time<F, Fut>(runs: usize, mut f: F) -> Timing
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let runs = runs.max(1);
    for _ in 0..runs / 10 {
        f().await;
    }
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        f().await;
        samples.push(start.elapsed());
    }
    Timing::of(samples)
}

/// Times `a` and `b` alternately, `runs` calls each after warm-up calls, so both see the
/// same machine (a shared VM drifts by tens of per cent between minutes).
async fn time_pair<A, FA, B, FB>(runs: usize, mut a: A, mut b: B) -> (Timing, Timing)
where
    A: FnMut() -> FA,
    FA: Future<Output = ()>,
    B: FnMut() -> FB,
    FB: Future<Output = ()>,
{
    let runs = runs.max(1);
    for _ in 0..runs / 10 {
        a().await;
        b().await;
    }
    let (mut sa, mut sb) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for _ in 0..runs {
        let start = Instant::now();
        a().await;
        sa.push(start.elapsed());
        let start = Instant::now();
        b().await;
        sb.push(start.elapsed());
    }
    (Timing::of(sa), Timing::of(sb))
}

fn ids(docs: &[Document]) -> Vec<String> {
    docs.iter().map(|d| d.id.clone()).collect()
}

/// The evaluator's answer over documents `0..n`.
fn expected(n: usize) -> Vec<String> {
    let docs: Vec<Document> = (0..n).map(|i| stored(i, document(i, 0))).collect();
    ids(&evaluate(&docs, &query()).expect("valid query").documents)
}

fn stored(i: usize, data: Data) -> Document {
    Document {
        expires_at: None,
        id: id(i),
        data,
        created_at: 0,
        updated_at: 0,
        created_by: "bench".to_owned(),
        updated_by: "bench".to_owned(),
        version: 1,
    }
}

/// Writes documents `0..n` into `collection` in batches of the largest size.
async fn load(store: &Store, collection: &str, n: usize) {
    let writes: Vec<Write> = (0..n)
        .map(|i| {
            Write::create(
                Key::new(SITE, collection, id(i)).expect("valid key"),
                document(i, 0),
            )
        })
        .collect();
    for chunk in writes.chunks(docstore::batch::MAX_BATCH_WRITES) {
        store.write_all(chunk, "bench").await.expect("loads");
    }
}

/// Checks the query's answer on `collection` of `store`; its plan.
async fn check_docstore(store: &Store, collection: &str, expected: &[String]) -> String {
    let q = query();
    let page = store.query(SITE, collection, &q).await.expect("query");
    assert_eq!(
        ids(&page.documents),
        expected,
        "docstore answers differently"
    );
    assert!(!page.exhausted_scan, "docstore's answer is partial");
    store
        .explain(SITE, collection, &q)
        .await
        .expect("explain")
        .to_string()
}

/// One run of the query on `collection` of `store`.
async fn run_docstore(store: &Store, collection: &str) {
    let page = store
        .query(SITE, collection, &query())
        .await
        .expect("query");
    assert_eq!(page.documents.len(), LIMIT);
}

/// Times the query on `collection` of `store` after checking its answer.
async fn time_docstore(
    store: &Store,
    collection: &str,
    expected: &[String],
    runs: usize,
) -> (Timing, String) {
    let plan = check_docstore(store, collection, expected).await;
    (time(runs, || run_docstore(store, collection)).await, plan)
}

/// One row of the query table.
struct QueryRow {
    backend: &'static str,
    documents: usize,
    unindexed: Option<Timing>,
    indexed: Timing,
    baseline: Timing,
    baseline_name: &'static str,
    requests: Option<(f64, f64)>,
    plan: String,
}

/// One row of the write-cost table: per-op median and mean for 0, 1 and 3 indexes.
struct WriteRow {
    backend: &'static str,
    call: &'static str,
    per_op: Vec<(Timing, f64)>,
    requests: Option<Vec<f64>>,
}

// ---------------------------------------------------------------------------------------
// memory

/// The hand-written memory index: documents by `(status, score descending, id)`.
type MemoryIndex = BTreeMap<(String, Reverse<u64>, String), Document>;

fn memory_index(n: usize) -> RwLock<MemoryIndex> {
    let mut map = BTreeMap::new();
    for i in 0..n {
        let doc = stored(i, document(i, 0));
        map.insert(sort_key(&doc), doc);
    }
    RwLock::new(map)
}

fn sort_key(doc: &Document) -> (String, Reverse<u64>, String) {
    let status = doc.data["status"].as_str().expect("status").to_owned();
    // Scores are positive floats: their bits order as the numbers do.
    let score = doc.data["score"].as_f64().expect("score").to_bits();
    (status, Reverse(score), doc.id.clone())
}

fn memory_baseline_query(map: &RwLock<MemoryIndex>) -> Vec<Document> {
    let map = map.read();
    let from = ("open".to_owned(), Reverse(u64::MAX), String::new());
    map.range(from..)
        .take_while(|((status, _, _), _)| status == "open")
        .filter(|(_, doc)| {
            doc.data["priority"]
                .as_u64()
                .is_some_and(|p| p >= PRIORITY_MIN)
        })
        .take(LIMIT)
        .map(|(_, doc)| doc.clone())
        .collect()
}

async fn memory(args: &Args, expected: &[String]) -> QueryRow {
    let n = args.documents;
    let store = Store::new(MemoryStore::with_options(
        StoreOptions::default().with_indexes(indexes()),
    ));
    load(&store, TICKETS, n).await;
    load(&store, PLAIN, n).await;
    let unindexed = time_docstore(&store, PLAIN, expected, args.runs / 10)
        .await
        .0;
    let plan = check_docstore(&store, TICKETS, expected).await;
    let map = memory_index(n);
    assert_eq!(ids(&memory_baseline_query(&map)), expected);
    let (indexed, baseline) = time_pair(
        args.runs,
        || run_docstore(&store, TICKETS),
        || async {
            assert_eq!(memory_baseline_query(&map).len(), LIMIT);
        },
    )
    .await;
    QueryRow {
        backend: "memory",
        documents: n,
        unindexed: Some(unindexed),
        indexed,
        baseline,
        baseline_name: "BTreeMap by (status, score desc, id)",
        requests: None,
        plan,
    }
}

// ---------------------------------------------------------------------------------------
// SQLite

/// A docstore SQLite store at `path` with the benchmark's indexes, `synchronous=NORMAL` like
/// the hand-written side.
fn open_sqlite(path: &std::path::Path) -> Store {
    Store::new(
        SqliteStore::open_with(
            path,
            StoreOptions::default().with_indexes(indexes()),
            SqliteOptions::default().with_durability(Durability::Normal),
        )
        .expect("opens"),
    )
}

/// The hand-written table: docstore-sqlite's columns, data as JSON text, and the
/// expression index on the same two fields.
fn raw_sqlite(path: &std::path::Path, n: usize) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).expect("opens");
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE TABLE t (id TEXT PRIMARY KEY, data TEXT NOT NULL, created_at INTEGER NOT NULL,
             updated_at INTEGER NOT NULL, created_by TEXT NOT NULL, updated_by TEXT NOT NULL,
             version INTEGER NOT NULL) STRICT;
         CREATE INDEX t_status_score ON t (data ->> '$.status', data ->> '$.score' DESC);",
    )
    .expect("schema");
    let tx = conn.unchecked_transaction().expect("begins");
    {
        let mut insert = tx
            .prepare("INSERT INTO t VALUES (?1, ?2, 0, 0, 'bench', 'bench', 1)")
            .expect("prepares");
        for i in 0..n {
            let data = serde_json::to_string(&document(i, 0)).expect("serializes");
            insert
                .execute(rusqlite::params![id(i), data])
                .expect("inserts");
        }
    }
    tx.commit().expect("commits");
    conn
}

const RAW_SQL: &str = "SELECT id, data, created_at, updated_at, created_by, updated_by, version \
    FROM t WHERE data ->> '$.status' = ?1 AND data ->> '$.priority' >= ?2 \
    ORDER BY data ->> '$.score' DESC, id LIMIT ?3";

/// The hand-written query: documents parsed as docstore returns them (`parse`), or only
/// their ids read.
fn raw_query(conn: &rusqlite::Connection, parse: bool) -> Vec<String> {
    let mut stmt = conn.prepare_cached(RAW_SQL).expect("prepares");
    let rows = stmt
        .query_map(
            rusqlite::params!["open", PRIORITY_MIN as i64, LIMIT as i64],
            |row| {
                if !parse {
                    return row.get::<_, String>(0);
                }
                let text: String = row.get(1)?;
                let doc = Document {
                    expires_at: None,
                    id: row.get(0)?,
                    data: serde_json::from_str(&text).expect("stored JSON"),
                    created_at: row.get(2)?,
                    updated_at: row.get(3)?,
                    created_by: row.get(4)?,
                    updated_by: row.get(5)?,
                    version: row.get::<_, i64>(6)? as u64,
                };
                Ok(doc.id)
            },
        )
        .expect("runs");
    rows.collect::<rusqlite::Result<_>>().expect("rows")
}

async fn sqlite(args: &Args, expected: &[String]) -> QueryRow {
    let n = args.documents;
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open_sqlite(&dir.path().join("docstore.db"));
    load(&store, TICKETS, n).await;
    load(&store, PLAIN, n).await;
    let unindexed = time_docstore(&store, PLAIN, expected, args.runs / 10)
        .await
        .0;
    let plan = check_docstore(&store, TICKETS, expected).await;
    let conn = raw_sqlite(&dir.path().join("raw.db"), n);
    assert_eq!(
        raw_query(&conn, true),
        expected,
        "rusqlite answers differently"
    );
    let (indexed, baseline) = time_pair(
        args.runs,
        || run_docstore(&store, TICKETS),
        || async {
            assert_eq!(raw_query(&conn, true).len(), LIMIT);
        },
    )
    .await;
    let ids_only = time(args.runs, || async {
        assert_eq!(raw_query(&conn, false).len(), LIMIT);
    })
    .await;
    let raw_plan: String = conn
        .query_row(
            &format!("EXPLAIN QUERY PLAN {RAW_SQL}"),
            rusqlite::params!["open", 50, 20],
            |row| row.get(3),
        )
        .expect("plan");
    println!(
        "SQLite baseline plan: {raw_plan}; reading only the ids (no data parsed): p50 {:.3} ms",
        ids_only.p50
    );
    QueryRow {
        backend: "SQLite",
        documents: n,
        unindexed: Some(unindexed),
        indexed,
        baseline,
        baseline_name: "rusqlite, expression index (status, score desc)",
        requests: None,
        plan,
    }
}

// ---------------------------------------------------------------------------------------
// DynamoDB

const RAW_GSI: &str = "by_status_score";

/// The baseline's table: the table layout's keys and a GSI on top-level `status` (S) / `score` (N).
async fn raw_table(client: &Client, table: &str) {
    let attribute = |name: &str, kind| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(kind)
            .build()
            .expect("attribute")
    };
    let key = |name: &str, kind| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .expect("key")
    };
    let gsi = GlobalSecondaryIndex::builder()
        .index_name(RAW_GSI)
        .key_schema(key("status", KeyType::Hash))
        .key_schema(key("score", KeyType::Range))
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::All)
                .build(),
        )
        .build()
        .expect("gsi");
    client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute("pk", ScalarAttributeType::S))
        .attribute_definitions(attribute("sk", ScalarAttributeType::S))
        .attribute_definitions(attribute("status", ScalarAttributeType::S))
        .attribute_definitions(attribute("score", ScalarAttributeType::N))
        .key_schema(key("pk", KeyType::Hash))
        .key_schema(key("sk", KeyType::Range))
        .global_secondary_indexes(gsi)
        .send()
        .await
        .expect("creates the baseline's table");
}

async fn raw_load(client: &Client, table: &str, n: usize) {
    use aws_sdk_dynamodb::types::AttributeValue;
    let items = (0..n).map(|i| {
        let mut item = dynamo::item(TICKETS, i);
        let data = document(i, 0);
        let status = data["status"].as_str().expect("status").to_owned();
        item.insert("status".to_owned(), AttributeValue::S(status));
        item.insert(
            "score".to_owned(),
            AttributeValue::N(data["score"].to_string()),
        );
        item
    });
    dynamo::put_items(client, table, items)
        .await
        .expect("loads");
}

/// The hand-written served query: the GSI read in descending score order, pages of the
/// page and one more then twice as many (docstore's schedule), each item parsed and
/// filtered, until the page and one more matched.
async fn raw_dynamodb_query(client: &Client, table: &str) -> Vec<Document> {
    use aws_sdk_dynamodb::types::AttributeValue;
    let mut matched = Vec::new();
    let mut start = None;
    let mut page = LIMIT + 1;
    loop {
        let output = client
            .query()
            .table_name(table)
            .index_name(RAW_GSI)
            .key_condition_expression("#s = :s")
            .expression_attribute_names("#s", "status")
            .expression_attribute_values(":s", AttributeValue::S("open".to_owned()))
            .scan_index_forward(false)
            .limit(page as i32)
            .set_exclusive_start_key(start)
            .send()
            .await
            .expect("queries");
        for item in output.items() {
            let doc = docstore_bench::baselines::dynamodb::parse(item).expect("parses");
            if doc.data["priority"]
                .as_u64()
                .is_some_and(|p| p >= PRIORITY_MIN)
            {
                matched.push(doc);
            }
        }
        if matched.len() > LIMIT {
            break;
        }
        match output.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => break,
        }
        page = (page * 2).min(1_000);
    }
    matched.truncate(LIMIT);
    matched
}

async fn dynamodb(args: &Args, endpoint: &str) -> (QueryRow, Vec<WriteRow>) {
    let n = args.dynamodb_documents;
    let expected = expected(n);
    let counter = RequestCounter::default();
    let client = dynamo::client(endpoint, &counter).await;
    let table = dynamo::fresh_table_name();
    let config = docstore::config::DynamoDbConfig::new(&table);
    let driver = DynamoStore::from_client(
        client.clone(),
        dynamo::streams_client(endpoint).await,
        &config,
        StoreOptions::default().with_indexes(indexes()),
    )
    .expect("valid settings");
    driver.create_table().await.expect("creates the table");
    let store = Store::new(driver);
    let started = Instant::now();
    load(&store, TICKETS, n).await;
    println!(
        "DynamoDB: {n} documents loaded through write_all in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let raw = format!("{table}-raw");
    raw_table(&client, &raw).await;
    raw_load(&client, &raw, n).await;
    let answer = raw_dynamodb_query(&client, &raw).await;
    assert_eq!(
        ids(&answer),
        expected,
        "the raw GSI query answers differently"
    );
    let plan = check_docstore(&store, TICKETS, &expected).await;
    // Requests per query, counted over ten calls of each (docstore's re-read of the table's
    // index records, one Query every 5 s at most, is not among them: it happened at open).
    counter.take();
    for _ in 0..10 {
        run_docstore(&store, TICKETS).await;
    }
    let docstore_requests = queries_per_run(&counter, 10);
    for _ in 0..10 {
        raw_dynamodb_query(&client, &raw).await;
    }
    let baseline_requests = queries_per_run(&counter, 10);
    let runs = (args.runs / 2).max(10);
    let (indexed, baseline) = time_pair(
        runs,
        || run_docstore(&store, TICKETS),
        || async {
            assert_eq!(raw_dynamodb_query(&client, &raw).await.len(), LIMIT);
        },
    )
    .await;
    let row = QueryRow {
        backend: "DynamoDB (dynoxide)",
        documents: n,
        unindexed: None,
        indexed,
        baseline,
        baseline_name: "raw aws-sdk Query on a GSI (status S, score N)",
        requests: Some((docstore_requests, baseline_requests)),
        plan,
    };
    let writes = write_cost(&store, args.dynamodb_write_ops, Some(&counter)).await;
    (row, writes)
}

/// GSI Query requests per run since the counter was last taken.
fn queries_per_run(counter: &RequestCounter, runs: usize) -> f64 {
    let taken = counter.take();
    taken.get("Query").map_or(0, |r| r.count) as f64 / runs as f64
}

// ---------------------------------------------------------------------------------------
// write cost

/// Single creates, then single updates, of `ops` documents into the collections with 0, 1
/// and 3 declared indexes.
async fn write_cost(store: &Store, ops: usize, counter: Option<&RequestCounter>) -> Vec<WriteRow> {
    let mut rows = Vec::new();
    for call in ["create", "update"] {
        let mut per_op = Vec::new();
        let mut requests = Vec::new();
        for (collection, _) in WRITE_COLLECTIONS {
            if let Some(counter) = counter {
                counter.take();
            }
            let mut samples = Vec::with_capacity(ops);
            let started = Instant::now();
            for i in 0..ops {
                let key = Key::new(SITE, collection, id(i)).expect("valid key");
                let start = Instant::now();
                if call == "create" {
                    store
                        .create(&key, document(i, 0), "bench")
                        .await
                        .expect("creates");
                } else {
                    let doc = store
                        .update(&key, &patch(i as u64), "bench")
                        .await
                        .expect("updates");
                    assert_eq!(doc.version, 2);
                }
                samples.push(start.elapsed());
            }
            let mean = started.elapsed().as_secs_f64() * 1e3 / ops.max(1) as f64;
            per_op.push((Timing::of(samples), mean));
            if let Some(counter) = counter {
                let taken = counter.take();
                requests.push(taken.values().map(|r| r.count).sum::<u64>() as f64 / ops as f64);
            }
        }
        rows.push(WriteRow {
            backend: "",
            call,
            per_op,
            requests: counter.map(|_| requests),
        });
    }
    rows
}

// ---------------------------------------------------------------------------------------

fn print_queries(rows: &[QueryRow]) {
    println!(
        "\n### The served query: `status = \"open\" and priority >= 50 order by score desc \
         limit {LIMIT}`\n"
    );
    println!(
        "| backend | documents | docstore, no index p50 | docstore, index p50 / p99 | baseline | \
         baseline p50 / p99 | **ratio** (docstore index ÷ baseline, p50) | Query requests per \
         query d / b |"
    );
    println!("|---|--:|--:|--:|---|--:|--:|--:|");
    for r in rows {
        println!(
            "| {} | {} | {} | {:.3} / {:.3} ms | {} | {:.3} / {:.3} ms | **{:.2}×** | {} |",
            r.backend,
            r.documents,
            r.unindexed
                .map_or("—".to_owned(), |t| format!("{:.1} ms", t.p50)),
            r.indexed.p50,
            r.indexed.p99,
            r.baseline_name,
            r.baseline.p50,
            r.baseline.p99,
            r.indexed.p50 / r.baseline.p50,
            r.requests
                .map_or("—".to_owned(), |(d, b)| format!("{d:.2} / {b:.2}")),
        );
    }
    println!();
    for r in rows {
        println!("- {} explain: {}", r.backend, r.plan);
    }
}

fn print_writes(rows: &[WriteRow]) {
    println!("\n### Write cost of declared indexes (single calls, per call)\n");
    println!(
        "| backend | call | 0 indexes p50 / mean | 1 index p50 / mean | 3 indexes p50 / mean | \
         3 vs 0 (mean) | requests per call 0 / 1 / 3 |"
    );
    println!("|---|---|--:|--:|--:|--:|--:|");
    for r in rows {
        let cell = |(t, mean): &(Timing, f64)| format!("{:.3} / {mean:.3} ms", t.p50);
        println!(
            "| {} | {} | {} | {} | {} | {:.2}× | {} |",
            r.backend,
            r.call,
            cell(&r.per_op[0]),
            cell(&r.per_op[1]),
            cell(&r.per_op[2]),
            r.per_op[2].1 / r.per_op[0].1,
            r.requests.as_ref().map_or("—".to_owned(), |q| q
                .iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(" / ")),
        );
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = Args::parse();
    let wants = |name: &str| args.backends.iter().any(|b| b == name);
    let mut queries = Vec::new();
    let mut writes = Vec::new();
    let label = |rows: Vec<WriteRow>, backend: &'static str| {
        rows.into_iter()
            .map(move |r| WriteRow { backend, ..r })
            .collect::<Vec<_>>()
    };
    let expected_local = if wants("memory") || wants("sqlite") {
        expected(args.documents)
    } else {
        Vec::new()
    };
    if wants("memory") {
        queries.push(memory(&args, &expected_local).await);
        let store = Store::new(MemoryStore::with_options(
            StoreOptions::default().with_indexes(indexes()),
        ));
        writes.extend(label(
            write_cost(&store, args.write_ops, None).await,
            "memory",
        ));
    }
    if wants("sqlite") {
        queries.push(sqlite(&args, &expected_local).await);
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = open_sqlite(&dir.path().join("writes.db"));
        writes.extend(label(
            write_cost(&store, args.write_ops, None).await,
            "SQLite",
        ));
    }
    if wants("dynamodb") {
        match &args.endpoint {
            Some(endpoint) => {
                let (row, rows) = dynamodb(&args, endpoint).await;
                queries.push(row);
                writes.extend(label(rows, "DynamoDB (dynoxide)"));
            }
            None => println!(
                "DynamoDB not run: no endpoint (run under scripts/with-dynamodb-emulators, or \
                 pass --endpoint)"
            ),
        }
    }
    print_queries(&queries);
    print_writes(&writes);
}
