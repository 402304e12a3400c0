//! # docstore-any
//!
//! Opens the backend an application's configuration names, as a [`docstore::Store`], so the
//! application never names a backend in code. Each backend is a cargo feature (`memory`,
//! `sqlite`, `dynamodb`, `postgres`; all on by default).
//!
//! From configuration: [`DatabaseConfig`] is the `[database]` table, to nest in an
//! application's own config struct:
//!
//! ```
//! #[derive(serde::Deserialize)]
//! struct AppConfig {
//!     listen: String,
//!     database: docstore::config::DatabaseConfig,
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let config: AppConfig = serde_json::from_value(serde_json::json!({
//!     "listen": "127.0.0.1:8080",
//!     "database": { "backend": "memory", "max_doc_bytes": 100000 }
//! })).unwrap();
//! let store = docstore_any::open(&config.database).await?;
//! assert_eq!(store.site("acme")?.count().await?, 0);
//! # Ok::<(), docstore::Error>(())
//! # }).unwrap();
//! ```
//!
//! From a URL:
//!
//! | URL | backend |
//! |---|---|
//! | `memory:` | a new in-memory store |
//! | `sqlite:path/to/file.db?synchronous=normal&busy_timeout_ms=30000` | the SQLite file (created if missing; the path is taken literally up to a `?`, not percent-decoded); `sqlite::memory:` for a private in-memory database; `synchronous` is `full` (default) or `normal`; `feed=false` turns the change feed off, `feed_previous=true` records each change's previous value, `feed_retention_hours` (default 168) and `feed_poll_ms` (default 200) tune it; `read_only=true` opens it for reading only (nothing in the file changes; a missing file is an empty store); `share_file=true` lets docstore keep its tables in a file that holds another program's (refused otherwise) |
//! | `postgres://user@host:port/db?schema=app` | a schema of a PostgreSQL database (created with its tables on first open; default schema `docstore`); `feed_retention_hours` (default 168) sets how long the change feed keeps a change; the other parameters are libpq's |
//! | `dynamodb://table?region=…&endpoint=…&max_scan=…&timeout_ms=…&operation_timeout_ms=…&connect_timeout_ms=…&counters=exact&counter_shards=32&collection_partitions=8&index_partitions=8&feed_poll_ms=1000` | the DynamoDB table (`feed_poll_ms`: how often a change feed watcher polls DynamoDB Streams) |
//!
//! Every URL also takes `max_doc_bytes`, `max_docs_per_site` and the retry policy's
//! `retry.max_retries`, `retry.budget_ms`, `retry.init_backoff_ms`, `retry.max_backoff_ms`
//! and `retry.base` (`[database.retry]`). An unknown parameter, backend or malformed value is
//! [`Error::InvalidArgument`] naming it.
//!
//! ```
//! let config = docstore_any::parse_url("dynamodb://docs?region=eu-west-1&max_scan=500").unwrap();
//! let dynamodb = config.dynamodb.unwrap();
//! assert_eq!((dynamodb.table.as_str(), dynamodb.max_scan), ("docs", 500));
//! assert!(docstore_any::parse_url("sqlite:x.db?max_scan=5").is_err());
//! ```

use docstore::config::{
    Backend, DatabaseConfig, DynamoDbConfig, PostgresConfig, SqliteConfig, Synchronous,
};
use docstore::{Error, Result, Store};

mod file;
mod url;
pub use file::load_config;
pub use url::parse_url;

/// The SQLite path that means "a private in-memory database".
pub const SQLITE_IN_MEMORY: &str = ":memory:";

/// Opens the store the `[database]` settings describe.
pub async fn open(database: &DatabaseConfig) -> Result<Store> {
    let options = database.store_options();
    match database.backend {
        Backend::Memory => open_memory(options),
        Backend::Sqlite => {
            let sqlite = database.sqlite.as_ref().ok_or_else(|| {
                Error::invalid(
                    "database.sqlite.path is required when database.backend = \"sqlite\"",
                )
            })?;
            open_sqlite(sqlite, options)
        }
        Backend::Dynamodb => {
            let dynamodb = database.dynamodb.as_ref().ok_or_else(|| {
                Error::invalid(
                    "database.dynamodb.table is required when database.backend = \"dynamodb\"",
                )
            })?;
            open_dynamodb(dynamodb, options).await
        }
        Backend::Postgres => {
            let postgres = database.postgres.as_ref().ok_or_else(|| {
                Error::invalid(
                    "database.postgres.url is required when database.backend = \"postgres\"",
                )
            })?;
            open_postgres(postgres, options).await
        }
    }
}

/// Opens the store a URL names (see the [crate docs](crate)).
pub async fn open_url(url: &str) -> Result<Store> {
    open(&parse_url(url)?).await
}

#[cfg(not(all(
    feature = "memory",
    feature = "sqlite",
    feature = "dynamodb",
    feature = "postgres"
)))]
fn disabled(backend: &str) -> Error {
    Error::invalid(format!(
        "the {backend} backend is not compiled in (enable docstore-any's feature {backend:?})"
    ))
}

#[cfg(feature = "memory")]
fn open_memory(options: docstore::StoreOptions) -> Result<Store> {
    Ok(Store::new(docstore_memory::MemoryStore::with_options(
        options,
    )))
}

#[cfg(not(feature = "memory"))]
fn open_memory(_: docstore::StoreOptions) -> Result<Store> {
    Err(disabled("memory"))
}

#[cfg(feature = "sqlite")]
const SECONDS_PER_HOUR: u64 = 3600;

#[cfg(feature = "sqlite")]
fn open_sqlite(config: &SqliteConfig, options: docstore::StoreOptions) -> Result<Store> {
    use docstore_sqlite::{Durability, SqliteOptions, SqliteStore};
    let sqlite = SqliteOptions::default()
        .with_durability(match config.synchronous {
            Synchronous::Full => Durability::Full,
            Synchronous::Normal => Durability::Normal,
        })
        .with_busy_timeout(std::time::Duration::from_millis(config.busy_timeout_ms))
        .with_feed(config.feed)
        .with_feed_previous(config.feed_previous)
        .with_feed_retention(std::time::Duration::from_secs(
            config.feed_retention_hours.saturating_mul(SECONDS_PER_HOUR),
        ))
        .with_feed_poll_interval(std::time::Duration::from_millis(config.feed_poll_ms))
        .with_read_only(config.read_only)
        .with_share_file(config.share_file);
    // SQLITE_IN_MEMORY is SQLite's own name for a private in-memory database.
    Ok(Store::new(SqliteStore::open_with(
        &config.path,
        options,
        sqlite,
    )?))
}

#[cfg(not(feature = "sqlite"))]
fn open_sqlite(_: &SqliteConfig, _: docstore::StoreOptions) -> Result<Store> {
    Err(disabled("sqlite"))
}

#[cfg(feature = "dynamodb")]
async fn open_dynamodb(config: &DynamoDbConfig, options: docstore::StoreOptions) -> Result<Store> {
    Ok(Store::new(
        docstore_dynamodb::DynamoStore::connect(config, options).await?,
    ))
}

#[cfg(not(feature = "dynamodb"))]
async fn open_dynamodb(_: &DynamoDbConfig, _: docstore::StoreOptions) -> Result<Store> {
    Err(disabled("dynamodb"))
}

#[cfg(feature = "postgres")]
async fn open_postgres(config: &PostgresConfig, options: docstore::StoreOptions) -> Result<Store> {
    let driver = docstore_postgres::PostgresStore::open_with_options(&config.url, options);
    Ok(Store::new(driver.await?))
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(_: &PostgresConfig, _: docstore::StoreOptions) -> Result<Store> {
    Err(disabled("postgres"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(all(feature = "memory", feature = "sqlite"))]
    #[tokio::test]
    async fn opens_memory_and_sqlite() {
        let store = open_url("memory:?max_docs_per_site=1").await.unwrap();
        let key = docstore::Key::new("s", "c", "1").unwrap();
        store.create(&key, docstore::Data::new(), "").await.unwrap();
        let second = docstore::Key::new("s", "c", "2").unwrap();
        let err = store
            .create(&second, docstore::Data::new(), "")
            .await
            .unwrap_err();
        assert!(matches!(err, Error::QuotaExceeded { limit: 1 }));

        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("a.db").display());
        open_url(&url)
            .await
            .unwrap()
            .create(&key, docstore::Data::new(), "")
            .await
            .unwrap();
        let reopened = open_url(&url).await.unwrap();
        assert_eq!(reopened.get(&key).await.unwrap().unwrap().version, 1);
        assert!(
            open_url("sqlite::memory:")
                .await
                .unwrap()
                .get(&key)
                .await
                .unwrap()
                .is_none()
        );
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test(flavor = "multi_thread")]
    async fn the_sqlite_feed_follows_the_url() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("f.db").display());
        let (scope, start) = (
            docstore::feed::FeedScope::whole_store(),
            docstore::FeedStart::Oldest,
        );
        let on = open_url(&format!("{url}?feed_poll_ms=50")).await.unwrap();
        assert!(on.changes(&scope, &start, 10).await.unwrap().caught_up);
        drop(on);
        let off = open_url(&format!("{url}?feed=false")).await.unwrap();
        let err = off.changes(&scope, &start, 10).await.unwrap_err();
        assert!(err.to_string().contains("feed is off"), "{err}");
    }

    #[cfg(feature = "dynamodb")]
    #[tokio::test]
    async fn malformed_dynamodb_settings_fail_at_open() {
        for url in [
            "dynamodb://docs?endpoint=&region=x",
            "dynamodb://docs?endpoint=not%20a%20url",
            "dynamodb://docs?region=",
        ] {
            let err = open_url(url).await.unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{url}: {err:?}");
        }
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn missing_backend_sections_are_named() {
        let config: DatabaseConfig =
            serde_json::from_value(serde_json::json!({"backend": "sqlite"})).unwrap();
        let err = open(&config).await.unwrap_err();
        assert!(err.to_string().contains("database.sqlite.path"), "{err}");
    }
}
