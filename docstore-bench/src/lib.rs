//! # docstore-bench
//!
//! Side-by-side benchmarks: every docstore backend runs the same workloads as a hand-written
//! baseline for the same database in the same process and run, so the ratio between the two
//! is what the docstore layer costs.
//!
//! - [`workloads`]: the workloads (single-document operations, a selective query, a walk
//!   page by page, concurrent updates), run on anything implementing [`subject::Subject`];
//! - [`adapter`]: a docstore [`Store`](docstore::Store) as a subject;
//! - [`baselines`]: the hand-written baselines (a `RwLock<HashMap>`, raw `rusqlite`, raw
//!   `aws-sdk-dynamodb`, raw `tokio-postgres`);
//! - [`postgres`]: one round of the PostgreSQL section, and [`contention`]: concurrent creates
//!   with the lock waits they cause;
//! - `polodb` (feature `polodb`, on by default): PoloDB as a peer of docstore-sqlite;
//! - [`evaluator`]: the reference query evaluator on its own;
//! - [`report`]: the table and the JSON file; [`peak`]: peak memory; [`measure`]: latencies.
//!
//! The binary `docstore-bench` (see `--help`) drives it all through [`run`].

pub mod adapter;
pub mod baselines;
pub mod cli;
pub mod contention;
pub mod data;
pub mod dynamo;
pub mod evaluator;
pub mod measure;
pub mod peak;
#[cfg(feature = "polodb")]
pub mod polodb;
pub mod postgres;
pub mod report;
pub mod run;
pub mod subject;
pub mod workloads;

/// The error every benchmark step returns.
pub type BenchError = Box<dyn std::error::Error + Send + Sync>;

/// A benchmark step's result.
pub type BenchResult<T> = std::result::Result<T, BenchError>;

/// Runs a benchmark binary's `run` on a multi-threaded runtime (as applications run
/// docstore) and turns its outcome into the exit status, printing an error after `name`.
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     docstore_bench::run_main("my_bench", async { Ok(()) })
/// }
/// ```
pub fn run_main(
    name: &str,
    run: impl std::future::Future<Output = BenchResult<()>>,
) -> std::process::ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(run) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{name}: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}
