//! # docstore-dynamodb
//!
//! [`DynamoStore`]: the docstore [`Store`](docstore::Store) on one Amazon DynamoDB table (or a
//! DynamoDB-compatible service), exactly as seed 001 describes it.
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
//! let store = DynamoStore::connect(&config, StoreOptions::default()).await?;
//! store.create_table().await?; // development only
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
//! One table, string partition key `pk` and string sort key `sk`:
//! - documents: `pk = "<site>#<collection>"`, `sk = <id>`, `data` (S, the JSON text of the
//!   data), `created_at` / `updated_at` (N, unix nanoseconds), `created_by` / `updated_by` (S),
//!   `version` (N), and `w` (S, a random identity of the call) when `create` or `update_if`
//!   wrote the item (`put` and `update` remove it);
//! - counters: `pk = "<site>#__collections"`, `sk = <collection>`, `n` (N), moved with an atomic
//!   `ADD` right after each create and delete (and a `put` that created). They are not
//!   transactional with the document write, so a crash in between leaves a counter off by
//!   one; `collections` lists the counters with `n > 0` and `count` sums them (they serve the
//!   soft per-site quota).
//!
//! ## Writes, and what each does when an answer is lost
//! The SDK resends a request whose answer was lost (an HTTP 500, which DynamoDB documents as
//! "may have succeeded", a timeout, a dropped connection); the resend then meets what the
//! first attempt stored. Every write below counts the attempts the SDK made, so it knows when
//! that can have happened.
//!
//! | call | requests (no contention, no quota) | lost answer |
//! |---|---|---|
//! | `get` | GetItem (consistent) | — |
//! | `create` | conditional PutItem (`attribute_not_exists(pk)`) with a fresh `w`, counter `ADD` | the resend fails on the item the first attempt wrote; it comes back (`ALL_OLD`) equal to what this call wrote, `w` included, so the call reports success once, version 1, counted once |
//! | `restore` | like `create`, with the given document | like `create` |
//! | `put` | one UpdateItem: `if_not_exists` keeps `created_*`, `ADD version 1`, `REMOVE w`; counter `ADD` when it created | the resend applies again: same data, no error, nothing lost, but the version grows by 2. When the lost attempt created the document (the resend finds version 2 with this call's creation stamp) the counter is still moved once |
//! | `update` | GetItem, PutItem conditioned on `version`, `created_at`, `updated_at` | the resend fails on this call's own write; `update` reads again and applies the patch again — a merge patch applied twice gives the same data — so no error and nothing lost, but the version grows by 2 |
//! | `update_if` | GetItem, one PutItem conditioned on the revision read, with a fresh `w` | like `create`: its own item is recognised, success once, version + 1 |
//! | `delete` | GetItem, DeleteItem conditioned on the revision read, counter `ADD -1` | the resend finds the document gone; since it was there at the read and this call's request had been sent more than once, the call reports `true` and moves the counter once |
//! | `delete_if` | the same, with the expected version checked on the read | as `delete`: `Ok(())`, no `NotFound` |
//!
//! When another write changes the document between a lost attempt of `create` or `update_if`
//! and its resend, the item the resend fails on is no longer this call's, and nothing can
//! tell whether the lost attempt was applied. The call then answers `Unavailable` (which,
//! unlike every refusal, may have changed something) instead of a false `AlreadyExists` or
//! `Conflict`: a `create` whose creation stamp (`created_at`, `created_by`) is still on the
//! item, an `update_if` whose document is gone or has a higher version of the same creation.
//! Such a `create` still moves the counter (the stamp makes it almost surely its own). A
//! `create` whose document was deleted and created again by others inside that window would
//! still answer `AlreadyExists`.
//!
//! `put` has no read, so a `put` whose clock is behind the stored `updated_at` is conditioned
//! on `updated_at <= now` and, when that fails, sent again at the stored `updated_at`:
//! timestamps never go back. With a quota set, `create` and `put` first read the site's
//! counters (one Query); a `put` in a full site is conditioned on the document existing.
//!
//! Counter `ADD`s are never resent after a lost answer (an `ADD` applied twice would count
//! twice): the SDK's retries are off for them and only throttled ones are sent again. A lost
//! counter answer is logged as a warning; the counter is then exact when the lost attempt was
//! applied and one short when it was not, the drift seed 001 already accepts. A `delete`
//! racing another `delete` of the same document inside the resend window may move the
//! counter twice; counters never go below zero.
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
//! ## Sizes and errors
//! `max_doc_bytes` above [`MAX_DOC_BYTES_LIMIT`] (what a 400 KB item holds next to the longest
//! keys, the other attributes and two 1 KiB actors) is refused at construction. A write whose
//! actor is so long that the item would pass 400 KB is `InvalidArgument`.
//!
//! Condition failures are `AlreadyExists`, `Conflict { current }` or `NotFound`; throttling,
//! timeouts, I/O errors and 5xx answers that outlast the SDK's retries are `Unavailable`; a
//! missing table is `Backend` with a message naming the table; anything else is `Backend`.

mod attempts;
mod backoff;
mod batch;
mod counters;
mod errors;
mod history;
mod item;
mod reads;
mod recount;
mod scan;
mod send;
mod store;
mod writes;

pub use item::MAX_DOC_BYTES_LIMIT;
pub use store::DynamoStore;
