//! Which stored data a configuration names: the `--busy-timeout` flag, and refusing to copy a
//! store onto itself (docs/contract.md, "The command line"). A `--config` file's relative
//! SQLite path follows the library's rule (`DatabaseConfig::resolve_relative_paths`).

use crate::args::Cli;
use crate::exit::CliError;
use docstore::config::{Backend, DatabaseConfig, DynamoDbConfig};
use std::path::{Path, PathBuf};

/// The in-memory SQLite database's path, which is no file.
const SQLITE_MEMORY: &str = ":memory:";

/// The options that chose the store, as a shell would take them back (` --config FILE` or
/// ` --store URL`, quoted where needed, each with a leading space), for hints that give a
/// command to run next; empty when the store came from `$DOCSTORE_URL` or the default.
pub fn store_flags(cli: &Cli) -> String {
    match (&cli.store, &cli.config) {
        (Some(url), _) => format!(" --store {}", shell_quoted(url)),
        (None, Some(file)) => format!(" --config {}", shell_quoted(&file.to_string_lossy())),
        (None, None) => String::new(),
    }
}

/// `word` as one shell word: as it is when every character is plain, else in single quotes.
fn shell_quoted(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_owned();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// Sets how long SQLite waits for another process's lock (`--busy-timeout`, milliseconds),
/// in all: the store's retries of a call that stayed locked end within it too
/// (`retry.budget_ms` at most `ms`). Other backends have no such wait and are left as they
/// are.
pub fn set_busy_timeout(database: &mut DatabaseConfig, busy_timeout_ms: Option<u64>) {
    if let (Some(ms), Some(sqlite)) = (busy_timeout_ms, &mut database.sqlite) {
        sqlite.busy_timeout_ms = ms;
        database.retry.budget_ms = database.retry.budget_ms.min(ms);
    }
}

/// `copy` refuses a destination that is its source (nothing is read or written): the same
/// SQLite file after canonicalisation, or the same DynamoDB table at the same endpoint and
/// region.
pub fn refuse_copy_onto_itself(from: &DatabaseConfig, to: &DatabaseConfig) -> Result<(), CliError> {
    if !same_store(from, to) {
        return Ok(());
    }
    Err(CliError::invalid(
        "copy: --to names the store being copied (the same SQLite file, or the same DynamoDB \
         table at the same endpoint and region); nothing was copied",
    ))
}

/// Whether `a` and `b` hold the same documents.
fn same_store(a: &DatabaseConfig, b: &DatabaseConfig) -> bool {
    match (a.backend, b.backend) {
        (Backend::Sqlite, Backend::Sqlite) => match (&a.sqlite, &b.sqlite) {
            (Some(a), Some(b)) => match (sqlite_file(&a.path), sqlite_file(&b.path)) {
                (Some(a), Some(b)) => a == b,
                _ => false,
            },
            _ => false,
        },
        (Backend::Dynamodb, Backend::Dynamodb) => match (&a.dynamodb, &b.dynamodb) {
            (Some(a), Some(b)) => same_table(a, b),
            _ => false,
        },
        // Two memory: stores are two stores, even in one process.
        _ => false,
    }
}

/// The canonical path of an existing SQLite file; `None` for the in-memory database or a
/// file not there yet (which cannot be an existing source).
fn sqlite_file(path: &Path) -> Option<PathBuf> {
    if path.as_os_str() == SQLITE_MEMORY {
        return None;
    }
    std::fs::canonicalize(path).ok()
}

fn same_table(a: &DynamoDbConfig, b: &DynamoDbConfig) -> bool {
    let endpoint = |c: &DynamoDbConfig| {
        c.endpoint
            .as_deref()
            .map(|e| e.trim_end_matches('/').to_owned())
    };
    a.table == b.table && a.region == b.region && endpoint(a) == endpoint(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(url: &str) -> DatabaseConfig {
        docstore_any::parse_url(url).unwrap()
    }

    #[test]
    fn the_same_table_at_the_same_endpoint_is_the_same_store() {
        let a = url("dynamodb://docs?region=r&endpoint=http://127.0.0.1:8000");
        let b = url("dynamodb://docs?region=r&endpoint=http://127.0.0.1:8000/&max_scan=5");
        assert!(same_store(&a, &b));
        assert!(!same_store(
            &a,
            &url("dynamodb://docs?region=r&endpoint=http://127.0.0.1:8001")
        ));
        assert!(!same_store(
            &a,
            &url("dynamodb://other?region=r&endpoint=http://127.0.0.1:8000")
        ));
        assert!(!same_store(&url("memory:"), &url("memory:")));
        assert!(!same_store(
            &url("sqlite::memory:"),
            &url("sqlite::memory:")
        ));
    }

    #[test]
    fn store_options_are_quoted_for_a_shell() {
        assert_eq!(shell_quoted("app.toml"), "app.toml");
        assert_eq!(
            shell_quoted("dynamodb://t?region=r&endpoint=http://h:1"),
            "'dynamodb://t?region=r&endpoint=http://h:1'"
        );
        assert_eq!(shell_quoted("it's"), r"'it'\''s'");
    }
}
