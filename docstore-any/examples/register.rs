//! User registration with a unique email and an expiring verification token: the store,
//! not the app, guarantees that two accounts never share an address — also when two
//! sign-ups race, and also for a change of address — and that a token is gone a day after
//! it was issued, with no cleanup job. SQLite in `./register.db` by default, any other store
//! by URL (`DOCSTORE_URL=memory:`).
//!
//! ```sh
//! cargo run -p docstore-any --example register
//! ```

use docstore::{Collection, Error, Index, IndexSet, Site, Store};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// An account.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct User {
    /// The name shown to others.
    pub name: String,
    /// The sign-in address: one account per address within a tenant.
    pub email: String,
    /// Whether the owner of the address confirmed it with a token.
    #[serde(default)]
    pub verified: bool,
}

/// A verification token: the account it confirms. Its id is the secret mailed to the
/// address; the document expires [`TOKEN_VALID_FOR`] after it is issued.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Token {
    /// The account's id.
    pub user: String,
}

/// How long a verification token can be used.
pub const TOKEN_VALID_FOR: Duration = Duration::from_secs(24 * 3600);

/// What presenting a token answers.
#[derive(Debug, PartialEq)]
pub enum Verified {
    /// The account is verified now: its id.
    Ok(String),
    /// No such token: never issued, used already, or expired.
    UnknownOrExpired,
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

/// The tenant's verification tokens, written as `actor`.
pub fn tokens(store: &Store, tenant: &str, actor: &str) -> docstore::Result<Collection<Token>> {
    store
        .site(tenant)?
        .with_actor(actor)?
        .collection::<Token>("tokens")
}

/// Issues the token `secret` for account `user_id`, valid for [`TOKEN_VALID_FOR`].
pub async fn issue_token(
    tokens: &Collection<Token>,
    secret: &str,
    user_id: &str,
) -> docstore::Result<()> {
    let token = Token {
        user: user_id.to_owned(),
    };
    tokens
        .create(secret, &token)
        .expires_after(TOKEN_VALID_FOR)
        .await?;
    Ok(())
}

/// Uses the token `secret`: marks its account verified and removes the token, both or
/// neither (one batch). An expired token reads as absent, whether or not the store's sweep
/// has removed it yet.
pub async fn verify(
    site: &Site,
    (users, tokens): (&Collection<User>, &Collection<Token>),
    secret: &str,
) -> docstore::Result<Verified> {
    let Some(token) = tokens.get(secret).await? else {
        return Ok(Verified::UnknownOrExpired);
    };
    let user_id = token.value.user;
    let used = site
        .batch()
        .update(users, &user_id, &serde_json::json!({ "verified": true }))
        .delete_if(tokens, secret, token.version)
        .commit()
        .await;
    match used {
        Ok(_) => Ok(Verified::Ok(user_id)),
        // Used (or expired) between the read and the batch.
        Err(Error::Batch { source, .. })
            if matches!(*source, Error::NotFound { .. } | Error::Conflict { .. }) =>
        {
            Ok(Verified::UnknownOrExpired)
        }
        Err(other) => Err(other),
    }
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
    let tokens = tokens(&store, "acme", "signup")?;
    let ann = User {
        name: "Ann".into(),
        email: "ann@example.com".into(),
        verified: false,
    };
    let impostor = User {
        name: "Not Ann".into(),
        email: "ann@example.com".into(),
        verified: false,
    };
    println!("ann:      {:?}", sign_up(&users, "u-ann", &ann).await?);
    issue_token(&tokens, "t-7f3a", "u-ann").await?;
    let site = store.site("acme")?.with_actor("signup")?;
    println!(
        "verify:   {:?}",
        verify(&site, (&users, &tokens), "t-7f3a").await?
    );
    println!(
        "again:    {:?}",
        verify(&site, (&users, &tokens), "t-7f3a").await?
    );
    println!("impostor: {:?}", sign_up(&users, "u-imp", &impostor).await?);
    println!(
        "move:     {:?}",
        change_email(&users, "u-ann", "ann@example.org").await?
    );
    println!("impostor: {:?}", sign_up(&users, "u-imp", &impostor).await?);
    Ok(())
}
