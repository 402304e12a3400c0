//! Caller write identities in the `write_ids` table (schema version 3): kept for each
//! document written with one and for each key a caller-identified delete removed, so a
//! repeated call applies nothing (see [`docstore::driver::Origin`]).
//!
//! Writes without a caller identity cannot be repeated and touch nothing here (a deleted
//! document's row goes by trigger).

use crate::error::Fail;
use crate::rows;
use docstore::identity::{DELETE_IDS_KEPT_FOR_NANOS, WriteIds};
use docstore::{Document, Key, WriteId};
use rusqlite::{Connection, OptionalExtension, params};

/// The row of `key`: its identities, and when a delete recorded them (`None`: the document
/// stands).
struct Kept {
    ids: WriteIds,
    deleted_at: Option<i64>,
}

fn kept(conn: &Connection, key: &Key) -> Result<Option<Kept>, Fail> {
    let mut stmt = conn.prepare_cached(
        "SELECT ids, deleted_at FROM write_ids WHERE site = ?1 AND collection = ?2 AND id = ?3",
    )?;
    let row = stmt
        .query_row(params![key.site(), key.collection(), key.id()], |row| {
            Ok(Kept {
                ids: WriteIds::decode(&row.get::<_, String>(0)?),
                deleted_at: row.get(1)?,
            })
        })
        .optional()?;
    Ok(row)
}

/// The document at `key` when it keeps `id`: the write is a repeat.
pub(crate) fn repeated(
    conn: &Connection,
    key: &Key,
    id: &WriteId,
) -> Result<Option<Document>, Fail> {
    match kept(conn, key)? {
        Some(kept) if kept.deleted_at.is_none() && kept.ids.holds(id) => rows::load(conn, key),
        _ => Ok(None),
    }
}

/// Keeps `id` on the document just written at `key` (after any identities the key had).
pub(crate) fn record_write(conn: &Connection, key: &Key, id: &WriteId) -> Result<(), Fail> {
    let mut ids = WriteIds::default();
    ids.record(id);
    if let Some(earlier) = kept(conn, key)? {
        ids.extend_older(&earlier.ids);
    }
    upsert(conn, key, &ids, None)
}

/// Whether a delete with `id` removed the document at `key` within the window (its
/// identity kept on the key, whether or not a document was created there since).
pub(crate) fn deleted(conn: &Connection, key: &Key, id: &WriteId, now: i64) -> Result<bool, Fail> {
    Ok(kept(conn, key)?.is_some_and(|kept| {
        kept.ids.holds(id)
            && kept
                .deleted_at
                .is_none_or(|at| now - at < DELETE_IDS_KEPT_FOR_NANOS)
    }))
}

/// Records that a delete with `id` just removed the document at `key`, and forgets deletes
/// older than the window.
pub(crate) fn record_delete(
    conn: &Connection,
    key: &Key,
    id: &WriteId,
    now: i64,
) -> Result<(), Fail> {
    let mut ids = WriteIds::default();
    ids.record(id);
    if let Some(earlier) = kept(conn, key)? {
        ids.extend_older(&earlier.ids);
    }
    upsert(conn, key, &ids, Some(now))?;
    let mut prune = conn.prepare_cached("DELETE FROM write_ids WHERE deleted_at < ?1")?;
    prune.execute(params![now.saturating_sub(DELETE_IDS_KEPT_FOR_NANOS)])?;
    Ok(())
}

fn upsert(
    conn: &Connection,
    key: &Key,
    ids: &WriteIds,
    deleted_at: Option<i64>,
) -> Result<(), Fail> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO write_ids (site, collection, id, ids, deleted_at) VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT (site, collection, id) DO UPDATE SET ids = excluded.ids, \
         deleted_at = excluded.deleted_at",
    )?;
    stmt.execute(params![
        key.site(),
        key.collection(),
        key.id(),
        ids.encode(),
        deleted_at
    ])?;
    Ok(())
}
