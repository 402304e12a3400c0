//! User registration with a unique email: the store, not the app, guarantees that two
//! accounts never share an address — also when two sign-ups race, and also for a change of
//! address. SQLite in `./register.db` by default, any other store by URL
//! (`DOCSTORE_URL=memory:`).
//!
//! ```sh
//! cargo run -p docstore-any --example register
//! ```

use docstore::{Collection, Error, Index, IndexSet, Store};
use serde::{Deserialize, Serialize};

/// An account.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct User {
    /// The name shown to others.
    pub name: String,
    /// The sign-in address: one account per address within a tenant.
    pub email: String,
}

/// What a sign-up or a change of address answers.
#[derive(Debug, PartialEq)]
pub enum Registered {
    /// Done: the account's id.
    Ok(String),
    /// Another account holds the address (its id, for the operator's log).
    EmailTaken {
        /// The id of the account holding it.
        holder: String,
    },
}

/// The store's index declarations: emails are unique within a tenant's `users`.
pub fn indexes() -> IndexSet {
    let by_email = Index::parse("users", "by_email", ["email"]).expect("a valid declaration");
    IndexSet::new([by_email.unique()]).expect("one index")
}

/// The tenant's users, written as `actor`.
pub fn users(store: &Store, tenant: &str, actor: &str) -> docstore::Result<Collection<User>> {
    store
        .site(tenant)?
        .with_actor(actor)?
        .collection::<User>("users")
}

/// Signs `user` up under `id`.
pub async fn sign_up(
    users: &Collection<User>,
    id: &str,
    user: &User,
) -> docstore::Result<Registered> {
    answer(users.create(id, user).await.map(|created| created.id))
}

/// Moves account `id` to a new address.
pub async fn change_email(
    users: &Collection<User>,
    id: &str,
    email: &str,
) -> docstore::Result<Registered> {
    let patch = serde_json::json!({ "email": email });
    answer(users.update(id, &patch).await.map(|updated| updated.id))
}

fn answer(result: docstore::Result<String>) -> docstore::Result<Registered> {
    match result {
        Ok(id) => Ok(Registered::Ok(id)),
        Err(Error::UniqueViolation { holder, .. }) => Ok(Registered::EmailTaken { holder }),
        Err(other) => Err(other),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DOCSTORE_URL").unwrap_or_else(|_| "sqlite:register.db".into());
    let mut config = docstore_any::parse_url(&url)?;
    config.indexes = indexes();
    let store = docstore_any::open(&config).await?;
    let users = users(&store, "acme", "signup")?;
    let ann = User {
        name: "Ann".into(),
        email: "ann@example.com".into(),
    };
    let impostor = User {
        name: "Not Ann".into(),
        email: "ann@example.com".into(),
    };
    println!("ann:      {:?}", sign_up(&users, "u-ann", &ann).await?);
    println!("impostor: {:?}", sign_up(&users, "u-imp", &impostor).await?);
    println!(
        "move:     {:?}",
        change_email(&users, "u-ann", "ann@example.org").await?
    );
    println!("impostor: {:?}", sign_up(&users, "u-imp", &impostor).await?);
    Ok(())
}
