//! Reading documents and write identities from rows.

use crate::error::{Fail, corrupt};
use docstore::identity::{KeptIds, WriteIds};
use docstore::{Document, Key, Versioned};
use tokio_postgres::Row;

/// The columns of a document, in the order [`document`] reads them from `offset`.
pub(crate) const DOC_COLUMNS: &str = "id, coalesce(raw, data::text), created_at, updated_at, created_by, updated_by, version, \
     expires_at";

/// The document in `row`'s [`DOC_COLUMNS`] from column `offset`.
pub(crate) fn document(row: &Row, offset: usize) -> Result<Document, Fail> {
    let data = |row: &Row| Ok(crate::json::parse(row.try_get(offset + 1)?)?);
    versioned(row, offset, data).map(Document::from)
}

/// [`document`] with its data left as the JSON text the row holds.
pub(crate) fn document_text(row: &Row, offset: usize) -> Result<Versioned<String>, Fail> {
    versioned(row, offset, |row| Ok(row.try_get(offset + 1)?))
}

/// The metadata in `row`'s [`DOC_COLUMNS`] from column `offset`, with the data as `data`
/// reads it.
fn versioned<T>(
    row: &Row,
    offset: usize,
    data: impl FnOnce(&Row) -> Result<T, Fail>,
) -> Result<Versioned<T>, Fail> {
    let version: i64 = row.try_get(offset + 6)?;
    Ok(Versioned {
        id: row.try_get(offset)?,
        value: data(row)?,
        created_at: row.try_get(offset + 2)?,
        updated_at: row.try_get(offset + 3)?,
        created_by: row.try_get(offset + 4)?,
        updated_by: row.try_get(offset + 5)?,
        version: u64::try_from(version).map_err(|_| corrupt("negative version"))?,
        expires_at: row.try_get(offset + 7)?,
    })
}

/// The key of a row whose first columns are site, collection and id.
pub(crate) fn key(row: &Row) -> Result<Key, Fail> {
    Key::new(
        row.try_get::<_, String>(0)?,
        row.try_get::<_, String>(1)?,
        row.try_get::<_, String>(2)?,
    )
    .map_err(|err| Fail::Store(corrupt(format!("key: {err}"))))
}

/// A row of the `lock` statement: the key's document ([`DOC_COLUMNS`]), then the identities
/// it keeps (ids, deleted_at), each NULL when missing.
pub(crate) fn locked(row: &Row) -> Result<(Option<Document>, Option<KeptIds>), Fail> {
    let found: Option<&str> = row.try_get(0)?;
    let document = found.map(|_| document(row, 0)).transpose()?;
    let ids: Option<&str> = row.try_get(8)?;
    let kept = match ids {
        Some(ids) => Some(KeptIds {
            ids: WriteIds::decode(ids),
            deleted_at: row.try_get(9)?,
        }),
        None => None,
    };
    Ok((document, kept))
}

/// A version as PostgreSQL's `bigint` (the front end keeps versions within `i64`).
pub(crate) fn version(version: u64) -> Result<i64, Fail> {
    i64::try_from(version).map_err(|_| {
        Fail::Store(docstore::Error::invalid(format!(
            "version {version} does not fit PostgreSQL's bigint"
        )))
    })
}

/// Three parallel arrays of keys' names, for `unnest($1, $2, $3)`.
#[derive(Default)]
pub(crate) struct KeyArrays {
    pub(crate) sites: Vec<String>,
    pub(crate) collections: Vec<String>,
    pub(crate) ids: Vec<String>,
}

impl KeyArrays {
    pub(crate) fn of<'a>(keys: impl IntoIterator<Item = &'a Key>) -> Self {
        let mut arrays = KeyArrays::default();
        keys.into_iter().for_each(|key| arrays.push(key));
        arrays
    }

    pub(crate) fn push(&mut self, key: &Key) {
        self.sites.push(key.site().to_owned());
        self.collections.push(key.collection().to_owned());
        self.ids.push(key.id().to_owned());
    }
}
