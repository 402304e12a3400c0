//! The whole conformance suite against a real PostgreSQL server: run it under
//! `scripts/with-postgres`, which starts a private server and passes `DOCSTORE_POSTGRES_URL`.
//! Every store the suite opens is a new `PostgresStore` (own pool) on one schema of this run
//! (a fresh name per run), so cases also run against each other's writers.

use async_trait::async_trait;
use docstore::feed::{FeedScope, FeedStart};
use docstore::{Data, Key, ManualClock, Store, StoreOptions};
use docstore_postgres::PostgresStore;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

/// The server's URL with this run's schema: a test without a server fails, saying how to
/// run it (a backend is never skipped in silence).
mod common;

fn url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| common::schema_url("conformance"))
}

struct PostgresHarness;

/// The URL a store with `options` opens: this run's schema, or — for a store without
/// background sweeps, an expiry case's or a property run's on a manual clock — a schema of
/// its own. Its documents read as expired long ago to the other cases' stores, on the system
/// clock, whose sweeps (of the whole schema) would remove them mid-case.
fn url_for(options: &StoreOptions) -> String {
    static OWN: AtomicU32 = AtomicU32::new(0);
    match options.sweep_interval {
        Some(_) => url().to_owned(),
        None => format!("{}_own_{}", url(), OWN.fetch_add(1, Ordering::Relaxed)),
    }
}

#[async_trait]
impl conformance_tests::Harness for PostgresHarness {
    async fn open(&self, options: StoreOptions) -> Store {
        let driver = PostgresStore::open_with_options(&url_for(&options), options).await;
        Store::new(driver.expect("open the store"))
    }

    /// A store with a feed retention of one hour on a manual clock, in a schema of its own
    /// (pruning the shared one would expire the other cases' cursors): two writes, two hours,
    /// a prune; the cursor from before them is past the retention.
    async fn expired_feed(&self) -> Option<(Store, docstore::ChangeCursor)> {
        static STORES: AtomicU32 = AtomicU32::new(0);
        let n = STORES.fetch_add(1, Ordering::Relaxed);
        let url = format!("{}_expired_{n}&feed_retention_hours=1", url());
        let clock = Arc::new(ManualClock::new(1_000_000_000));
        let options = StoreOptions::default().with_clock(clock.clone());
        let driver = PostgresStore::open_with_options(&url, options)
            .await
            .unwrap();
        let store = Store::new(driver.clone());
        let all = FeedScope::whole_store();
        let start = store.changes(&all, &FeedStart::Now, 1).await.unwrap().next;
        for id in ["a", "b"] {
            let key = Key::new("s", "c", id).unwrap();
            store.put(&key, Data::new(), "").await.unwrap();
        }
        clock.advance(2 * 3600 * 1_000_000_000);
        driver.prune_feed().await.unwrap();
        Some((store, start))
    }

    /// Declared indexes serve queries; unique indexes and expiry are kept.
    fn capabilities(&self) -> conformance_tests::Capabilities {
        conformance_tests::Capabilities::default()
            .with_secondary_indexes(true)
            .with_feed_previous(true)
    }
}

conformance_tests::conformance_suite!(PostgresHarness);

/// The contract's families again with indexes declared on the fields the cases query.
mod indexed {
    use super::*;
    conformance_tests::index_suite!(PostgresHarness);
}
