//! What the conformance suite cannot see of unique indexes and expiry on a real server (run
//! under `scripts/with-postgres`): a declaration over shared values, the connection a
//! refusal leaves, and a sweep in bounded transactions.

use docstore::driver::Driver;
use docstore::feed::{FeedScope, FeedStart};
use docstore::index::{Index, IndexSet};
use docstore::{ChangeKind, Data, Error, Key, ManualClock, RecountMode, Store, StoreOptions};
use docstore_postgres::PostgresStore;
use serde_json::json;
use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;

/// The server's URL with a schema of its own for `name`.
mod common;

fn url(name: &str) -> String {
    common::schema_url(&format!("ux_{name}"))
}

fn by_email() -> StoreOptions {
    let index = Index::parse("users", "by_email", ["email"]).unwrap();
    StoreOptions::default().with_indexes(IndexSet::new([index.unique()]).unwrap())
}

fn user(site: &str, id: &str) -> Key {
    Key::new(site, "users", id).unwrap()
}

fn email(value: &str) -> Data {
    docstore::object(json!({ "email": value })).unwrap()
}

/// Declaring a unique index over documents that share a value refuses the open, naming the
/// pairs, and records nothing; once the values are distinct the declaration builds and is
/// enforced.
#[tokio::test]
async fn a_unique_declaration_over_shared_values_is_refused_and_changes_nothing() {
    let url = url("build");
    let plain = PostgresStore::open(&url).await.unwrap();
    let store = Store::new(plain.clone());
    for (site, id, value) in [
        ("s", "a", "x"),
        ("s", "b", "x"),
        ("s", "c", "y"),
        ("t", "d", "x"),
    ] {
        store
            .create(&user(site, id), email(value), "")
            .await
            .unwrap();
    }
    let refused = PostgresStore::open_with_options(&url, by_email()).await;
    match refused {
        Err(Error::InvalidArgument(message)) => {
            assert!(message.contains("s/users/a and s/users/b"), "{message}");
            assert!(message.contains("1 pairs"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    store
        .update(&user("s", "b"), &email("z"), "")
        .await
        .unwrap();
    let unique = Store::new(
        PostgresStore::open_with_options(&url, by_email())
            .await
            .unwrap(),
    );
    let taken = unique.create(&user("s", "e"), email("y"), "").await;
    assert!(
        matches!(taken, Err(Error::UniqueViolation { ref holder, .. }) if holder == "c"),
        "{taken:?}"
    );
    unique
        .create(&user("t", "e"), email("y"), "")
        .await
        .unwrap();
    plain.drop_schema().await.unwrap();
}

/// A refusal comes from a failed `COMMIT`: the connection it used goes back to the pool with
/// no transaction open and no lock held, and the same store keeps writing.
#[tokio::test]
async fn a_unique_refusal_leaves_the_connection_clean() {
    let url = url("clean");
    let driver = PostgresStore::open_with_options(&url, by_email())
        .await
        .unwrap();
    let (first, second) = (
        Store::new(driver.clone()),
        Store::new(
            PostgresStore::open_with_options(&url, by_email())
                .await
                .unwrap(),
        ),
    );
    first.create(&user("s", "a"), email("x"), "").await.unwrap();
    for attempt in 0..3 {
        let refused = first.put(&user("s", "b"), email("x"), "").await;
        assert!(
            matches!(refused, Err(Error::UniqueViolation { ref holder, .. }) if holder == "a"),
            "attempt {attempt}: {refused:?}"
        );
        let patch = docstore::object(json!({ "n": attempt })).unwrap();
        first.update(&user("s", "a"), &patch, "").await.unwrap();
    }
    let (a, w) = (user("s", "a"), email("w"));
    let moved = second.update(&a, &w, "").into_future();
    let moved = tokio::time::timeout(Duration::from_secs(20), moved).await;
    assert_eq!(moved.expect("a lock was left held").unwrap().version, 5);
    assert_eq!(
        first
            .put(&user("s", "b"), email("x"), "")
            .await
            .unwrap()
            .version,
        1
    );
    driver.drop_schema().await.unwrap();
}

/// The sweep removes up to its limit, longest expired first, over several transactions, each
/// document with one `Expired` change; the counters stay exact.
#[tokio::test]
async fn the_sweep_removes_expired_documents_in_bounded_transactions() {
    const START: i64 = 1_000_000_000_000;
    let clock = Arc::new(ManualClock::new(START));
    let options = StoreOptions::default()
        .with_clock(clock.clone())
        .with_sweep_interval(None);
    let driver = PostgresStore::open_with_options(&url("sweep"), options)
        .await
        .unwrap();
    let store = Store::new(driver.clone());
    let all = FeedScope::whole_store();
    let start = store.changes(&all, &FeedStart::Now, 1).await.unwrap().next;
    for i in 0..450 {
        let key = Key::new("s", "sessions", format!("{i:03}")).unwrap();
        store
            .create(&key, Data::new(), "")
            .expires_at(START + 1 + i)
            .await
            .unwrap();
    }
    store
        .create(&Key::new("s", "sessions", "kept").unwrap(), Data::new(), "")
        .await
        .unwrap();
    clock.set(START + 1_000);
    assert_eq!(store.count("s").await.unwrap(), 1);
    assert_eq!(driver.sweep_expired(300).await.unwrap(), 300);
    assert_eq!(store.count("s").await.unwrap(), 1);
    assert_eq!(driver.sweep_expired(300).await.unwrap(), 150);
    assert_eq!(driver.sweep_expired(300).await.unwrap(), 0);
    let recount = store.recount("s", RecountMode::Report).await.unwrap();
    assert_eq!(
        (recount.collections, recount.changes),
        (vec![("sessions".into(), 1)], vec![])
    );
    let mut expired = Vec::new();
    let mut cursor = FeedStart::After(start);
    loop {
        let page = store.changes(&all, &cursor, 500).await.unwrap();
        let gone = page
            .changes
            .iter()
            .filter(|c| c.kind == ChangeKind::Expired);
        expired.extend(gone.map(|c| (c.key.id().to_owned(), c.time)));
        if page.caught_up {
            break;
        }
        cursor = FeedStart::After(page.next);
    }
    let longest_first: Vec<(String, i64)> = (0..450)
        .map(|i| (format!("{i:03}"), START + 1 + i))
        .collect();
    assert_eq!(expired, longest_first);
    driver.drop_schema().await.unwrap();
}
