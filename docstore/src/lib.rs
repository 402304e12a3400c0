//! # docstore
//!
//! One document store API — create, get, put, optimistic update, conditional update and
//! delete, queries, per-collection counters — over interchangeable backends (in memory,
//! SQLite, DynamoDB). An application holds an `Arc<dyn Store>` and picks the backend by
//! configuration.
//!
//! This crate holds the contract and no backend: the [`Store`] trait, [`Document`], [`Key`]
//! and the name rules, [`Error`], the [`query`] model with the reference evaluator, RFC 7386
//! [`merge_patch`], write identities ([`WriteId`]), clocks and the shared
//! [`config`] types. The behaviour every backend shows is specified in `docs/contract.md` and checked
//! by the `conformance-tests` crate.
//!
//! ```
//! use docstore::query::{Filter, Query};
//! use docstore::{Key, Store};
//!
//! async fn open_tickets(store: &dyn Store) -> docstore::Result<usize> {
//!     let key = Key::new("acme", "tickets", "T-1")?;
//!     let data = docstore::object(serde_json::json!({"status": "open", "priority": 3}))?;
//!     store.create(&key, data, "alice").await?;
//!     let page = store
//!         .query("acme", "tickets", &Query::new().filter(Filter::eq("status", "open")))
//!         .await?;
//!     Ok(page.documents.len())
//! }
//! ```
//!
//! Decisions where `docs/contract.md` is silent:
//! - A [`Key`] can only be built valid, so invalid names are refused before any store call.
//! - Field paths step only into objects; a path through an array does not resolve.
//! - Range operators compare only numbers with numbers, strings with strings and booleans with
//!   booleans; arrays and objects never match a range.
//! - A cursor is tied to the filter and order of its query, not to its limit: the page size may
//!   change from page to page.

pub mod batch;
pub mod clock;
pub mod config;
pub mod document;
mod error;
mod identity;
pub mod index;
pub mod key;
mod options;
mod patch;
pub mod query;
mod store;
#[cfg(any(test, feature = "proptest"))]
pub mod strategies;

pub use batch::{Write, WriteOutcome};
pub use clock::{Clock, ManualClock, SystemClock};
pub use document::{Data, Document, object};
pub use error::{BoxError, Error, Result};
pub use identity::WriteId;
pub use index::{Index, IndexSet};
pub use key::Key;
pub use options::{DEFAULT_MAX_DOC_BYTES, StoreOptions};
pub use patch::merge_patch;
pub use query::{Cursor, Filter, Order, Query};
pub use store::{CounterChange, Explain, Page, Recount, RecountMode, Store};
