//! # docstore-dynamodb
//!
//! [`DynamoStore`]: the docstore [`Driver`](docstore::driver::Driver) on one Amazon DynamoDB
//! table (or a DynamoDB-compatible service), in the single-table layout `docs/contract.md`
//! states. Applications open it through `docstore_any` and hold the front end's
//! [`Store`](docstore::Store) over it.
//!
//! ```no_run
//! use docstore::config::DynamoDbConfig;
//! use docstore::{Key, Store, StoreOptions};
//! use docstore_dynamodb::DynamoStore;
//!
//! # async fn example() -> docstore::Result<()> {
//! let config = DynamoDbConfig {
//!     region: Some("eu-west-1".into()),
//!     endpoint: None, // e.g. Some("http://127.0.0.1:8000") for an emulator
//!     ..DynamoDbConfig::new("docs")
//! };
//! let driver = DynamoStore::connect(&config, StoreOptions::default()).await?;
//! driver.create_table().await?; // development only
//! let store = Store::new(driver);
//! let key = Key::new("acme", "tickets", "T-1")?;
//! let doc = store
//!     .create(&key, docstore::object(serde_json::json!({"title": "hello"}))?, "alice")
//!     .await?;
//! assert_eq!(doc.version, 1);
//! # Ok(())
//! # }
//! ```
//!
//! ## Table layout
//! One table, string partition key `pk` and string sort key `sk`. Each collection is spread
//! over the table's partitions (`database.dynamodb.collection_partitions`, default 8, recorded
//! in the table under `pk = "__docstore#layout"` when it is first used): a partition key below
//! ends with `#<p>` for the partition `p > 0` of the document id (partition 0 carries no
//! suffix, so a table written before partitions has one); see `docs/contract.md`, "Partitions
//! on DynamoDB".
//! - documents: `pk = "<site>#<collection>"`, `sk = <id>`, `data` (S, the JSON text of the
//!   data), `created_at` / `updated_at` (N, unix nanoseconds), `created_by` / `updated_by` (S),
//!   `version` (N) — the layout's original attributes, unchanged — and the write history: `w` (S, the
//!   random identity of the write call that produced this revision; the original layout set it for
//!   `create` and `update_if`, every write sets it now) and `wh` (L of S, the identities of the
//!   up to 15 writes before it, most recent first; absent after a creation); for a document
//!   that expires, `expires_at` (N, unix nanoseconds of the store clock) and `expires` (N,
//!   unix seconds: the expiry plus one day, DynamoDB's time to live — see "Expiring
//!   documents" below);
//! - counters, spread over shards: `pk = "<site>#__collections"` (shard `s` in partition
//!   `s mod P`), `sk = <collection>` (shard
//!   0, the layout's original counter item) or `<collection>#<s>` (shard `s`), `n` (N), and,
//!   with exact counters, `w` (S, the identity of the last create or delete that moved it). A
//!   document's creates and deletes move the shard its id hashes to; a collection's count is
//!   the sum of its shards (see "Counters" below). `collections` lists the collections whose
//!   sum is above 0; `count` adds them up;
//! - no list of sites: `sites` ([`Store::sites`](docstore::Store::sites)) is a paginated Scan
//!   of the partition keys, keeping the sites of document items — it reads the whole table,
//!   like `recount`: a maintenance call;
//! - expiry markers, one per expiring document: `pk = "<site>#__expiring"` (then `#<p>`,
//!   spread like documents), `sk = "<expires_at, 20 digits>#<collection>#<id>"`; and the
//!   registry of sites with markers, `pk = "__docstore#expiring"`, `sk = <site>` (see
//!   "Expiring documents");
//! - declared indexes: on each document item, `gNpk` (S, `<site>#<collection>#<index>`) and
//!   `gNsk` (B, the index key, cut to 1 024 bytes) for the index in GSI slot `N`
//!   (`docstore-gN`); the table's index records under `pk = "__docstore#indexes"`. See
//!   "Indexes" below.
//!
//! ## Indexes
//! Declared indexes ([`docstore::index`], `[[database.indexes]]`) are generic GSIs, overloaded
//! across collections: [`DynamoStore::create_table`] makes them for a new table;
//! [`DynamoStore::add_index`], [`DynamoStore::build_index`] (resumable, with progress, while
//! applications write) and [`DynamoStore::drop_index`] (`docstore index add|build|drop`) manage
//! them on an existing one. A query an index serves reads about its page from the GSI —
//! never bounded by `max_scan`, exact at any size and with keys past DynamoDB's 1 024-byte sort
//! key limit — but eventually consistent: `consistent: true` queries never use one.
//! [`Store::explain`](docstore::Store::explain) says which index or scan a query takes.
//!
//! ## Unique indexes
//! An index declared unique ([`docstore::index::Index::unique`]) keeps one guard item per
//! value a document claims: `pk = "<site>#__unique"` (then `#<p>`, spread like documents),
//! `sk = "<collection>#<index>#<SHA-256 of the value, hex>"`, `holder` (S, the document's id),
//! written in the document's own `TransactWriteItems` — a Put conditioned on the guard being
//! absent or the writer's, a Delete when the value is given up. A write whose values do not
//! change touches no guard and is sent as before; one that claims or gives up a value is a
//! transaction (a replacing `put` or an `update` then costs twice the document's write units
//! plus 2 per guard, about 100 bytes each; creates and deletes, already transactions, 2 more
//! per guard). A batch's guards are merged per guard item and count against its 100 actions
//! with its writes and counter shards. A failed guard is `UniqueViolation` naming the holder
//! the guard returned; the feed, `sites`, counts and `recount` pass over guards (a reserved
//! partition name). `build_index` writes the guards of the documents stored before and
//! refuses, naming up to 10 pairs, when documents share a value. `recount` (`docstore fsck`)
//! checks the site's guards against its documents in the same Scan: with repair it writes a
//! missing guard and deletes an orphan one (documents sharing a value are left to the
//! application); [`DynamoStore::check_unique`] returns what it found ([`docstore::UniqueProblem`]),
//! `recount` logs it.
//!
//! ## Expiring documents
//! Expiry (`docs/contract.md`, "Expiry") is kept by the library, on the store clock, with
//! DynamoDB's time to live as a backstop:
//! - **Reads**: `get`, `get_many`, queries (Scan-like id order, bounded scans and GSIs) and
//!   streams leave out a document whose `expires_at` is at or before the store clock's now;
//!   `sites` skips it too.
//! - **Counts stay exact at once**: each expiring document has a marker item, put or deleted
//!   in the document's own `TransactWriteItems` (like unique guards) whenever a write gives,
//!   changes or removes its expiry or deletes it. Markers sort by expiry, so `count`,
//!   `collections` and the quota subtract, per collection, the markers due now — one strongly
//!   consistent `Query` per marker partition, sent alongside the counter shards' (about one
//!   read unit each while nothing is due). A sweep running at the same moment may make one
//!   such count off by one for that moment (counters and markers are two reads).
//! - **Removal**: [`Store::sweep_expired`](docstore::Store::sweep_expired) (and the store's
//!   background sweep) lists the registry of sites with markers (again at most once a minute;
//!   sites this store registered it knows at once), reads the due markers of each site's
//!   partitions — at most its limit in all — and removes each document with one
//!   `TransactWriteItems`: the document's delete conditioned on the revision read (so on its
//!   expiry, which only a new version changes), the counter shard's decrement, the marker's
//!   delete, the release of its unique guards and an expiry stamp (`<site>#__removed`, marked
//!   `ex`), which the feed shows as one `Expired` change at the expiry instant with an empty
//!   actor. Two sweepers racing on a document remove it once. A write that reads an expired
//!   document (`create` and `restore` meet it in their condition) removes it the same way
//!   first, then finds the key empty; a unique value an expired document holds is freed the
//!   same way when another write claims it.
//! - **Time to live**: `create_table` enables it on `expires` (also for delete records and
//!   stamps); for an older table, [`DynamoStore::enable_ttl`] (`docstore ttl enable`). The
//!   service deletes a document item one day (`TTL_GRACE_SECS`, 86 400 s) after its expiry —
//!   only what no sweep removed in that day. Such a delete moves no counter and writes no
//!   stamp: the feed shows it as `Expired` too (with a warning), `count` stays exact while its
//!   marker is due, `recount` (`docstore fsck`) reports the counter one above the documents,
//!   and the next sweep settles it (the orphan marker's delete and the counter's decrement in
//!   one transaction, conditioned on the document still being absent); `recount` with repair
//!   deletes such markers before it sets the counters.
//!
//! What it costs: a write that gives, changes or removes an expiry is a `TransactWriteItems`
//! (transactional writes cost twice): a replacing `put` or an `update` then costs twice the
//! document's write units plus 2 per marker put or deleted (about 60 bytes each; changing an
//! expiry deletes one and puts one); creates and deletes, already transactions, 2 more; a
//! batch's markers count against its 100 actions. A write that keeps the expiry as it was
//! (an `update` without one) touches no marker and costs as before. The first expiring write
//! of a site in a process also puts the registry item (one write unit, once). A sweep's
//! removal costs what a delete does, plus the marker (2); each sweep round reads the due
//! markers of every registered site (one `Query` per partition and site).
//!
//! ## Counters: exact (default) or fast
//! `database.dynamodb.counters` ([`CounterMode`](docstore::config::CounterMode)):
//! - `exact`: every write that creates or deletes a document (`create`, `restore`, a `put`
//!   that creates, `delete`, `delete_if`, and `write_all`) is one `TransactWriteItems` holding
//!   the document write and the counter `ADD`, with a client request token. Counters stay
//!   exact under lost answers, resends and processes killed at any point. One request instead
//!   of two, lower latency; twice the write capacity of those writes (transactional writes);
//!   concurrent creates in one collection contend only when their documents share a counter
//!   shard (conflicts are retried with backoff). Updates and replacing `put`s are not transactions and cost the same
//!   in both modes.
//! - `fast`: the original layout's way, an atomic `ADD` right after the document write (never resent after
//!   a lost answer, so never counted twice). A process dying between the two, or a lost counter
//!   answer, leaves the counter off by one: `Store::recount` (`docstore fsck --repair`) fixes
//!   it.
//!
//! In both modes a collection's counter is spread over `database.dynamodb.counter_shards`
//! items (default 32, at most 100): one item takes at most 1 000 write units per second and
//! transactions that overlap on an item are cancelled, so a single counter item would cap a
//! collection's creates and deletes whatever the table's size. Each create or delete moves
//! the shard chosen by a fixed hash of the document id (a resend moves the same shard), and
//! `count` / `collections` read the site's shards with one strongly consistent `Query` per
//! partition, all at once — about 60 bytes a shard, so each costs about one read unit — and,
//! beside them, one per partition of the site's expiry markers ("Expiring documents"). A shard may go below
//! zero; only the sum counts, and a sum below zero (drift) reads as 0 and is repaired by
//! `recount`. A table written with one counter item per collection needs no migration: that
//! item is shard 0, its count stays in the sum, and later creates and deletes spread over the
//! shards (`recount` with repair folds a collection's shards back into shard 0).
//!
//! ## Writes, and what each does when an answer is lost
//! The SDK resends a request whose answer was lost (an HTTP 500, which DynamoDB documents as
//! "may have succeeded", a timeout, a dropped connection); the resend then meets what the
//! first attempt stored. Every write call has a fresh random identity (128 bits) that goes
//! into the history of the item it writes, and every write is conditioned on what it read (or
//! on the document being absent), with `ReturnValuesOnConditionCheckFailure = ALL_OLD`. When a
//! resend's condition fails, the item it failed on settles the outcome without another read:
//! - the item's history holds this call's identity: its own earlier attempt was applied, even
//!   if other writers got in since — success, with the document as this call wrote it, the
//!   version moved by exactly one;
//! - the item is the incarnation this call read and too few writes followed for its identity
//!   to have left the history: the attempt was not applied — the genuine answer (`put` and
//!   `update` read and try again; `update_if` answers `Conflict`);
//! - for the transactions of exact counters (creates and deletes): the counter item names this
//!   call as its last mover, so it committed; otherwise the client request token settles it —
//!   DynamoDB answers a resent transaction that had committed with success, so a refused one
//!   had not.
//!
//! | call | requests (no contention, no quota; exact counters) | fast counters |
//! |---|---|---|
//! | `get` | GetItem (consistent) | same |
//! | `create`, `restore` | TransactWriteItems: Put `attribute_not_exists(pk)` + counter `ADD` | PutItem, UpdateItem (counter) |
//! | `put` | GetItem, then PutItem on the revision read (replace) or TransactWriteItems (create) | GetItem, PutItem (+ UpdateItem when it created) |
//! | `update`, `update_if` | GetItem, PutItem conditioned on the revision read | same |
//! | `delete`, `delete_if` of a revision the store wrote or read last | TransactWriteItems: Delete on that revision + counter `ADD -1` + delete stamp Put + delete record Update | TransactWriteItems (Delete + stamp Put + record Update), UpdateItem (counter) |
//! | `delete`, `delete_if` of any other | BatchGetItem (document and delete record), then the same TransactWriteItems with the record Put | BatchGetItem, TransactWriteItems, UpdateItem (counter) |
//! | `write_all` | BatchGetItem, one TransactWriteItems (writes, checks, one counter `ADD` per collection) | same |
//! | `get_many` | consistent BatchGetItem per 100 keys (unprocessed keys again, with backoff) | same |
//!
//! A write that gives, changes or removes its document's expiry adds the marker's Put or
//! Delete to its transaction (a lone PutItem becomes a TransactWriteItems); a write that
//! reads an expired document first removes it (see "Expiring documents"); `count`,
//! `collections` and the quota read the due markers beside the counters.
//!
//! A delete names the revision it removes (its stamp is keyed by it, and its condition is that
//! revision), so it reads first unless the store already knows the revision: each store
//! remembers the revision it last wrote or read (`get`) of up to 8 192 keys (metadata only,
//! about 200 bytes a key) and sends the delete of such a revision at once, its record
//! appended under a condition (the record absent, or live, holding fewer than 16 identities
//! and not the call's). In a collection with a unique index (the guards to release depend on
//! the data) or when the revision expired, the delete reads. A remembered revision that
//! changed since (another store wrote it), or a record whose condition fails, cancels the
//! transaction with nothing written, and the delete reads and is sent again: one request more
//! than reading first.
//!
//! `delete` and `delete_if` never touch a document created after their read: when the revision
//! read is gone and another incarnation stands at the key (told apart by `created_at` and the
//! history), the call reports that nothing was deleted (`false`, `NotFound`); it never answers
//! a refusal after its own lost attempt deleted.
//!
//! **When a write answers `Unavailable`** (it may or may not have been applied; read to find
//! out), and only then:
//! - the SDK gave up (timeouts, 5xx, dropped connections outlasting its retries) and one read
//!   afterwards does not find the call's identity on the item;
//! - a `put` (replacing), `update` or `update_if` whose answer was lost, when before the
//!   resend another caller deleted the document, deleted and re-created it, or wrote it more
//!   than 15 times (the history no longer tells);
//! - with `trust_request_tokens = false` (services that ignore the token, such as moto): a
//!   create, delete or batch whose answer was lost and whose resend was refused, when neither
//!   the items' histories nor the counter prove it committed;
//! - with fast counters: a create whose answer was lost and whose resend met another caller's
//!   document (a delete in that position, in either mode, is settled by its stamp: see
//!   "Change feed").
//!
//! Why 16 identities per item: see the `history` module — the SDK's resend follows within
//! about 60 ms ([`DynamoStore::connect`] sets a 20 ms first backoff), in which about 8 other
//! writes of one item fit under heavy contention; 16 doubles that for about 530 bytes per
//! item.
//!
//! `put` reads first: the replacement keeps `created_*`, and the time never goes back
//! (`updated_at` is at least the stored one). With a quota set, `create` and `put` first read
//! the site's counters (one Query).
//!
//! ## Deadlines
//! `timeout_ms` (per attempt, default 10 s), `operation_timeout_ms` (per request with its
//! retries, default 30 s) and `connect_timeout_ms` (default 3 s) in
//! [`DynamoDbConfig`](docstore::config::DynamoDbConfig) and the URL. An endpoint that accepts
//! connections and never answers gives `Unavailable` within `operation_timeout_ms` (plus one
//! read for a write, to settle it).
//!
//! ## Queries
//! DynamoDB cannot filter inside the JSON text, so queries read the collection with a
//! strongly consistent Query on `pk` in id order (pages followed with `LastEvaluatedKey`) and
//! the reference evaluator ([`docstore::query::CompiledQuery::evaluate`]) gives the answer:
//! - a query in id order (no `order`, or `$id` first, either direction) starts at the cursor's
//!   id (`ExclusiveStartKey`, `ScanIndexForward`) and stops reading once its page is full, so
//!   it is exact on collections of any size and costs what it returns (plus what the filter
//!   skips). Without a filter it asks DynamoDB for one item more than the page, so `next` is
//!   exact; with a filter, DynamoDB pages grow from `max(limit + 1, 16)` items, and when the
//!   page filled exactly with items left unread, `next` is set without reading on: the page
//!   after it may then be empty, with `next = None` (the contract allows this);
//! - any other order reads at most `max_scan` items (default 10 000) and 64 MiB of document
//!   data. When it had to stop before the end, the page has `exhausted_scan = true` and a
//!   `tracing` warning is logged: the answer then considers only the first documents by id.
//!
//! ## Change feed
//! [`Store::changes`](docstore::Store::changes) and [`Store::watch`](docstore::Store::watch)
//! read the table's DynamoDB stream (`NEW_AND_OLD_IMAGES`), which
//! [`DynamoStore::create_table`] turns on and [`DynamoStore::enable_stream`] (`docstore
//! streams enable`) turns on for an existing table; writes made before that are in no stream.
//! - **Order**: per shard, not across the table. DynamoDB keeps one item's records in one
//!   shard at a time and in write order, and the feed reads a shard's parent to its end before
//!   its children, so each document's changes come in version order; changes of documents in
//!   different shards may come in another order than they committed.
//! - **Retention**: Streams keeps records 24 hours. A cursor older than that, of a shard no
//!   longer in the stream, or of another stream (the table recreated, the stream enabled
//!   again) is [`Error::CursorExpired`](docstore::Error::CursorExpired): read again from
//!   `Oldest` or `Now` after a resync. A cursor's unread shards are read from their first
//!   record, so records trimmed since are an expired cursor, never a silent gap; only
//!   `FeedStart::Oldest` starts at what the stream still retains.
//! - **Visibility delay**: a committed write reaches the stream shortly after it commits
//!   (DynamoDB documents "near-real time", with no bound; the emulators: at once), so a read
//!   right after a write may not show it yet. A watcher sees it within the delay plus
//!   `feed_poll_ms`.
//! - **Polling**: Streams has no push. A watcher at the end of the feed waits
//!   `feed_poll_ms` (default 1000 ms, [`DynamoDbConfig`](docstore::config::DynamoDbConfig))
//!   before it reads again. A page read costs a GetShardIterator and one to three GetRecords
//!   per open shard; the stream's ARN is kept by the store, and its shard list for 10 s
//!   (listed again at once when a shard ends or a cursor names a shard it does not hold).
//!   AWS advises at most two readers per shard at a time (more are throttled).
//! - **Deletes' actor and time**: a stream record of a removed item says neither, so every
//!   delete (`delete`, `delete_if`, and each delete of `write_all`) writes a stamp item
//!   (`<site>#__removed`, the actor, the time, the deleting call's identity; expiring after
//!   48 hours by time to live) in the delete's own `TransactWriteItems` (a `write_all` whose
//!   writes and counters leave no room in its 100 actions writes the rest right after it
//!   commits). Cost: about 100 bytes plus
//!   the actor per delete, one write unit more (two, transactional); with fast counters a
//!   delete is a two-item `TransactWriteItems` instead of a `DeleteItem`, still followed by
//!   the counter's `UpdateItem`. A feed page reads its deletes' stamps with consistent
//!   `BatchGetItem`s (half a read unit each). A delete made outside docstore (console, other
//!   SDKs, time to live) has no stamp: the feed shows it with an empty actor and the stream's
//!   approximate time, and logs a warning. The stamp also settles a delete whose answer was
//!   lost: it names the call that deleted that revision.
//! - **Expiries**: a document removed as its expiry shows as one `Expired` change (time: the
//!   expiry instant, actor empty), read from its expiry stamp.
//! - **What is not shown**: counters, index records, delete records, stamps, expiry markers
//!   and other internal items, and rewrites that move neither the version nor the write identity.
//!
//! ## Sizes and errors
//! `max_doc_bytes` above [`MAX_DOC_BYTES_LIMIT`] (what a 400 KB item holds next to the longest
//! keys, the other attributes, a full write history and two actors of the longest allowed,
//! 256 bytes) is refused at construction.
//!
//! Condition failures are `AlreadyExists`, `Conflict { current }` or `NotFound`; throttling,
//! timeouts, I/O errors and 5xx answers that outlast the SDK's retries are `Unavailable`; a
//! missing table is `Backend` with a message naming the table; anything else is `Backend`.

// The write futures nest the delete path of an expired document (`sweep`) inside the
// counter, guard and marker reads of each write: deeper types than the default limit allows.
#![recursion_limit = "256"]

mod attempts;
mod backoff;
mod batch;
mod batch_get;
mod counters;
mod deleted;
mod errors;
mod expiring;
mod expiry_check;
mod explain;
mod feed;
mod guard_check;
mod guards;
mod history;
mod id_order;
mod index;
mod index_admin;
mod index_reads;
mod item;
mod known;
mod layout;
mod quick_delete;
mod reads;
mod recount;
mod scan;
mod send;
mod sites;
mod stamps;
mod store;
mod stream_admin;
mod sweep;
mod table_scan;
mod ttl_admin;
mod writes;

/// The DynamoDB Streams SDK this crate reads the change feed with, for building the client
/// [`DynamoStore::from_client`] takes.
pub use aws_sdk_dynamodbstreams;
pub use index::{IndexState, MAX_SLOTS, TableIndex};
pub use index_admin::BuildProgress;
pub use item::MAX_DOC_BYTES_LIMIT;
pub use reads::PARTIAL_ANSWER_TARGET;
pub use store::DynamoStore;
pub use stream_admin::StreamEnabled;
pub use ttl_admin::TtlEnabled;

/// Entry points for the fuzz targets (`fuzz/`) and their replay test; not part of the API.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::feed::reencode_cursor;
}
