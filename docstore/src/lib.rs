//! # docstore
//!
//! One document store API — create, get, put, optimistic and conditional writes, queries with
//! cursors and streams, per-collection counters, atomic batches — over interchangeable
//! backends (in memory, SQLite, DynamoDB). An application holds a [`Store`], picks the backend
//! by configuration (`docstore_any::open`), scopes each request to a tenant with
//! [`Store::site`] and works with its own serde types in typed [`Collection`]s.
//!
//! ```
//! use futures_util::TryStreamExt;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct Ticket {
//!     title: String,
//!     status: String,
//!     priority: u32,
//! }
//!
//! async fn triage(store: &docstore::Store) -> docstore::Result<Vec<String>> {
//!     let tickets = store.site("acme")?.with_actor("alice")?.collection::<Ticket>("tickets")?;
//!     let ticket = Ticket { title: "Printer on fire".into(), status: "open".into(), priority: 3 };
//!     tickets.create("T-1", &ticket).await?;
//!     // Read, change and write back; re-read and retry when someone wrote in between.
//!     tickets.modify("T-1", |t| t.priority += 1).await?;
//!     let urgent = docstore::Query::parse(r#"status = "open" and priority >= 3"#)?;
//!     tickets.stream(&urgent).map_ok(|t| t.value.title).try_collect().await
//! }
//! ```
//!
//! The crate has two halves:
//! - the front end apps use: [`Store`], [`Site`], [`Collection`], [`Versioned`], streams
//!   ([`DocumentStream`]), the [`query`] model (builder, text form, reference evaluator),
//!   [`Error`], [`Key`], batches ([`Write`], [`SiteBatch`]), [`config`];
//! - the [`driver`] trait backends implement, which receives only checked input: the front
//!   end validates names, actors, sizes, batches and queries once, for every backend; with
//!   what every driver shares: [`batch`]'s decision table, [`request`] (single calls and
//!   batches as decisions, repeats, the quota, the answers), [`identity`], [`index`].
//!
//! The behaviour every backend shows is specified in `docs/contract.md` and checked by the
//! `conformance-tests` crate.
//!
//! Decisions where `docs/contract.md` is silent:
//! - A [`Key`], a [`Site`] and a [`Collection`] can only be built valid, so invalid names are
//!   refused before any store call.
//! - Field paths step only into objects; a path through an array does not resolve.
//! - Range operators compare only numbers with numbers, strings with strings and booleans with
//!   booleans; arrays and objects never match a range.
//! - A cursor is tied to the site, collection, filter and order of its query, not to its
//!   limit: the page size may change from page to page.
//! - A stream's page size is its query's `limit` ([`front::DEFAULT_STREAM_PAGE`] without
//!   one); `take(n)` bounds the number of items.
//! - A site's writes are stamped with the site's actor, empty unless set
//!   ([`Site::with_actor`]).

pub mod batch;
pub mod clock;
pub mod config;
mod data;
pub mod document;
pub mod driver;
mod error;
pub mod feed;
pub mod front;
pub mod identity;
pub mod index;
pub mod json;
pub mod key;
mod options;
mod patch;
pub mod query;
pub mod request;
pub mod retry;
#[cfg(any(test, feature = "proptest"))]
pub mod strategies;

pub use batch::{Write, WriteOutcome};
pub use clock::{Clock, ManualClock, SystemClock};
pub use data::Data;
pub use document::{Document, object};
pub use driver::{CounterChange, Explain, Page, Recount, RecountMode, UniqueProblem};
pub use error::{BoxError, Error, ErrorKind, Result};
pub use feed::{Change, ChangeCursor, ChangeKind, FeedStart};
pub use front::{
    ChangeStream, Collection, DocumentStream, Site, SiteBatch, Store, TypedChange, TypedPage,
    Versioned, WriteCall,
};
pub use identity::WriteId;
pub use index::{Index, IndexSet};
pub use key::Key;
pub use options::{DEFAULT_MAX_DOC_BYTES, SWEEP_LIMIT, StoreOptions};
pub use patch::merge_patch;
pub use query::{Cursor, Filter, Order, Query};
