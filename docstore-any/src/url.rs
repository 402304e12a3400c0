//! Store URLs (`memory:`, `sqlite:PATH`, `dynamodb://TABLE`, `postgres://…`) read into the
//! `[database]` settings they stand for: the scheme and location first, then each parameter,
//! refused when unknown for the scheme, given twice, or not of its kind.

use crate::SQLITE_IN_MEMORY;
use docstore::config::{
    Backend, CounterMode, DatabaseConfig, DynamoDbConfig, PostgresConfig, SqliteConfig, Synchronous,
};
use docstore::{DEFAULT_MAX_DOC_BYTES, Error, Result};
use std::path::PathBuf;

/// The parameters every URL takes besides its scheme's.
const COMMON_PARAMETERS: [&str; 2] = ["max_doc_bytes", "max_docs_per_site"];

/// The URL parameters of `[database.retry]`, which every URL takes.
const RETRY_PARAMETERS: [&str; 5] = [
    "retry.max_retries",
    "retry.budget_ms",
    "retry.init_backoff_ms",
    "retry.max_backoff_ms",
    "retry.base",
];

const SQLITE_PARAMETERS: [&str; 8] = [
    "synchronous",
    "busy_timeout_ms",
    "feed",
    "feed_previous",
    "feed_retention_hours",
    "feed_poll_ms",
    "read_only",
    "share_file",
];

const DYNAMODB_PARAMETERS: [&str; 12] = [
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
];

/// The `[database]` settings a URL stands for.
pub fn parse_url(url: &str) -> Result<DatabaseConfig> {
    let (scheme, rest) = url.split_once(':').ok_or_else(|| {
        Error::invalid(format!(
            "store URL {url:?} has no scheme (expected memory:, sqlite:PATH, dynamodb://TABLE or postgres://…)"
        ))
    })?;
    let (location, params) = rest.split_once('?').unwrap_or((rest, ""));
    let mut database = located(url, scheme, location)?;
    // A PostgreSQL URL is the server's, but for the parameters every URL takes.
    let params = match database.postgres.as_mut() {
        Some(postgres) => {
            let (server, common) = split_common_parameters(url);
            postgres.url = server;
            common
        }
        None => params.to_owned(),
    };
    let mut seen = Vec::new();
    for (name, value) in form_urlencoded::parse(params.as_bytes()) {
        if seen.contains(&name) {
            return Err(Error::invalid(format!(
                "store URL parameter {name:?} is given more than once"
            )));
        }
        let parameter = Parameter {
            name: &name,
            value: &value,
        };
        if !set(&mut database, parameter)? {
            return Err(unknown(scheme, &name));
        }
        seen.push(name.clone());
    }
    database.retry.check()?;
    Ok(database)
}

/// The settings of `scheme` at `location`, every parameter at its default.
fn located(url: &str, scheme: &str, location: &str) -> Result<DatabaseConfig> {
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
    let unnamed = |what: &str| Error::invalid(format!("store URL {url:?}: {what}"));
    match scheme {
        "memory" if matches!(location, "" | "//") => {}
        "memory" => return Err(unnamed("memory: takes no location")),
        "sqlite" => {
            let path = location.strip_prefix("//").unwrap_or(location);
            if path.is_empty() {
                let needs = format!("sqlite: needs a file path (or {SQLITE_IN_MEMORY})");
                return Err(unnamed(&needs));
            }
            database.backend = Backend::Sqlite;
            database.sqlite = Some(SqliteConfig::new(PathBuf::from(path)));
        }
        "dynamodb" => {
            let table = location.strip_prefix("//").unwrap_or(location);
            let table = table.trim_end_matches('/');
            if table.is_empty() {
                return Err(unnamed("dynamodb:// needs a table name"));
            }
            database.backend = Backend::Dynamodb;
            database.dynamodb = Some(DynamoDbConfig::new(table));
        }
        "postgres" | "postgresql" => {
            database.backend = Backend::Postgres;
            let url = url.to_owned();
            database.postgres = Some(PostgresConfig { url });
        }
        other => {
            return Err(unnamed(&format!(
                "unknown backend {other:?} (expected memory, sqlite, dynamodb or postgres)"
            )));
        }
    }
    Ok(database)
}

/// The parameter `name` is not one the URLs of `scheme` take.
fn unknown(scheme: &str, name: &str) -> Error {
    let mut known = COMMON_PARAMETERS.to_vec();
    known.extend(RETRY_PARAMETERS);
    match scheme {
        "sqlite" => known.extend(SQLITE_PARAMETERS),
        "dynamodb" => known.extend(DYNAMODB_PARAMETERS),
        _ => {}
    }
    Error::invalid(format!(
        "store URL parameter {name:?} is not known for {scheme}: (known: {})",
        known.join(", ")
    ))
}

/// One `name=value` of a URL's query, read as the kind its setting is.
#[derive(Clone, Copy)]
struct Parameter<'a> {
    name: &'a str,
    value: &'a str,
}

impl Parameter<'_> {
    fn invalid(&self, is_not: &str) -> Error {
        let Parameter { name, value } = self;
        Error::invalid(format!("store URL parameter {name}={value:?} is {is_not}"))
    }

    fn number(&self) -> Result<u64> {
        self.value.parse().map_err(|_| self.invalid("not a number"))
    }

    fn small_number(&self) -> Result<u32> {
        u32::try_from(self.number()?).map_err(|_| self.invalid("too large"))
    }

    fn float(&self) -> Result<f64> {
        self.value.parse().map_err(|_| self.invalid("not a number"))
    }

    fn boolean(&self) -> Result<bool> {
        match self.value {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(self.invalid("not true or false")),
        }
    }

    /// One of `choices` (value and what it means), else not one of `names`.
    fn choice<T: Copy>(&self, choices: &[(&str, T)], names: &str) -> Result<T> {
        let chosen = choices.iter().find(|(text, _)| *text == self.value);
        chosen
            .map(|(_, meaning)| *meaning)
            .ok_or_else(|| self.invalid(&format!("not {names}")))
    }
}

/// Sets what `parameter` names in `database`; `false` when the URL's scheme takes no such
/// parameter.
fn set(database: &mut DatabaseConfig, parameter: Parameter<'_>) -> Result<bool> {
    if let Some(sqlite) = database.sqlite.as_mut()
        && set_sqlite(sqlite, parameter)?
    {
        return Ok(true);
    }
    if let Some(dynamodb) = database.dynamodb.as_mut()
        && set_dynamodb(dynamodb, parameter)?
    {
        return Ok(true);
    }
    set_common(database, parameter)
}

fn set_common(database: &mut DatabaseConfig, parameter: Parameter<'_>) -> Result<bool> {
    let retry = &mut database.retry;
    match parameter.name {
        "max_doc_bytes" => database.max_doc_bytes = parameter.number()? as usize,
        "max_docs_per_site" => database.max_docs_per_site = Some(parameter.number()?),
        "retry.max_retries" => retry.max_retries = parameter.small_number()?,
        "retry.budget_ms" => retry.budget_ms = parameter.number()?,
        "retry.init_backoff_ms" => retry.init_backoff_ms = parameter.number()?,
        "retry.max_backoff_ms" => retry.max_backoff_ms = parameter.number()?,
        "retry.base" => retry.base = parameter.float()?,
        _ => return Ok(false),
    }
    Ok(true)
}

fn set_sqlite(sqlite: &mut SqliteConfig, parameter: Parameter<'_>) -> Result<bool> {
    match parameter.name {
        "synchronous" => {
            let modes = [("full", Synchronous::Full), ("normal", Synchronous::Normal)];
            sqlite.synchronous = parameter.choice(&modes, "full or normal")?;
        }
        "busy_timeout_ms" => sqlite.busy_timeout_ms = parameter.number()?,
        "feed" => {
            let switch = [
                ("true", true),
                ("on", true),
                ("false", false),
                ("off", false),
            ];
            sqlite.feed = parameter.choice(&switch, "true or false")?;
        }
        "feed_previous" => sqlite.feed_previous = parameter.boolean()?,
        "feed_retention_hours" => sqlite.feed_retention_hours = parameter.number()?,
        "feed_poll_ms" => sqlite.feed_poll_ms = parameter.number()?,
        "read_only" => sqlite.read_only = parameter.boolean()?,
        "share_file" => sqlite.share_file = parameter.boolean()?,
        _ => return Ok(false),
    }
    Ok(true)
}

fn set_dynamodb(d: &mut DynamoDbConfig, parameter: Parameter<'_>) -> Result<bool> {
    match parameter.name {
        "region" => d.region = Some(parameter.value.to_owned()),
        "endpoint" => d.endpoint = Some(parameter.value.to_owned()),
        "max_scan" => d.max_scan = parameter.number()? as usize,
        "timeout_ms" => d.timeout_ms = parameter.number()?,
        "operation_timeout_ms" => d.operation_timeout_ms = parameter.number()?,
        "connect_timeout_ms" => d.connect_timeout_ms = parameter.number()?,
        "feed_poll_ms" => d.feed_poll_ms = parameter.number()?,
        "counter_shards" => d.counter_shards = parameter.small_number()?,
        "collection_partitions" => d.collection_partitions = parameter.small_number()?,
        "index_partitions" => d.index_partitions = parameter.small_number()?,
        "trust_request_tokens" => d.trust_request_tokens = parameter.boolean()?,
        "counters" => {
            let modes = [("exact", CounterMode::Exact), ("fast", CounterMode::Fast)];
            d.counters = parameter.choice(&modes, "exact or fast")?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// A PostgreSQL URL without the parameters every store URL takes (`max_doc_bytes`,
/// `max_docs_per_site`, `retry.*`; PostgreSQL would refuse them), and those parameters.
fn split_common_parameters(url: &str) -> (String, String) {
    let common = |name: &str| COMMON_PARAMETERS.contains(&name) || RETRY_PARAMETERS.contains(&name);
    let (server, common) = docstore::config::take_url_parameters(url, common);
    let common: Vec<String> = common
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    (server, common.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Not;

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

    /// Each kind of setting names the parameter, the value and what it must be.
    #[test]
    fn a_value_of_the_wrong_kind_says_what_it_must_be() {
        let cases = [
            (
                "sqlite:a.db?synchronous=off",
                "synchronous=\"off\" is not full or normal",
            ),
            ("sqlite:a.db?feed=yes", "feed=\"yes\" is not true or false"),
            (
                "sqlite:a.db?read_only=1",
                "read_only=\"1\" is not true or false",
            ),
            (
                "sqlite:a.db?busy_timeout_ms=-1",
                "busy_timeout_ms=\"-1\" is not a number",
            ),
            (
                "dynamodb://t?counters=slow",
                "counters=\"slow\" is not exact or fast",
            ),
            (
                "dynamodb://t?counter_shards=9999999999",
                "counter_shards=\"9999999999\" is too large",
            ),
            (
                "dynamodb://t?trust_request_tokens=no",
                "trust_request_tokens=\"no\" is not true or false",
            ),
            ("memory:?retry.base=x", "retry.base=\"x\" is not a number"),
        ];
        for (url, says) in cases {
            let message = invalid(url);
            assert!(message.contains(says), "{url}: {message}");
        }
        let unknown = invalid("sqlite:a.db?max_scan=5");
        assert!(
            unknown.contains("\"max_scan\" is not known for sqlite"),
            "{unknown}"
        );
        assert!(
            unknown.contains("share_file") && !unknown.contains("region"),
            "{unknown}"
        );
        assert!(
            parse_url("sqlite:a.db?feed=off")
                .unwrap()
                .sqlite
                .unwrap()
                .feed
                .not()
        );
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
}
