//! A write that is refused or cancelled leaves no transaction open on its pooled connection:
//! its `BEGIN` went with its locking reads, so its `ROLLBACK` must go too, or the key's row
//! stays locked and the next writer of the key waits on it. Run under `scripts/with-postgres`.

use docstore::{Data, Error, Key, Store};
use docstore_postgres::PostgresStore;
use std::future::{Future, IntoFuture, poll_fn};
use std::task::Poll;
use std::time::Duration;

/// How long the other store's write may take before the test calls it stuck behind a lock.
const STUCK: Duration = Duration::from_secs(20);

mod common;

fn url() -> String {
    common::schema_url("transactions")
}

fn data(value: serde_json::Value) -> Data {
    docstore::object(value).expect("an object")
}

/// Two stores (two pools) on one schema, and a key holding a document.
async fn two_stores() -> (Store, Store, Key) {
    let url = url();
    let first = Store::new(PostgresStore::open(&url).await.expect("open"));
    let second = Store::new(PostgresStore::open(&url).await.expect("open"));
    let key = Key::new("acme", "notes", "n1").expect("a key");
    first
        .create(&key, data(serde_json::json!({"n": 0})), "ann")
        .await
        .expect("create");
    (first, second, key)
}

/// `second` can still write `key`.
async fn assert_unlocked(second: &Store, key: &Key) {
    let patch = data(serde_json::json!({"n": 2}));
    let written = tokio::time::timeout(STUCK, second.update(key, &patch, "bob").into_future());
    let written = written.await.expect("the write waited on a lock left held");
    assert_eq!(written.expect("the update").version, 2);
}

#[tokio::test]
async fn a_refused_write_leaves_no_lock() {
    let (first, second, key) = two_stores().await;
    let patch = data(serde_json::json!({"n": 1}));
    let refused = first.update_if(&key, &patch, 7, "ann").await;
    assert!(
        matches!(refused, Err(Error::Conflict { current: 1 })),
        "{refused:?}"
    );
    assert_unlocked(&second, &key).await;
}

#[tokio::test]
async fn a_cancelled_write_leaves_no_lock() {
    let (first, second, key) = two_stores().await;
    let patch = data(serde_json::json!({"n": 1}));
    // The create went as one statement, so the transaction's statements are not prepared on
    // the connection yet, and a first poll that prepares sends no `BEGIN`: a refused write
    // prepares them (and moves no version).
    let refused = first.update_if(&key, &patch, 7, "ann").await;
    assert!(
        matches!(refused, Err(Error::Conflict { .. })),
        "{refused:?}"
    );
    {
        let write = first.update(&key, &patch, "ann").into_future();
        tokio::pin!(write);
        // Polled once (its `BEGIN` and locking read sent), then left until the server has
        // answered them and holds the transaction open, then dropped.
        let polled = poll_fn(|cx| Poll::Ready(write.as_mut().poll(cx).is_pending()));
        assert!(polled.await, "the write finished at its first poll");
        let mut holding = false;
        for _ in 0..1000 {
            if idle_in_transaction().await > 0 {
                holding = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(holding, "the write never held its transaction open");
    }
    assert_unlocked(&second, &key).await;
}

/// Sessions of this database sitting in an open transaction.
async fn idle_in_transaction() -> i64 {
    let config: tokio_postgres::Config = common::server().parse().expect("a URL");
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    let row = client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND state = 'idle in transaction'",
            &[],
        )
        .await
        .expect("pg_stat_activity");
    row.get(0)
}
