//! Configuration types for choosing a backend, shared by every crate that opens a store.
//!
//! The keys are those of the original design, so an application can nest [`Config`] in its
//! own configuration file. Unknown keys are errors, so a typo never silently means a default.
//!
//! ```
//! use docstore::config::{Backend, Config};
//!
//! let config: Config = serde_json::from_value(serde_json::json!({
//!     "database": {
//!         "backend": "dynamodb",
//!         "max_doc_bytes": 100000,
//!         "dynamodb": { "table": "docs", "region": "eu-west-1" }
//!     }
//! })).unwrap();
//! assert_eq!(config.database.backend, Backend::Dynamodb);
//! assert_eq!(config.database.dynamodb.unwrap().max_scan, 10_000);
//! ```

use crate::index::IndexSet;
use crate::options::{DEFAULT_MAX_DOC_BYTES, StoreOptions};
use crate::retry::{BackoffConfig, RetryPolicy};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default number of items a DynamoDB query reads before it stops.
pub const DEFAULT_MAX_SCAN: usize = 10_000;

/// The default deadline of one DynamoDB request attempt, in milliseconds.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// The default deadline of one DynamoDB request with its retries, in milliseconds.
pub const DEFAULT_OPERATION_TIMEOUT_MS: u64 = 30_000;
/// The default deadline for opening a connection to DynamoDB, in milliseconds.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 3_000;
/// How often, by default, a DynamoDB change feed watcher polls Streams, in milliseconds.
pub const DEFAULT_FEED_POLL_MS: u64 = 1_000;

/// The top level: everything sits under `database`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The store settings.
    pub database: DatabaseConfig,
}

/// `database.*`: which backend, its limits and its own settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    /// `database.backend`: `memory`, `sqlite` or `dynamodb`.
    pub backend: Backend,
    /// `database.max_doc_bytes`: the largest serialized document data (default 390 000).
    #[serde(default = "default_max_doc_bytes")]
    pub max_doc_bytes: usize,
    /// `database.max_docs_per_site`: the soft per-site quota (default: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_docs_per_site: Option<u64>,
    /// `database.sqlite.*`, used when `backend = "sqlite"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sqlite: Option<SqliteConfig>,
    /// `database.dynamodb.*`, used when `backend = "dynamodb"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamodb: Option<DynamoDbConfig>,
    /// `database.postgres.*`, used when `backend = "postgres"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres: Option<PostgresConfig>,
    /// `[[database.indexes]]`: the declared indexes (`collection`, `name`, `fields` with `-`
    /// for descending, `unique = true` for a unique index), checked as a set when the config is read.
    #[serde(default, skip_serializing_if = "IndexSet::is_empty")]
    pub indexes: IndexSet,
    /// `[database.retry]`: how every call retries `Unavailable` (default: up to 10 retries
    /// within 5 seconds), checked when the config is read.
    #[serde(
        default,
        skip_serializing_if = "RetryConfig::is_default",
        deserialize_with = "checked_retry"
    )]
    pub retry: RetryConfig,
    /// `[[database.expiry]]`: per collection, how long after a `create`, `put` or
    /// `replace_if` its documents expire when the call gives no expiry (`collection`,
    /// `after_seconds`; `docs/contract.md`, "Expiry").
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "checked_expiry"
    )]
    pub expiry: Vec<ExpiryDefault>,
}

/// One `[[database.expiry]]` entry: documents of `collection` (in every site) expire
/// `after_seconds` after the write that stores them, unless it gives its own expiry.
///
/// ```
/// use docstore::config::Config;
///
/// let config: Config = serde_json::from_value(serde_json::json!({"database": {
///     "backend": "memory",
///     "expiry": [{ "collection": "sessions", "after_seconds": 1800 }]
/// }})).unwrap();
/// let options = config.database.store_options();
/// assert_eq!(options.expiry["sessions"], std::time::Duration::from_secs(1800));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpiryDefault {
    /// The collection name.
    pub collection: String,
    /// How long its documents live, in seconds (at least 1).
    pub after_seconds: u64,
}

/// `database.retry.*`: the store's [`RetryPolicy`] (`docs/contract.md`, "Retries"), in
/// whole milliseconds.
///
/// ```
/// use docstore::config::Config;
///
/// let config: Config = serde_json::from_value(serde_json::json!({"database": {
///     "backend": "memory",
///     "retry": { "max_retries": 3, "budget_ms": 2000 }
/// }})).unwrap();
/// let policy = config.database.store_options().retry;
/// assert_eq!(policy.max_retries, 3);
/// assert_eq!(policy.budget, std::time::Duration::from_secs(2));
/// assert_eq!(policy.backoff.init_backoff, std::time::Duration::from_millis(50)); // default
/// // Bounds that cannot be followed are refused, naming the key.
/// let bad = serde_json::from_value::<Config>(serde_json::json!({"database": {
///     "backend": "memory", "retry": { "base": 0.5 }
/// }}));
/// assert!(bad.unwrap_err().to_string().contains("retry.base"));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryConfig {
    /// `database.retry.max_retries`: retries after the first try, at most (default 10; 0
    /// turns retrying off).
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// `database.retry.budget_ms`: the time from a call's start within which every wait must
    /// end (default 5 000).
    #[serde(default = "default_budget_ms")]
    pub budget_ms: u64,
    /// `database.retry.init_backoff_ms`: the bound of the first wait (default 50).
    #[serde(default = "default_init_backoff_ms")]
    pub init_backoff_ms: u64,
    /// `database.retry.max_backoff_ms`: the largest bound of any wait (default 1 000).
    #[serde(default = "default_max_backoff_ms")]
    pub max_backoff_ms: u64,
    /// `database.retry.base`: how much each bound grows over the previous one (default 2; at
    /// least 1).
    #[serde(default = "default_base")]
    pub base: f64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig::from(&RetryPolicy::default())
    }
}

impl From<&RetryPolicy> for RetryConfig {
    fn from(policy: &RetryPolicy) -> Self {
        RetryConfig {
            max_retries: policy.max_retries,
            budget_ms: millis(policy.budget),
            init_backoff_ms: millis(policy.backoff.init_backoff),
            max_backoff_ms: millis(policy.backoff.max_backoff),
            base: policy.backoff.base,
        }
    }
}

impl RetryConfig {
    /// These settings as a [`RetryPolicy`].
    pub fn policy(&self) -> RetryPolicy {
        let backoff = BackoffConfig::new(
            Duration::from_millis(self.init_backoff_ms),
            Duration::from_millis(self.max_backoff_ms),
            self.base,
        );
        RetryPolicy::default()
            .with_max_retries(self.max_retries)
            .with_budget(Duration::from_millis(self.budget_ms))
            .with_backoff(backoff)
    }

    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming the key
    /// (`retry.base`, ...) when the backoff bounds cannot be followed: a `base` below 1, or
    /// `init_backoff_ms` above `max_backoff_ms`.
    pub fn check(&self) -> crate::Result<()> {
        self.policy().backoff.check("retry")?;
        Ok(())
    }

    fn is_default(&self) -> bool {
        *self == RetryConfig::default()
    }
}

/// `url` without the query parameters whose names `takes` accepts, and those parameters as
/// they were written (`name=value`, in order): how a driver whose URL is a server's (a
/// PostgreSQL connection string) takes docstore's parameters out before the server sees it.
///
/// ```
/// use docstore::config::take_url_parameters;
///
/// let (server, ours) =
///     take_url_parameters("postgres://db/app?schema=s&sslmode=disable", |name| name == "schema");
/// assert_eq!(server, "postgres://db/app?sslmode=disable");
/// assert_eq!(ours, [("schema", "s")]);
/// ```
pub fn take_url_parameters(url: &str, takes: impl Fn(&str) -> bool) -> (String, Vec<(&str, &str)>) {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut taken = Vec::new();
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match takes(name) {
            true => taken.push((name, value)),
            false => rest.push(pair),
        }
    }
    let url = match rest.is_empty() {
        true => base.to_owned(),
        false => format!("{base}?{}", rest.join("&")),
    };
    (url, taken)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Reads `[database.retry]` and refuses bounds that cannot be followed.
fn checked_retry<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<RetryConfig, D::Error> {
    let retry = RetryConfig::deserialize(deserializer)?;
    retry.check().map_err(serde::de::Error::custom)?;
    Ok(retry)
}

/// `[[database.expiry]]`, each entry checked: a valid collection name, given once, and at
/// least one second.
fn checked_expiry<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<ExpiryDefault>, D::Error> {
    let entries = Vec::<ExpiryDefault>::deserialize(deserializer)?;
    let mut seen = std::collections::BTreeSet::new();
    for entry in &entries {
        let fail = |rule: String| {
            serde::de::Error::custom(format!("database.expiry {:?}: {rule}", entry.collection))
        };
        crate::key::validate_collection(&entry.collection).map_err(|e| fail(e.to_string()))?;
        if entry.after_seconds == 0 {
            return Err(fail("after_seconds must be at least 1".into()));
        }
        if !seen.insert(&entry.collection) {
            return Err(fail("the collection is given twice".into()));
        }
    }
    Ok(entries)
}

fn default_max_retries() -> u32 {
    crate::retry::DEFAULT_MAX_RETRIES
}

fn default_budget_ms() -> u64 {
    millis(crate::retry::DEFAULT_BUDGET)
}

fn default_init_backoff_ms() -> u64 {
    millis(crate::retry::DEFAULT_INIT_BACKOFF)
}

fn default_max_backoff_ms() -> u64 {
    millis(crate::retry::DEFAULT_MAX_BACKOFF)
}

fn default_base() -> f64 {
    crate::retry::DEFAULT_BASE
}

/// The backends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// In process memory; gone when the process ends.
    Memory,
    /// One SQLite file.
    Sqlite,
    /// One DynamoDB table.
    Dynamodb,
    /// One schema of a PostgreSQL database.
    Postgres,
}

/// `database.postgres.*`: the server and schema, as a URL
/// (`postgres://user@host:port/db?schema=app&feed_retention_hours=168`; the other parameters
/// are libpq's).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresConfig {
    /// `database.postgres.url`.
    pub url: String,
}

/// `database.sqlite.*`.
///
/// ```
/// let sqlite: docstore::config::SqliteConfig =
///     toml_like(r#"{"path": "app.db", "synchronous": "normal", "busy_timeout_ms": 30000}"#);
/// assert_eq!(sqlite.synchronous, docstore::config::Synchronous::Normal);
/// assert_eq!(sqlite.busy_timeout_ms, 30_000);
/// // The change feed: on, kept 7 days, other processes' commits looked for every 200 ms.
/// assert!(sqlite.feed);
/// assert_eq!((sqlite.feed_retention_hours, sqlite.feed_poll_ms), (168, 200));
/// let off: docstore::config::SqliteConfig = toml_like(r#"{"path": "a.db", "feed": false}"#);
/// assert!(!off.feed);
/// # fn toml_like<T: serde::de::DeserializeOwned>(json: &str) -> T { serde_json::from_str(json).unwrap() }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqliteConfig {
    /// `database.sqlite.path`: the database file.
    pub path: PathBuf,
    /// `database.sqlite.synchronous`: how hard a commit works to survive a crash
    /// (default `full`).
    #[serde(default)]
    pub synchronous: Synchronous,
    /// `database.sqlite.busy_timeout_ms`: how long a write waits for another process's lock
    /// before it is `Unavailable` (default 5 000).
    #[serde(default = "default_busy_timeout_ms")]
    pub busy_timeout_ms: u64,
    /// `database.sqlite.feed`: whether writes record their changes for the change feed
    /// (default `true`; with `false` reading the feed is an error, and every process writing
    /// the file should say the same, or the feed misses the writes of those with it off).
    #[serde(default = "default_true")]
    pub feed: bool,
    /// `database.sqlite.feed_previous`: whether each change of an update, put or delete also
    /// records the document before it, `Change::previous` (default `false`: it costs every
    /// such write a read and a larger change row; `docs/benchmarks.md`, "Change feed").
    #[serde(default)]
    pub feed_previous: bool,
    /// `database.sqlite.feed_retention_hours`: how long changes are kept before pruning
    /// (default 168, 7 days); a cursor older than that is `CursorExpired`.
    #[serde(default = "default_sqlite_feed_retention_hours")]
    pub feed_retention_hours: u64,
    /// `database.sqlite.feed_poll_ms`: how often a watcher looks for other processes'
    /// commits, in milliseconds (default 200; this process's commits wake it at once).
    #[serde(default = "default_sqlite_feed_poll_ms")]
    pub feed_poll_ms: u64,
    /// `database.sqlite.read_only`: open the file for reading only (default `false`):
    /// nothing in it changes (no schema, no journal mode, no file created), a missing file
    /// is an empty store, and every write is refused.
    #[serde(default)]
    pub read_only: bool,
    /// `database.sqlite.share_file`: whether docstore may keep its tables in a file that
    /// holds another program's tables (default `false`: such a file is refused, naming
    /// them, and left as it was). Sharing adds docstore's tables and switches the file to
    /// WAL.
    #[serde(default)]
    pub share_file: bool,
}

/// The default of [`SqliteConfig::feed_retention_hours`]: 7 days.
pub const DEFAULT_SQLITE_FEED_RETENTION_HOURS: u64 = 7 * 24;

/// The default of [`SqliteConfig::feed_poll_ms`].
pub const DEFAULT_SQLITE_FEED_POLL_MS: u64 = 200;

fn default_sqlite_feed_retention_hours() -> u64 {
    DEFAULT_SQLITE_FEED_RETENTION_HOURS
}

fn default_sqlite_feed_poll_ms() -> u64 {
    DEFAULT_SQLITE_FEED_POLL_MS
}

/// The path SQLite reads as "a private in-memory database", never a file.
const SQLITE_MEMORY_PATH: &str = ":memory:";

/// The default of [`SqliteConfig::busy_timeout_ms`].
pub const DEFAULT_BUSY_TIMEOUT_MS: u64 = 5_000;

fn default_busy_timeout_ms() -> u64 {
    DEFAULT_BUSY_TIMEOUT_MS
}

impl SqliteConfig {
    /// The file at `path`, with the default settings.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SqliteConfig {
            path: path.into(),
            synchronous: Synchronous::default(),
            busy_timeout_ms: DEFAULT_BUSY_TIMEOUT_MS,
            feed: true,
            feed_previous: false,
            feed_retention_hours: DEFAULT_SQLITE_FEED_RETENTION_HOURS,
            feed_poll_ms: DEFAULT_SQLITE_FEED_POLL_MS,
            read_only: false,
            share_file: false,
        }
    }
}

/// `database.sqlite.synchronous` (SQLite's `PRAGMA synchronous` in WAL mode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Synchronous {
    /// Every commit is on stable storage before the write returns (survives power loss).
    #[default]
    Full,
    /// Commits reach the operating system; the last ones may be lost on an OS crash or
    /// power loss (never corrupted). Much faster on slow disks.
    Normal,
}

/// `database.dynamodb.*`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DynamoDbConfig {
    /// `database.dynamodb.table`: the table name, by DynamoDB's rule 3 to 255 characters,
    /// each a letter, digit, `_`, `-` or `.` (checked when the store is opened:
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument)).
    pub table: String,
    /// `database.dynamodb.region` (default: the standard AWS region chain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// `database.dynamodb.endpoint`: an explicit endpoint, for emulators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// `database.dynamodb.max_scan`: items a query reads at most (default 10 000).
    #[serde(default = "default_max_scan")]
    pub max_scan: usize,
    /// `database.dynamodb.timeout_ms`: the deadline of one attempt of one request, in
    /// milliseconds (default 10 000); an attempt past it is abandoned and retried.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// `database.dynamodb.operation_timeout_ms`: the deadline of one request with all its
    /// retries, in milliseconds (default 30 000); past it the call fails with
    /// [`Error::Unavailable`](crate::Error::Unavailable).
    #[serde(default = "default_operation_timeout_ms")]
    pub operation_timeout_ms: u64,
    /// `database.dynamodb.connect_timeout_ms`: the deadline for opening a connection, in
    /// milliseconds (default 3 000).
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// `database.dynamodb.counters`: how collection counters are moved (default
    /// [`CounterMode::Exact`]).
    #[serde(default)]
    pub counters: CounterMode,
    /// `database.dynamodb.counter_shards`: over how many items each collection's counter is
    /// spread (default 32, at most 100). Every create or delete moves one of them, chosen by
    /// the document id, so a busy collection is not held to one item's write limit; `count`
    /// and `collections` read them all in one query.
    #[serde(default = "default_counter_shards")]
    pub counter_shards: u32,
    /// `database.dynamodb.collection_partitions`: over how many partition keys a table
    /// spreads each collection's documents and counter shards, and each site's delete
    /// records (default 8, at most 100). Fixed when the table is first used: recorded in the
    /// table, which keeps it whatever a later store is configured with. One partition key takes
    /// at most 1 000 write units per second, so one collection takes about 250 one-KB creates
    /// per second per partition; a query in id order reads every partition, so a page costs
    /// up to that many requests.
    #[serde(default = "default_collection_partitions")]
    pub collection_partitions: u32,
    /// `database.dynamodb.index_partitions`: over how many GSI partitions an index added
    /// from now on spreads its keys (default 8, at most 100; each index keeps the count it was
    /// added with). One partition key takes at most 1 000 write units per second, so an
    /// index whose field has one value takes about 8 000 one-KB writes per second with 8; a
    /// query reads every partition, so a page costs up to that many times one partition's
    /// reads.
    #[serde(default = "default_index_partitions")]
    pub index_partitions: u32,
    /// `database.dynamodb.trust_request_tokens` (default `true`): whether the service honours
    /// `TransactWriteItems`' client request token, as DynamoDB does (a resent transaction that
    /// had committed is answered with success). Set it to `false` for compatible services
    /// that ignore the token (moto): a resent create or delete whose outcome the write
    /// identities cannot prove then answers [`Error::Unavailable`](crate::Error::Unavailable)
    /// instead of a refusal.
    #[serde(default = "default_true")]
    pub trust_request_tokens: bool,
    /// `database.dynamodb.feed_poll_ms`: how often a change feed watcher at the end of the
    /// feed asks DynamoDB Streams for new records, in milliseconds (default 1 000; Streams
    /// has no push, and AWS allows about 5 reads per second per shard).
    #[serde(default = "default_feed_poll_ms")]
    pub feed_poll_ms: u64,
}

/// `database.dynamodb.counters`: how the DynamoDB backend moves collection counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CounterMode {
    /// In the same transaction as the document write (`TransactWriteItems`): exact under
    /// lost answers, resends and interrupted processes. Creates and deletes cost one request
    /// but twice the write capacity (transactional writes), and creates in one collection
    /// contend on its counter item.
    #[default]
    Exact,
    /// The original layout's way: an atomic `ADD` right after the document write. Half the write capacity
    /// of `exact`, one request more, and a counter can drift by one when a process dies between
    /// the two or the counter's own answer is lost (`docstore fsck --repair` fixes it).
    Fast,
}

impl DynamoDbConfig {
    /// The settings for `table` with every default: region and endpoint from the standard AWS
    /// chain, `max_scan` 10 000, 10 s per attempt, 30 s per request, 3 s to connect, exact
    /// counters.
    ///
    /// ```
    /// let config = docstore::config::DynamoDbConfig::new("docs");
    /// assert_eq!(config.operation_timeout_ms, 30_000);
    /// ```
    pub fn new(table: impl Into<String>) -> Self {
        DynamoDbConfig {
            table: table.into(),
            region: None,
            endpoint: None,
            max_scan: DEFAULT_MAX_SCAN,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            operation_timeout_ms: DEFAULT_OPERATION_TIMEOUT_MS,
            connect_timeout_ms: DEFAULT_CONNECT_TIMEOUT_MS,
            counters: CounterMode::Exact,
            counter_shards: DEFAULT_COUNTER_SHARDS,
            collection_partitions: DEFAULT_COLLECTION_PARTITIONS,
            index_partitions: DEFAULT_INDEX_PARTITIONS,
            trust_request_tokens: true,
            feed_poll_ms: DEFAULT_FEED_POLL_MS,
        }
    }
}

impl DatabaseConfig {
    /// Takes a relative `sqlite.path` from the folder of `config_file`, the file these
    /// settings were read from, so that the file names the same database wherever the
    /// program runs: the one rule for relative paths (`docs/contract.md`, "Configuration").
    /// An absolute path, SQLite's `:memory:` and other backends' settings are left as they
    /// are. A path given in code, a URL or the environment is not from a file: it stays
    /// relative to the working directory, as a path anywhere else in a program is.
    /// [`docstore_any::load_config`](https://docs.rs/docstore-any) reads a file and calls
    /// this; an app that nests `database` in its own config file calls it after reading it.
    ///
    /// ```
    /// use docstore::config::DatabaseConfig;
    /// use std::path::Path;
    ///
    /// # let mut database: DatabaseConfig = serde_json::from_value(serde_json::json!(
    /// #     {"backend": "sqlite", "sqlite": {"path": "data/app.db"}})).unwrap();
    /// // `database` read from /etc/app/app.toml, which says path = "data/app.db":
    /// database.resolve_relative_paths(Path::new("/etc/app/app.toml"));
    /// let path = &database.sqlite.as_ref().unwrap().path;
    /// assert_eq!(path, Path::new("/etc/app/data/app.db"));
    /// ```
    pub fn resolve_relative_paths(&mut self, config_file: &Path) {
        let Some(sqlite) = &mut self.sqlite else {
            return;
        };
        if sqlite.path.is_absolute() || sqlite.path.as_os_str() == SQLITE_MEMORY_PATH {
            return;
        }
        if let Some(folder) = config_file.parent() {
            sqlite.path = folder.join(&sqlite.path);
        }
    }

    /// The backend-independent settings as [`StoreOptions`] (with the system clock).
    pub fn store_options(&self) -> StoreOptions {
        let options = StoreOptions::default()
            .with_max_doc_bytes(self.max_doc_bytes)
            .with_max_docs_per_site(self.max_docs_per_site)
            .with_indexes(self.indexes.clone())
            .with_retry(self.retry.policy());
        self.expiry.iter().fold(options, |options, entry| {
            let after = std::time::Duration::from_secs(entry.after_seconds);
            options.with_expiry(entry.collection.clone(), after)
        })
    }
}

fn default_max_doc_bytes() -> usize {
    DEFAULT_MAX_DOC_BYTES
}

/// The default of [`DynamoDbConfig::counter_shards`].
pub const DEFAULT_COUNTER_SHARDS: u32 = 32;

fn default_counter_shards() -> u32 {
    DEFAULT_COUNTER_SHARDS
}

/// The default of [`DynamoDbConfig::collection_partitions`].
pub const DEFAULT_COLLECTION_PARTITIONS: u32 = 8;

fn default_collection_partitions() -> u32 {
    DEFAULT_COLLECTION_PARTITIONS
}

/// The default of [`DynamoDbConfig::index_partitions`].
pub const DEFAULT_INDEX_PARTITIONS: u32 = 8;

fn default_index_partitions() -> u32 {
    DEFAULT_INDEX_PARTITIONS
}

fn default_max_scan() -> usize {
    DEFAULT_MAX_SCAN
}

fn default_true() -> bool {
    true
}

fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

fn default_operation_timeout_ms() -> u64 {
    DEFAULT_OPERATION_TIMEOUT_MS
}

fn default_connect_timeout_ms() -> u64 {
    DEFAULT_CONNECT_TIMEOUT_MS
}

fn default_feed_poll_ms() -> u64 {
    DEFAULT_FEED_POLL_MS
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_apply() {
        let config: Config =
            serde_json::from_value(json!({"database": {"backend": "memory"}})).unwrap();
        assert_eq!(config.database.max_doc_bytes, 390_000);
        assert_eq!(config.database.max_docs_per_site, None);
        assert_eq!(config.database.store_options().max_doc_bytes, 390_000);
        assert_eq!(config.database.retry, RetryConfig::default());
        assert_eq!(
            config.database.store_options().retry,
            RetryPolicy::default()
        );
    }

    #[test]
    fn retry_settings_are_read_checked_and_written_back() {
        let read = |retry| {
            serde_json::from_value::<Config>(
                json!({"database": {"backend": "memory", "retry": retry}}),
            )
        };
        let config = read(
            json!({"max_retries": 0, "init_backoff_ms": 10, "max_backoff_ms": 10, "base": 1.0}),
        )
        .unwrap();
        let policy = config.database.store_options().retry;
        assert!(!policy.retries());
        assert_eq!(policy.backoff.bound(5), Duration::from_millis(10));
        let written = serde_json::to_value(&config).unwrap();
        assert_eq!(written["database"]["retry"]["max_retries"], 0);
        assert_eq!(serde_json::from_value::<Config>(written).unwrap(), config);
        // The default is not written out.
        let plain = read(json!({})).unwrap();
        assert!(
            serde_json::to_value(&plain).unwrap()["database"]
                .get("retry")
                .is_none()
        );

        let err = read(json!({"init_backoff_ms": 2000, "max_backoff_ms": 1000})).unwrap_err();
        assert!(err.to_string().contains("retry.init_backoff"), "{err}");
        let err = read(json!({"tries": 3})).unwrap_err();
        assert!(err.to_string().contains("tries"), "{err}");
    }

    #[test]
    fn indexes_are_read_and_checked() {
        let config: Config = serde_json::from_value(json!({"database": {
            "backend": "memory",
            "indexes": [{"collection": "tickets", "name": "by_status",
                         "fields": ["status", "-$updated_at"]}]
        }}))
        .unwrap();
        let options = config.database.store_options();
        let index = &options.indexes.for_collection("tickets")[0];
        assert_eq!(index.name(), "by_status");
        assert!(index.fields()[1].1);
        let err = serde_json::from_value::<Config>(json!({"database": {
            "backend": "memory",
            "indexes": [{"collection": "tickets", "name": "bad name", "fields": ["s"]}]
        }}))
        .unwrap_err();
        assert!(err.to_string().contains("bad name"), "{err}");
        let unique: Config = serde_json::from_value(json!({"database": {
            "backend": "memory",
            "indexes": [{"collection": "users", "name": "by_email", "fields": ["email"],
                         "unique": true}]
        }}))
        .unwrap();
        assert!(unique.database.indexes.for_collection("users")[0].is_unique());
        let metadata = serde_json::from_value::<Config>(json!({"database": {
            "backend": "memory",
            "indexes": [{"collection": "u", "name": "x", "fields": ["$updated_at"],
                         "unique": true}]
        }}))
        .unwrap_err();
        assert!(
            metadata.to_string().contains("data fields only"),
            "{metadata}"
        );
    }

    #[test]
    fn expiry_defaults_are_checked() {
        for (entries, named) in [
            (
                json!([{"collection": "s", "after_seconds": 0}]),
                "at least 1",
            ),
            (json!([{"collection": "__s", "after_seconds": 5}]), "__s"),
            (
                json!([{"collection": "s", "after_seconds": 5}, {"collection": "s", "after_seconds": 6}]),
                "twice",
            ),
            (json!([{"collection": "s", "after": 5}]), "after"),
        ] {
            let err = serde_json::from_value::<Config>(
                json!({"database": {"backend": "memory", "expiry": entries}}),
            )
            .unwrap_err();
            assert!(err.to_string().contains(named), "{err}");
        }
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = serde_json::from_value::<Config>(
            json!({"database": {"backend": "sqlite", "sqlite": {"pth": "x"}}}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("pth"), "{err}");
        let err = serde_json::from_value::<Config>(json!({"database": {"backend": "mongo"}}))
            .unwrap_err();
        assert!(err.to_string().contains("mongo"), "{err}");
    }

    #[test]
    fn only_a_relative_file_path_is_taken_from_the_config_folder() {
        let sqlite = |path: &str| DatabaseConfig {
            sqlite: Some(SqliteConfig::new(path)),
            ..serde_json::from_value(json!({"backend": "sqlite"})).unwrap()
        };
        let resolved = |path: &str, file: &str| {
            let mut database = sqlite(path);
            database.resolve_relative_paths(Path::new(file));
            database.sqlite.unwrap().path
        };
        let file = "/etc/app/app.toml";
        assert_eq!(resolved("app.db", file), Path::new("/etc/app/app.db"));
        assert_eq!(
            resolved("../d/app.db", file),
            Path::new("/etc/app/../d/app.db")
        );
        assert_eq!(resolved("/var/app.db", file), Path::new("/var/app.db"));
        assert_eq!(resolved(":memory:", file), Path::new(":memory:"));
        // A file in the working directory: its folder is the working directory.
        assert_eq!(resolved("app.db", "app.toml"), Path::new("app.db"));
        let mut memory: DatabaseConfig =
            serde_json::from_value(json!({"backend": "memory"})).unwrap();
        memory.resolve_relative_paths(Path::new(file));
        assert_eq!(memory.sqlite, None);
    }
}
