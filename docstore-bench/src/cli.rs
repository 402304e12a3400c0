//! The command line.

use clap::{Parser, ValueEnum};
use std::path::PathBuf;

/// Runs the same workloads on each docstore backend and on a hand-written baseline for that
/// backend, in one run, and prints ops/s, p50/p99 latency, peak memory and the ratio to the
/// baseline; the figures also go to a JSON file.
#[derive(Clone, Debug, Parser)]
#[command(name = "docstore-bench", version)]
pub struct Args {
    /// Backends to run (DynamoDB only when an endpoint is given; PostgreSQL only when named,
    /// and then it needs a server: `--postgres-url`).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "memory,sqlite,polodb,dynamodb"
    )]
    pub backends: Vec<BackendName>,
    /// Operations per single-document workload, memory backend.
    #[arg(long, default_value_t = 50_000)]
    pub memory_ops: usize,
    /// Changes the memory store's feed keeps in the bench (`with_feed_retention`). At 1 000,
    /// well under a workload's operations, each workload frees the history it writes, as an
    /// application writing one kind of change does in steady state. At the store's default
    /// (100 000, two workloads' writes) the versions a workload replaces are freed by the
    /// workload two after it: the puts' replaced documents by the updates, which then measure
    /// the put's frees and the put none of its own.
    #[arg(long, default_value_t = 1_000)]
    pub memory_feed_retention: usize,
    /// Operations per single-document workload, SQLite backend.
    #[arg(long, default_value_t = 10_000)]
    pub sqlite_ops: usize,
    /// Operations per single-document workload, DynamoDB backend.
    #[arg(long, default_value_t = 1_000)]
    pub dynamodb_ops: usize,
    /// Operations per single-document workload, PostgreSQL backend.
    #[arg(long, default_value_t = 2_000)]
    pub postgres_ops: usize,
    /// Documents in the query collection, PostgreSQL.
    #[arg(long, default_value_t = 20_000)]
    pub postgres_query_docs: usize,
    /// Timed runs of the selective query, PostgreSQL (an indexed read of about a
    /// millisecond: ten runs would measure little but the first executions).
    #[arg(long, default_value_t = 200)]
    pub postgres_query_runs: usize,
    /// Updates (and creates) per task in the concurrency workloads, PostgreSQL.
    #[arg(long, default_value_t = 200)]
    pub postgres_task_ops: usize,
    /// The PostgreSQL server of the `postgres` backend (a database the benchmark creates and
    /// drops schemas in); `scripts/with-postgres` sets DOCSTORE_POSTGRES_URL.
    #[arg(long, env = "DOCSTORE_POSTGRES_URL")]
    pub postgres_url: Option<String>,
    /// Documents in the query collection (memory and SQLite).
    #[arg(long, default_value_t = 100_000)]
    pub query_docs: usize,
    /// Documents in the query collection, DynamoDB (the emulator writes ~700 items/s).
    #[arg(long, default_value_t = 5_000)]
    pub dynamodb_query_docs: usize,
    /// Timed runs of the selective query (memory and SQLite).
    #[arg(long, default_value_t = 10)]
    pub query_runs: usize,
    /// Timed runs of the selective query, DynamoDB.
    #[arg(long, default_value_t = 10)]
    pub dynamodb_query_runs: usize,
    /// Page size of the collection walk.
    #[arg(long, default_value_t = 100)]
    pub page_size: usize,
    /// Concurrent tasks in the concurrency workloads.
    #[arg(long, default_value_t = 16)]
    pub tasks: usize,
    /// Updates per task in the concurrency workloads (memory and SQLite).
    #[arg(long, default_value_t = 500)]
    pub task_ops: usize,
    /// Updates per task in the concurrency workloads, DynamoDB.
    #[arg(long, default_value_t = 20)]
    pub dynamodb_task_ops: usize,
    /// Run each backend this many times and report, per workload, the round with the median
    /// ratio (every round's ratio is kept in the JSON and shown as a range).
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// A single-document workload stops early after this many seconds.
    #[arg(long, default_value_t = 30.0)]
    pub max_seconds: f64,
    /// SQLite `synchronous` for both docstore and the baseline. `full` is docstore-sqlite's
    /// default, but then every write waits for an fsync, which swamps (and on a shared disk
    /// randomizes) what the library itself costs; `normal` shows that cost.
    #[arg(long, value_enum, default_value = "normal")]
    pub sqlite_sync: SyncName,
    /// docstore-sqlite's change feed in the SQLite rows: `on` (its default) against a
    /// baseline writing the same change rows, `off` (`SqliteOptions::feed = false`) against
    /// one writing none, or `both`, one section each.
    #[arg(long, value_enum, default_value = "both")]
    pub sqlite_feed: FeedChoice,
    /// The DynamoDB emulator (dynoxide) to benchmark against; never moto.
    #[arg(long, env = "DOCSTORE_DYNOXIDE_ENDPOINT")]
    pub dynamodb_endpoint: Option<String>,
    /// Directory for the SQLite files (default: a fresh temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Where to write the JSON figures.
    #[arg(long, default_value = "docstore-bench.json")]
    pub json: PathBuf,
    /// Also write the tables as Markdown to this file.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Documents the evaluator measurements run over.
    #[arg(long, default_value_t = 50_000)]
    pub evaluator_docs: usize,
    /// Skip the evaluator measurements.
    #[arg(long)]
    pub skip_evaluator: bool,
}

/// A backend to benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendName {
    /// `docstore-memory` against a `RwLock<HashMap>`.
    Memory,
    /// `docstore-sqlite` against raw `rusqlite`.
    Sqlite,
    /// `docstore-sqlite` against PoloDB, a peer (needs the `polodb` feature).
    Polodb,
    /// `docstore-dynamodb` against raw `aws-sdk-dynamodb`, on the emulator.
    Dynamodb,
    /// `docstore-postgres` against raw `tokio-postgres` (never run unless named).
    Postgres,
}

/// SQLite's `synchronous` setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SyncName {
    /// Every commit flushed (docstore-sqlite's `Durability::Full`, the default).
    Full,
    /// Commits flushed at checkpoints (`Durability::Normal`).
    Normal,
}

/// Which change-feed settings the SQLite rows run with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FeedChoice {
    /// The feed on (docstore-sqlite's default), against a baseline writing change rows.
    On,
    /// The feed off, against a baseline writing none.
    Off,
    /// Both, one section each.
    Both,
}

impl FeedChoice {
    /// The feed settings to run, in order.
    pub fn settings(self) -> &'static [bool] {
        match self {
            FeedChoice::On => &[true],
            FeedChoice::Off => &[false],
            FeedChoice::Both => &[true, false],
        }
    }
}
