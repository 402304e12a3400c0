//! The registration example (`examples/register.rs`) on memory and SQLite: an address is
//! taken once, freed by a change of address, and 16 sign-ups racing for one address leave
//! exactly one account holding it.
#![cfg(feature = "sqlite")]

#[allow(dead_code)] // the example's `main` is not run here
#[path = "../examples/register.rs"]
mod register;

use docstore::{Store, StoreOptions};
use register::{Registered, User, change_email, sign_up, users};

fn stores(dir: &std::path::Path) -> Vec<Store> {
    let options = || StoreOptions::default().with_indexes(register::indexes());
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
