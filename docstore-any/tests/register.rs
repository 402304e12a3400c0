//! The registration example (`examples/register.rs`) on memory and SQLite: an address is
//! taken once, freed by a change of address, and 16 sign-ups racing for one address leave
//! exactly one account holding it; a verification token works once, and not after it
//! expired (the store's clock moved, nothing swept).
#![cfg(feature = "sqlite")]

#[allow(dead_code)] // the example's `main` is not run here
#[path = "../examples/register.rs"]
mod register;

use docstore::{ManualClock, Store, StoreOptions};
use register::{Registered, User, Verified, change_email, sign_up, users};
use std::sync::Arc;

fn stores(dir: &std::path::Path) -> Vec<Store> {
    stores_on(dir, Arc::new(ManualClock::new(1)))
}

/// The example's stores on `clock`, without the background sweep (an expired token must
/// read as absent before any sweep).
fn stores_on(dir: &std::path::Path, clock: Arc<ManualClock>) -> Vec<Store> {
    let options = || {
        StoreOptions::default()
            .with_indexes(register::indexes())
            .with_clock(clock.clone())
            .with_sweep_interval(None)
    };
    let sqlite = docstore_sqlite::SqliteStore::open_with_options(dir.join("r.db"), options());
    vec![
        Store::new(docstore_memory::MemoryStore::with_options(options())),
        Store::new(sqlite.expect("open the file")),
    ]
}

fn user(name: &str, email: &str) -> User {
    User {
        name: name.into(),
        email: email.into(),
        verified: false,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_verifies_once_and_not_after_a_day() {
    const HOUR: i64 = 3_600_000_000_000;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000 * HOUR));
    for store in stores_on(dir.path(), clock.clone()) {
        let users = users(&store, "acme", "test").unwrap();
        let tokens = register::tokens(&store, "acme", "test").unwrap();
        let site = store.site("acme").unwrap().with_actor("test").unwrap();
        sign_up(&users, "a", &user("Ann", "ann@example.com"))
            .await
            .unwrap();
        register::issue_token(&tokens, "late", "a").await.unwrap();
        clock.advance(24 * HOUR);
        let late = register::verify(&site, (&users, &tokens), "late").await;
        assert_eq!(late.unwrap(), Verified::UnknownOrExpired);
        assert!(!users.get("a").await.unwrap().unwrap().value.verified);

        register::issue_token(&tokens, "fresh", "a").await.unwrap();
        clock.advance(23 * HOUR);
        let fresh = register::verify(&site, (&users, &tokens), "fresh").await;
        assert_eq!(fresh.unwrap(), Verified::Ok("a".into()));
        assert!(users.get("a").await.unwrap().unwrap().value.verified);
        let again = register::verify(&site, (&users, &tokens), "fresh").await;
        assert_eq!(again.unwrap(), Verified::UnknownOrExpired);
        assert_eq!(tokens.count().await.unwrap(), 0);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_address_is_held_by_one_account() {
    let dir = tempfile::tempdir().unwrap();
    for store in stores(dir.path()) {
        let users = users(&store, "acme", "test").unwrap();
        let ann = user("Ann", "ann@example.com");
        assert_eq!(
            sign_up(&users, "a", &ann).await.unwrap(),
            Registered::Ok("a".into())
        );
        let taken = sign_up(&users, "b", &user("Bob", "ann@example.com"))
            .await
            .unwrap();
        assert_eq!(taken, Registered::EmailTaken { holder: "a".into() });
        let moved = change_email(&users, "a", "ann@example.org").await.unwrap();
        assert_eq!(moved, Registered::Ok("a".into()));
        let now_free = sign_up(&users, "b", &user("Bob", "ann@example.com"))
            .await
            .unwrap();
        assert_eq!(now_free, Registered::Ok("b".into()));
        let back = change_email(&users, "a", "ann@example.com").await.unwrap();
        assert_eq!(back, Registered::EmailTaken { holder: "b".into() });
        // Another tenant's accounts are its own business.
        let other = register::users(&store, "globex", "test").unwrap();
        assert_eq!(
            sign_up(&other, "a", &ann).await.unwrap(),
            Registered::Ok("a".into())
        );

        let racing = (0..16).map(|i| {
            let users = users.clone();
            tokio::spawn(async move {
                sign_up(
                    &users,
                    &format!("r{i:02}"),
                    &user("Racer", "race@example.com"),
                )
                .await
            })
        });
        let answers: Vec<Registered> = futures_util::future::join_all(racing)
            .await
            .into_iter()
            .map(|joined| joined.unwrap().unwrap())
            .collect();
        let winners: Vec<_> = answers
            .iter()
            .filter(|a| matches!(a, Registered::Ok(_)))
            .collect();
        assert_eq!(winners.len(), 1, "{answers:?}");
    }
}
