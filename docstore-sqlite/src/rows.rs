//! Documents to and from rows.

use crate::error::{Fail, corrupt};
use docstore::{Data, Document, Error, Key};
use rusqlite::{Connection, OptionalExtension, Row, params};

/// The columns [`document`] reads, in order.
pub(crate) const COLUMNS: &str =
    "id, json(data), created_at, updated_at, created_by, updated_by, version";

/// Serializes `data` as it is stored, refusing it when nested deeper than
/// [`docstore::document::MAX_DEPTH`]
/// ([`Error::InvalidArgument`]) or larger than `limit` (the size is the one
/// `docstore::document::data_size` measures: the compact serialization).
pub(crate) fn encode(data: &Data, limit: usize) -> Result<String, Error> {
    docstore::document::check_depth(data)?;
    let text =
        serde_json::to_string(data).map_err(|err| Error::backend("serializing data", err))?;
    if text.len() > limit {
        return Err(Error::TooLarge {
            size: text.len(),
            limit,
        });
    }
    Ok(text)
}

/// Serializes `data` as it is stored, for data the front end has checked already (depth
/// and size; see [`encode`] for data that has not been, such as a merge result).
pub(crate) fn text(data: &Data) -> Result<String, Error> {
    serde_json::to_string(data).map_err(|err| Error::backend("serializing data", err))
}

/// A document from a row holding [`COLUMNS`].
pub(crate) fn document(row: &Row<'_>) -> Result<Document, Fail> {
    let text: String = row.get(1)?;
    let data: Data = serde_json::from_str(&text).map_err(|err| corrupt(format!("data: {err}")))?;
    let version: i64 = row.get(6)?;
    Ok(Document {
        expires_at: None,
        id: row.get(0)?,
        data,
        created_at: row.get(2)?,
        updated_at: row.get(3)?,
        created_by: row.get(4)?,
        updated_by: row.get(5)?,
        version: u64::try_from(version).map_err(|_| corrupt("negative version"))?,
    })
}

/// A merge patch as a write applies it.
pub(crate) enum Patch {
    /// Its JSON text, merged by SQLite into the stored JSONB ([`merge`]).
    Text(String),
    /// A patch nested deeper than [`docstore::document::MAX_DEPTH`] (its merge may still
    /// be shallow enough, since `null` removes): merged in Rust, and the result checked.
    Deep(Data),
}

impl Patch {
    pub(crate) fn new(patch: &Data) -> Result<Self, Error> {
        Ok(match docstore::document::check_depth(patch) {
            Ok(()) => Patch::Text(
                serde_json::to_string(patch)
                    .map_err(|err| Error::backend("serializing a patch", err))?,
            ),
            Err(_) => Patch::Deep(patch.clone()),
        })
    }
}

/// A document a merge wrote: its data still as text when SQLite merged it (see
/// [`Merged::into_document`]).
pub(crate) struct Merged {
    doc: Document,
    text: Option<String>,
    size: usize,
}

impl Merged {
    /// A merged document whose data is at hand, `size` bytes serialized.
    pub(crate) fn parsed(doc: Document, size: usize) -> Self {
        Merged {
            doc,
            text: None,
            size,
        }
    }

    /// The merged data's size (`docstore::document::data_size`).
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// The document with its data: parsing the text is left to here so that a single write
    /// does it after its commit, outside the writer connection's lock.
    pub(crate) fn into_document(self) -> Result<Document, Error> {
        let mut doc = self.doc;
        if let Some(text) = self.text {
            doc.data =
                serde_json::from_str(&text).map_err(|err| corrupt(format!("data: {err}")))?;
        }
        Ok(doc)
    }
}

/// Merges the patch `patch` (JSON text, nested at most `MAX_DEPTH`) into the stored document
/// at `key` as its next version, written at `now` by `actor`, when its version is
/// `expected_version` (any version for `None`): one statement, SQLite's `jsonb_patch` (RFC
/// 7386, as `docstore::merge_patch`) on the stored JSONB, so the document is neither parsed
/// nor serialized again before it is written. `None` when nothing was written (no document,
/// another version, or a version that cannot grow).
///
/// The merge of data stored within `MAX_DEPTH` with a patch within it is within it too, and
/// its text is what serde_json would write (the stored and the patch's strings and numbers
/// are serde_json's own text, kept verbatim by JSONB), so its length is the exact size.
pub(crate) fn merge(
    conn: &Connection,
    key: &Key,
    patch: &str,
    expected_version: Option<u64>,
    now: i64,
    actor: &str,
) -> Result<Option<Merged>, Fail> {
    let mut stmt = conn.prepare_cached(
        "UPDATE documents SET data = jsonb_patch(data, ?4), updated_at = max(updated_at, ?5), \
         updated_by = ?6, version = version + 1 \
         WHERE site = ?1 AND collection = ?2 AND id = ?3 AND (?7 IS NULL OR version = ?7) \
         AND version < 9223372036854775807 \
         RETURNING json(data), created_at, updated_at, created_by, updated_by, version",
    )?;
    let expected = match expected_version.map(i64::try_from) {
        None => None,
        Some(Ok(version)) => Some(version),
        // No stored version is that large.
        Some(Err(_)) => return Ok(None),
    };
    let merged = stmt
        .query_row(
            params![
                key.site(),
                key.collection(),
                key.id(),
                patch,
                now,
                actor,
                expected
            ],
            |row| {
                let text: String = row.get(0)?;
                Ok(Merged {
                    doc: metadata(row, key, 1)?,
                    size: text.len(),
                    text: Some(text),
                })
            },
        )
        .optional()?;
    merged
        .map(|merged| checked(merged.doc).map(|doc| Merged { doc, ..merged }))
        .transpose()
}

/// The document at `key` without its data, from the five write-metadata columns starting at
/// `first` (`created_at, updated_at, created_by, updated_by, version`); a version below 1
/// reads as 0, for [`checked`] to refuse.
fn metadata(row: &Row<'_>, key: &Key, first: usize) -> rusqlite::Result<Document> {
    Ok(Document {
        expires_at: None,
        id: key.id().to_owned(),
        data: Data::new(),
        created_at: row.get(first)?,
        updated_at: row.get(first + 1)?,
        created_by: row.get(first + 2)?,
        updated_by: row.get(first + 3)?,
        version: u64::try_from(row.get::<_, i64>(first + 4)?).unwrap_or(0),
    })
}

/// `doc`, unless its version is below 1: a corrupt row.
fn checked(doc: Document) -> Result<Document, Fail> {
    match doc.version {
        0 => Err(Fail::Store(corrupt("version below 1"))),
        _ => Ok(doc),
    }
}

/// The stored document at `key`, if any.
pub(crate) fn load(conn: &Connection, key: &Key) -> Result<Option<Document>, Fail> {
    let sql =
        format!("SELECT {COLUMNS} FROM documents WHERE site = ?1 AND collection = ?2 AND id = ?3");
    let mut stmt = conn.prepare_cached(&sql)?;
    let row = stmt
        .query_row(params![key.site(), key.collection(), key.id()], |row| {
            Ok(document(row))
        })
        .optional()?;
    row.transpose()
}

/// The stored document at `key` without its data (left empty, and not read), if any.
pub(crate) fn load_metadata(conn: &Connection, key: &Key) -> Result<Option<Document>, Fail> {
    let mut stmt = conn.prepare_cached(
        "SELECT created_at, updated_at, created_by, updated_by, version FROM documents \
         WHERE site = ?1 AND collection = ?2 AND id = ?3",
    )?;
    let row = stmt
        .query_row(params![key.site(), key.collection(), key.id()], |row| {
            metadata(row, key, 0)
        })
        .optional()?;
    row.map(checked).transpose()
}

/// `document` without its data: what a write needs of a document whose data it has as text.
pub(crate) fn without_data(document: &Document) -> Document {
    Document {
        expires_at: None,
        id: document.id.clone(),
        data: Data::new(),
        created_at: document.created_at,
        updated_at: document.updated_at,
        created_by: document.created_by.clone(),
        updated_by: document.updated_by.clone(),
        version: document.version,
    }
}

/// The version of the stored document at `key`, if any (without reading its data).
pub(crate) fn version(conn: &Connection, key: &Key) -> Result<Option<u64>, Fail> {
    let mut stmt = conn.prepare_cached(
        "SELECT version FROM documents WHERE site = ?1 AND collection = ?2 AND id = ?3",
    )?;
    let version: Option<i64> = stmt
        .query_row(params![key.site(), key.collection(), key.id()], |row| {
            row.get(0)
        })
        .optional()?;
    version
        .map(|v| u64::try_from(v).map_err(|_| Fail::Store(corrupt("negative version"))))
        .transpose()
}

/// Inserts a new document.
pub(crate) fn insert(conn: &Connection, key: &Key, doc: &Document, text: &str) -> Result<(), Fail> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO documents \
         (site, collection, id, data, created_at, updated_at, created_by, updated_by, version) \
         VALUES (?1, ?2, ?3, jsonb(?4), ?5, ?6, ?7, ?8, ?9)",
    )?;
    let inserted = stmt.execute(params![
        key.site(),
        key.collection(),
        key.id(),
        text,
        doc.created_at,
        doc.updated_at,
        doc.created_by,
        doc.updated_by,
        version_param(doc.version)?,
    ]);
    match inserted {
        Ok(_) => Ok(()),
        // The id is taken: the failed statement changed nothing (SQLite undoes it).
        Err(err)
            if err.sqlite_error().is_some_and(|e| {
                e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
            }) =>
        {
            Err(Error::AlreadyExists.into())
        }
        Err(err) => Err(err.into()),
    }
}

/// Replaces the data of the stored document at `key` with `text` as its next version, written
/// at `now` by `actor`, in one statement (the metadata it keeps are read by `RETURNING`, not
/// before): the document without its data, or `None` when nothing was written (no document,
/// or a version that cannot grow).
pub(crate) fn overwrite(
    conn: &Connection,
    key: &Key,
    text: &str,
    now: i64,
    actor: &str,
) -> Result<Option<Document>, Fail> {
    let mut stmt = conn.prepare_cached(
        "UPDATE documents SET data = jsonb(?4), updated_at = max(updated_at, ?5), \
         updated_by = ?6, version = version + 1 \
         WHERE site = ?1 AND collection = ?2 AND id = ?3 \
         AND version < 9223372036854775807 \
         RETURNING created_at, updated_at, created_by, updated_by, version",
    )?;
    let row = stmt
        .query_row(
            params![key.site(), key.collection(), key.id(), text, now, actor],
            |row| metadata(row, key, 0),
        )
        .optional()?;
    row.map(checked).transpose()
}

/// Replaces the data and write metadata of an existing document.
pub(crate) fn rewrite(
    conn: &Connection,
    key: &Key,
    doc: &Document,
    text: &str,
) -> Result<(), Fail> {
    let mut stmt = conn.prepare_cached(
        "UPDATE documents SET data = jsonb(?4), updated_at = ?5, updated_by = ?6, version = ?7 \
         WHERE site = ?1 AND collection = ?2 AND id = ?3",
    )?;
    stmt.execute(params![
        key.site(),
        key.collection(),
        key.id(),
        text,
        doc.updated_at,
        doc.updated_by,
        version_param(doc.version)?,
    ])?;
    Ok(())
}

/// Deletes the document at `key`; the version it had, if there was one (for its change).
pub(crate) fn remove(conn: &Connection, key: &Key) -> Result<Option<i64>, Fail> {
    let mut stmt = conn.prepare_cached(
        "DELETE FROM documents WHERE site = ?1 AND collection = ?2 AND id = ?3 \
         RETURNING version",
    )?;
    let version = stmt
        .query_row(params![key.site(), key.collection(), key.id()], |row| {
            row.get(0)
        })
        .optional()?;
    Ok(version)
}

/// The number of documents in `site`, from the counters.
pub(crate) fn site_count(conn: &Connection, site: &str) -> Result<u64, Fail> {
    let mut stmt =
        conn.prepare_cached("SELECT COALESCE(SUM(documents), 0) FROM collections WHERE site = ?1")?;
    let count: i64 = stmt.query_row([site], |row| row.get(0))?;
    u64::try_from(count).map_err(|_| Fail::Store(corrupt("negative counter")))
}

/// The sites holding a document or a collection counter (a counter row is never 0, so one
/// left by drift without documents is listed and `fsck` finds it), by name: from the
/// documents themselves, so a site whose counters were lost is listed too. One primary-key
/// seek per table and site (the next site after the last one found), never a walk over the
/// documents.
pub(crate) fn sites(conn: &Connection) -> Result<Vec<String>, Fail> {
    let mut stmt = conn.prepare_cached(
        "SELECT MIN(site) FROM ( \
             SELECT MIN(site) AS site FROM documents WHERE site > ?1 \
             UNION ALL SELECT MIN(site) FROM collections WHERE site > ?1)",
    )?;
    let mut out: Vec<String> = Vec::new();
    loop {
        let after = out.last().map_or("", String::as_str);
        // MIN over no rows is one NULL row.
        let next: Option<String> = stmt.query_row([after], |row| row.get(0))?;
        match next {
            Some(site) => out.push(site),
            None => return Ok(out),
        }
    }
}

/// The collections of `site` with their counts, by name.
pub(crate) fn collections(conn: &Connection, site: &str) -> Result<Vec<(String, u64)>, Fail> {
    let mut stmt = conn.prepare_cached(
        "SELECT collection, documents FROM collections WHERE site = ?1 ORDER BY collection",
    )?;
    let rows = stmt.query_map([site], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (name, count) = row?;
        let count = u64::try_from(count).map_err(|_| Fail::Store(corrupt("negative counter")))?;
        out.push((name, count));
    }
    Ok(out)
}

/// The collections of `site` counted from the documents, by name.
pub(crate) fn counted_collections(
    conn: &Connection,
    site: &str,
) -> Result<Vec<(String, u64)>, Fail> {
    let mut stmt = conn.prepare_cached(
        "SELECT collection, COUNT(*) FROM documents WHERE site = ?1 \
         GROUP BY collection ORDER BY collection",
    )?;
    let rows = stmt.query_map([site], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (name, count) = row?;
        out.push((name, count as u64));
    }
    Ok(out)
}

/// Sets the counter of `collection` in `site` to `documents` (removing it at 0).
pub(crate) fn set_counter(
    conn: &Connection,
    site: &str,
    collection: &str,
    documents: u64,
) -> Result<(), Fail> {
    if documents == 0 {
        conn.prepare_cached("DELETE FROM collections WHERE site = ?1 AND collection = ?2")?
            .execute(params![site, collection])?;
    } else {
        conn.prepare_cached(
            "INSERT INTO collections (site, collection, documents) VALUES (?1, ?2, ?3) \
             ON CONFLICT (site, collection) DO UPDATE SET documents = excluded.documents",
        )?
        .execute(params![site, collection, documents as i64])?;
    }
    Ok(())
}

fn version_param(version: u64) -> Result<i64, Fail> {
    i64::try_from(version).map_err(|_| {
        Fail::Store(Error::Backend {
            message: format!("version {version} does not fit SQLite's INTEGER"),
            source: None,
        })
    })
}
