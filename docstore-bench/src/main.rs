//! `docstore-bench`: see `docstore-bench --help` and `docs/benchmarks.md`.

use clap::Parser;
use docstore_bench::cli::Args;

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("docstore-bench: cannot start the runtime: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(docstore_bench::run::run(&args)) {
        Ok(report) => {
            print!("{}", report.table());
            if let Err(err) = report.write_json(&args.json) {
                eprintln!("docstore-bench: writing {}: {err}", args.json.display());
                return std::process::ExitCode::FAILURE;
            }
            eprintln!("figures written to {}", args.json.display());
            if let Some(path) = &args.markdown
                && let Err(err) = std::fs::write(path, report.markdown())
            {
                eprintln!("docstore-bench: writing {}: {err}", path.display());
                return std::process::ExitCode::FAILURE;
            }
            std::process::ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("docstore-bench: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}
