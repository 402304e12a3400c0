//! Records of caller-identified deletes: the document item is gone, so the delete's write
//! identity is kept on an item of its own, written in the same transaction as the delete, so
//! that a repeated delete (see [`docstore::driver::Origin`]) is recognised and never removes
//! a document created at the key since.
//!
//! The item: `pk` = `<site>#__deleted` with the id's partition suffix ([`crate::layout`];
//! names starting `__` are reserved, so no collection has this partition), `sk` = `<collection>#<id>` (collection names hold no `#`), `wh` (L of
//! S) the identities of the key's recorded deletes, newest first, `expires` (N, Unix seconds)
//! for DynamoDB's time to live, which `create_table` enables. Reads ignore a record past
//! `expires` (TTL deletes late), so the window is the same as on every backend:
//! [`DELETE_IDS_KEPT_FOR`](docstore::identity::DELETE_IDS_KEPT_FOR).

use crate::history::Stored;
use crate::item::{Item, PK, SK, WRITE_HISTORY, is_document, key_of, num, text};
use crate::layout::{DELETED, Layout};
use crate::store::DynamoStore;
use aws_sdk_dynamodb::types::{AttributeValue, Update};
use docstore::identity::{DELETE_IDS_KEPT_FOR, KEPT_WRITE_IDS, WriteIds};
use docstore::{Key, Result, WriteId};
use std::collections::HashMap;

/// The attribute DynamoDB's time to live reads: when the record may go, in Unix seconds.
pub(crate) const EXPIRES: &str = "expires";

/// The key of the delete record of `key`.
fn record_key(layout: Layout, key: &Key) -> Item {
    HashMap::from([
        (PK.to_owned(), text(layout.site_items_pk(DELETED, key))),
        (
            SK.to_owned(),
            text(format!("{}#{}", key.collection(), key.id())),
        ),
    ])
}

/// The record the delete `id` of `key` writes at `now_nanos`: `id`, then the identities of
/// the key's `earlier` recorded deletes.
pub(crate) fn record_item(
    layout: Layout,
    key: &Key,
    earlier: &WriteIds,
    id: &WriteId,
    now_nanos: i64,
) -> Item {
    let mut ids = WriteIds::default();
    ids.record(id);
    ids.extend_older(earlier);
    let expires = now_nanos / 1_000_000_000 + DELETE_IDS_KEPT_FOR.as_secs() as i64;
    let mut item = record_key(layout, key);
    let list = ids.iter().map(|id| text(id.as_str())).collect();
    item.insert(WRITE_HISTORY.to_owned(), AttributeValue::L(list));
    item.insert(EXPIRES.to_owned(), num(expires));
    item
}

/// For a delete `id` of `key` at `now_nanos` that did not read the record: the record's
/// update in `table` that adds `id` as the newest identity, conditioned on the record being
/// absent, or live with room for one more and without `id`. A failed condition cancels the
/// delete's transaction, and the delete then reads the record: `id` in it means an earlier
/// try did this delete; a full or lapsed record is written whole ([`record_item`]).
pub(crate) fn record_append(
    table: &str,
    layout: Layout,
    key: &Key,
    id: &WriteId,
    now_nanos: i64,
) -> Result<Update> {
    let now_secs = now_nanos / 1_000_000_000;
    let expires = now_secs + DELETE_IDS_KEPT_FOR.as_secs() as i64;
    let condition = "attribute_not_exists(#wh) \
         OR (#ex > :now AND size(#wh) < :kept AND NOT contains(#wh, :id))";
    Update::builder()
        .table_name(table)
        .set_key(Some(record_key(layout, key)))
        .update_expression("SET #wh = list_append(:ids, if_not_exists(#wh, :none)), #ex = :ex")
        .condition_expression(condition)
        .expression_attribute_names("#wh", WRITE_HISTORY)
        .expression_attribute_names("#ex", EXPIRES)
        .expression_attribute_values(":ids", AttributeValue::L(vec![text(id.as_str())]))
        .expression_attribute_values(":none", AttributeValue::L(Vec::new()))
        .expression_attribute_values(":id", text(id.as_str()))
        .expression_attribute_values(":now", num(now_secs))
        .expression_attribute_values(":kept", num(KEPT_WRITE_IDS as i64))
        .expression_attribute_values(":ex", num(expires))
        .build()
        .map_err(crate::send::build_error)
}

impl DynamoStore {
    /// The identities of the recorded deletes of `key`, newest first (a strongly consistent
    /// read; empty without a record or past its window).
    pub(crate) async fn recorded_deletes(&self, key: &Key) -> Result<WriteIds> {
        let layout = self.layout().await?;
        let record = self.consistent_get(record_key(layout, key)).await?;
        let now_secs = self.options.clock.now() / 1_000_000_000;
        Ok(match record {
            Some(item) if !expired(&item, now_secs) => ids_of(&item),
            _ => WriteIds::default(),
        })
    }
}

impl DynamoStore {
    /// The document at `key` with its write history, and the identities of the key's
    /// recorded deletes (as [`recorded_deletes`](Self::recorded_deletes)), read together in
    /// one strongly consistent `BatchGetItem`.
    pub(crate) async fn read_with_deletes(&self, key: &Key) -> Result<(Option<Stored>, WriteIds)> {
        let layout = self.layout().await?;
        let record = record_key(layout, key);
        let record_pk = record.get(PK).cloned();
        let items = self
            .batch_get(
                vec![key_of(key, layout), record],
                "document and delete record",
            )
            .await?;
        let now_secs = self.options.clock.now() / 1_000_000_000;
        let mut read = (None, WriteIds::default());
        for item in items {
            if item.get(PK) == record_pk.as_ref() {
                if !expired(&item, now_secs) {
                    read.1 = ids_of(&item);
                }
            } else if is_document(&item) {
                read.0 = Some(Stored::from_item(&item)?);
            }
        }
        Ok(read)
    }
}

fn expired(item: &Item, now_secs: i64) -> bool {
    match item.get(EXPIRES) {
        Some(AttributeValue::N(n)) => n.parse::<i64>().is_ok_and(|at| at <= now_secs),
        _ => false,
    }
}

fn ids_of(item: &Item) -> WriteIds {
    match item.get(WRITE_HISTORY) {
        Some(AttributeValue::L(list)) => list
            .iter()
            .filter_map(|value| value.as_s().ok())
            .map(WriteId::from_stored)
            .collect(),
        _ => WriteIds::default(),
    }
}
