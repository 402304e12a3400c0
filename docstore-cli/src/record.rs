//! One document with its address, as the CLI prints it and as export/import lines carry it.

use docstore::{Data, Document, Key};
use serde::{Deserialize, Serialize};

/// A document with its site and collection: one line of an export.
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
    pub created_at: i64,
    /// Last write time, unix nanoseconds.
    pub updated_at: i64,
    /// The creating actor.
    pub created_by: String,
    /// The last writing actor.
    pub updated_by: String,
    /// The version.
    pub version: u64,
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
        }
    }

    /// The key and document this record describes (names checked).
    pub fn into_parts(self) -> docstore::Result<(Key, Document)> {
        let key = Key::new(self.site, self.collection, self.id.clone())?;
        let document = Document {
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
