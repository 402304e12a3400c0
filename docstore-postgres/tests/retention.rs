//! The feed's retention on a real server (run under `scripts/with-postgres`): what a prune
//! removes and keeps, the cursors it expires, the URL parameter, and a schema of the first
//! version upgraded in place.

use docstore::feed::{ChangeCursor, FeedScope, FeedStart};
use docstore::{Data, Error, Key, ManualClock, Store, StoreOptions};
use docstore_postgres::PostgresStore;
use futures_util::StreamExt;
use std::sync::Arc;

const HOUR: i64 = 3600 * 1_000_000_000;

mod common;

/// The server's URL with a schema of its own for `name`, and `parameters`.
fn url(name: &str, parameters: &str) -> String {
    format!(
        "{}{parameters}",
        common::schema_url(&format!("retention_{name}"))
    )
}

async fn open(url: &str, clock: &Arc<ManualClock>) -> (PostgresStore, Store) {
    let options = StoreOptions::default().with_clock(clock.clone());
    let driver = PostgresStore::open_with_options(url, options)
        .await
        .unwrap();
    (driver.clone(), Store::new(driver))
}

async fn put(store: &Store, id: &str) -> ChangeCursor {
    let key = Key::new("s", "c", id).unwrap();
    store.put(&key, Data::new(), "w").await.unwrap();
    let all = FeedScope::whole_store();
    store.changes(&all, &FeedStart::Now, 1).await.unwrap().next
}

async fn ids_from(store: &Store, start: FeedStart) -> docstore::Result<Vec<String>> {
    let page = store
        .changes(&FeedScope::whole_store(), &start, 100)
        .await?;
    Ok(page.changes.iter().map(|c| c.key.id().to_owned()).collect())
}

#[tokio::test]
async fn a_prune_removes_the_old_changes_and_expires_only_the_cursors_before_them() {
    let clock = Arc::new(ManualClock::new(10 * HOUR));
    let (driver, store) = open(&url("prune", "&feed_retention_hours=2"), &clock).await;
    let after_a = put(&store, "a").await;
    let after_b = put(&store, "b").await;
    clock.advance(HOUR);
    let after_c = put(&store, "c").await;
    clock.advance(HOUR + HOUR / 2); // a and b are 2.5 hours old, c 1.5
    driver.prune_feed().await.unwrap();

    assert_eq!(ids_from(&store, FeedStart::Oldest).await.unwrap(), ["c"]);
    let expired = ids_from(&store, FeedStart::After(after_a.clone())).await;
    assert!(
        matches!(expired, Err(Error::CursorExpired(_))),
        "{expired:?}"
    );
    let mut watch = store.watch(FeedScope::whole_store(), FeedStart::After(after_a));
    assert!(matches!(
        watch.next().await,
        Some(Err(Error::CursorExpired(_)))
    ));
    // The last pruned change's cursor still reads everything after it.
    let kept = ids_from(&store, FeedStart::After(after_b)).await.unwrap();
    assert_eq!(kept, ["c"]);
    assert!(
        ids_from(&store, FeedStart::After(after_c.clone()))
            .await
            .unwrap()
            .is_empty()
    );

    // Everything old: the feed is empty, its end stays where it was, and new changes follow.
    clock.advance(2 * HOUR);
    driver.prune_feed().await.unwrap();
    assert!(
        ids_from(&store, FeedStart::Oldest)
            .await
            .unwrap()
            .is_empty()
    );
    let now = store
        .changes(&FeedScope::whole_store(), &FeedStart::Now, 1)
        .await
        .unwrap();
    assert_eq!(
        now.next, after_c,
        "the end of the feed moved back after a prune"
    );
    put(&store, "d").await;
    assert_eq!(
        ids_from(&store, FeedStart::After(after_c)).await.unwrap(),
        ["d"]
    );
    driver.drop_schema().await.unwrap();
}

/// A change with an older time behind a younger one (another process's clock) is kept
/// until the younger one is old: only a prefix of the feed is ever removed, never a gap.
#[tokio::test]
async fn a_prune_never_leaves_a_gap_behind_a_younger_change() {
    let clock = Arc::new(ManualClock::new(10 * HOUR));
    let url = url("gap", "&feed_retention_hours=1");
    let (driver, store) = open(&url, &clock).await;
    put(&store, "young").await;
    clock.set(5 * HOUR); // a writer whose clock is behind
    put(&store, "behind").await;
    clock.set(10 * HOUR + HOUR / 2);
    driver.prune_feed().await.unwrap();
    let kept = ids_from(&store, FeedStart::Oldest).await.unwrap();
    assert_eq!(kept, ["young", "behind"]);
    driver.drop_schema().await.unwrap();
}

#[tokio::test]
async fn a_retention_that_is_not_whole_hours_above_zero_is_refused() {
    for bad in ["0", "-1", "1.5", "", "week"] {
        let url = url("bad", &format!("&feed_retention_hours={bad}"));
        let opened = PostgresStore::open(&url).await;
        match opened {
            Err(Error::InvalidArgument(message)) => {
                assert!(message.contains("feed_retention_hours"), "{message}")
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}

/// A schema written by the first version (no `meta.pruned_through`, no expiry, no unique
/// claims) is upgraded on open to the current one and keeps its documents and feed.
#[tokio::test]
async fn a_first_version_schema_is_upgraded_in_place() {
    let url = url("upgrade", "");
    let clock = Arc::new(ManualClock::new(HOUR));
    let (driver, store) = open(&url, &clock).await;
    put(&store, "a").await;
    let (client, connection) = tokio_postgres::connect(&common::server(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let schema = url.split("schema=").nth(1).unwrap();
    let downgrade = format!(
        "ALTER TABLE \"{schema}\".meta DROP COLUMN pruned_through; \
         ALTER TABLE \"{schema}\".documents DROP COLUMN expires_at; \
         ALTER TABLE \"{schema}\".changes DROP COLUMN expires_at; \
         ALTER TABLE \"{schema}\".changes DROP COLUMN previous; \
         DROP TABLE \"{schema}\".unique_claims, \"{schema}\".unique_indexes; \
         UPDATE \"{schema}\".meta SET version = 1"
    );
    client.batch_execute(&downgrade).await.unwrap();
    drop(store);

    let (_, reopened) = open(&url, &clock).await;
    assert_eq!(ids_from(&reopened, FeedStart::Oldest).await.unwrap(), ["a"]);
    let expiring = Key::new("s", "c", "b").unwrap();
    let written = reopened
        .create(&expiring, Data::new(), "w")
        .expires_at(2 * HOUR)
        .await
        .unwrap();
    assert_eq!(reopened.get(&expiring).await.unwrap(), Some(written));
    let version = format!("SELECT version FROM \"{schema}\".meta");
    let version: i32 = client.query_one(&version, &[]).await.unwrap().get(0);
    assert_eq!(version, 4);
    let key = Key::new("s", "c", "a").unwrap();
    reopened.put(&key, Data::new(), "w").await.unwrap();
    let changes = reopened
        .changes(&FeedScope::whole_store(), &FeedStart::Oldest, 10)
        .await
        .unwrap()
        .changes;
    let previous: Vec<Option<u64>> = changes
        .iter()
        .map(|change| change.previous.as_ref().map(|p| p.version))
        .collect();
    // The change written before the upgrade has none; the put after it, the version it replaced.
    assert_eq!(previous, [None, None, Some(1)]);
    driver.drop_schema().await.unwrap();
}

#[tokio::test]
async fn a_retention_that_is_not_whole_hours_above_zero_is_refused_before_connecting() {
    for bad in ["0", "1.5", "lots", ""] {
        // Port 1: nothing listens there, so only the URL's check can answer.
        let url = format!("postgres://app@127.0.0.1:1/app?feed_retention_hours={bad}");
        let err = PostgresStore::open(&url).await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{bad}: {err:?}");
        assert!(err.to_string().contains("feed_retention_hours"), "{err}");
    }
}
