//! The table layout (`docs/contract.md`): attribute names, items built from documents, documents read
//! back from items, and item sizes.

use crate::history::HISTORY_LEN;
use crate::layout::Layout;
use aws_sdk_dynamodb::types::AttributeValue;
use docstore::{Data, Document, Error, Key, Result};
use std::collections::HashMap;

/// An item as the SDK holds it.
pub(crate) type Item = HashMap<String, AttributeValue>;

/// Partition key (S): `<site>#<collection>`, `<site>#__collections` and others, each with a
/// partition suffix (see [`crate::layout`]).
pub(crate) const PK: &str = "pk";
/// Sort key (S): the document id, or the collection name of a counter.
pub(crate) const SK: &str = "sk";
/// The JSON text of the document data (S).
pub(crate) const DATA: &str = "data";
/// Creation time, unix nanoseconds (N).
pub(crate) const CREATED_AT: &str = "created_at";
/// Last write time, unix nanoseconds (N).
pub(crate) const UPDATED_AT: &str = "updated_at";
/// The actor of the creating write (S).
pub(crate) const CREATED_BY: &str = "created_by";
/// The actor of the last write (S).
pub(crate) const UPDATED_BY: &str = "updated_by";
/// The version (N).
pub(crate) const VERSION: &str = "version";
/// The random identity of the write call that produced this revision of the item (S).
pub(crate) const WRITE_ID: &str = "w";
/// The identities of the writes before it, most recent first (L of S; see [`crate::history`]).
pub(crate) const WRITE_HISTORY: &str = "wh";
/// On a counter item: the identity of the last create or delete that moved it in the same
/// transaction (S; exact counters only), which settles a resent delete whose document is gone.
pub(crate) const COUNTER_WRITE_ID: &str = "w";
/// A counter's document count (N).
pub(crate) const COUNT: &str = "n";
/// When the document expires, unix nanoseconds of the store's clock (N; absent when it never
/// expires: `docs/contract.md`, "Expiry").
pub(crate) const EXPIRES_AT: &str = "expires_at";
/// DynamoDB's time to live on a document item (N, unix seconds): its expiry plus
/// [`TTL_GRACE_SECS`], the service's backstop for a document no sweep removed
/// ([`crate::expiring`]). The same attribute delete records and stamps expire by.
pub(crate) const TTL: &str = crate::deleted::EXPIRES;
/// How long after its expiry the service's time to live may delete a document item that the
/// library's sweep missed: one day, so that the service only removes what no sweep ran for
/// (its delete bypasses the counters: see [`crate::expiring`]).
pub(crate) const TTL_GRACE_SECS: i64 = 24 * 60 * 60;

/// DynamoDB's item size limit: 400 KB.
pub(crate) const ITEM_LIMIT: usize = 409_600;
/// The bytes of an actor the size check reserves room for (twice: creator and last writer):
/// the longest actor the contract allows.
pub(crate) const ACTOR_RESERVE: usize = docstore::document::MAX_ACTOR_BYTES;
/// The most a number attribute takes (DynamoDB counts at most 21 bytes per number).
const NUMBER_BYTES: usize = 21;
/// The length of a write identity as stored (128 bits in hex).
const WRITE_ID_BYTES: usize = 32;
/// What the write history `wh` takes at most: the list (3 bytes), and per earlier identity
/// one byte and its text.
const HISTORY_BYTES: usize = 3 + (HISTORY_LEN - 1) * (1 + WRITE_ID_BYTES);

/// The largest `max_doc_bytes` a store accepts: the item limit less the longest keys, the
/// attribute names, the numbers (expiry and time to live included), the full write history and
/// two actors of the longest kind.
pub const MAX_DOC_BYTES_LIMIT: usize = ITEM_LIMIT
    - item_overhead(
        docstore::key::MAX_NAME_LEN * 2 + 1 + crate::layout::MAX_SUFFIX_BYTES,
        docstore::key::MAX_ID_BYTES,
        ACTOR_RESERVE,
        ACTOR_RESERVE,
    );

/// The size DynamoDB counts for an item without its `data` text: names plus values.
pub(crate) const fn item_overhead(
    pk: usize,
    sk: usize,
    created_by: usize,
    updated_by: usize,
) -> usize {
    PK.len()
        + pk
        + SK.len()
        + sk
        + DATA.len()
        + CREATED_AT.len()
        + NUMBER_BYTES
        + UPDATED_AT.len()
        + NUMBER_BYTES
        + CREATED_BY.len()
        + created_by
        + UPDATED_BY.len()
        + updated_by
        + VERSION.len()
        + NUMBER_BYTES
        + WRITE_ID.len()
        + WRITE_ID_BYTES
        + WRITE_HISTORY.len()
        + HISTORY_BYTES
        + EXPIRES_AT.len()
        + NUMBER_BYTES
        + TTL.len()
        + NUMBER_BYTES
}

/// The shard, in `0..shards`, that a document with this id belongs to wherever the layout
/// spreads a collection over several items or partitions (counter shards, index partitions):
/// [`stable_hash`](docstore::driver::stable_hash) (FNV-1a) of the id's bytes. Part of the
/// table layout: it must never change.
pub(crate) fn shard_of(id: &str, shards: u32) -> u32 {
    (docstore::driver::stable_hash(id.as_bytes()) % u64::from(shards.max(1))) as u32
}

/// The primary key of a document in a table of `layout`.
pub(crate) fn key_of(key: &Key, layout: Layout) -> Item {
    HashMap::from([
        (PK.to_owned(), AttributeValue::S(layout.document_pk(key))),
        (SK.to_owned(), AttributeValue::S(key.id().to_owned())),
    ])
}

/// A number attribute.
pub(crate) fn num(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// A string attribute.
pub(crate) fn text(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

/// The JSON text stored in `data`.
pub(crate) fn data_text(data: &Data) -> String {
    serde_json::to_string(data).expect("a JSON map always serializes")
}

/// The full item of `doc` at `key` with its write history (most recent first: `w`, then the
/// earlier ones in `wh`).
pub(crate) fn document_item(key: &Key, doc: &Document, history: &[String], layout: Layout) -> Item {
    let mut item = key_of(key, layout);
    item.insert(DATA.to_owned(), text(data_text(&doc.data)));
    item.insert(CREATED_AT.to_owned(), num(doc.created_at));
    item.insert(UPDATED_AT.to_owned(), num(doc.updated_at));
    item.insert(CREATED_BY.to_owned(), text(&doc.created_by));
    item.insert(UPDATED_BY.to_owned(), text(&doc.updated_by));
    item.insert(VERSION.to_owned(), num(doc.version));
    if let Some(at) = doc.expires_at {
        item.insert(EXPIRES_AT.to_owned(), num(at));
        item.insert(TTL.to_owned(), num(ttl_seconds(at)));
    }
    if let Some((w, earlier)) = history.split_first() {
        item.insert(WRITE_ID.to_owned(), text(w));
        if !earlier.is_empty() {
            item.insert(
                WRITE_HISTORY.to_owned(),
                AttributeValue::L(earlier.iter().map(text).collect()),
            );
        }
    }
    item
}

/// The time to live (unix seconds) of a document expiring at `expires_at` (unix
/// nanoseconds): the expiry rounded up to a second, plus [`TTL_GRACE_SECS`].
pub(crate) fn ttl_seconds(expires_at: i64) -> i64 {
    expires_at
        .div_euclid(1_000_000_000)
        .saturating_add(i64::from(expires_at.rem_euclid(1_000_000_000) != 0))
        .saturating_add(TTL_GRACE_SECS)
}

/// Whether `item` is a stored document (and not, say, the bare key that an emulator returns
/// as the "old" image of an item an update created).
pub(crate) fn is_document(item: &Item) -> bool {
    item.contains_key(VERSION)
}

/// The document an item holds.
pub(crate) fn parse_document(item: &Item) -> Result<Document> {
    let expires_at = match item.get(EXPIRES_AT) {
        None => None,
        Some(_) => Some(number(item, EXPIRES_AT)?),
    };
    let doc = Document {
        expires_at,
        id: string(item, SK)?.to_owned(),
        data: serde_json::from_str(string(item, DATA)?)
            .map_err(|e| corrupt(item, DATA, e.to_string()))?,
        created_at: number(item, CREATED_AT)?,
        updated_at: number(item, UPDATED_AT)?,
        created_by: string(item, CREATED_BY)?.to_owned(),
        updated_by: string(item, UPDATED_BY)?.to_owned(),
        version: number(item, VERSION)?,
    };
    Ok(doc)
}

/// A string attribute of `item`.
pub(crate) fn string<'a>(item: &'a Item, name: &str) -> Result<&'a str> {
    match item.get(name) {
        Some(AttributeValue::S(s)) => Ok(s),
        _ => Err(corrupt(item, name, "missing or not a string".into())),
    }
}

/// A number attribute of `item`.
pub(crate) fn number<T: std::str::FromStr>(item: &Item, name: &str) -> Result<T> {
    match item.get(name) {
        Some(AttributeValue::N(n)) => n
            .parse()
            .map_err(|_| corrupt(item, name, format!("{n:?} is not an integer"))),
        _ => Err(corrupt(item, name, "missing or not a number".into())),
    }
}

fn corrupt(item: &Item, name: &str, what: String) -> Error {
    let at = match (item.get(PK), item.get(SK)) {
        (Some(AttributeValue::S(pk)), Some(AttributeValue::S(sk))) => format!("{pk}/{sk}"),
        _ => "an item".to_owned(),
    };
    Error::Backend {
        message: format!("{at}: attribute `{name}` {what}: not written by docstore"),
        source: None,
    }
}

/// Refuses a write whose item would exceed DynamoDB's limit (only possible with actors beyond
/// [`ACTOR_RESERVE`]), before anything is sent.
pub(crate) fn check_item_size(
    key: &Key,
    data_len: usize,
    created_by: usize,
    updated_by: usize,
) -> Result<()> {
    let size = data_len
        + item_overhead(
            // The longest partition suffix, whatever the table's layout: the same limit on
            // every table.
            key.site().len() + 1 + key.collection().len() + crate::layout::MAX_SUFFIX_BYTES,
            key.id().len(),
            created_by,
            updated_by,
        );
    if size > ITEM_LIMIT {
        return Err(Error::invalid(format!(
            "the DynamoDB item would be about {size} bytes, above the {ITEM_LIMIT}-byte item \
             limit: shorten the actor or the data"
        )));
    }
    Ok(())
}

/// The size DynamoDB counts for `item`: every attribute's name and value.
pub(crate) fn item_size(item: &Item) -> usize {
    fn value_size(value: &AttributeValue) -> usize {
        match value {
            AttributeValue::S(s) => s.len(),
            AttributeValue::N(_) => NUMBER_BYTES,
            AttributeValue::B(b) => b.as_ref().len(),
            AttributeValue::L(list) => 3 + list.iter().map(|v| 1 + value_size(v)).sum::<usize>(),
            _ => NUMBER_BYTES,
        }
    }
    item.iter()
        .map(|(name, value)| name.len() + value_size(value))
        .sum()
}

/// Refuses an item (with its index keys) above DynamoDB's item limit, before anything is
/// sent.
pub(crate) fn check_full_item(item: &Item) -> Result<()> {
    let size = item_size(item);
    if size > ITEM_LIMIT {
        return Err(Error::invalid(format!(
            "the DynamoDB item would be about {size} bytes with its index keys, above the \
             {ITEM_LIMIT}-byte item limit: store less data in this collection or declare \
             fewer indexes on long values"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn documents_round_trip_through_items() {
        let key = Key::new("s", "c", "id-1").unwrap();
        let doc = Document {
            expires_at: None,
            id: "id-1".into(),
            data: docstore::object(json!({"a": u64::MAX, "b": 1.0, "c": i64::MIN, "d": "é\n"}))
                .unwrap(),
            created_at: -5,
            updated_at: i64::MAX,
            created_by: "".into(),
            updated_by: "bob".into(),
            version: u64::MAX,
        };
        let history = vec!["a".repeat(32), "b".repeat(32)];
        let item = document_item(&key, &doc, &history, Layout::SINGLE);
        assert_eq!(string(&item, PK).unwrap(), "s#c");
        assert_eq!(parse_document(&item).unwrap(), doc);
        let stored = crate::history::Stored::from_item(&item).unwrap();
        assert_eq!(stored.history, history);
        let item = document_item(&key, &doc, &history[..1], Layout::SINGLE);
        assert!(
            !item.contains_key(WRITE_HISTORY),
            "a creation has no earlier writes"
        );
        let item = document_item(&key, &doc, &[], Layout::SINGLE);
        assert_eq!(parse_document(&item).unwrap(), doc);
        assert!(
            !item.contains_key(TTL),
            "a document that never expires has no TTL"
        );
        let expiring = Document {
            expires_at: Some(1_700_000_000_500_000_000),
            ..doc
        };
        let item = document_item(&key, &expiring, &[], Layout::SINGLE);
        assert_eq!(parse_document(&item).unwrap(), expiring);
        assert_eq!(
            number::<i64>(&item, TTL).unwrap(),
            1_700_000_001 + TTL_GRACE_SECS
        );
        assert_eq!(ttl_seconds(2_000_000_000), 2 + TTL_GRACE_SECS);
    }

    #[test]
    fn corrupt_items_are_backend_errors() {
        let mut item = key_of(&Key::new("s", "c", "i").unwrap(), Layout::SINGLE);
        item.insert(DATA.into(), text("[1]"));
        let err = parse_document(&item).unwrap_err();
        assert!(matches!(err, Error::Backend { .. }), "{err}");
        assert!(!is_document(&item));
    }

    #[test]
    fn the_limit_leaves_room_for_every_attribute() {
        const { assert!(MAX_DOC_BYTES_LIMIT > docstore::DEFAULT_MAX_DOC_BYTES) };
        const { assert!(MAX_DOC_BYTES_LIMIT < ITEM_LIMIT - 2 * ACTOR_RESERVE) };
        let key = Key::new("s".repeat(64), "c".repeat(64), "i".repeat(512)).unwrap();
        check_item_size(&key, MAX_DOC_BYTES_LIMIT, ACTOR_RESERVE, ACTOR_RESERVE).unwrap();
        assert!(
            check_item_size(&key, MAX_DOC_BYTES_LIMIT, ACTOR_RESERVE + 1, ACTOR_RESERVE).is_err()
        );
    }
}
