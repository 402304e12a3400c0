//! Caller write identities in the `write_ids` table (schema version 3): kept for each
//! document written with one and for each key a caller-identified delete removed, so a
//! repeated call applies nothing (see [`docstore::driver::Origin`]).
//!
//! Writes without a caller identity cannot be repeated and touch nothing here (a deleted
//! document's row goes by trigger).

use crate::error::Fail;
use docstore::Key;
use docstore::identity::{KeptIds, WriteIds};
use rusqlite::{Connection, OptionalExtension, params};

/// The row of `key`, if it has one: read once per write, before it, for what the write keeps
/// ([`keep`]).
pub(crate) fn kept(conn: &Connection, key: &Key) -> Result<Option<KeptIds>, Fail> {
    let mut stmt = conn.prepare_cached(
        "SELECT ids, deleted_at FROM write_ids WHERE site = ?1 AND collection = ?2 AND id = ?3",
    )?;
    let row = stmt
        .query_row(params![key.site(), key.collection(), key.id()], |row| {
            Ok(KeptIds {
                ids: WriteIds::decode(&row.get::<_, String>(0)?),
                deleted_at: row.get(1)?,
            })
        })
        .optional()?;
    Ok(row)
}

/// Keeps `kept` at `key`: what a write with a caller identity leaves there
/// ([`KeptIds::written`], [`KeptIds::deleted`] of the row read before it). A delete record
/// forgets the deletes older than the window ([`KeptIds::prunes_before`]); a standing
/// document's row goes with it by trigger.
pub(crate) fn keep(conn: &Connection, key: &Key, kept: &KeptIds) -> Result<(), Fail> {
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
    if let Some(before) = kept.prunes_before() {
        let mut prune = conn.prepare_cached("DELETE FROM write_ids WHERE deleted_at < ?1")?;
        prune.execute(params![before])?;
    }
    Ok(())
}
