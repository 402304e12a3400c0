//! Documents to and from rows.

use crate::error::{Fail, corrupt};
use docstore::driver::{Expiry, Fetched};
use docstore::{Data, Document, Error, Key, Versioned};
use rusqlite::{Connection, OptionalExtension, Row, params};
use std::sync::LazyLock;

/// The columns [`document`] reads, in order.
pub(crate) const COLUMNS: &str =
    "id, json(data), created_at, updated_at, created_by, updated_by, version, expires_at";

/// The condition a document must meet to be read at the instant bound as `?{n}`: not
/// expired (`docs/contract.md`, "Expiry"). Every read of `documents` applies it; an expired
/// row stays until a write on its key or the sweep removes it with its change.
pub(crate) fn live(n: usize) -> String {
    format!("(expires_at IS NULL OR expires_at > ?{n})")
}

/// What a write does to `expires_at`, as its statement binds it: `mode` 0 keeps the stored
/// value, 1 sets `value`, 2 sets the write's `updated_at` plus `value`, 3 clears it
/// ([`EXPIRY_SET`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ExpiryParams {
    mode: i64,
    value: i64,
}

impl From<Expiry> for ExpiryParams {
    fn from(expiry: Expiry) -> Self {
        let (mode, value) = match expiry {
            Expiry::Keep => (0, 0),
            Expiry::At(at) => (1, at),
            Expiry::After(nanos) => (2, nanos.max(0)),
            Expiry::Never => (3, 0),
        };
        ExpiryParams { mode, value }
    }
}

/// The `SET` term of [`ExpiryParams`] in an `UPDATE` whose new `updated_at` is
/// `max(updated_at, ?{now})`, with the mode bound as `?{mode}` and the value as the next
/// parameter (`UPDATE` reads the old column values, so `updated_at` here is the stored one).
/// `After` saturates at the largest instant, as [`Expiry::apply`] does.
fn expiry_set(now: usize, mode: usize) -> String {
    let value = mode + 1;
    format!(
        "expires_at = CASE ?{mode} WHEN 0 THEN expires_at WHEN 1 THEN ?{value} \
         WHEN 2 THEN min(max(updated_at, ?{now}), 9223372036854775807 - ?{value}) + ?{value} \
         ELSE NULL END"
    )
}

/// Who writes, when, and what the write does to the document's expiry.
pub(crate) struct Stamp<'a> {
    pub(crate) now: i64,
    pub(crate) actor: &'a str,
    pub(crate) expiry: ExpiryParams,
}

/// The write-metadata columns [`metadata`] reads, in order.
const METADATA: &str = "created_at, updated_at, created_by, updated_by, version, expires_at";

/// [`merge`]'s statement (built once: it runs on every update).
static MERGE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE documents SET data = jsonb_patch(data, ?4), \
         updated_at = max(updated_at, ?5), updated_by = ?6, version = version + 1, {} \
         WHERE site = ?1 AND collection = ?2 AND id = ?3 AND (?7 IS NULL OR version = ?7) \
         AND version < 9223372036854775807 AND {} \
         RETURNING json(data), {METADATA}",
        expiry_set(5, 8),
        live(5)
    )
});

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
    versioned(row, |row| {
        // Parsed where SQLite holds it: no copy of the text.
        let text = row
            .get_ref(1)?
            .as_str()
            .map_err(|err| corrupt(format!("data: {err}")))?;
        serde_json::from_str(text).map_err(|err| Fail::Store(corrupt(format!("data: {err}"))))
    })
    .map(Document::from)
}

/// The metadata of a row holding [`COLUMNS`], with the data as `data` reads it.
fn versioned<T>(
    row: &Row<'_>,
    data: impl FnOnce(&Row<'_>) -> Result<T, Fail>,
) -> Result<Versioned<T>, Fail> {
    let version: i64 = row.get(6)?;
    Ok(Versioned {
        id: row.get(0)?,
        value: data(row)?,
        created_at: row.get(2)?,
        updated_at: row.get(3)?,
        created_by: row.get(4)?,
        updated_by: row.get(5)?,
        version: u64::try_from(version).map_err(|_| corrupt("negative version"))?,
        expires_at: row.get(7)?,
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
    stamp: &Stamp<'_>,
) -> Result<Option<Merged>, Fail> {
    let mut stmt = conn.prepare_cached(&MERGE)?;
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
                stamp.now,
                stamp.actor,
                expected,
                stamp.expiry.mode,
                stamp.expiry.value
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

/// The document at `key` without its data, from the six write-metadata columns starting at
/// `first` ([`METADATA`]); a version below 1 reads as 0, for [`checked`] to refuse.
fn metadata(row: &Row<'_>, key: &Key, first: usize) -> rusqlite::Result<Document> {
    Ok(Document {
        expires_at: row.get(first + 5)?,
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

/// [`load`]'s statement.
static LOAD: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {COLUMNS} FROM documents WHERE site = ?1 AND collection = ?2 AND id = ?3 \
         AND {}",
        live(4)
    )
});

/// The document at `key` at `now`, if any (an expired one is none).
pub(crate) fn load(conn: &Connection, key: &Key, now: i64) -> Result<Option<Document>, Fail> {
    load_row(conn, key, now, document)
}

/// [`load`], the data left as the JSON text SQLite gives ([`Driver::get_text`]).
///
/// [`Driver::get_text`]: docstore::driver::Driver::get_text
pub(crate) fn load_text(conn: &Connection, key: &Key, now: i64) -> Result<Option<Fetched>, Fail> {
    Ok(load_row(conn, key, now, document_text)?.map(Fetched::Text))
}

/// The row of [`LOAD`] at `key` at `now`, if any, as `read` makes it.
fn load_row<T>(
    conn: &Connection,
    key: &Key,
    now: i64,
    read: impl FnOnce(&Row<'_>) -> Result<T, Fail>,
) -> Result<Option<T>, Fail> {
    let mut stmt = conn.prepare_cached(&LOAD)?;
    let row = stmt
        .query_row(
            params![key.site(), key.collection(), key.id(), now],
            |row| Ok(read(row)),
        )
        .optional()?;
    row.transpose()
}

/// A row holding [`COLUMNS`] with its data as text, the rest as [`document`] reads it.
fn document_text(row: &Row<'_>) -> Result<Versioned<String>, Fail> {
    versioned(row, |row| Ok(row.get(1)?))
}

/// [`load_metadata`]'s statement.
static LOAD_METADATA: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {METADATA} FROM documents WHERE site = ?1 AND collection = ?2 AND id = ?3 \
         AND {}",
        live(4)
    )
});

/// The document at `key` at `now` without its data (left empty, and not read), if any.
pub(crate) fn load_metadata(
    conn: &Connection,
    key: &Key,
    now: i64,
) -> Result<Option<Document>, Fail> {
    let mut stmt = conn.prepare_cached(&LOAD_METADATA)?;
    let row = stmt
        .query_row(
            params![key.site(), key.collection(), key.id(), now],
            |row| metadata(row, key, 0),
        )
        .optional()?;
    row.map(checked).transpose()
}

/// `document` without its data: what a write needs of a document whose data it has as text.
pub(crate) fn without_data(document: &Document) -> Document {
    Document {
        expires_at: document.expires_at,
        id: document.id.clone(),
        data: Data::new(),
        created_at: document.created_at,
        updated_at: document.updated_at,
        created_by: document.created_by.clone(),
        updated_by: document.updated_by.clone(),
        version: document.version,
    }
}

/// [`version`]'s statement.
static VERSION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT version FROM documents WHERE site = ?1 AND collection = ?2 AND id = ?3 AND {}",
        live(4)
    )
});

/// The version of the document at `key` at `now`, if any (without reading its data).
pub(crate) fn version(conn: &Connection, key: &Key, now: i64) -> Result<Option<u64>, Fail> {
    let mut stmt = conn.prepare_cached(&VERSION)?;
    let version: Option<i64> = stmt
        .query_row(
            params![key.site(), key.collection(), key.id(), now],
            |row| row.get(0),
        )
        .optional()?;
    version
        .map(|v| u64::try_from(v).map_err(|_| Fail::Store(corrupt("negative version"))))
        .transpose()
}

/// Inserts a new document.
pub(crate) fn insert(conn: &Connection, key: &Key, doc: &Document, text: &str) -> Result<(), Fail> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO documents (site, collection, id, data, created_at, updated_at, \
         created_by, updated_by, version, expires_at) \
         VALUES (?1, ?2, ?3, jsonb(?4), ?5, ?6, ?7, ?8, ?9, ?10)",
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
        doc.expires_at,
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

/// [`overwrite`]'s statement (built once: it runs on every `put`).
static OVERWRITE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE documents SET data = jsonb(?4), updated_at = max(updated_at, ?5), \
         updated_by = ?6, version = version + 1, {} \
         WHERE site = ?1 AND collection = ?2 AND id = ?3 \
         AND version < 9223372036854775807 AND {} \
         RETURNING {METADATA}",
        expiry_set(5, 7),
        live(5)
    )
});

/// Replaces the data of the document at `key` with `text` as its next version, stamped by
/// `stamp`, in one statement (the metadata it keeps are read by `RETURNING`, not before):
/// the document without its data, or `None` when nothing was written (no document at
/// `stamp.now`, or a version that cannot grow).
pub(crate) fn overwrite(
    conn: &Connection,
    key: &Key,
    text: &str,
    stamp: &Stamp<'_>,
) -> Result<Option<Document>, Fail> {
    let mut stmt = conn.prepare_cached(&OVERWRITE)?;
    let row = stmt
        .query_row(
            params![
                key.site(),
                key.collection(),
                key.id(),
                text,
                stamp.now,
                stamp.actor,
                stamp.expiry.mode,
                stamp.expiry.value
            ],
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
        "UPDATE documents SET data = jsonb(?4), updated_at = ?5, updated_by = ?6, version = ?7, \
         expires_at = ?8 WHERE site = ?1 AND collection = ?2 AND id = ?3",
    )?;
    stmt.execute(params![
        key.site(),
        key.collection(),
        key.id(),
        text,
        doc.updated_at,
        doc.updated_by,
        version_param(doc.version)?,
        doc.expires_at,
    ])?;
    Ok(())
}

/// [`remove`]'s statement.
static REMOVE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "DELETE FROM documents WHERE site = ?1 AND collection = ?2 AND id = ?3 AND {} \
         RETURNING version",
        live(4)
    )
});

/// Deletes the document at `key` unless it expired at `now`; the version it had, if there
/// was one (for its change).
pub(crate) fn remove(conn: &Connection, key: &Key, now: i64) -> Result<Option<i64>, Fail> {
    let mut stmt = conn.prepare_cached(&REMOVE)?;
    let version = stmt
        .query_row(
            params![key.site(), key.collection(), key.id(), now],
            |row| row.get(0),
        )
        .optional()?;
    Ok(version)
}

/// An expired document a write or the sweep removed: what its change records.
pub(crate) struct Expired {
    pub(crate) version: i64,
    pub(crate) expires_at: i64,
}

/// Deletes the document at `key` if it expired at `now` (`docs/contract.md`, "Expiry").
pub(crate) fn remove_expired(
    conn: &Connection,
    key: &Key,
    now: i64,
) -> Result<Option<Expired>, Fail> {
    let mut stmt = conn.prepare_cached(
        "DELETE FROM documents WHERE site = ?1 AND collection = ?2 AND id = ?3 \
         AND expires_at <= ?4 RETURNING version, expires_at",
    )?;
    let expired = stmt
        .query_row(
            params![key.site(), key.collection(), key.id(), now],
            |row| {
                Ok(Expired {
                    version: row.get(0)?,
                    expires_at: row.get(1)?,
                })
            },
        )
        .optional()?;
    Ok(expired)
}

/// The keys of up to `limit` documents expired at `now`, longest expired first.
pub(crate) fn expired_keys(conn: &Connection, now: i64, limit: usize) -> Result<Vec<Key>, Fail> {
    let mut stmt = conn.prepare_cached(
        "SELECT site, collection, id FROM documents WHERE expires_at <= ?1 \
         ORDER BY expires_at LIMIT ?2",
    )?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = stmt.query_map(params![now, limit], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, String>(2)?,
        ))
    })?;
    let mut keys = Vec::new();
    for row in rows {
        let (site, collection, id) = row?;
        keys.push(Key::new(site, collection, id).map_err(|err| corrupt(format!("key: {err}")))?);
    }
    Ok(keys)
}

/// The number of documents in `site` at `now`: the counters, which count every stored row,
/// less the expired rows not yet swept (found through the partial index by site and
/// expiry, so a site without expiring documents costs nothing more).
pub(crate) fn site_count(conn: &Connection, site: &str, now: i64) -> Result<u64, Fail> {
    let mut stmt = conn.prepare_cached(
        "SELECT (SELECT COALESCE(SUM(documents), 0) FROM collections WHERE site = ?1) \
         - (SELECT count(*) FROM documents WHERE site = ?1 AND expires_at <= ?2)",
    )?;
    let count: i64 = stmt.query_row(params![site, now], |row| row.get(0))?;
    u64::try_from(count).map_err(|_| Fail::Store(corrupt("negative counter")))
}

/// The sites holding a document at `now` or a collection counter (a counter row is never
/// 0, so one left by drift without documents is listed and `fsck` finds it), by name: from
/// the documents themselves, so a site whose counters were lost is listed too. One
/// primary-key seek per table and site (the next site after the last one found), never a
/// walk over the documents; a site whose every document expired is then left out.
pub(crate) fn sites(conn: &Connection, now: i64) -> Result<Vec<String>, Fail> {
    let mut live = Vec::new();
    for site in stored_sites(conn)? {
        if site_count(conn, &site, now)? > 0 || holds_live_document(conn, &site, now)? {
            live.push(site);
        }
    }
    Ok(live)
}

/// Whether `site` holds a document not expired at `now` (asked only of a site whose
/// counters, less its expired documents, are 0).
fn holds_live_document(conn: &Connection, site: &str, now: i64) -> Result<bool, Fail> {
    let mut stmt = conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM documents WHERE site = ?1 \
         AND (expires_at IS NULL OR expires_at > ?2))",
    )?;
    Ok(stmt.query_row(params![site, now], |row| row.get(0))?)
}

/// The sites holding a stored row or a collection counter, expired documents included.
fn stored_sites(conn: &Connection) -> Result<Vec<String>, Fail> {
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

/// The collections of `site` with their counts at `now`, by name: the counters less the
/// expired documents not yet swept (a collection whose every document expired is left
/// out).
pub(crate) fn collections(
    conn: &Connection,
    site: &str,
    now: i64,
) -> Result<Vec<(String, u64)>, Fail> {
    let mut stmt = conn.prepare_cached(
        "SELECT c.collection, c.documents - COALESCE(e.expired, 0) FROM collections AS c \
         LEFT JOIN (SELECT collection, count(*) AS expired FROM documents \
                    WHERE site = ?1 AND expires_at <= ?2 GROUP BY collection) AS e \
         ON e.collection = c.collection \
         WHERE c.site = ?1 ORDER BY c.collection",
    )?;
    let rows = stmt.query_map(params![site, now], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (name, count) = row?;
        let count = u64::try_from(count).map_err(|_| Fail::Store(corrupt("negative counter")))?;
        if count > 0 {
            out.push((name, count));
        }
    }
    Ok(out)
}

/// The collections of `site` with their counters as stored (expired documents not yet
/// swept included, as in [`counted_collections`]): what `recount` compares.
pub(crate) fn counters(conn: &Connection, site: &str) -> Result<Vec<(String, u64)>, Fail> {
    // No document expires before the first instant.
    collections(conn, site, i64::MIN)
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
