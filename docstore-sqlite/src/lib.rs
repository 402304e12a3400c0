//! # docstore-sqlite
//!
//! [`SqliteStore`]: the SQLite [`Driver`](docstore::driver::Driver) under the front end's
//! [`Store`](docstore::Store). One database file in WAL mode
//! (or a private in-memory database), SQLite bundled so a new machine needs nothing
//! installed.
//!
//! ```
//! use docstore::{Key, Query, Store};
//! use docstore_sqlite::SqliteStore;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::new(SqliteStore::open(dir.path().join("docs.db"))?);
//! let key = Key::new("acme", "tickets", "T-1")?;
//! store.create(&key, docstore::object(serde_json::json!({"title": "hello"}))?, "alice").await?;
//! assert_eq!(store.get(&key).await?.expect("just created").version, 1);
//! assert_eq!(store.query("acme", "tickets", &Query::new()).await?.documents.len(), 1);
//! assert_eq!(store.count("acme").await?, 1);
//! # Ok::<(), docstore::Error>(())
//! # }).unwrap();
//! ```

//!
//! ## Design
//!
//! - **Schema** (created and migrated by the store, versioned with `PRAGMA user_version`):
//!   table `documents` keyed by `(site, collection, id)`, the data as SQLite's binary JSON
//!   (JSONB keeps each number and string literal exactly as serde_json wrote it, so a
//!   document reads back identical: `u64::MAX`, `i64::MIN`, `5e-324`, `1` vs `1.0`), the
//!   metadata as columns; table `collections` holds per-collection counts, kept exact by
//!   triggers in the writing transaction.
//! - **Expiry** (`docs/contract.md`, "Expiry"): a document's `expires_at` is a column, with
//!   two partial indexes holding only expiring rows (by expiry, for the sweep; by site and
//!   expiry, for counts). Every read asks for rows not expired at the store clock's instant,
//!   a count subtracts the expired rows not yet swept from the counters, a write inserting
//!   over an expired row first removes it with its `Expired` change, and
//!   [`Store::sweep_expired`](docstore::Store::sweep_expired) (the store's background sweep)
//!   removes expired rows 200 to a write transaction.
//! - **Concurrency**: one writer connection; how a write reaches it depends on how long a
//!   commit takes.
//!   - [`Durability::Full`] (the default; every commit waits for an fsync): a write call
//!     that finds no other write in progress runs in place, in its own `BEGIN IMMEDIATE`
//!     transaction (a lone writer pays no thread hop). Under concurrent writers a call
//!     queues its work and its task waits (holding no thread); a writer thread takes every
//!     write queued meanwhile (up to 64) and commits them in one `BEGIN IMMEDIATE`
//!     transaction — *group commit*, one fsync for the group — each write inside its own
//!     savepoint, so a write whose condition fails is rolled back alone and never fails
//!     another caller's.
//!   - [`Durability::Normal`] (no fsync per commit: a write takes tens of µs): every
//!     single-document write runs on the calling thread in its own `BEGIN IMMEDIATE`
//!     transaction, waiting for the writer connection as a mutex-guarded call does, like
//!     hand-written `rusqlite` behind a mutex (a `write_all` batch, whose work grows with
//!     its size, goes as with `Full`), except that a waiter spins for up to 100 µs before
//!     it sleeps, so it takes the connection the moment the holder releases it instead of
//!     leaving it idle while it is woken. Under concurrent writers at most as many writes as
//!     the runtime has threads are in progress, so each waits for a few others at most
//!     (queueing would make it wait for every queued one, and a group commit saves little
//!     when commits cost no fsync). When another process holds the database's write lock, the call does not
//!     block the runtime's thread for the busy timeout: it waits off the runtime (as with
//!     `Full`).
//!
//!   Either way a call returns only after the commit that holds its write (with
//!   [`Durability::Full`] that commit was flushed). `update` merges inside its transaction,
//!   so it never conflicts: one `UPDATE` in which SQLite's `jsonb_patch` (RFC 7386, exactly
//!   `docstore::merge_patch`) merges the patch into the stored JSONB and `RETURNING` gives
//!   the merged text, whose length is the size held to `max_doc_bytes` (a merge over the
//!   limit is rolled back); the document is parsed after the commit, outside the writer's
//!   lock. (A patch nested deeper than the depth limit, whose merge may still be shallow
//!   enough, is merged in Rust.) A write whose future is dropped after it was queued still
//!   happens.
//!   Reads use a pool of other connections and, in WAL mode, never wait for the writer —
//!   neither ours nor another process's. Another process's locks are waited for up to the
//!   busy timeout (default 5 s, see [`SqliteOptions`]; SQLite's own waits between tries, and
//!   the first wait of the process is said once as an `info` event of target
//!   [`LOCK_WAIT_TARGET`]). The timeout bounds the whole operation: a busy failure that
//!   came before it ends (a snapshot gone stale, say) runs the whole transaction again (up
//!   to four attempts), one that waited it out does not wait again; then it is
//!   [`Error::Unavailable`](docstore::Error::Unavailable) (when a group fails that way, or
//!   its commit fails, each of its writes is retried alone, within the same timeout). Busy,
//!   locked and I/O failures are `Unavailable`, every other SQLite failure
//!   [`Error::Backend`](docstore::Error::Backend).
//! - **Opening** reads the journal mode and `PRAGMA user_version` first and takes the write
//!   lock only to switch a new file to WAL or to migrate an older schema, so opening a
//!   current database never waits for a running writer (a CLI `get` during an import).
//!   A file this process cannot write, or one in a directory where SQLite cannot create its
//!   `-wal` and `-shm` files, opens read-only: reads work, and every write is
//!   [`Error::Backend`](docstore::Error::Backend) with a message naming the file or the
//!   directory and what the operating system said. In a read-only directory without a
//!   `-shm` file the file is opened `immutable` (SQLite then assumes nobody changes it —
//!   nobody can through SQLite there, since no journal can be created); a non-empty `-wal`
//!   there cannot be read and is an error saying so.
//! - **Read means read** (`docs/contract.md`, "How the backends differ"):
//!   [`SqliteOptions::read_only`] opens a store that only reads and changes nothing in the
//!   file — no schema, no journal mode, no index built, no file created. Where this process
//!   may write the file and its directory it opens read-write with `PRAGMA query_only` (so
//!   SQLite removes the `-wal` and `-shm` files a reader needs once the last connection
//!   closes, which a read-only connection cannot), else read-only as above. A missing file,
//!   or one without docstore's tables, is an empty store (an in-memory stand-in; the file is
//!   never touched); a file whose schema needs migrating fails with a message saying why.
//!   Writes are refused, saying why the store is read-only. The CLI opens its reading
//!   commands this way.
//! - **Files of other programs**: every open first lists the file's tables; one holding a
//!   table docstore does not own is [`Error::InvalidArgument`](docstore::Error::InvalidArgument)
//!   naming them, before anything in it may change (docstore never quietly adopts another
//!   program's database), unless [`SqliteOptions::share_file`] allows sharing: then a
//!   read-write open adds docstore's tables beside the others and switches the file to WAL.
//! - **Batches**: `write_all` checks the batch and serializes its data on the calling
//!   thread (once: the text's length is the size the limits count), then applies its writes
//!   in order inside one immediate transaction (the counters move through the same
//!   triggers); the first failing write rolls it all back. `get_many` reads every key inside one read transaction on one connection, so its
//!   answer is one snapshot (of the last commit when it began).
//! - **Async**: the store needs a Tokio runtime. Writes wait for the writer thread as
//!   parked tasks. On a multi-threaded runtime a read runs SQLite in place through
//!   `block_in_place` (the worker's other tasks move to another thread); on a
//!   current-thread runtime it goes to the blocking pool. Either way the runtime keeps
//!   running, but futures joined *within the same task* wait for a read.
//! - **Durability**: [`Durability::Full`] by default (`synchronous = FULL`: an acknowledged
//!   write survives power loss); [`Durability::Normal`] survives process crashes only, and
//!   is much faster on slow disks. With `Normal` WAL checkpoints run beside the writes, on
//!   a checkpointer thread with its own connection (`PASSIVE`, woken every 1 000 logged
//!   frames), instead of inside the commit that crossed the mark; the writer checkpoints
//!   itself only once the log reaches 8 000 frames, so that the log can start over under
//!   writes that never stop. With `Full` SQLite's own checkpoints are kept (a checkpoint
//!   syncing beside commits that each wait for an fsync slowed them down).
//! - **Queries** are one parameterized statement: filter, keyset cursor, order and
//!   `LIMIT` are pushed down, each piece provably the reference evaluator's answer —
//!   strings, booleans and `null` natively through `json_type` and `->>`, numbers, arrays,
//!   objects, `In` and `Contains` through SQL functions that run `docstore`'s own comparison
//!   on the verbatim JSON text, and sort keys as byte strings whose order is the reference
//!   total order. Field paths and values are always bound parameters. A query in id order
//!   walks the primary key from the cursor and stops at the page; other orders pick the
//!   page's rows by key before reading their data.
//!
//! - **Indexes** ([`StoreOptions::with_indexes`](docstore::StoreOptions::with_indexes),
//!   `[[database.indexes]]`): each declared index is recorded in table `indexes` (schema
//!   version 2) and built at open, in one immediate transaction, over the documents already
//!   there; its keys (the core's order-preserving encoding, the id last) live in table
//!   `index_entries`, primary key `(index_id, entry_site, entry_key)`, kept by three triggers on
//!   `documents` inside every writing transaction (batches included). A query the core's
//!   planner gives to an index reads only its key ranges, in order (the filter parts the
//!   keys do not decide pushed down as in other queries), stopping once the page and one
//!   more match are found (`explain` shows SQLite's own `EXPLAIN QUERY PLAN` line);
//!   other queries run as before. A declaration with a recorded name but other fields is
//!   [`Error::InvalidArgument`](docstore::Error::InvalidArgument) at open, naming it; an index
//!   recorded but no longer declared stays maintained but is never read. The declared field
//!   paths appear only inside the trigger DDL, as quoted SQL literals; query SQL is fixed
//!   and parameterized. Chosen over an expression index on a registered function because
//!   SQLite only uses an expression index for a query that repeats its expression verbatim,
//!   which would put each index's paths into the query text.
//!
//! - **Change feed** (schema version 4; `docs/contract.md`, "Change feed"): every committed
//!   write inserts one row into table `changes` in its own transaction — in the write path,
//!   right after the document's row (a copy of it, the data as stored JSONB, or the delete's
//!   version, time from the store clock and actor) — so a refused write, a write rolled
//!   back to its group-commit savepoint, a failed batch or a repeat recognised by its write
//!   identity leaves none, and no committed write of any process can miss its change.
//!   Counters, index entries and `write_ids` rows are other tables and never appear. A
//!   change's position is its rowid: SQLite serializes writers, so positions grow in commit
//!   order. Cursors are `sqlite:FILE.POSITION`, `FILE` a random id the migration stored in
//!   the file: a cursor of another file is
//!   [`Error::InvalidArgument`](docstore::Error::InvalidArgument) saying it belongs to
//!   another store (not `CursorExpired`, which would send its consumer to resync against
//!   the wrong database). A read runs on a reader
//!   connection in one read transaction and looks at most 10 000 positions (a scoped read
//!   in a feed of other scopes' changes answers with `caught_up: false` and a cursor past
//!   them). Changes older than [`SqliteOptions::feed_retention`] (7 days by default) are
//!   pruned 1 000 at a time through the writer connection, never inside a write's
//!   transaction: right after the commit of a store's first write and of every 64th (so a
//!   file written only by CLI commands, one write a process, is pruned too), and every
//!   minute by a thread of their own; the highest pruned position is recorded, so an older cursor is
//!   `CursorExpired` exactly. Watchers are woken by this process's commits (a
//!   `tokio::sync::watch` channel) and see other processes' by reading the feed's head every
//!   [`SqliteOptions::feed_poll_interval`] (200 ms by default). A file migrated from
//!   version 3 starts with an empty feed: writes from before the migration are not in it.
//!   [`SqliteOptions::feed`] turns the feed off (no change rows written; reads are an
//!   error): every process writing a file should agree, since the feed misses the writes
//!   of processes with it off. [`SqliteOptions::feed_previous`] (off by default) also
//!   keeps, in the change row's `previous` column (schema version 6), the document an
//!   update, put or delete replaced or removed, read in the write's transaction just before
//!   it ([`docstore::Change::previous`]); it costs those writes a read and a change row
//!   twice the size, so it is opt-in. Written in the write path rather than by triggers on
//!   `documents`: both measured the same (a delete's trigger could not know its time and
//!   actor), and the write path leaves the feed per store and `documents` writable from a
//!   plain `sqlite3` shell.
//!
//! To inspect a database by hand use SQLite 3.45 or newer (JSONB), e.g.
//! `SELECT id, json(data) FROM documents`. A plain `sqlite3` shell (without this library's
//! functions) can read everything, and can write documents of collections that have no
//! declared index; writing a document of an indexed collection there fails with `no such
//! function: docstore_index_key` (the trigger needs it), so the index can never silently go
//! stale.
//!
//! Decisions where the contract (`docs/contract.md`) is silent: a `version` above `i64::MAX` cannot be stored
//! (`restore` refuses it as `InvalidArgument`); data nested more than 127 levels deep is
//! `InvalidArgument` (serde_json could not read it back); the in-memory store reads through
//! its one connection; `:memory:` and `""` as a path give an in-memory store.

mod batch;
mod busy;
mod checkpoint;
mod conn;
mod error;
mod feed;
mod functions;
mod index;
mod options;
mod query;
mod rows;
mod schema;
mod spin;
mod sql;
mod store;
mod unique;
mod write_ids;

pub use busy::LOCK_WAIT_TARGET;
pub use options::{
    DEFAULT_FEED_POLL_INTERVAL, DEFAULT_FEED_PRUNE_INTERVAL, DEFAULT_FEED_RETENTION, Durability,
    SqliteOptions,
};
pub use store::SqliteStore;
