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
    Backend, CounterMode, DatabaseConfig, DynamoDbConfig, PostgresConfig, SqliteConfig, Synchronous,
};
use docstore::{DEFAULT_MAX_DOC_BYTES, Error, Result, Store};
use std::path::PathBuf;

mod file;
pub use file::load_config;

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

/// The `[database]` settings a URL stands for.
pub fn parse_url(url: &str) -> Result<DatabaseConfig> {
    let (scheme, rest) = url.split_once(':').ok_or_else(|| {
        Error::invalid(format!(
            "store URL {url:?} has no scheme (expected memory:, sqlite:PATH, dynamodb://TABLE or postgres://…)"
        ))
    })?;
    let (location, mut params) = rest.split_once('?').unwrap_or((rest, ""));
    let common_of_postgres;
    let mut database = DatabaseConfig {
        backend: Backend::Memory,
        max_doc_bytes: DEFAULT_MAX_DOC_BYTES,
        max_docs_per_site: None,
        sqlite: None,
        dynamodb: None,
        postgres: None,
        indexes: docstore::IndexSet::default(),
        retry: docstore::config::RetryConfig::default(),
        expiry: Vec::new(),
    };
    let allowed: &[&str] = match scheme {
        "memory" => {
            if !matches!(location, "" | "//") {
                return Err(Error::invalid(format!(
                    "store URL {url:?}: memory: takes no location"
                )));
            }
            &[]
        }
        "sqlite" => {
            let path = location.strip_prefix("//").unwrap_or(location);
            if path.is_empty() {
                return Err(Error::invalid(format!(
                    "store URL {url:?}: sqlite: needs a file path (or {SQLITE_IN_MEMORY})"
                )));
            }
            database.backend = Backend::Sqlite;
            database.sqlite = Some(SqliteConfig::new(PathBuf::from(path)));
            &[
                "synchronous",
                "busy_timeout_ms",
                "feed",
                "feed_previous",
                "feed_retention_hours",
                "feed_poll_ms",
                "read_only",
                "share_file",
            ]
        }
        "dynamodb" => {
            let table = location
                .strip_prefix("//")
                .unwrap_or(location)
                .trim_end_matches('/');
            if table.is_empty() {
                return Err(Error::invalid(format!(
                    "store URL {url:?}: dynamodb:// needs a table name"
                )));
            }
            database.backend = Backend::Dynamodb;
            database.dynamodb = Some(DynamoDbConfig::new(table));
            &[
                "region",
                "endpoint",
                "max_scan",
                "timeout_ms",
                "operation_timeout_ms",
                "connect_timeout_ms",
                "counters",
                "counter_shards",
                "collection_partitions",
                "index_partitions",
                "trust_request_tokens",
                "feed_poll_ms",
            ]
        }
        // The URL is the server's, but for the parameters every URL takes.
        "postgres" | "postgresql" => {
            database.backend = Backend::Postgres;
            let (server, common) = split_common_parameters(url);
            database.postgres = Some(PostgresConfig { url: server });
            common_of_postgres = common;
            params = &common_of_postgres;
            &[]
        }
        other => {
            return Err(Error::invalid(format!(
                "store URL {url:?}: unknown backend {other:?} (expected memory, sqlite, dynamodb or postgres)"
            )));
        }
    };
    let mut seen = Vec::new();
    for (name, value) in form_urlencoded::parse(params.as_bytes()) {
        if seen.contains(&name) {
            return Err(Error::invalid(format!(
                "store URL parameter {name:?} is given more than once"
            )));
        }
        seen.push(name.clone());
        let number = |what: &str| {
            value.parse::<u64>().map_err(|_| {
                Error::invalid(format!(
                    "store URL parameter {what}={value:?} is not a number"
                ))
            })
        };
        let boolean = |what: &str| match value.as_ref() {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(Error::invalid(format!(
                "store URL parameter {what}={other:?} is not true or false"
            ))),
        };
        let small_number = |what: &str| {
            u32::try_from(number(what)?).map_err(|_| {
                Error::invalid(format!("store URL parameter {what}={value:?} is too large"))
            })
        };
        if let Some(sqlite) = database.sqlite.as_mut() {
            match name.as_ref() {
                "synchronous" => {
                    sqlite.synchronous = match value.as_ref() {
                        "full" => Synchronous::Full,
                        "normal" => Synchronous::Normal,
                        other => {
                            return Err(Error::invalid(format!(
                                "store URL parameter synchronous={other:?} is not full or normal"
                            )));
                        }
                    };
                    continue;
                }
                "busy_timeout_ms" => {
                    sqlite.busy_timeout_ms = number("busy_timeout_ms")?;
                    continue;
                }
                "feed" => {
                    sqlite.feed = match value.as_ref() {
                        "true" | "on" => true,
                        "false" | "off" => false,
                        other => {
                            return Err(Error::invalid(format!(
                                "store URL parameter feed={other:?} is not true or false"
                            )));
                        }
                    };
                    continue;
                }
                "feed_previous" => {
                    sqlite.feed_previous = boolean("feed_previous")?;
                    continue;
                }
                "feed_retention_hours" => {
                    sqlite.feed_retention_hours = number("feed_retention_hours")?;
                    continue;
                }
                "feed_poll_ms" => {
                    sqlite.feed_poll_ms = number("feed_poll_ms")?;
                    continue;
                }
                "read_only" => {
                    sqlite.read_only = boolean("read_only")?;
                    continue;
                }
                "share_file" => {
                    sqlite.share_file = boolean("share_file")?;
                    continue;
                }
                _ => {}
            }
        }
        match (name.as_ref(), database.dynamodb.as_mut()) {
            ("max_doc_bytes", _) => database.max_doc_bytes = number("max_doc_bytes")? as usize,
            ("max_docs_per_site", _) => {
                database.max_docs_per_site = Some(number("max_docs_per_site")?)
            }
            ("retry.max_retries", _) => database.retry.max_retries = small_number(&name)?,
            ("retry.budget_ms", _) => database.retry.budget_ms = number(&name)?,
            ("retry.init_backoff_ms", _) => database.retry.init_backoff_ms = number(&name)?,
            ("retry.max_backoff_ms", _) => database.retry.max_backoff_ms = number(&name)?,
            ("retry.base", _) => {
                database.retry.base = value.parse().map_err(|_| {
                    Error::invalid(format!(
                        "store URL parameter {name}={value:?} is not a number"
                    ))
                })?
            }
            ("region", Some(d)) => d.region = Some(value.into_owned()),
            ("endpoint", Some(d)) => d.endpoint = Some(value.into_owned()),
            ("max_scan", Some(d)) => d.max_scan = number("max_scan")? as usize,
            ("timeout_ms", Some(d)) => d.timeout_ms = number("timeout_ms")?,
            ("operation_timeout_ms", Some(d)) => {
                d.operation_timeout_ms = number("operation_timeout_ms")?
            }
            ("connect_timeout_ms", Some(d)) => d.connect_timeout_ms = number("connect_timeout_ms")?,
            ("feed_poll_ms", Some(d)) => d.feed_poll_ms = number("feed_poll_ms")?,
            ("counter_shards", Some(d)) => d.counter_shards = small_number("counter_shards")?,
            ("collection_partitions", Some(d)) => {
                d.collection_partitions = small_number("collection_partitions")?
            }
            ("index_partitions", Some(d)) => d.index_partitions = small_number("index_partitions")?,
            ("trust_request_tokens", Some(d)) => {
                d.trust_request_tokens = match value.as_ref() {
                    "true" => true,
                    "false" => false,
                    other => {
                        return Err(Error::invalid(format!(
                            "store URL parameter trust_request_tokens={other:?} is not true or \
                             false"
                        )));
                    }
                }
            }
            ("counters", Some(d)) => {
                d.counters = match value.as_ref() {
                    "exact" => CounterMode::Exact,
                    "fast" => CounterMode::Fast,
                    other => {
                        return Err(Error::invalid(format!(
                            "store URL parameter counters={other:?} is not exact or fast"
                        )));
                    }
                }
            }
            (other, _) => {
                let mut known = vec!["max_doc_bytes", "max_docs_per_site"];
                known.extend(RETRY_PARAMETERS);
                known.extend(allowed);
                return Err(Error::invalid(format!(
                    "store URL parameter {other:?} is not known for {scheme}: (known: {})",
                    known.join(", ")
                )));
            }
        }
    }
    database.retry.check()?;
    Ok(database)
}

/// A PostgreSQL URL without the parameters every store URL takes (`max_doc_bytes`,
/// `max_docs_per_site`, `retry.*`; PostgreSQL would refuse them), and those parameters.
fn split_common_parameters(url: &str) -> (String, String) {
    let common = |name: &str| {
        ["max_doc_bytes", "max_docs_per_site"].contains(&name) || RETRY_PARAMETERS.contains(&name)
    };
    let (server, common) = docstore::config::take_url_parameters(url, common);
    let common: Vec<String> = common
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    (server, common.join("&"))
}

/// The URL parameters of `[database.retry]`, which every URL takes.
const RETRY_PARAMETERS: [&str; 5] = [
    "retry.max_retries",
    "retry.budget_ms",
    "retry.init_backoff_ms",
    "retry.max_backoff_ms",
    "retry.base",
];

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

    fn invalid(url: &str) -> String {
        match parse_url(url) {
            Err(Error::InvalidArgument(message)) => message,
            other => panic!("{url}: {other:?}"),
        }
    }

    /// A PostgreSQL URL keeps its server's parameters (`schema`, libpq's) and gives the
    /// parameters every URL takes to the configuration, where PostgreSQL would refuse them.
    #[test]
    fn a_postgres_url_takes_the_parameters_every_url_takes() {
        let url = "postgres://app@db:5432/app?schema=s&max_doc_bytes=1000&sslmode=disable\
                   &retry.max_retries=2&max_docs_per_site=7&feed_retention_hours=24";
        let database = parse_url(url).unwrap();
        assert_eq!(
            database.postgres.unwrap().url,
            "postgres://app@db:5432/app?schema=s&sslmode=disable&feed_retention_hours=24"
        );
        let retries = database.retry.max_retries;
        assert_eq!(
            (database.max_doc_bytes, database.max_docs_per_site, retries),
            (1000, Some(7), 2)
        );
        let plain = parse_url("postgresql://app@db/app")
            .unwrap()
            .postgres
            .unwrap();
        assert_eq!(plain.url, "postgresql://app@db/app");
        assert!(invalid("postgres://db/app?max_doc_bytes=lots").contains("max_doc_bytes"));
    }

    #[test]
    fn urls_map_to_configs() {
        assert_eq!(parse_url("memory:").unwrap().backend, Backend::Memory);
        let sqlite = parse_url("sqlite:dir/my file.db?max_doc_bytes=1000").unwrap();
        assert_eq!(sqlite.sqlite.unwrap().path, PathBuf::from("dir/my file.db"));
        assert_eq!(sqlite.max_doc_bytes, 1000);
        let absolute = parse_url("sqlite:///tmp/x.db").unwrap().sqlite.unwrap();
        assert_eq!(absolute.path, PathBuf::from("/tmp/x.db"));
        assert_eq!(
            (absolute.synchronous, absolute.busy_timeout_ms),
            (Synchronous::Full, 5_000)
        );
        let tuned = parse_url("sqlite:x.db?synchronous=normal&busy_timeout_ms=30000")
            .unwrap()
            .sqlite
            .unwrap();
        assert_eq!(
            (tuned.synchronous, tuned.busy_timeout_ms),
            (Synchronous::Normal, 30_000)
        );
        assert!(invalid("sqlite:x.db?synchronous=off").contains("synchronous"));
        assert!(invalid("sqlite:x.db?busy_timeout_ms=soon").contains("busy_timeout_ms"));
        let feed = parse_url("sqlite:x.db?feed=false&feed_retention_hours=24&feed_poll_ms=50")
            .unwrap()
            .sqlite
            .unwrap();
        assert_eq!(
            (feed.feed, feed.feed_retention_hours, feed.feed_poll_ms),
            (false, 24, 50)
        );
        assert_eq!(
            (
                absolute.feed,
                absolute.feed_retention_hours,
                absolute.feed_poll_ms
            ),
            (true, 168, 200)
        );
        assert!(invalid("sqlite:x.db?feed=maybe").contains("feed"));
        assert!(!absolute.feed_previous);
        let previous = parse_url("sqlite:x.db?feed_previous=true").unwrap().sqlite;
        assert!(previous.unwrap().feed_previous);
        assert!(invalid("sqlite:x.db?feed_previous=yes").contains("feed_previous"));
        let sharing = parse_url("sqlite:x.db?read_only=true&share_file=true")
            .unwrap()
            .sqlite
            .unwrap();
        assert!(sharing.read_only && sharing.share_file);
        let plain = parse_url("sqlite:x.db").unwrap().sqlite.unwrap();
        assert!(!plain.read_only && !plain.share_file);
        assert!(invalid("sqlite:x.db?share_file=yes").contains("share_file"));
        assert!(invalid("sqlite:x.db?feed_poll_ms=soon").contains("feed_poll_ms"));
        assert!(invalid("memory:?feed=false").contains("feed"));
        assert!(invalid("memory:?synchronous=normal").contains("synchronous"));
        let dynamo = parse_url(
            "dynamodb://docs?region=eu-west-1&endpoint=http%3A%2F%2F127.0.0.1%3A8000&max_scan=7&max_docs_per_site=9",
        )
        .unwrap();
        assert_eq!(dynamo.max_docs_per_site, Some(9));
        let d = dynamo.dynamodb.unwrap();
        assert_eq!(d.table, "docs");
        assert_eq!(d.region.as_deref(), Some("eu-west-1"));
        assert_eq!(d.endpoint.as_deref(), Some("http://127.0.0.1:8000"));
        assert_eq!(d.max_scan, 7);
        assert_eq!(d.feed_poll_ms, 1_000);
        let polled = parse_url("dynamodb://docs?feed_poll_ms=250").unwrap();
        assert_eq!(polled.dynamodb.unwrap().feed_poll_ms, 250);
    }

    #[test]
    fn bad_urls_name_the_problem() {
        assert!(invalid("mongodb://x").contains("mongodb"));
        assert!(invalid("nothing").contains("scheme"));
        assert!(invalid("sqlite:").contains("path"));
        assert!(invalid("dynamodb://").contains("table"));
        assert!(invalid("memory:?regin=x").contains("regin"));
        assert!(invalid("sqlite:x.db?region=x").contains("region"));
        assert!(invalid("dynamodb://t?max_scan=ten").contains("max_scan"));
        assert!(invalid("memory:somewhere").contains("location"));
        assert!(invalid("dynamodb://t?max_scan=1&max_scan=2").contains("more than once"));
    }

    #[test]
    fn every_url_takes_the_retry_policy() {
        let url = "sqlite:a.db?retry.max_retries=2&retry.budget_ms=900&retry.init_backoff_ms=5\
                   &retry.max_backoff_ms=40&retry.base=1.5";
        let policy = parse_url(url).unwrap().store_options().retry;
        assert_eq!(policy.max_retries, 2);
        assert_eq!(policy.budget, std::time::Duration::from_millis(900));
        assert_eq!(
            policy.backoff.init_backoff,
            std::time::Duration::from_millis(5)
        );
        assert_eq!(
            policy.backoff.max_backoff,
            std::time::Duration::from_millis(40)
        );
        assert_eq!(policy.backoff.base, 1.5);
        let off = parse_url("dynamodb://t?retry.max_retries=0").unwrap();
        assert!(!off.store_options().retry.retries());
        assert_eq!(parse_url("memory:").unwrap().retry, Default::default());
        assert!(invalid("memory:?retry.base=0.5").contains("retry.base"));
        assert!(invalid("memory:?retry.base=x").contains("retry.base"));
        assert!(invalid("memory:?retry.max_retries=-1").contains("retry.max_retries"));
        assert!(invalid("memory:?retry.tries=1").contains("retry.budget_ms"));
    }

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
