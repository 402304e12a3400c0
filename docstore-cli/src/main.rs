//! The `docstore` command. See `docstore --help`.

// Several threads: an import's batches are written while it waits for its input.
#[tokio::main]
async fn main() {
    let matches = docstore_cli::args::command().get_matches();
    let cli = docstore_cli::args::Cli::from_matches(&matches).unwrap_or_else(|e| e.exit());
    docstore_cli::init_logging(cli.verbose);
    if let Err(err) = docstore_cli::run(cli).await {
        if err.is_quiet() {
            // Standard output was closed (`| head`): nothing more to say.
            std::process::exit(docstore_cli::exit::SUCCESS);
        }
        eprintln!("error: {err}");
        std::process::exit(err.code);
    }
}
