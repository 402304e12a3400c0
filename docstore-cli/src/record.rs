//! One document with its address, as the CLI prints it and as export/import lines carry it.

use crate::timefmt::{self, TimeFormat};
use docstore::{Data, Document, Key};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// A document with its site and collection: one line of an export.
///
/// Timestamps are written as unix nanoseconds; a line may also give them as RFC 3339 strings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// The site.
    pub site: String,
    /// The collection.
    pub collection: String,
    /// The document id.
    pub id: String,
    /// The document body.
    pub data: Data,
    /// Creation time, unix nanoseconds.
    #[serde(deserialize_with = "timestamp")]
    pub created_at: i64,
    /// Last write time, unix nanoseconds.
    #[serde(deserialize_with = "timestamp")]
    pub updated_at: i64,
    /// The creating actor.
    pub created_by: String,
    /// The last writing actor.
    pub updated_by: String,
    /// The version.
    pub version: u64,
    /// When the document expires, unix nanoseconds; absent when it never does.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "optional_timestamp"
    )]
    pub expires_at: Option<i64>,
}

/// An optional timestamp: absent, `null`, integer nanoseconds or an RFC 3339 string.
fn optional_timestamp<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    match Option::<serde_json::Value>::deserialize(deserializer)? {
        None | Some(Value::Null) => Ok(None),
        Some(value) => crate::timefmt::from_json(&value)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

/// A timestamp: integer nanoseconds or an RFC 3339 string.
fn timestamp<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    crate::timefmt::from_json(&value).map_err(serde::de::Error::custom)
}

impl Record {
    /// The record of `document` stored in `site` / `collection`.
    pub fn new(site: &str, collection: &str, document: Document) -> Self {
        Record {
            site: site.to_owned(),
            collection: collection.to_owned(),
            id: document.id,
            data: document.data,
            created_at: document.created_at,
            updated_at: document.updated_at,
            created_by: document.created_by,
            updated_by: document.updated_by,
            version: document.version,
            expires_at: document.expires_at,
        }
    }

    /// The record as one JSON line, its timestamps in `time` (the fields in their order).
    pub fn to_line(&self, time: TimeFormat) -> String {
        if time == TimeFormat::Ns {
            return serde_json::to_string(self).expect("records serialize");
        }
        let stamp = |nanos: i64| Value::String(timefmt::format_rfc3339(nanos));
        let line = RecordLine {
            site: &self.site,
            collection: &self.collection,
            id: &self.id,
            data: &self.data,
            created_at: stamp(self.created_at),
            updated_at: stamp(self.updated_at),
            created_by: &self.created_by,
            updated_by: &self.updated_by,
            version: self.version,
            expires_at: self.expires_at.map(stamp),
        };
        serde_json::to_string(&line).expect("records serialize")
    }

    /// The key and document this record describes (names checked).
    pub fn into_parts(self) -> docstore::Result<(Key, Document)> {
        let key = Key::new(self.site, self.collection, self.id.clone())?;
        let document = Document {
            expires_at: self.expires_at,
            id: self.id,
            data: self.data,
            created_at: self.created_at,
            updated_at: self.updated_at,
            created_by: self.created_by,
            updated_by: self.updated_by,
            version: self.version,
        };
        Ok((key, document))
    }
}

/// A [`Record`] with its timestamps formatted, as [`Record::to_line`] writes it.
#[derive(Serialize)]
struct RecordLine<'r> {
    site: &'r str,
    collection: &'r str,
    id: &'r str,
    data: &'r Data,
    created_at: Value,
    updated_at: Value,
    created_by: &'r str,
    updated_by: &'r str,
    version: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<Value>,
}
