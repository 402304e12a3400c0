//! `write_all` and `get_many`: a batch is applied inside one immediate transaction (the
//! counters move through the same triggers as single writes), several reads in one read
//! transaction.

use crate::error::Fail;
use crate::rows;
use crate::store::Inner;
use docstore::batch::{self, BatchBytes, Write, WriteOutcome};
use docstore::{Document, Error, Key};
use rusqlite::Connection;

/// Applies `writes` on `conn`, inside the caller's transaction, in order. The first failing
/// write ends it with [`Error::Batch`] (the caller rolls the transaction back, so nothing
/// stays written); SQLite failures are returned as they are, so a busy database retries the
/// whole batch.
pub(crate) fn apply(
    inner: &Inner,
    conn: &Connection,
    writes: &[Write],
    actor: &str,
    mut bytes: BatchBytes,
) -> Result<Vec<WriteOutcome>, Fail> {
    let mut outcomes = Vec::with_capacity(writes.len());
    for (index, write) in writes.iter().enumerate() {
        let outcome = apply_one(inner, conn, write, actor).map_err(|fail| match fail {
            Fail::Store(err) => Fail::Store(batch::failed(index, err)),
            sql => sql,
        })?;
        if let (Write::Update { .. } | Write::UpdateIf { .. }, WriteOutcome::Written(doc)) =
            (write, &outcome)
        {
            bytes.add(index, docstore::document::data_size(&doc.data))?;
        }
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

fn apply_one(
    inner: &Inner,
    conn: &Connection,
    write: &Write,
    actor: &str,
) -> Result<WriteOutcome, Fail> {
    let key = write.key();
    let limit = inner.options.max_doc_bytes;
    Ok(match write {
        Write::Create { data, .. } => {
            let text = rows::encode(data, limit)?;
            inner.check_absent(conn, key)?;
            WriteOutcome::Written(inner.insert_new(conn, key, data, &text, actor)?)
        }
        Write::Put { data, .. } => {
            let text = rows::encode(data, limit)?;
            WriteOutcome::Written(match rows::load(conn, key)? {
                Some(current) => inner.replace(conn, key, current, data.clone(), &text, actor)?,
                None => inner.insert_new(conn, key, data, &text, actor)?,
            })
        }
        Write::Update { patch, .. } => {
            WriteOutcome::Written(inner.patch(conn, key, patch, None, actor)?)
        }
        Write::UpdateIf {
            patch,
            expected_version,
            ..
        } => {
            WriteOutcome::Written(inner.patch(conn, key, patch, Some(*expected_version), actor)?)
        }
        Write::DeleteIf {
            expected_version, ..
        } => {
            let current = rows::version(conn, key)?.ok_or(Error::NotFound)?;
            if current != *expected_version {
                return Err(Error::Conflict { current }.into());
            }
            rows::remove(conn, key)?;
            WriteOutcome::Deleted
        }
        Write::Check { version, .. } => {
            match (version, rows::version(conn, key)?) {
                (None, Some(_)) => return Err(Error::AlreadyExists.into()),
                (Some(_), None) => return Err(Error::NotFound.into()),
                (Some(expected), Some(current)) if *expected != current => {
                    return Err(Error::Conflict { current }.into());
                }
                _ => {}
            }
            WriteOutcome::Checked
        }
        Write::Restore { document, .. } => {
            let text = rows::encode(&document.data, usize::MAX)?;
            inner.check_absent(conn, key)?;
            inner.check_quota(conn, key.site())?;
            rows::insert(conn, key, document, &text)?;
            WriteOutcome::Written(document.clone())
        }
    })
}

/// Reads `keys` on `conn` inside one read transaction: one snapshot.
pub(crate) fn load_many(conn: &Connection, keys: &[Key]) -> Result<Vec<Option<Document>>, Fail> {
    // Dropped without commit: a read transaction has nothing to keep.
    let _snapshot = conn.unchecked_transaction()?;
    keys.iter().map(|key| rows::load(conn, key)).collect()
}
