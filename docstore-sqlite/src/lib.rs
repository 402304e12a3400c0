//! # docstore-sqlite
//!
//! [`SqliteStore`]: the SQLite [`Store`](docstore::Store). One database file in WAL mode
//! (or a private in-memory database), SQLite bundled so a new machine needs nothing
//! installed.
//!
//! ```
//! use docstore::{Key, Query, Store};
//! use docstore_sqlite::SqliteStore;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let store = SqliteStore::open(dir.path().join("docs.db"))?;
//! let key = Key::new("acme", "tickets", "T-1")?;
//! store.create(&key, docstore::object(serde_json::json!({"title": "hello"}))?, "alice").await?;
//! assert_eq!(store.get(&key).await?.expect("just created").version, 1);
//! assert_eq!(store.query("acme", "tickets", &Query::new()).await?.documents.len(), 1);
//! assert_eq!(store.count("acme").await?, 1);
//! # Ok::<(), docstore::Error>(())
//! # }).unwrap();
//! ```

mod conn;
mod error;
mod functions;
mod options;
mod query;
mod rows;
mod schema;
mod sortkey;
mod sql;
mod store;

pub use options::{Durability, SqliteOptions};
pub use store::SqliteStore;
