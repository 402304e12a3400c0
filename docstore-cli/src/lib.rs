//! # docstore-cli
//!
//! The `docstore` command: every [`Store`](docstore::Store) call from a shell, plus `export`,
//! `import` and `copy` between stores, `fsck` for the collection counters, `explain` for
//! query plans, and `create-table` and `index list|add|build|drop` for DynamoDB. Run
//! `docstore --help`.
//!
//! Queries are typed in the core's text language ([`docstore::Query::parse`]), which
//! applications can accept too.

pub mod args;
mod batch;
pub mod exit;
#[doc(hidden)]
pub mod fuzzing;
mod indexes;
mod interrupt;
mod live_copy;
mod output;
mod plain;
mod progress;
mod record;
mod run;
mod store_identity;
mod text;
mod timefmt;
mod transfer;
mod watch;
mod whole_store;

pub use exit::{CliError, EXIT_CODES_HELP};
pub use run::run;
pub use timefmt::TimeFormat;

/// Sends the library's `tracing` logs to standard error: warnings always, `-v` info (the
/// line saying that a SQLite store waits for another process's lock among them), `-vv` debug,
/// `-vvv` trace (a DynamoDB query stopped at `max_scan` is the CLI's own warning; the
/// library's line about it from `-v` on). `RUST_LOG`,
/// when set, chooses instead (`warn`, `docstore_dynamodb=debug`, ...; target=level
/// directives).
pub fn init_logging(verbose: u8) {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::prelude::*;

    let level = match verbose {
        0 => LevelFilter::WARN,
        1 => LevelFilter::INFO,
        2 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    };
    let from_env = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| match v.parse::<Targets>() {
            Ok(targets) => Some(targets),
            Err(err) => {
                eprintln!("warning: RUST_LOG={v:?} is not understood ({err}); using -v levels");
                None
            }
        });
    // A wait for another process's SQLite lock that ends well is not worth a line without
    // -v (concurrent commands all printed it); one that gives up is the command's error,
    // which says so. A DynamoDB
    // query stopped at max_scan is said by the CLI itself (`warning: partial answer`), so the
    // library's own line about it only from -v on: on a terminal it would say it twice.
    let partial_answer_log = if verbose == 0 {
        LevelFilter::OFF
    } else {
        level
    };
    let filter = from_env.unwrap_or_else(|| {
        Targets::new()
            .with_default(level)
            .with_target(docstore_dynamodb::PARTIAL_ANSWER_TARGET, partial_answer_log)
    });
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .without_time();
    let _ = tracing_subscriber::registry()
        .with(layer.with_filter(filter))
        .try_init();
}
