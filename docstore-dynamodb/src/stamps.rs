//! Delete stamps: who deleted a document revision, and when. A stream's REMOVE record holds
//! only the removed item, so every delete writes a stamp naming its actor and time, in the
//! same `TransactWriteItems` as the delete (so a stamp exists exactly when its delete
//! committed), and the change feed reads it back for the REMOVE.
//!
//! The item: `pk` = `<site>#__removed` with the deleted id's partition suffix
//! ([`crate::layout`]; names starting `__` are reserved, so no collection has this partition), `sk` = `<collection>#<revision>#<id>` where `<revision>` is the
//! removed revision's write identity `w` (or `<version>.<created_at>` for an item written
//! before every write set one) — collection names and revisions hold no `#`, so keys of
//! different revisions never meet, and a revision is deleted at most once. Attributes: `by`
//! (S, the actor), `at` (N, unix nanoseconds), `dw` (S, the deleting call's write identity,
//! which also proves that call's commit after a lost answer) and `expires` (N, unix seconds,
//! for DynamoDB's time to live): twice the stream's 24-hour retention, so a stamp outlives
//! every record that can ask for it.
//!
//! Cost: one more item in the delete's transaction — about 100 bytes plus the actor, so one
//! write unit, two as a transactional write — and, with fast counters, a delete becomes a
//! two-item `TransactWriteItems` (the delete and its stamp) instead of a `DeleteItem`, still
//! followed by the counter's own `UpdateItem` (so deletes do not contend on the counter item).
//! An expiry's stamp ([`crate::expiring`]) has no actor, the expiry instant as `at`, and `ex`
//! (BOOL, true): the feed shows it as an `Expired` change.
//!
//! Reading the feed costs one consistent read (half a read unit) per delete it shows, the
//! stamps of a page asked for together in `BatchGetItem`s.

use crate::batch_get::MAX_KEYS;
use crate::history::Stored;
use crate::item::{Item, PK, SK, num, number, string, text};
use crate::layout::{Layout, REMOVED};
use crate::store::DynamoStore;
use aws_sdk_dynamodb::types::AttributeValue;
use docstore::{Key, Result, WriteId};
use std::collections::HashMap;

/// The stamp's actor (S).
const BY: &str = "by";
/// The stamp's time, unix nanoseconds (N).
const AT: &str = "at";
/// The deleting call's write identity (S).
const DELETER: &str = "dw";
/// On the stamp of an expiry ([`crate::expiring`]): `true` (BOOL). The feed then shows the
/// delete as [`ChangeKind::Expired`](docstore::ChangeKind::Expired) at the expiry instant.
const EXPIRED: &str = "ex";
/// How long a stamp is kept: twice the stream's retention.
const KEPT_FOR_SECS: i64 = 2 * 24 * 60 * 60;

/// Who deleted a revision, and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    /// The deleting call's actor.
    pub(crate) actor: String,
    /// When it deleted, unix nanoseconds.
    pub(crate) time: i64,
    /// The deleting call's write identity.
    pub(crate) deleter: String,
    /// Whether the delete was the document's expiry (the sweep's, or a write's that found it
    /// expired): actor empty, time the expiry instant.
    pub(crate) expired: bool,
}

impl Stamp {
    /// The stamp an item holds.
    fn of(item: &Item) -> Result<Stamp> {
        Ok(Stamp {
            actor: string(item, BY)?.to_owned(),
            time: number(item, AT)?,
            deleter: string(item, DELETER)?.to_owned(),
            expired: matches!(item.get(EXPIRED), Some(AttributeValue::Bool(true))),
        })
    }
}

/// The key of the stamp of the delete of `removed` at `key`.
fn stamp_key(layout: Layout, key: &Key, removed: &Stored) -> Item {
    let revision = match removed.history.first() {
        Some(w) => w.clone(),
        None => format!("{}.{}", removed.doc.version, removed.doc.created_at),
    };
    HashMap::from([
        (PK.to_owned(), text(layout.site_items_pk(REMOVED, key))),
        (
            SK.to_owned(),
            text(format!("{}#{revision}#{}", key.collection(), key.id())),
        ),
    ])
}

/// The stamp item of the delete `w` by `actor` at `now` (unix nanoseconds) of `removed`.
pub(crate) fn stamp_item(
    layout: Layout,
    key: &Key,
    removed: &Stored,
    actor: &str,
    now: i64,
    w: &WriteId,
) -> Item {
    let mut item = stamp_key(layout, key, removed);
    item.insert(BY.to_owned(), text(actor));
    item.insert(AT.to_owned(), num(now));
    item.insert(DELETER.to_owned(), text(w.as_str()));
    item.insert(
        crate::deleted::EXPIRES.to_owned(),
        num(now / 1_000_000_000 + KEPT_FOR_SECS),
    );
    item
}

/// The stamp of the expiry of `removed` (which has an expiry) by the delete `w` at `now`:
/// no actor, the expiry instant as its time, marked expired; kept as long as any stamp from
/// `now` on.
pub(crate) fn expiry_stamp_item(
    layout: Layout,
    key: &Key,
    removed: &Stored,
    now: i64,
    w: &WriteId,
) -> Item {
    let mut item = stamp_item(layout, key, removed, "", now, w);
    let at = removed.doc.expires_at.unwrap_or(now);
    item.insert(AT.to_owned(), num(at));
    item.insert(EXPIRED.to_owned(), AttributeValue::Bool(true));
    item
}

impl DynamoStore {
    /// The stamp of the delete of `removed` at `key` (a strongly consistent read), `None`
    /// when no docstore delete removed it.
    pub(crate) async fn stamp(&self, key: &Key, removed: &Stored) -> Result<Option<Stamp>> {
        let layout = self.layout().await?;
        let Some(item) = self.consistent_get(stamp_key(layout, key, removed)).await? else {
            return Ok(None);
        };
        Stamp::of(&item).map(Some)
    }
}

impl DynamoStore {
    /// The stamps of the deletes of `removed` (key and removed revision each), in its order,
    /// in consistent `BatchGetItem`s of 100 (a feed page reads them together instead of one
    /// `GetItem` per delete); `None` where no docstore delete left one.
    pub(crate) async fn stamps(&self, removed: &[(&Key, &Stored)]) -> Result<Vec<Option<Stamp>>> {
        let layout = self.layout().await?;
        let keys: Vec<Item> = removed
            .iter()
            .map(|(key, r)| stamp_key(layout, key, r))
            .collect();
        // The same stamp asked twice in one request is refused: ask each once.
        let mut distinct = keys.clone();
        distinct.sort_by_key(item_id);
        distinct.dedup_by(|a, b| item_id(a) == item_id(b));
        let mut found: HashMap<(String, String), Stamp> = HashMap::new();
        for chunk in distinct.chunks(MAX_KEYS) {
            for item in self.batch_get(chunk.to_vec(), "delete stamps").await? {
                found.insert(item_id(&item), Stamp::of(&item)?);
            }
        }
        Ok(keys
            .iter()
            .map(|k| found.get(&item_id(k)).cloned())
            .collect())
    }
}

/// An item's `pk` and `sk` (empty when missing: stamps always have both).
fn item_id(item: &Item) -> (String, String) {
    let get = |name: &str| string(item, name).map(str::to_owned).unwrap_or_default();
    (get(PK), get(SK))
}
