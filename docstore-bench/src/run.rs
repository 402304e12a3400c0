//! One benchmark run: for each backend, build the docstore store and its baseline, load the
//! query collection into both, run the workloads side by side; then the evaluator.

use crate::adapter::{DocstoreSubject, TypedDocstore};
use crate::baselines::dynamodb::DynamoBaseline;
use crate::baselines::memory::MemoryBaseline;
use crate::baselines::sqlite::{self, SqliteBaseline, Sync};
use crate::cli::{Args, BackendName, SyncName};
use crate::data::{self, POINT_COLLECTION, QUERY_COLLECTION};
use crate::dynamo::{self, RequestCounter};
use crate::report::{Report, Section};
use crate::subject::Subject;
use crate::workloads::{self, Comparison, Side, Spec};
use crate::{BenchResult, evaluator};
use docstore::{Store, StoreOptions};
use docstore_memory::MemoryStore;
use docstore_sqlite::{Durability, SqliteOptions, SqliteStore};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The side of `subject`, its single-document workloads in a collection named after `label`.
pub(crate) fn side(
    subject: Arc<dyn Subject>,
    label: &str,
    requests: Option<RequestCounter>,
) -> Side {
    Side {
        subject,
        point_collection: format!("{POINT_COLLECTION}-{label}"),
        query_collection: QUERY_COLLECTION.to_owned(),
        requests,
        typed: None,
    }
}

/// The docstore side of `store`: its [`DocstoreSubject`], and the same store typed for the
/// typed rows.
pub(crate) fn docstore_side(store: &Store, requests: Option<RequestCounter>) -> BenchResult<Side> {
    let mut side = side(
        Arc::new(DocstoreSubject::new(store.clone())),
        "docstore",
        requests,
    );
    side.typed = Some(TypedDocstore::new(store)?);
    Ok(side)
}

/// Runs everything `args` asks for; progress goes to stderr.
pub async fn run(args: &Args) -> BenchResult<Report> {
    let mut report = Report {
        started_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        load_average: std::fs::read_to_string("/proc/loadavg")
            .ok()
            .map(|s| s.trim().to_owned()),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        ..Report::default()
    };
    for backend in &args.backends {
        match backend {
            BackendName::Memory => run_memory(args, &mut report).await?,
            BackendName::Sqlite => run_sqlite(args, &mut report).await?,
            BackendName::Polodb => run_polodb(args, &mut report).await?,
            BackendName::Postgres => run_postgres(args, &mut report).await?,
            BackendName::Dynamodb => run_dynamodb(args, &mut report).await?,
        }
    }
    if !args.skip_evaluator {
        eprintln!("evaluator: {} documents", args.evaluator_docs);
        report.sections.push(Section {
            backend: "evaluator".to_owned(),
            description: format!(
                "docstore::query on {} in-memory documents vs the same test hand-written \
                 over serde_json (one op = one document)",
                args.evaluator_docs
            ),
            rows: evaluator::run(args.evaluator_docs)?,
        });
    }
    Ok(report)
}

/// The workload sizes of one backend, with the flags every backend shares.
fn spec(args: &Args, ops: usize, query_docs: usize, query_runs: usize, task_ops: usize) -> Spec {
    Spec {
        ops,
        query_docs,
        query_runs,
        page_size: args.page_size,
        tasks: args.tasks,
        task_ops,
        max_time: Duration::from_secs_f64(args.max_seconds),
    }
}

/// How many rounds each backend runs.
fn rounds(args: &Args) -> usize {
    args.repeat.max(1)
}

async fn run_memory(args: &Args, report: &mut Report) -> BenchResult<()> {
    let (ops, task_ops) = (args.memory_ops, args.task_ops);
    let spec = spec(args, ops, args.query_docs, args.query_runs, task_ops);
    let retention = args.memory_feed_retention;
    eprintln!("memory: {spec:?}, feed retention {retention} changes");
    let mut sections = Vec::new();
    for _ in 0..rounds(args) {
        sections.push(memory(&spec, retention).await?);
    }
    report.sections.push(median_round(sections));
    Ok(())
}

/// One section per feed setting `--sqlite-feed` names.
async fn run_sqlite(args: &Args, report: &mut Report) -> BenchResult<()> {
    let (ops, task_ops) = (args.sqlite_ops, args.task_ops);
    let spec = spec(args, ops, args.query_docs, args.query_runs, task_ops);
    eprintln!("sqlite: {spec:?}");
    let temp = tempfile::tempdir()?;
    let dir = args.dir.as_deref().unwrap_or(temp.path());
    std::fs::create_dir_all(dir)?;
    for &feed in args.sqlite_feed.settings() {
        let mut sections = Vec::new();
        for _ in 0..rounds(args) {
            sections.push(sqlite_section(&spec, dir, args.sqlite_sync, feed).await?);
        }
        report.sections.push(median_round(sections));
    }
    Ok(())
}

/// The PoloDB peer, or a note that it is not built in.
async fn run_polodb(args: &Args, report: &mut Report) -> BenchResult<()> {
    let (ops, task_ops) = (args.sqlite_ops, args.task_ops);
    let spec = spec(args, ops, args.query_docs, args.query_runs, task_ops);
    eprintln!("polodb: {spec:?}");
    let temp = tempfile::tempdir()?;
    let dir = args.dir.as_deref().unwrap_or(temp.path());
    std::fs::create_dir_all(dir)?;
    let mut sections = Vec::new();
    for _ in 0..rounds(args) {
        match polodb_section(&spec, dir, args.sqlite_sync).await? {
            Some(section) => sections.push(section),
            None => break,
        }
    }
    if sections.is_empty() {
        let skipped = "polodb skipped: built without the `polodb` feature";
        report.notes.push(skipped.to_owned());
    } else {
        report.sections.push(median_round(sections));
    }
    Ok(())
}

/// PostgreSQL, which needs a server (an error without one: it runs only when named).
async fn run_postgres(args: &Args, report: &mut Report) -> BenchResult<()> {
    let Some(url) = &args.postgres_url else {
        return Err("postgres: no server; pass --postgres-url or set \
                    DOCSTORE_POSTGRES_URL (scripts/with-postgres starts a \
                    private server and sets it)"
            .into());
    };
    let spec = spec(
        args,
        args.postgres_ops,
        args.postgres_query_docs,
        args.postgres_query_runs,
        args.postgres_task_ops,
    );
    eprintln!("postgres: {spec:?}");
    let mut sections = Vec::new();
    for round in 0..rounds(args) {
        let done = crate::postgres::round(&spec, url, round).await?;
        for waits in done.waits {
            let round = round + 1;
            report
                .notes
                .push(format!("postgres round {round}: {waits}"));
        }
        sections.push(done.section);
    }
    report.sections.push(median_round(sections));
    Ok(())
}

/// DynamoDB on the emulator, or a note that there is none.
async fn run_dynamodb(args: &Args, report: &mut Report) -> BenchResult<()> {
    let Some(endpoint) = &args.dynamodb_endpoint else {
        report.notes.push(
            "dynamodb skipped: no endpoint (pass --dynamodb-endpoint or run under \
             scripts/with-dynamodb-emulators, which sets DOCSTORE_DYNOXIDE_ENDPOINT)"
                .to_owned(),
        );
        return Ok(());
    };
    let spec = spec(
        args,
        args.dynamodb_ops,
        args.dynamodb_query_docs,
        args.dynamodb_query_runs,
        args.dynamodb_task_ops,
    );
    eprintln!("dynamodb: {spec:?}");
    report.notes.push(format!(
        "dynamodb runs on the dynoxide emulator at {endpoint} with smaller sizes \
         ({} ops per workload, {} query documents, {} updates per task): every call \
         is an HTTP round trip to a local emulator, thousands of times slower than \
         memory. Its absolute figures say nothing about DynamoDB; the ratios and \
         the request counts do",
        spec.ops, spec.query_docs, spec.task_ops
    ));
    let mut sections = Vec::new();
    for _ in 0..rounds(args) {
        sections.push(dynamodb(&spec, endpoint).await?);
    }
    report.sections.push(median_round(sections));
    Ok(())
}

/// One section from several rounds of the same backend: for each workload the round with the
/// median ratio, with every round's ratio alongside (in run order).
fn median_round(mut rounds: Vec<Section>) -> Section {
    if rounds.len() == 1 {
        return rounds.pop().expect("one round");
    }
    let mut merged = rounds[0].clone();
    for (i, row) in merged.rows.iter_mut().enumerate() {
        let mut candidates: Vec<&Comparison> =
            rounds.iter().filter_map(|r| r.rows.get(i)).collect();
        let ratios: Vec<f64> = candidates.iter().map(|c| c.ratio).collect();
        let typed_vs_raw: Vec<f64> = candidates.iter().filter_map(|c| c.typed_vs_raw).collect();
        candidates.sort_by(|a, b| a.ratio.total_cmp(&b.ratio));
        let same = candidates.iter().all(|c| c.same_answer != Some(false));
        *row = candidates[candidates.len() / 2].clone();
        if row.same_answer.is_some() {
            row.same_answer = Some(same);
        }
        row.ratio_runs = ratios;
        row.typed_vs_raw_runs = typed_vs_raw;
    }
    merged
        .description
        .push_str(&format!("; median of {} rounds", rounds.len()));
    merged
}

/// The single-document, query and walk workloads on both sides.
pub(crate) async fn both(
    spec: &Spec,
    docstore: &Side,
    baseline: &Side,
) -> BenchResult<Vec<Comparison>> {
    let mut rows = workloads::point_workloads(spec, docstore, baseline).await?;
    rows.extend(workloads::query_workloads(spec, docstore, baseline).await?);
    Ok(rows)
}

/// Creates the query documents through `subject` (generation 0, version 1).
async fn load_through(subject: &dyn Subject, count: usize) -> BenchResult<()> {
    for n in 0..count {
        subject
            .create(QUERY_COLLECTION, &data::id(n), data::document(n, 0))
            .await?;
    }
    Ok(())
}

async fn memory(spec: &Spec, feed_retention: usize) -> BenchResult<Section> {
    let store = MemoryStore::new().with_feed_retention(feed_retention);
    let store = docstore_side(&Store::new(store), None)?;
    let baseline = Arc::new(MemoryBaseline::new());
    load_through(store.subject.as_ref(), spec.query_docs).await?;
    load_through(baseline.as_ref(), spec.query_docs).await?;
    let rows = both(spec, &store, &side(baseline, "baseline", None)).await?;
    Ok(Section {
        backend: "memory".to_owned(),
        description: format!(
            "`MemoryStore` (feed retention {feed_retention} changes) vs `RwLock<HashMap>` of the \
             same `Document`s; {} ops per workload",
            spec.ops
        ),
        rows,
    })
}

/// docstore-sqlite against the baseline, both with the change feed on or both with it off;
/// an error when the baseline's schema is not the one docstore-sqlite created.
async fn sqlite_section(
    spec: &Spec,
    dir: &Path,
    sync: SyncName,
    feed: bool,
) -> BenchResult<Section> {
    let pragma = match sync {
        SyncName::Full => Sync::Full,
        SyncName::Normal => Sync::Normal,
    };
    let (store, store_path) = fresh_sqlite(dir, "docstore.db", sync, feed)?;
    let baseline_path = dir.join("baseline.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", baseline_path.display()));
    }
    let baseline = SqliteBaseline::open(&baseline_path, pragma, feed)?;
    sqlite::check_same_schema(&store_path, &baseline_path)?;
    sqlite::bulk_load(&store_path, QUERY_COLLECTION, spec.query_docs)?;
    sqlite::bulk_load(&baseline_path, QUERY_COLLECTION, spec.query_docs)?;
    data::check_bulk_loaded(&store, "docstore-sqlite", spec.query_docs).await?;
    let rows = both(
        spec,
        &docstore_side(&store, None)?,
        &side(Arc::new(baseline), "baseline", None),
    )
    .await?;
    let (backend, what) = if feed {
        (
            "sqlite",
            "the change feed on (its default) vs raw rusqlite writing the same change rows",
        )
    } else {
        (
            "sqlite, feed off",
            "SqliteOptions::feed = false vs raw rusqlite writing no change rows",
        )
    };
    Ok(Section {
        backend: backend.to_owned(),
        description: format!(
            "SqliteStore with {what} (same schema, WAL, synchronous={}); {} ops per workload",
            pragma_name(sync),
            spec.ops
        ),
        rows,
    })
}

/// A fresh SqliteStore file in `dir`, its change feed on or off.
fn fresh_sqlite(
    dir: &Path,
    name: &str,
    sync: SyncName,
    feed: bool,
) -> BenchResult<(Store, PathBuf)> {
    let path = dir.join(name);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let durability = match sync {
        SyncName::Full => Durability::Full,
        SyncName::Normal => Durability::Normal,
    };
    let store = SqliteStore::open_with(
        &path,
        StoreOptions::default(),
        SqliteOptions::default()
            .with_durability(durability)
            .with_feed(feed),
    )?;
    Ok((Store::new(store), path))
}

#[cfg(feature = "polodb")]
async fn polodb_section(spec: &Spec, dir: &Path, sync: SyncName) -> BenchResult<Option<Section>> {
    use crate::polodb::PoloSubject;
    let (store, store_path) = fresh_sqlite(dir, "peer-docstore.db", sync, true)?;
    sqlite::bulk_load(&store_path, QUERY_COLLECTION, spec.query_docs)?;
    let polo_path = dir.join("peer-polodb.db");
    let _ = std::fs::remove_file(&polo_path);
    let polo = PoloSubject::open(&polo_path)?;
    polo.bulk_load(QUERY_COLLECTION, spec.query_docs)?;
    let rows = both(
        spec,
        &docstore_side(&store, None)?,
        &side(Arc::new(polo), "polodb", None),
    )
    .await?;
    Ok(Some(Section {
        backend: "polodb (peer)".to_owned(),
        description: format!(
            "SqliteStore (synchronous={}) vs PoloDB 4.4 (polodb_core, embedded, pure Rust) \
             through its own API; here \"base\" is PoloDB and the ratio is docstore-sqlite \
             ÷ PoloDB; {} ops per workload",
            pragma_name(sync),
            spec.ops
        ),
        rows,
    }))
}

#[cfg(not(feature = "polodb"))]
async fn polodb_section(_: &Spec, _: &Path, _: SyncName) -> BenchResult<Option<Section>> {
    Ok(None)
}

fn pragma_name(sync: SyncName) -> &'static str {
    match sync {
        SyncName::Full => "FULL",
        SyncName::Normal => "NORMAL",
    }
}

/// The fewest requests per operation the table layout allows, by workload: the query reads
/// each of the collection's partition keys in 1 MB pages; the walk, whose operation is one
/// document, one Query a partition key per page.
fn dynamodb_minimum(workload: &str, query_bytes: usize, spec: &Spec) -> Option<f64> {
    let partitions = dynamo::partitions() as usize;
    Some(match workload {
        // The typed rows make the same requests as the raw ones.
        "create" | "create, typed" => 2.0, // conditional PutItem + counter ADD
        "get" | "get, typed" => 1.0,
        "put" => 1.0,    // one UpdateItem (counter only when it creates)
        "delete" => 2.0, // DeleteItem returning the old item + counter ADD
        w if w.starts_with("update") => 2.0, // the merge needs the data: GetItem + PutItem
        w if w.starts_with("query") => {
            (partitions * query_bytes.div_ceil(partitions).div_ceil(1 << 20).max(1)) as f64
        }
        w if w.starts_with("walk") => {
            let pages = spec.query_docs.div_ceil(spec.page_size);
            (pages * partitions) as f64 / spec.query_docs.max(1) as f64
        }
        _ => return None,
    })
}

async fn dynamodb(spec: &Spec, endpoint: &str) -> BenchResult<Section> {
    let counter = RequestCounter::default();
    let client = dynamo::client(endpoint, &counter).await;
    let table = dynamo::fresh_table_name();
    let streams = dynamo::streams_client(endpoint).await;
    let driver = dynamo::store(client.clone(), streams, &table)?;
    driver.create_table().await?;
    let store = Store::new(driver);
    let query_bytes = dynamo::bulk_load(&client, &table, QUERY_COLLECTION, spec.query_docs).await?;
    data::check_bulk_loaded(&store, "docstore-dynamodb", spec.query_docs).await?;
    let baseline = DynamoBaseline::new(client.clone(), &table);
    let mut rows = both(
        spec,
        &docstore_side(&store, Some(counter.clone()))?,
        &side(Arc::new(baseline), "baseline", Some(counter.clone())),
    )
    .await?;
    for row in &mut rows {
        row.min_requests_per_op = dynamodb_minimum(&row.workload, query_bytes, spec);
    }
    let _ = client.delete_table().table_name(&table).send().await;
    Ok(Section {
        backend: "dynamodb".to_owned(),
        description: format!(
            "DynamoStore vs raw aws-sdk-dynamodb calls on the same table layout, dynoxide \
             emulator; {} ops per workload, {} query documents",
            spec.ops, spec.query_docs
        ),
        rows,
    })
}
