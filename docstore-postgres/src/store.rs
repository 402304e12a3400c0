//! `PostgresStore` and its `Driver` implementation: each call one statement or one
//! transaction ([`crate::write`]).

use crate::error::{Fail, pool};
use crate::feed::Feed;
use crate::sql::Statements;
use async_trait::async_trait;
use docstore::driver::{Driver, Fetched};
use docstore::feed::{ChangeCursor, ChangePage, FeedScope, FeedStart};
use docstore::query::CompiledQuery;
use docstore::request::{Answer, Request};
use docstore::{Document, Error, Explain, Key, Page, Recount, RecountMode, Result, StoreOptions};
use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The schema a URL without `?schema=` uses.
pub const DEFAULT_SCHEMA: &str = "docstore";

/// The PostgreSQL backend. See the [crate docs](crate). Cheap to clone: clones share the pool.
#[derive(Clone, Debug)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) pool: deadpool_postgres::Pool,
    config: tokio_postgres::Config,
    pub(crate) options: StoreOptions,
    pub(crate) sql: Statements,
    /// The declared indexes' key columns.
    pub(crate) columns: crate::keys::Columns,
    pub(crate) feed: Feed,
    documents_read: AtomicU64,
    /// How long the feed keeps a change.
    pub(crate) retention: Duration,
}

impl Inner {
    pub(crate) fn now(&self) -> i64 {
        self.options.clock.now()
    }
}

/// The server settings of every connection of the store, before the URL's own `options`
/// (which a URL may use to override them): each statement is planned once per connection,
/// generically. The store writes its statements for one plan — a read of a key range, a
/// key's row — and PostgreSQL's default would otherwise plan a statement anew at every
/// execution whenever its generic plan's estimate looks worse than the custom plans', as a
/// query's range read did once writes to other collections had moved the table's
/// statistics (twice the server's time per query, `docs/benchmarks.md`).
const SESSION_OPTIONS: &str = "-c plan_cache_mode=force_generic_plan";

/// `url`'s connection settings with [`SESSION_OPTIONS`].
fn connection_config(url: &str) -> Result<tokio_postgres::Config> {
    let mut config = tokio_postgres::Config::from_str(url)
        .map_err(|err| Error::invalid(format!("PostgreSQL URL: {err}")))?;
    let options = match config.get_options() {
        Some(theirs) => format!("{SESSION_OPTIONS} {theirs}"),
        None => SESSION_OPTIONS.to_owned(),
    };
    config.options(&options);
    Ok(config)
}

/// What a URL says beside libpq's parameters.
struct Settings {
    /// The URL without docstore's parameters.
    url: String,
    /// `schema` (default [`DEFAULT_SCHEMA`]).
    schema: String,
    /// `feed_retention_hours` (default 7 days).
    retention: Duration,
}

/// Takes docstore's parameters (`schema`, `feed_retention_hours`) out of `url`.
fn settings(url: &str) -> Result<Settings> {
    let ours = |name: &str| matches!(name, "schema" | "feed_retention_hours");
    let (url, parameters) = docstore::config::take_url_parameters(url, ours);
    let (mut schema, mut retention) = (DEFAULT_SCHEMA.to_owned(), crate::retention::DEFAULT);
    for (name, value) in parameters {
        if name == "schema" {
            schema = value.to_owned();
            continue;
        }
        let hours: u64 = value.parse().ok().filter(|&h| h > 0).ok_or_else(|| {
            Error::invalid(format!(
                "PostgreSQL URL: feed_retention_hours={value:?} is not a whole number of hours \
                 above 0"
            ))
        })?;
        retention = Duration::from_secs(hours.saturating_mul(3600));
    }
    Ok(Settings {
        url,
        schema,
        retention,
    })
}

impl PostgresStore {
    /// Opens the store at `url` (`postgres://user@host:port/db?schema=app`; the other
    /// parameters are libpq's, as `tokio-postgres` reads them) with the default options.
    pub async fn open(url: &str) -> Result<Self> {
        Self::open_with_options(url, StoreOptions::default()).await
    }

    /// Opens the store at `url` with `options`: creates its schema and tables when missing
    /// (`docs/contract.md`, "PostgreSQL"). A unique index declared over documents that share
    /// a value is [`Error::InvalidArgument`] naming them.
    pub async fn open_with_options(url: &str, options: StoreOptions) -> Result<Self> {
        let Settings {
            url,
            schema,
            retention,
        } = settings(url)?;
        crate::schema::check_name(&schema)?;
        let config = connection_config(&url)?;
        let manager = deadpool_postgres::Manager::new(config.clone(), tokio_postgres::NoTls);
        // Last in, first out: a call takes the connection the previous one returned, whose
        // server process is awake and warm, instead of cycling through all 16 (deadpool's
        // default): the selective query ran twice as fast (docs/benchmarks.md).
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(16)
            .queue_mode(deadpool_postgres::QueueMode::Lifo)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|err| Error::invalid(format!("PostgreSQL pool: {err}")))?;
        let mut client = pool.get().await.map_err(crate::error::pool)?;
        let now = options.clock.now();
        let feed_id = crate::schema::migrate(&mut client, &schema, &options.indexes, now)
            .await
            .map_err(Fail::into_error)?;
        drop(client);
        let columns = crate::keys::Columns::of(&options.indexes);
        let inner = Arc::new(Inner {
            pool,
            config,
            options,
            sql: Statements::new(&schema),
            columns,
            feed: Feed::new(&schema, feed_id),
            documents_read: AtomicU64::new(0),
            retention,
        });
        crate::retention::spawn(Arc::downgrade(&inner));
        Ok(PostgresStore { inner })
    }

    /// Removes the changes older than the feed's retention (`feed_retention_hours` in the
    /// URL, 7 days by default) by the store clock, now; the store also does it every minute.
    /// A cursor before what is kept is then [`Error::CursorExpired`].
    pub async fn prune_feed(&self) -> Result<()> {
        let pruned = crate::retention::prune(&self.inner).await;
        pruned.map(drop).map_err(Fail::into_error)
    }

    /// How many document rows this store's queries and `get_many` calls have read since it
    /// opened: what pages and walks cost, for tests and benchmarks that count reads.
    pub fn documents_read(&self) -> u64 {
        self.inner.documents_read.load(Ordering::Relaxed)
    }

    /// Drops the store's schema with everything in it (tests and tools).
    pub async fn drop_schema(&self) -> Result<()> {
        let client = self.client().await?;
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.inner.sql.schema);
        client.batch_execute(&sql).await.map_err(crate::error::sql)
    }

    async fn client(&self) -> Result<deadpool_postgres::Client> {
        self.inner.pool.get().await.map_err(pool)
    }

    fn target<'a>(
        &'a self,
        client: &'a deadpool_postgres::Client,
        site: &'a str,
        collection: &'a str,
    ) -> crate::query::Target<'a> {
        crate::query::Target {
            client,
            sql: &self.inner.sql,
            indexes: &self.inner.options.indexes,
            columns: &self.inner.columns,
            now: self.inner.now(),
            site,
            collection,
        }
    }

    /// Rows a read gave, for [`PostgresStore::documents_read`].
    fn count_read(&self, rows: u64) {
        self.inner.documents_read.fetch_add(rows, Ordering::Relaxed);
    }

    /// The row at `key` not expired now, if any, as `row` makes it.
    async fn get_row<T>(
        &self,
        key: &Key,
        row: impl Fn(&tokio_postgres::Row) -> std::result::Result<T, Fail>,
    ) -> Result<Option<T>> {
        let now = self.inner.now();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
            [&key.site(), &key.collection(), &key.id(), &now];
        Ok(self
            .query_rows(&self.inner.sql.read.get, &params, row)
            .await?
            .pop())
    }

    async fn query_rows<T>(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
        row: impl Fn(&tokio_postgres::Row) -> std::result::Result<T, Fail>,
    ) -> Result<Vec<T>> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached(sql)
            .await
            .map_err(crate::error::sql)?;
        let rows = client
            .query(&statement, params)
            .await
            .map_err(crate::error::sql)?;
        rows.iter()
            .map(|r| row(r).map_err(Fail::into_error))
            .collect()
    }
}

#[async_trait]
impl Driver for PostgresStore {
    fn options(&self) -> &StoreOptions {
        &self.inner.options
    }

    /// One transaction: the writes decided in order, applied, counted and logged together
    /// (see the `write` module).
    async fn apply(&self, request: Request<'_>) -> Result<Answer> {
        crate::write::run(&self.inner, &request).await
    }

    async fn get(&self, key: &Key) -> Result<Option<Document>> {
        self.get_row(key, |row| crate::rows::document(row, 0)).await
    }

    /// The data as the JSON text of the row: a typed read parses it once, into its type.
    async fn get_text(&self, key: &Key) -> Result<Option<Fetched>> {
        let found = self.get_row(key, |row| crate::rows::document_text(row, 0));
        Ok(found.await?.map(Fetched::Text))
    }

    /// One statement: one snapshot.
    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Document>>> {
        let arrays = crate::rows::KeyArrays::of(keys);
        let now = self.inner.now();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
            [&arrays.sites, &arrays.collections, &arrays.ids, &now];
        let found = self
            .query_rows(&self.inner.sql.read.get_many, &params, |row| {
                Ok((crate::rows::key(row)?, crate::rows::document(row, 2)?))
            })
            .await?;
        self.count_read(found.len() as u64);
        let mut found: std::collections::HashMap<Key, Document> = found.into_iter().collect();
        Ok(keys.iter().map(|key| found.remove(key)).collect())
    }

    async fn query(&self, site: &str, collection: &str, query: &CompiledQuery) -> Result<Page> {
        let client = self.client().await?;
        let (page, rows) = self
            .target(&client, site, collection)
            .run(query)
            .await
            .map_err(Fail::into_error)?;
        self.count_read(rows);
        Ok(page)
    }

    /// The planner's choice with PostgreSQL's plan of its statement; strongly consistent.
    async fn explain(
        &self,
        site: &str,
        collection: &str,
        query: &CompiledQuery,
    ) -> Result<Explain> {
        let client = self.client().await?;
        let target = self.target(&client, site, collection);
        target.explain(query).await.map_err(Fail::into_error)
    }

    async fn collections(&self, site: &str) -> Result<Vec<(String, u64)>> {
        let now = self.inner.now();
        self.query_rows(&self.inner.sql.read.collections, &[&site, &now], |row| {
            Ok((row.try_get(0)?, row.try_get::<_, i64>(1)? as u64))
        })
        .await
    }

    async fn count(&self, site: &str) -> Result<u64> {
        let counts = self
            .query_rows(
                &self.inner.sql.read.site_count,
                &[&site, &self.inner.now()],
                |row| Ok(row.try_get::<_, i64>(0)? as u64),
            )
            .await?;
        Ok(counts.into_iter().sum())
    }

    /// From the documents not expired: reads every row's site, so it costs a scan of the
    /// primary key.
    async fn sites(&self) -> Result<Vec<String>> {
        let now = self.inner.now();
        self.query_rows(&self.inner.sql.read.sites, &[&now], |row| {
            Ok(row.try_get(0)?)
        })
        .await
    }

    /// Counts and compares in one transaction (a repair sets the counters in it).
    async fn recount(&self, site: &str, mode: RecountMode) -> Result<Recount> {
        let mut client = self.client().await?;
        let sql = &self.inner.sql;
        let recounted = async {
            let tx = client.transaction().await?;
            let counted = tx.query(&sql.read.counted, &[&site]).await?;
            let collections: Vec<(String, u64)> = counted
                .iter()
                .map(|row| Ok((row.try_get(0)?, row.try_get::<_, i64>(1)? as u64)))
                .collect::<std::result::Result<_, Fail>>()?;
            let counters: BTreeMap<String, u64> = tx
                .query(&sql.read.counters, &[&site])
                .await?
                .iter()
                .map(|row| Ok((row.try_get(0)?, row.try_get::<_, i64>(1)? as u64)))
                .collect::<std::result::Result<_, Fail>>()?;
            let recount = Recount::compare(collections, counters);
            if mode == RecountMode::Repair {
                for change in &recount.changes {
                    let n = change.documents as i64;
                    tx.execute(&sql.write.set_counter, &[&site, &change.collection, &n])
                        .await?;
                }
            }
            tx.commit().await?;
            Ok::<_, Fail>(recount)
        };
        recounted.await.map_err(Fail::into_error)
    }

    /// In transactions of at most 200 documents, each removed with its change as a write on
    /// its key would (see the `write` module).
    async fn sweep_expired(&self, limit: usize) -> Result<usize> {
        let swept = crate::write::sweep(&self.inner, limit).await;
        swept.map_err(Fail::into_error)
    }

    fn supports_expiry(&self) -> bool {
        true
    }

    async fn changes(
        &self,
        scope: &FeedScope,
        start: &FeedStart,
        limit: usize,
    ) -> Result<ChangePage> {
        docstore::feed::check_page_size(limit)?;
        let mut client = self.client().await?;
        let feed = &self.inner.feed;
        feed.page(&mut client, &self.inner.sql.read, (scope, start, limit))
            .await
            .map_err(Fail::into_error)
    }

    /// Woken by this process's commits and by other processes' notifications; reads the
    /// head at least every second.
    async fn wait_for_changes(&self, after: &ChangeCursor) -> Result<()> {
        let feed = &self.inner.feed;
        let Ok(position) = feed.position(after) else {
            return Ok(());
        };
        feed.listen(&self.inner.config);
        let head = || async {
            let head = self.query_rows(&self.inner.sql.read.head, &[], |row| {
                Ok(row.try_get::<_, i64>(0)?)
            });
            Ok(head.await?.first().map_or(0, |&head| head as u64))
        };
        let poll = crate::feed::POLL_INTERVAL;
        feed.commits.wait_past(position as u64, poll, head).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_plan_generically_unless_the_url_says_otherwise() {
        let plain = connection_config("postgres://app@127.0.0.1:5432/app").unwrap();
        assert_eq!(plain.get_options(), Some(SESSION_OPTIONS));
        let theirs = "postgres://app@127.0.0.1/app?options=-c%20plan_cache_mode%3Dauto";
        let config = connection_config(theirs).unwrap();
        // Later settings win on the server: the URL's own come after ours.
        assert_eq!(
            config.get_options(),
            Some("-c plan_cache_mode=force_generic_plan -c plan_cache_mode=auto")
        );
        assert!(connection_config("postgres://app@host:notaport/app").is_err());
    }
}
