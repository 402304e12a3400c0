//! The client CPU of PostgreSQL's single writes: docstore-postgres through the front end
//! (`Store`) and the hand-written baseline (`baselines::postgres`) run the same creates,
//! puts, updates, update_ifs and deletes of ~1 KB documents, one at a time, and each
//! workload reports wall time and the process's CPU time per operation (every thread's, from
//! `/proc/self/task/*/schedstat`: the calling thread and the runtime's workers, where the
//! connections' tasks run). The server's CPU is not in it. Sides alternate, rounds repeat, so
//! drift hits both.
//!
//! ```sh
//! scripts/with-postgres cargo run --release -p docstore-bench --no-default-features --bin pg_write_cpu
//! ```

use clap::Parser;
use docstore::Store;
use docstore_bench::BenchResult;
use docstore_bench::adapter::DocstoreSubject;
use docstore_bench::baselines::postgres::PostgresBaseline;
use docstore_bench::data::{self, POINT_COLLECTION};
use docstore_bench::subject::Subject;
use docstore_postgres::PostgresStore;
use std::time::{Duration, Instant};

/// Client CPU per single write, docstore-postgres against the baseline.
#[derive(Debug, Parser)]
struct Args {
    /// Operations per workload and round.
    #[arg(long, default_value_t = 1_000)]
    ops: usize,
    /// Rounds (each runs both sides).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Run one side only (`docstore` or `baseline`), to count its system calls alone.
    #[arg(long)]
    only: Option<String>,
    /// The server (`scripts/with-postgres` sets DOCSTORE_POSTGRES_URL).
    #[arg(long, env = "DOCSTORE_POSTGRES_URL")]
    postgres_url: String,
}

/// The CPU time every thread of this process has used, from the kernel's schedstat.
fn process_cpu() -> Duration {
    let mut nanos = 0u64;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            nanos += stat
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Duration::from_nanos(nanos)
}

/// Wall and CPU time per operation of one workload, in µs.
#[derive(Clone, Copy, Debug, Default)]
struct PerOp {
    wall: f64,
    cpu: f64,
}

const WORKLOADS: [&str; 5] = ["create", "put", "update", "update_if", "delete"];

/// Workload `workload` on `subject` over documents `ids` (`versions`: what each was left
/// at): wall and CPU time per operation.
async fn workload(
    subject: &dyn Subject,
    workload: &str,
    ids: &[String],
    versions: &mut [u64],
) -> BenchResult<PerOp> {
    let (start, cpu) = (Instant::now(), process_cpu());
    for (n, id) in ids.iter().enumerate() {
        let patch = data::patch(n as u64);
        versions[n] = match workload {
            "create" => {
                subject
                    .create(POINT_COLLECTION, id, data::document(n, 0))
                    .await?
            }
            "put" => {
                subject
                    .put(POINT_COLLECTION, id, data::document(n, 1))
                    .await?
            }
            "update" => subject.update(POINT_COLLECTION, id, &patch).await?,
            "update_if" => {
                let expected = versions[n];
                subject
                    .update_if(POINT_COLLECTION, id, &patch, expected)
                    .await?
            }
            _ => u64::from(subject.delete(POINT_COLLECTION, id).await?),
        };
    }
    let per = |d: Duration| d.as_secs_f64() * 1e6 / ids.len() as f64;
    Ok(PerOp {
        wall: per(start.elapsed()),
        cpu: per(process_cpu() - cpu),
    })
}

async fn run(args: &Args) -> BenchResult<()> {
    let tag = std::process::id();
    let (ours, theirs) = (format!("cpu_docstore_{tag}"), format!("cpu_baseline_{tag}"));
    let joint = if args.postgres_url.contains('?') {
        '&'
    } else {
        '?'
    };
    let driver = PostgresStore::open(&format!("{}{joint}schema={ours}", args.postgres_url)).await?;
    let docstore = DocstoreSubject::new(Store::new(driver.clone()));
    let baseline = PostgresBaseline::open(&args.postgres_url, &theirs).await?;
    let sides: [(&str, &dyn Subject); 2] = [("docstore", &docstore), ("baseline", &baseline)];
    // A warm-up round (connections opened, statements prepared), not reported.
    let mut rows: Vec<(usize, &str, Vec<PerOp>)> = Vec::new();
    for round in 0..=args.rounds {
        let ops = if round == 0 {
            args.ops.min(100)
        } else {
            args.ops
        };
        let ids: Vec<String> = (0..ops)
            .map(|n| format!("r{round}-{}", data::id(n)))
            .collect();
        let mut versions = vec![vec![0u64; ops]; sides.len()];
        let mut figures = vec![Vec::new(); sides.len()];
        // Workload by workload, the sides alternating (which goes first too).
        for (w, name) in WORKLOADS.iter().enumerate() {
            for k in 0..sides.len() {
                let s = (k + w + round) % sides.len();
                if args.only.as_ref().is_some_and(|only| only != sides[s].0) {
                    continue;
                }
                let figure = workload(sides[s].1, name, &ids, &mut versions[s]).await?;
                figures[s].push(figure);
            }
        }
        if round > 0 {
            for (s, figures) in figures.into_iter().enumerate() {
                rows.push((round, sides[s].0, figures));
            }
        }
    }
    println!("workload   round  docstore wall/cpu µs  baseline wall/cpu µs  cpu ratio b/d");
    for (w, workload) in WORKLOADS.iter().enumerate() {
        for round in 1..=args.rounds {
            let side = |name: &str| {
                rows.iter()
                    .find(|(r, n, _)| *r == round && *n == name)
                    .map(|(.., f)| f[w])
                    .unwrap_or_default()
            };
            let (d, b) = (side("docstore"), side("baseline"));
            println!(
                "{workload:<10} {round:>5}  {:>8.1} / {:>6.1}      {:>8.1} / {:>6.1}      {:.2}",
                d.wall,
                d.cpu,
                b.wall,
                b.cpu,
                b.cpu / d.cpu
            );
        }
    }
    println!(
        "medians:   docstore wall/cpu µs  baseline wall/cpu µs  wall ratio  cpu ratio (baseline / docstore)"
    );
    for (w, workload) in WORKLOADS.iter().enumerate() {
        let median = |name: &str, cpu: bool| {
            let mut values: Vec<f64> = rows
                .iter()
                .filter(|(_, n, _)| *n == name)
                .map(|(.., f)| if cpu { f[w].cpu } else { f[w].wall })
                .collect();
            values.sort_by(f64::total_cmp);
            values.get(values.len() / 2).copied().unwrap_or_default()
        };
        let (dw, dc) = (median("docstore", false), median("docstore", true));
        let (bw, bc) = (median("baseline", false), median("baseline", true));
        println!(
            "{workload:<10} {dw:>8.1} / {dc:>6.1}      {bw:>8.1} / {bc:>6.1}      {:.2}       {:.2}",
            bw / dw,
            bc / dc
        );
    }
    driver.drop_schema().await?;
    let admin = docstore_bench::baselines::postgres::pool(&args.postgres_url)?;
    admin
        .get()
        .await?
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{theirs}\" CASCADE"))
        .await?;
    Ok(())
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    docstore_bench::run_main("pg_write_cpu", run(&args))
}
