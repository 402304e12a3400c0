//! The `docstore` command. See `docstore --help`.

use clap::Parser;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let cli = docstore_cli::args::Cli::parse();
    if let Err(err) = docstore_cli::run(cli).await {
        eprintln!("error: {err}");
        std::process::exit(err.code);
    }
}
