//! The selective query on PostgreSQL, alone: docstore-postgres through the front end
//! (`Store`, reading its declared index `(status, category, -score)`) and the hand-written
//! baseline (reading the application's expression index), set up as the bench's PostgreSQL
//! round sets them up (`docstore_bench::postgres`), run in turn. Per query: the wall time,
//! this process's CPU (every thread's, from `/proc/self/task/*/schedstat`) and the server's
//! (every backend of the server, from `/proc/<pid>/schedstat` of `pg_stat_activity`'s pids:
//! readable when run as the server's user or root). Both answers are checked equal first.
//!
//! ```sh
//! scripts/with-postgres cargo run --release -p docstore-bench --no-default-features --bin pg_query
//! ```

use clap::Parser;
use docstore::Store;
use docstore_bench::BenchResult;
use docstore_bench::adapter::DocstoreSubject;
use docstore_bench::data::QUERY_COLLECTION;
use docstore_bench::postgres::{connect, load_query_collection, open_sides};
use docstore_bench::subject::Subject;
use std::time::{Duration, Instant};
use tokio_postgres::Client;

/// The selective query, docstore-postgres against the baseline.
#[derive(Debug, Parser)]
struct Args {
    /// Documents in the query collection.
    #[arg(long, default_value_t = 20_000)]
    docs: usize,
    /// Queries per side and round.
    #[arg(long, default_value_t = 200)]
    runs: usize,
    /// Rounds (each runs both sides, which goes first alternating).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Keep the schemas (for `EXPLAIN` by hand) instead of dropping them.
    #[arg(long)]
    keep: bool,
    /// The server (`scripts/with-postgres` sets DOCSTORE_POSTGRES_URL).
    #[arg(long, env = "DOCSTORE_POSTGRES_URL")]
    postgres_url: String,
}

/// The CPU time the threads or processes under `dirs` have used, from their schedstat.
fn cpu_of(dirs: impl IntoIterator<Item = std::path::PathBuf>) -> Duration {
    let nanos = dirs
        .into_iter()
        .filter_map(|dir| std::fs::read_to_string(dir.join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

/// This process's CPU time, every thread's.
fn client_cpu() -> Duration {
    let tasks = std::fs::read_dir("/proc/self/task").into_iter().flatten();
    cpu_of(tasks.flatten().map(|t| t.path()))
}

/// The CPU time of every backend of the server `admin` is connected to.
async fn server_cpu(admin: &Client) -> BenchResult<Duration> {
    let rows = admin.query("SELECT pid FROM pg_stat_activity", &[]).await?;
    let pids = rows.iter().map(|r| r.get::<_, i32>(0));
    Ok(cpu_of(pids.map(|pid| {
        std::path::PathBuf::from(format!("/proc/{pid}"))
    })))
}

/// One side's figures for one round, in µs per query.
#[derive(Clone, Debug, Default)]
struct Figures {
    wall: Vec<f64>,
    client: f64,
    server: f64,
}

async fn side(subject: &dyn Subject, admin: &Client, runs: usize) -> BenchResult<Figures> {
    let (client, server) = (client_cpu(), server_cpu(admin).await?);
    let mut wall = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        subject.top(QUERY_COLLECTION).await?;
        wall.push(start.elapsed().as_secs_f64() * 1e6);
    }
    let per = |d: Duration| d.as_secs_f64() * 1e6 / runs as f64;
    Ok(Figures {
        wall,
        client: per(client_cpu().saturating_sub(client)),
        // A backend that ended meanwhile takes its time along: never below zero.
        server: per(server_cpu(admin).await?.saturating_sub(server)),
    })
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or_default()
}

async fn measure(args: &Args, sides: [(&str, &dyn Subject); 2], admin: &Client) -> BenchResult<()> {
    let (ours, theirs) = (
        sides[0].1.top(QUERY_COLLECTION),
        sides[1].1.top(QUERY_COLLECTION),
    );
    let (ours, theirs) = (ours.await?, theirs.await?);
    if ours != theirs {
        return Err(format!("different answers: {ours:?} against {theirs:?}").into());
    }
    // A warm-up (connections opened, statements prepared and planned generic), not reported.
    for (_, subject) in sides {
        side(subject, admin, args.runs.min(50)).await?;
    }
    println!("round  side      p50 wall µs  client CPU µs  server CPU µs  (per query)");
    let mut all = [Figures::default(), Figures::default()];
    for round in 1..=args.rounds {
        for k in 0..sides.len() {
            let s = (k + round) % sides.len();
            let mut figures = side(sides[s].1, admin, args.runs).await?;
            println!(
                "{round:>5}  {:<8}  {:>11.0}  {:>13.0}  {:>13.0}",
                sides[s].0,
                median(&mut figures.wall),
                figures.client,
                figures.server
            );
            all[s].wall.extend(figures.wall);
            all[s].client += figures.client / args.rounds as f64;
            all[s].server += figures.server / args.rounds as f64;
        }
    }
    let p50 = [median(&mut all[0].wall), median(&mut all[1].wall)];
    for (s, (name, _)) in sides.iter().enumerate() {
        println!(
            "all    {name:<8}  {:>11.0}  {:>13.0}  {:>13.0}",
            p50[s], all[s].client, all[s].server
        );
    }
    println!(
        "ratio (baseline p50 / docstore p50): {:.2}",
        p50[1] / p50[0]
    );
    Ok(())
}

async fn run(args: &Args) -> BenchResult<()> {
    let tag = std::process::id();
    let (ours, theirs) = (
        format!("query_docstore_{tag}"),
        format!("query_baseline_{tag}"),
    );
    let admin = connect(&args.postgres_url).await?;
    let (driver, baseline) = open_sides(&args.postgres_url, &ours, &theirs).await?;
    let store = Store::new(driver);
    let result = async {
        load_query_collection(&admin, &store, args.docs, [&ours, &theirs]).await?;
        let docstore = DocstoreSubject::new(store.clone());
        measure(
            args,
            [("docstore", &docstore), ("baseline", &baseline)],
            &admin,
        )
        .await
    }
    .await;
    if args.keep {
        eprintln!("pg_query: kept schemas {ours} and {theirs}");
    } else {
        admin
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{ours}\" CASCADE; DROP SCHEMA IF EXISTS \"{theirs}\" CASCADE"
            ))
            .await?;
    }
    result
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    docstore_bench::run_main("pg_query", run(&args))
}
