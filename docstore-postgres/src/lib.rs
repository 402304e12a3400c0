//! # docstore-postgres
//!
//! [`PostgresStore`]: the PostgreSQL [`Driver`](docstore::driver::Driver) under the front
//! end's [`Store`](docstore::Store), on `tokio-postgres` with a `deadpool-postgres` pool.
//!
//! ```no_run
//! use docstore::{Key, Store};
//! use docstore_postgres::PostgresStore;
//!
//! # async fn example() -> docstore::Result<()> {
//! let store = Store::new(PostgresStore::open("postgres://app@127.0.0.1:5432/app?schema=docs").await?);
//! let key = Key::new("acme", "tickets", "T-1")?;
//! store.create(&key, docstore::object(serde_json::json!({"title": "hello"}))?, "alice").await?;
//! # Ok(()) }
//! ```
//!
//! Needs PostgreSQL 12 or later (`plan_cache_mode`, below).
//!
//! ## Design
//!
//! - **Schema**: every store lives in a schema of its own (`?schema=`, default `docstore`),
//!   created on first open with its tables and a version (table `meta`): `documents` keyed by
//!   `(site, collection, id)` in the "C" collation (byte order: the contract's id order), the
//!   data as `JSONB` (see the `json` module for how numbers stay exact, and the two values
//!   JSONB cannot hold, kept verbatim beside), the metadata as columns; `counters` per
//!   collection; `write_ids` (caller write identities); `changes` (the feed);
//!   `unique_claims` and `unique_indexes` (unique indexes).
//! - **Writes**: every write, single or batch, is one transaction in two round trips: `BEGIN`
//!   with one locking read per key (`SELECT … FOR UPDATE` of the document and its write
//!   identities, single-key, in key order), the core deciding each write on what they hold
//!   ([`docstore::request`]: versions, timestamps, merges, conditions, the quota, a repeated
//!   caller identity), then the document writes, the counter updates, the write identities,
//!   the change rows and `COMMIT` in one pipeline (a single update's three writes as one
//!   statement: see the `fused` module). Every statement, reads included, is prepared once
//!   per connection and planned once, generically (the store's sessions start with
//!   `plan_cache_mode = force_generic_plan`, before the URL's own `options`). A `create` on
//!   a free key is one statement committed on its own, in one round trip; a taken key makes
//!   it the transaction above (see the `create` module).
//!   Counters are therefore exact; a write racing another (a key inserted meanwhile, a
//!   deadlock) runs again, up to 32 times. Connection failures, an overloaded server and
//!   cancelled statements are [`Error::Unavailable`](docstore::Error::Unavailable) — a
//!   commit's answer can be lost, so the front end gives every write an identity
//!   ([`Driver::may_lose_answers`](docstore::driver::Driver::may_lose_answers) is `true`)
//!   and a resend is recognised. Other server errors are
//!   [`Error::Backend`](docstore::Error::Backend).
//! - **Queries**: see the `query` module: the planner's choice under the contract's cost
//!   rule, read with prepared statements cached per connection, filters pushed down where
//!   exact, the core evaluator on what is read; id-order pages read from the cursor and
//!   stopped at the page.
//! - **Declared indexes**: see the `keys` module: one generated SQL function per index
//!   computing the core's order-preserving key (`docstore::index::key`; the server's
//!   encoding in `sql/keys.sql`), a stored generated column holding each row's key and a
//!   B-tree over `(site, key column)`, so a served query reads `ORDER BY key LIMIT n` in the
//!   contract's total order, computes no key, and stops at the page; `explain` adds
//!   PostgreSQL's generic plan of the statement (`Index Scan using ix_…`). The declared
//!   fields are SQL literals only in the function's DDL; [`index_name`] names the function,
//!   column and index.
//! - **Unique indexes**: see the `unique` module: the value each document claims, in a table
//!   under a unique constraint, written in the document's transaction; a clash is judged in
//!   Rust on the holders read after the rollback.
//! - **Expiry**: `expires_at` on documents and changes; every read leaves out rows expired at
//!   the store clock's instant, counts subtract those not yet removed, a write removes the
//!   expired document at its key first (with its `Expired` change), and
//!   [`Store::sweep_expired`](docstore::Store::sweep_expired) removes them 200 to a
//!   transaction.
//! - **Change feed**: see the `feed` module: positions in commit order under a
//!   transaction-scoped advisory lock, `LISTEN`/`NOTIFY` wake-ups; changes kept for
//!   `feed_retention_hours` (URL parameter, default 7 days), pruned every minute
//!   ([`PostgresStore::prune_feed`]). Each change row also keeps the document the write
//!   replaced or removed (`previous`, [`docstore::Change::previous`]): the write read and
//!   locked it anyway, so it costs the row's bytes and no read.

mod create;
mod error;
mod feed;
mod fused;
mod json;
mod keys;
mod pipeline;
mod query;
mod retention;
mod rows;
mod schema;
mod sql;
mod store;
mod unique;
mod write;

pub use keys::name as index_name;
pub use store::{DEFAULT_SCHEMA, PostgresStore};
