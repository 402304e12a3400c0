//! The `docstore` command. See `docstore --help`.

use clap::Parser;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let cli = docstore_cli::args::Cli::parse();
    docstore_cli::init_logging(cli.verbose);
    if let Err(err) = docstore_cli::run(cli).await {
        if err.is_quiet() {
            // Standard output was closed (`| head`): nothing more to say.
            std::process::exit(0);
        }
        eprintln!("error: {err}");
        std::process::exit(err.code);
    }
}
