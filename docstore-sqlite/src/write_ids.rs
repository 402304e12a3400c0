//! Caller write identities in the `write_ids` table (schema version 3): kept for each
//! document written with one and for each key a caller-identified delete removed, so a
//! repeated call applies nothing (see [`docstore::driver::Origin`]).
//!
//! Writes without a caller identity cannot be repeated and touch nothing here (a deleted
//! document's row goes by trigger).

use crate::error::Fail;
use docstore::identity::{DELETE_IDS_KEPT_FOR_NANOS, KeptIds, WriteIds};
use docstore::{Key, WriteId};
use rusqlite::{Connection, OptionalExtension, params};

/// The row of a key (see [`KeptIds`]): read once per write and handed to the `record_*` call
/// that follows.
pub(crate) type Kept = KeptIds;

/// The row of `key`, if it has one.
pub(crate) fn kept(conn: &Connection, key: &Key) -> Result<Option<Kept>, Fail> {
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

/// Keeps `id` on the document just written at `key`, after the identities the key had
/// (`earlier`, read before the write).
pub(crate) fn record_write(
    conn: &Connection,
    key: &Key,
    id: &WriteId,
    earlier: Option<&Kept>,
) -> Result<(), Fail> {
    upsert(conn, key, &KeptIds::written(id, earlier))
}

/// Records that a delete with `id` just removed the document at `key` (`earlier`: the key's
/// row read before the delete), and forgets deletes older than the window.
pub(crate) fn record_delete(
    conn: &Connection,
    key: &Key,
    id: &WriteId,
    now: i64,
    earlier: Option<&Kept>,
) -> Result<(), Fail> {
    // A standing document's row went with it (by trigger): only a delete record stays.
    upsert(conn, key, &KeptIds::deleted(id, earlier, now))?;
    let mut prune = conn.prepare_cached("DELETE FROM write_ids WHERE deleted_at < ?1")?;
    prune.execute(params![now.saturating_sub(DELETE_IDS_KEPT_FOR_NANOS)])?;
    Ok(())
}

fn upsert(conn: &Connection, key: &Key, kept: &KeptIds) -> Result<(), Fail> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO write_ids (site, collection, id, ids, deleted_at) VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT (site, collection, id) DO UPDATE SET ids = excluded.ids, \
         deleted_at = excluded.deleted_at",
    )?;
    stmt.execute(params![
        key.site(),
        key.collection(),
        key.id(),
        kept.ids.encode(),
        kept.deleted_at
    ])?;
    Ok(())
}
