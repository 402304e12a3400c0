//! Stream records as changes: which records are document writes (INSERT → created, MODIFY →
//! updated, REMOVE → deleted), and which the feed passes over — internal items (counters,
//! delete records and stamps, index records) and rewrites that leave a document's version
//! and write identity as they were (an index build adding its keys; an identical re-put, which
//! DynamoDB does not record but the emulators do).

use crate::history::Stored;
use crate::item::{Item, PK, SK, is_document, string};
use aws_sdk_dynamodb::types::AttributeValue as Value;
use aws_sdk_dynamodbstreams::types::{
    AttributeValue as StreamValue, OperationType, Record, StreamRecord,
};
use docstore::feed::{ChangeKind, FeedScope};
use docstore::{Document, Error, Key, Result};
use std::collections::HashMap;

/// A document write read from the stream, before its cursor is known and, for a delete,
/// before its stamp is read.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Pending {
    /// A write that left `document` at `key`, over `previous` (the record's old image).
    Stored {
        key: Key,
        kind: ChangeKind,
        document: Document,
        previous: Option<Document>,
    },
    /// A delete of `removed` (the revision it removed) at `key`; `approximate_time` is when
    /// the stream recorded it (unix nanoseconds), used only when no stamp names the delete.
    Removed {
        key: Key,
        removed: Stored,
        approximate_time: i64,
    },
}

/// The change a record stands for, when it is a document write in `scope`.
pub(crate) fn pending(record: Record, scope: &FeedScope) -> Result<Option<Pending>> {
    let operation = record.event_name.clone();
    let Some(stream) = record.dynamodb else {
        return Ok(None);
    };
    let time = approximate_nanos(&stream);
    let (new, old) = (image(stream.new_image)?, image(stream.old_image)?);
    let Some(key) = document_key(new.as_ref().or(old.as_ref()))? else {
        return Ok(None);
    };
    if !scope.contains(&key) {
        return Ok(None);
    }
    let stored = |item: &Item| Stored::from_item(item);
    Ok(match (operation, new, old) {
        (Some(OperationType::Insert), Some(new), _) if is_document(&new) => Some(Pending::Stored {
            key,
            kind: ChangeKind::Created,
            document: stored(&new)?.doc,
            previous: None,
        }),
        (Some(OperationType::Modify), Some(new), old) if is_document(&new) => {
            let new = stored(&new)?;
            let old = old.filter(is_document).map(|o| stored(&o)).transpose()?;
            let unchanged = old.as_ref().is_some_and(|old| {
                old.doc.version == new.doc.version && old.history.first() == new.history.first()
            });
            (!unchanged).then_some(Pending::Stored {
                key,
                kind: ChangeKind::Updated,
                document: new.doc,
                previous: old.map(|old| old.doc),
            })
        }
        (Some(OperationType::Remove), _, Some(old)) if is_document(&old) => {
            Some(Pending::Removed {
                key,
                removed: stored(&old)?,
                approximate_time: time,
            })
        }
        _ => None,
    })
}

/// The document key of an item of the table, or `None` for the backend's own items
/// (partitions of reserved names: counters, delete records and stamps, index records).
fn document_key(item: Option<&Item>) -> Result<Option<Key>> {
    let Some(item) = item else { return Ok(None) };
    let (Ok(pk), Ok(id)) = (string(item, PK), string(item, SK)) else {
        return Ok(None);
    };
    let crate::layout::Partition::Documents { site, collection } = crate::layout::parse_pk(pk)
    else {
        return Ok(None);
    };
    Key::new(site, collection, id)
        .map(Some)
        .map_err(|err| Error::Backend {
            message: format!("stream record of {pk}/{id}: not a docstore key: {err}"),
            source: None,
        })
}

/// When the stream recorded the write, in unix nanoseconds (0 when it does not say).
fn approximate_nanos(stream: &StreamRecord) -> i64 {
    stream.approximate_creation_date_time.map_or(0, |at| {
        at.secs() * 1_000_000_000 + i64::from(at.subsec_nanos())
    })
}

/// A record's image as the table's items are held (the Streams crate has its own copy of
/// the attribute type).
fn image(image: Option<HashMap<String, StreamValue>>) -> Result<Option<Item>> {
    image
        .map(|image| {
            image
                .into_iter()
                .map(|(name, value)| Ok((name, table_value(value)?)))
                .collect()
        })
        .transpose()
}

/// One attribute value of a stream image as the DynamoDB crate's: the same variants (and
/// the same `Blob`, moved, not copied).
fn table_value(value: StreamValue) -> Result<Value> {
    Ok(match value {
        StreamValue::S(s) => Value::S(s),
        StreamValue::N(n) => Value::N(n),
        StreamValue::B(b) => Value::B(b),
        StreamValue::Bool(b) => Value::Bool(b),
        StreamValue::Null(b) => Value::Null(b),
        StreamValue::Ss(v) => Value::Ss(v),
        StreamValue::Ns(v) => Value::Ns(v),
        StreamValue::Bs(v) => Value::Bs(v),
        StreamValue::L(v) => Value::L(v.into_iter().map(table_value).collect::<Result<_>>()?),
        StreamValue::M(m) => Value::M(
            m.into_iter()
                .map(|(k, v)| Ok((k, table_value(v)?)))
                .collect::<Result<_>>()?,
        ),
        other => {
            return Err(Error::Backend {
                message: format!(
                    "a stream record holds an attribute type this SDK does not know: {other:?}"
                ),
                source: None,
            });
        }
    })
}
