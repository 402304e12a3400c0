//! [`DynamoStore`]: construction, table creation and the [`Store`] implementation, which
//! hands each call to the module doing it.

use crate::counters::MAX_COUNTER_SHARDS;
use crate::errors::map_sdk_error;
use crate::index::{IndexState, gsi_pk, gsi_sk};
use crate::item::{MAX_DOC_BYTES_LIMIT, PK, SK};
use crate::writes::Edit;
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType, TableStatus,
};
use aws_sdk_dynamodbstreams::Client as StreamsClient;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use docstore::config::{CounterMode, DynamoDbConfig};
use docstore::driver::Driver;
use docstore::query::CompiledQuery;
use docstore::request::{Answer, Call, Request};
use docstore::{Document, Error, Explain, Key, Page, Recount, RecountMode, Result, StoreOptions};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The DynamoDB backend: one table in the single-table layout of `docs/contract.md`. See the [crate docs](crate).
#[derive(Clone, Debug)]
pub struct DynamoStore {
    pub(crate) client: Client,
    /// The DynamoDB Streams client the change feed reads with (same credentials, region and
    /// endpoint as `client`).
    pub(crate) streams: StreamsClient,
    /// How long a feed watcher at the end of the feed waits before it polls again.
    pub(crate) feed_poll: Duration,
    pub(crate) table: String,
    pub(crate) max_scan: usize,
    pub(crate) counters: CounterMode,
    /// How many items each collection counter is spread over (see [`crate::counters`]).
    pub(crate) counter_shards: u32,
    /// Over how many partition keys a table this store is the first to use spreads each
    /// collection (see [`crate::layout`]).
    pub(crate) collection_partitions: u32,
    /// The layout of the table, once read (see [`crate::layout`]).
    pub(crate) layout: Arc<tokio::sync::OnceCell<crate::layout::Layout>>,
    /// Over how many GSI partitions an index added by this store spreads its keys.
    pub(crate) index_partitions: u32,
    /// How long a call may go on trying again after throttling and conflicts.
    pub(crate) operation_timeout: Duration,
    pub(crate) trust_request_tokens: bool,
    pub(crate) options: StoreOptions,
    /// The table's index records as last read (see [`crate::index`]).
    pub(crate) registry: Arc<Mutex<Option<Arc<crate::index::Registry>>>>,
    /// The change feed's stream ARN and shard list between reads (see `feed::cache`).
    pub(crate) feed_cache: Arc<crate::feed::FeedCache>,
    /// The sites with expiry markers as this store knows them (see [`crate::expiring`]).
    pub(crate) expiring_sites: Arc<crate::expiring::ExpiringSites>,
    /// The revisions this store last wrote or read, which its deletes need not read first
    /// (see [`crate::known`]).
    pub(crate) known: Arc<crate::known::KnownRevisions>,
}

/// The SDK's retries as this backend sets them in [`DynamoStore::connect`]: the standard
/// mode's 3 attempts, with a first backoff of at most 20 ms (then 40 ms), so that a resend
/// follows its lost attempt quickly and finds its write still in the item's write history.
pub(crate) fn write_retry() -> RetryConfig {
    RetryConfig::standard()
        .with_max_attempts(3)
        .with_initial_backoff(Duration::from_millis(20))
}

/// The deadlines of `config` as the SDK's timeout settings.
fn timeouts(config: &DynamoDbConfig) -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
        .operation_attempt_timeout(Duration::from_millis(config.timeout_ms))
        .operation_timeout(Duration::from_millis(config.operation_timeout_ms))
        .build()
}

impl DynamoStore {
    /// The backoff of a call starting now: it may try again until `operation_timeout_ms`.
    pub(crate) fn backoff(&self) -> crate::backoff::Backoff {
        crate::backoff::Backoff::until(tokio::time::Instant::now() + self.operation_timeout)
    }

    /// Connects with the standard AWS configuration chain (credentials, region), overridden
    /// by `config.region` and `config.endpoint` when set. The DynamoDB Streams client of the
    /// change feed is built from the same configuration.
    ///
    /// The SDK is built lean: environment, profile, web identity, ECS and EC2 instance
    /// credentials work; SSO and `credential_process` profiles would need `aws-config`'s
    /// `sso` / `credentials-process` features — build the client yourself and use
    /// [`from_client`](Self::from_client) for those.
    ///
    /// Fails with [`Error::InvalidArgument`] when `options.max_doc_bytes` is above
    /// [`MAX_DOC_BYTES_LIMIT`](crate::MAX_DOC_BYTES_LIMIT), `config.max_scan` is 0 or
    /// `config.table` is not a DynamoDB table name (3 to 255 characters, each a letter,
    /// digit, `_`, `-` or `.`). Nothing is
    /// sent yet: a missing table shows on the first call (or create it with
    /// [`create_table`](Self::create_table)).
    pub async fn connect(config: &DynamoDbConfig, options: StoreOptions) -> Result<Self> {
        check_settings(config, &options)?;
        check_connection(config)?;
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
        if let Some(region) = &config.region {
            loader = loader.region(aws_config::Region::new(region.clone()));
        }
        if let Some(endpoint) = &config.endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        let loaded = loader.retry_config(write_retry()).load().await;
        let mut streams = aws_sdk_dynamodbstreams::config::Builder::from(&loaded);
        if let Some(endpoint) = &config.endpoint {
            // Explicit, so that an `AWS_ENDPOINT_URL_DYNAMODB_STREAMS` in the environment
            // cannot send the feed to another service than the writes.
            streams = streams.endpoint_url(endpoint);
        }
        Self::from_client(
            Client::new(&loaded),
            StreamsClient::from_conf(streams.build()),
            config,
            options,
        )
    }

    /// Uses existing SDK clients (with their own region, endpoint, HTTP client, retries and
    /// interceptors): `client` for the table, `streams` for the change feed, which must
    /// reach the same table — same credentials, region and endpoint (an SDK client cannot
    /// hand its credentials or endpoint on, so the feed's client cannot be made from
    /// `client`). `config.region` and `config.endpoint` are ignored, and the deadlines of
    /// `config` (`timeout_ms`, `operation_timeout_ms`, `connect_timeout_ms`) replace both
    /// clients'. The same checks as [`connect`](Self::connect).
    ///
    /// ```no_run
    /// use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
    /// use docstore_dynamodb::{DynamoStore, aws_sdk_dynamodbstreams};
    ///
    /// let (region, endpoint) = (Region::new("us-east-1"), "http://127.0.0.1:8000");
    /// let credentials = Credentials::new("key", "secret", None, None, "example");
    /// let client = aws_sdk_dynamodb::Client::from_conf(
    ///     aws_sdk_dynamodb::Config::builder()
    ///         .behavior_version(BehaviorVersion::latest())
    ///         .region(region.clone())
    ///         .endpoint_url(endpoint)
    ///         .credentials_provider(credentials.clone())
    ///         .build(),
    /// );
    /// let streams = aws_sdk_dynamodbstreams::Client::from_conf(
    ///     aws_sdk_dynamodbstreams::Config::builder()
    ///         .behavior_version(BehaviorVersion::latest())
    ///         .region(region)
    ///         .endpoint_url(endpoint)
    ///         .credentials_provider(credentials)
    ///         .build(),
    /// );
    /// let config = docstore::config::DynamoDbConfig::new("docs");
    /// let store = DynamoStore::from_client(client, streams, &config, Default::default())?;
    /// # Ok::<(), docstore::Error>(())
    /// ```
    ///
    /// Keep the client's retry backoff short (as [`connect`](Self::connect) sets it: 20 ms,
    /// then 40 ms): a resend that comes late may find its write displaced from the item's
    /// write history by other writers, and then answers `Unavailable`.
    pub fn from_client(
        client: Client,
        streams: StreamsClient,
        config: &DynamoDbConfig,
        options: StoreOptions,
    ) -> Result<Self> {
        check_settings(config, &options)?;
        let client = Client::from_conf(
            client
                .config()
                .to_builder()
                .timeout_config(timeouts(config))
                .build(),
        );
        let streams = StreamsClient::from_conf(
            streams
                .config()
                .to_builder()
                .timeout_config(timeouts(config))
                .build(),
        );
        Ok(DynamoStore {
            client,
            streams,
            feed_poll: Duration::from_millis(config.feed_poll_ms),
            table: config.table.clone(),
            max_scan: config.max_scan,
            counters: config.counters,
            counter_shards: config.counter_shards,
            collection_partitions: config.collection_partitions,
            layout: Arc::default(),
            index_partitions: config.index_partitions,
            operation_timeout: Duration::from_millis(config.operation_timeout_ms),
            trust_request_tokens: config.trust_request_tokens,
            options,
            registry: Arc::default(),
            feed_cache: Arc::default(),
            expiring_sites: Arc::default(),
            known: Arc::default(),
        })
    }

    /// Creates the table (string `pk` hash key, string `sk` range key, on-demand billing, a
    /// DynamoDB stream of new and old images for the change feed) with
    /// one GSI per declared index of the store's options (see the crate docs, "Indexes": the index of a
    /// collection's `n`-th declaration is slot `n`), records those indexes as built, and waits
    /// until the table is active. A table that already exists is left as it is: add indexes
    /// to it with [`add_index`](Self::add_index) and [`build_index`](Self::build_index)
    /// (`docstore index add|build`). Meant for development and tests: production tables belong
    /// to infrastructure code.
    pub async fn create_table(&self) -> Result<()> {
        let attribute = |name: &str, kind: ScalarAttributeType| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(kind)
                .build()
                .expect("name and type are set")
        };
        let key = |name: &str, key_type| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(key_type)
                .build()
                .expect("name and type are set")
        };
        let slots = crate::index_admin::declared_slots(&self.options.indexes);
        let mut request = self
            .client
            .create_table()
            .table_name(&self.table)
            .attribute_definitions(attribute(PK, ScalarAttributeType::S))
            .attribute_definitions(attribute(SK, ScalarAttributeType::S))
            .key_schema(key(PK, KeyType::Hash))
            .key_schema(key(SK, KeyType::Range))
            .stream_specification(crate::stream_admin::stream_specification())
            .billing_mode(BillingMode::PayPerRequest);
        let used: std::collections::BTreeSet<usize> = slots.iter().map(|(_, slot)| *slot).collect();
        for slot in &used {
            request = request
                .attribute_definitions(attribute(&gsi_pk(*slot), ScalarAttributeType::S))
                .attribute_definitions(attribute(&gsi_sk(*slot), ScalarAttributeType::B))
                .global_secondary_indexes(crate::index_admin::gsi(*slot));
        }
        let created = request.send().await;
        let fresh = match created {
            Ok(_) => true,
            Err(err) if err.code() == Some("ResourceInUseException") => false,
            Err(err) => return Err(self.error("CreateTable", err)),
        };
        self.wait_until_active(None).await?;
        if fresh {
            // Recorded now rather than by the first call, which would look whether the table
            // is empty first.
            self.record_new_layout().await?;
            let now = self.options.clock.now();
            for (index, slot) in slots {
                self.register(index, slot, IndexState::Built, now).await?;
            }
            self.expire_delete_records().await;
        }
        Ok(())
    }

    /// Turns on DynamoDB's time to live on `expires` ([`crate::ttl_admin`]), so delete records
    /// and stamps go once their window is over and an expired document no sweep removed goes
    /// a day after its expiry. A service without time to live (some emulators) keeps them;
    /// reads ignore them either way, so it only costs storage, and the warning says so.
    async fn expire_delete_records(&self) {
        if let Err(err) = self.update_ttl().await {
            tracing::warn!(
                table = %self.table,
                error = %err,
                "time to live could not be enabled: records of deletes stay after their window \
                 and expired documents until a sweep removes them (they are ignored once \
                 expired)"
            );
        }
    }

    /// Waits until the table, and the GSI `index` when given, are active.
    pub(crate) async fn wait_until_active(&self, index: Option<&str>) -> Result<()> {
        for _ in 0..3_000 {
            let described = self
                .client
                .describe_table()
                .table_name(&self.table)
                .send()
                .await
                .map_err(|e| self.error("DescribeTable", e))?;
            let table = described.table();
            let table_active = table.and_then(|t| t.table_status()) == Some(&TableStatus::Active);
            let index_active = index.is_none_or(|name| {
                table
                    .map(|t| t.global_secondary_indexes())
                    .unwrap_or_default()
                    .iter()
                    .any(|g| {
                        g.index_name() == Some(name)
                            && g.index_status()
                                == Some(&aws_sdk_dynamodb::types::IndexStatus::Active)
                    })
            });
            if table_active && index_active {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(Error::Unavailable {
            message: format!(
                "DynamoDB table `{}`{} did not become active",
                self.table,
                index.map(|i| format!(" (index {i})")).unwrap_or_default()
            ),
            source: None,
            write_id: None,
        })
    }

    /// The table this store uses.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// An SDK failure of `operation` as a docstore error.
    pub(crate) fn error<E>(&self, operation: &str, err: SdkError<E, HttpResponse>) -> Error
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        map_sdk_error(&self.table, operation, err)
    }
}

/// A region and endpoint the SDK can use: a malformed one would otherwise surface on every
/// call, as a panic inside the SDK (empty endpoint) or as a transient-looking error.
fn check_connection(config: &DynamoDbConfig) -> Result<()> {
    if let Some(region) = &config.region {
        let valid = !region.is_empty()
            && region
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !valid {
            return Err(Error::invalid(format!(
                "database.dynamodb.region {region:?} is not a region name (e.g. eu-west-1)"
            )));
        }
    }
    if let Some(endpoint) = &config.endpoint {
        let host = endpoint
            .strip_prefix("http://")
            .or_else(|| endpoint.strip_prefix("https://"));
        let valid = host.is_some_and(|host| {
            !host.is_empty() && !host.starts_with('/') && !host.contains(char::is_whitespace)
        });
        if !valid {
            return Err(Error::invalid(format!(
                "database.dynamodb.endpoint {endpoint:?} is not an http:// or https:// URL"
            )));
        }
    }
    Ok(())
}

fn check_settings(config: &DynamoDbConfig, options: &StoreOptions) -> Result<()> {
    if options.max_doc_bytes > MAX_DOC_BYTES_LIMIT {
        return Err(Error::invalid(format!(
            "max_doc_bytes = {} does not fit in one DynamoDB item (400 KB) with the other \
             attributes; the DynamoDB backend allows at most {MAX_DOC_BYTES_LIMIT}",
            options.max_doc_bytes
        )));
    }
    if config.max_scan == 0 {
        return Err(Error::invalid(
            "database.dynamodb.max_scan must be at least 1",
        ));
    }
    if config.timeout_ms == 0 || config.operation_timeout_ms == 0 || config.connect_timeout_ms == 0
    {
        return Err(Error::invalid(
            "database.dynamodb timeouts (timeout_ms, operation_timeout_ms, connect_timeout_ms) \
             must be at least 1 ms",
        ));
    }
    for (name, value) in [
        ("counter_shards", config.counter_shards),
        ("collection_partitions", config.collection_partitions),
        ("index_partitions", config.index_partitions),
    ] {
        if !(1..=MAX_COUNTER_SHARDS).contains(&value) {
            return Err(Error::invalid(format!(
                "database.dynamodb.{name} = {value} is not between 1 and {MAX_COUNTER_SHARDS}"
            )));
        }
    }
    if config.feed_poll_ms == 0 {
        return Err(Error::invalid(
            "database.dynamodb.feed_poll_ms must be at least 1 ms",
        ));
    }
    check_table_name(&config.table)
}

/// DynamoDB's rule for table names: 3 to 255 characters, each a letter, digit, `_`, `-`
/// or `.`. Checked when the store is opened, so that a bad name is one clear
/// [`Error::InvalidArgument`] instead of the service's refusal on every call.
fn check_table_name(table: &str) -> Result<()> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    let length = table.chars().count();
    if (3..=255).contains(&length) && table.chars().all(allowed) {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "database.dynamodb.table {table:?} is not a DynamoDB table name: 3 to 255 characters, \
         each a letter, digit, '_', '-' or '.'"
    )))
}

#[async_trait]
impl Driver for DynamoStore {
    fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// A single call by its own conditional write (see the `writes` module), a batch by
    /// `TransactWriteItems` (see the `batch` module): each costs the requests it did as its
    /// own method.
    async fn apply(&self, request: Request<'_>) -> Result<Answer> {
        let origin = request.origin();
        Ok(match request.call() {
            Call::Create { key, data } => {
                Answer::written(self.create_document(key, data.clone(), origin).await?)
            }
            Call::Put { key, data } => {
                Answer::written(self.put_document(key, data.clone(), origin).await?)
            }
            Call::Update {
                key,
                patch,
                expected: None,
            } => Answer::written(self.update_document(key, patch, origin).await?),
            Call::Update {
                key,
                patch,
                expected: Some(expected),
            } => {
                let edit = Edit::Merge(patch);
                Answer::written(self.update_document_if(key, edit, expected, origin).await?)
            }
            Call::ReplaceIf {
                key,
                data,
                expected,
            } => {
                let edit = Edit::Replace(data.clone());
                Answer::written(self.update_document_if(key, edit, expected, origin).await?)
            }
            Call::Delete { key, expected } => {
                // `delete_if` of nothing: NotFound, made by the front end from the answer.
                Answer::deleted(self.delete_document(key, expected, origin).await?)
            }
            Call::Restore { key, document } => {
                self.restore_document(key, document, origin).await?;
                Answer::written(document.clone())
            }
            Call::Batch(batch) => Answer::Applied(self.write_all_items(&batch, origin).await?),
        })
    }

    /// An expired document reads as absent (`docs/contract.md`, "Expiry").
    async fn get(&self, key: &Key) -> Result<Option<Document>> {
        let now = self.options.clock.now();
        let read = self.read(key).await?;
        match &read {
            Some(stored) => self.known.remember_read(key, stored),
            None => self.known.forget(key),
        }
        Ok(read
            .map(|stored| stored.doc)
            .filter(|doc| !doc.is_expired(now)))
    }

    async fn query(&self, site: &str, collection: &str, query: &CompiledQuery) -> Result<Page> {
        self.run_query(site, collection, query).await
    }

    async fn explain(
        &self,
        site: &str,
        collection: &str,
        query: &CompiledQuery,
    ) -> Result<Explain> {
        self.explain_query(site, collection, query).await
    }

    async fn collections(&self, site: &str) -> Result<Vec<(String, u64)>> {
        self.read_counters(site).await
    }

    async fn count(&self, site: &str) -> Result<u64> {
        Ok(self.read_counters(site).await?.iter().map(|(_, n)| n).sum())
    }

    /// A paginated Scan of the table's keys: it reads the whole table (see the crate docs,
    /// "Table layout"), as `recount` does.
    async fn sites(&self) -> Result<Vec<String>> {
        self.scan_sites().await
    }

    async fn recount(&self, site: &str, mode: RecountMode) -> Result<Recount> {
        self.recount_site(site, mode).await
    }

    /// Read from the table's DynamoDB stream: see the crate docs, "Change feed".
    ///
    /// The read runs in a task of its own, so that its requests finish even when the caller
    /// stops polling mid-read (a `select!` that moves on, a watch left idle while the caller
    /// does something else): a request left half-sent holds its connection, and a server
    /// that takes one connection at a time (moto as the tests run it) then answers nobody
    /// else until the request times out. A read that nobody awaits any more still ends: it
    /// reads at most one page.
    async fn changes(
        &self,
        scope: &docstore::feed::FeedScope,
        start: &docstore::FeedStart,
        limit: usize,
    ) -> Result<docstore::feed::ChangePage> {
        let store = self.clone();
        let (scope, start) = (scope.clone(), start.clone());
        let read =
            tokio::spawn(async move { store.read_changes(&scope, &start, limit).await }).await;
        match read {
            Ok(page) => page,
            Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
            Err(err) => Err(Error::Backend {
                message: format!("the change feed read of `{}` was cancelled", self.table),
                source: Some(Box::new(err)),
            }),
        }
    }

    /// Streams has no push: waits `feed_poll_ms`, after which the caller reads again.
    async fn wait_for_changes(&self, _after: &docstore::ChangeCursor) -> Result<()> {
        tokio::time::sleep(self.feed_poll).await;
        Ok(())
    }

    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Document>>> {
        self.get_many_items(keys).await
    }

    /// Expiry is kept with markers and the sweep: see the [crate docs](crate), "Expiring
    /// documents".
    fn supports_expiry(&self) -> bool {
        true
    }

    /// Due markers of the registered sites, at most `limit`, each document removed with its
    /// expiry stamp: see the [crate docs](crate), "Expiring documents".
    async fn sweep_expired(&self, limit: usize) -> Result<usize> {
        self.sweep_expired_documents(limit).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(max_scan: usize) -> DynamoDbConfig {
        DynamoDbConfig {
            max_scan,
            ..DynamoDbConfig::new("docs")
        }
    }

    #[test]
    fn settings_beyond_an_item_are_refused() {
        let options = StoreOptions::default();
        check_settings(&config(1), &options).unwrap();
        let too_big = StoreOptions::default().with_max_doc_bytes(MAX_DOC_BYTES_LIMIT + 1);
        let err = check_settings(&config(1), &too_big).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains("max_doc_bytes")),
            "{err}"
        );
        let fits = StoreOptions::default().with_max_doc_bytes(MAX_DOC_BYTES_LIMIT);
        check_settings(&config(1), &fits).unwrap();
        assert!(check_settings(&config(0), &options).is_err());
    }

    #[test]
    fn table_names_follow_dynamodb_rules() {
        let options = StoreOptions::default();
        for good in ["abc", "docs", "my_table-1.v2", &"x".repeat(255)] {
            let config = DynamoDbConfig::new(good);
            check_settings(&config, &options).unwrap_or_else(|e| panic!("{good}: {e}"));
        }
        for bad in [
            "",
            "t",
            "ab",
            "has space",
            "tab/le",
            "é-table",
            &"x".repeat(256),
        ] {
            let err = check_settings(&DynamoDbConfig::new(bad), &options).unwrap_err();
            assert!(
                matches!(&err, Error::InvalidArgument(m) if m.contains("3 to 255 characters")),
                "{bad:?}: {err}"
            );
        }
    }
}
