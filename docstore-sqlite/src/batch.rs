//! `write_all` and `get_many`: a batch is prepared on the calling thread (validated, its data
//! serialized once), then applied inside one immediate transaction (the counters move through
//! the same triggers as single writes); several reads run in one read transaction.

use crate::error::Fail;
use crate::store::{By, Inner};
use crate::{rows, write_ids};
use docstore::batch::{self, BatchBytes, CheckedBatch, Write, WriteOutcome};
use docstore::driver::Expiry;
use docstore::identity::KeptIds;
use docstore::request::Answer;
use docstore::{Document, Key, WriteId};
use rusqlite::Connection;

/// One write of a batch as the writer needs it: owned (it may run on the writer thread), with
/// the data it stores already serialized, and no copy of that data.
pub(crate) enum Step {
    Create {
        key: Key,
        text: String,
        expiry: Expiry,
    },
    Put {
        key: Key,
        text: String,
        expiry: Expiry,
    },
    Patch {
        key: Key,
        patch: rows::Patch,
        expected_version: Option<u64>,
        expiry: Expiry,
    },
    /// The batch's `Write::DeleteIf` (a key and a version: nothing to copy beyond the key),
    /// for [`batch::precondition`].
    DeleteIf(Write),
    /// The batch's `Write::Check`, likewise.
    Check(Write),
    /// `metadata`: the document to restore without its data.
    Restore {
        key: Key,
        metadata: Document,
        text: String,
    },
}

impl Step {
    fn key(&self) -> &Key {
        match self {
            Step::Create { key, .. }
            | Step::Put { key, .. }
            | Step::Patch { key, .. }
            | Step::Restore { key, .. } => key,
            Step::DeleteIf(write) | Step::Check(write) => write.key(),
        }
    }
}

/// A checked batch ready for [`apply`]: every stored data serialized once, and the byte
/// total so far.
pub(crate) fn prepare(batch: &CheckedBatch<'_>) -> docstore::Result<(Vec<Step>, BatchBytes)> {
    let writes = batch.writes();
    let bytes = batch.bytes();
    let steps = writes
        .iter()
        .enumerate()
        .map(|(position, write)| {
            let expiry = batch.expiry(position);
            Ok(match write {
                Write::Create { key, data } => Step::Create {
                    key: key.clone(),
                    text: rows::text(data)?,
                    expiry,
                },
                Write::Put { key, data } => Step::Put {
                    key: key.clone(),
                    text: rows::text(data)?,
                    expiry,
                },
                Write::Update { key, patch } => Step::Patch {
                    key: key.clone(),
                    patch: rows::Patch::new(patch)?,
                    expected_version: None,
                    expiry,
                },
                Write::UpdateIf {
                    key,
                    patch,
                    expected_version,
                } => Step::Patch {
                    key: key.clone(),
                    patch: rows::Patch::new(patch)?,
                    expected_version: Some(*expected_version),
                    expiry,
                },
                Write::DeleteIf { .. } => Step::DeleteIf(write.clone()),
                Write::Check { .. } => Step::Check(write.clone()),
                Write::Restore { key, document } => Step::Restore {
                    key: key.clone(),
                    metadata: rows::without_data(document),
                    text: rows::text(&document.data)?,
                },
            })
        })
        .collect::<docstore::Result<_>>()?;
    Ok((steps, bytes))
}

/// Applies `steps` on `conn`, inside the caller's transaction, in order. The first failing
/// write ends it with [`docstore::Error::Batch`] (the caller rolls the transaction back, so
/// nothing stays written); SQLite failures are returned as they are, so a busy database
/// retries the whole batch. The documents of `Create`, `Put` and `Restore` come back without
/// their data (the caller has it: see [`attach_data`]).
pub(crate) fn apply(
    inner: &Inner,
    conn: &Connection,
    steps: &[Step],
    actor: &str,
    mut bytes: BatchBytes,
) -> Result<Vec<WriteOutcome>, Fail> {
    let mut outcomes = Vec::with_capacity(steps.len());
    for (index, step) in steps.iter().enumerate() {
        let (outcome, merged) = apply_one(inner, conn, step, actor).map_err(|fail| match fail {
            Fail::Store(err) => Fail::Store(batch::failed(index, err)),
            sql => sql,
        })?;
        // The batch's own limit: an error of the batch, not of this write.
        bytes.add(index, merged)?;
        outcomes.push(outcome);
    }
    let stored = steps
        .iter()
        .zip(&outcomes)
        .enumerate()
        .filter(|(_, (_, outcome))| matches!(outcome, WriteOutcome::Written(_)))
        .map(|(position, (step, _))| (position, step.key()));
    crate::unique::check_batch(conn, inner, stored)?;
    Ok(outcomes)
}

/// [`apply`] ([`Answer::Applied`], the outcomes as [`apply`] gives them), unless `id` (the
/// caller's identity of the batch) is kept on one of its keys: then the batch is a repeat,
/// nothing is written, and the answer holds the documents at its keys as they stand. An applied batch with an identity
/// keeps it on every key it wrote or deleted.
pub(crate) fn apply_once(
    inner: &Inner,
    conn: &Connection,
    steps: &[Step],
    actor: &str,
    bytes: BatchBytes,
    id: Option<&WriteId>,
) -> Result<Answer, Fail> {
    let Some(id) = id else {
        return Ok(Answer::Applied(apply(inner, conn, steps, actor, bytes)?));
    };
    let now = inner.options.clock.now();
    let kept = steps
        .iter()
        .map(|step| write_ids::kept(conn, step.key()))
        .collect::<Result<Vec<_>, Fail>>()?;
    if kept
        .iter()
        .flatten()
        .any(|kept| kept.repeats_delete(id, now))
    {
        let keys: Vec<Key> = steps.iter().map(|step| step.key().clone()).collect();
        return Ok(Answer::Repeat(load_many_in(conn, &keys, now)?));
    }
    let outcomes = apply(inner, conn, steps, actor, bytes)?;
    for ((step, outcome), kept) in steps.iter().zip(&outcomes).zip(&kept) {
        let kept = match outcome {
            WriteOutcome::Written(_) => KeptIds::written(id, kept.as_ref()),
            WriteOutcome::Deleted => KeptIds::deleted(id, kept.as_ref(), now),
            _ => continue,
        };
        write_ids::keep(conn, step.key(), &kept)?;
    }
    Ok(Answer::Applied(outcomes))
}

/// Applies one write; with the size of a patch's merged data (0 for the others, whose data
/// [`prepare`] counted).
fn apply_one(
    inner: &Inner,
    conn: &Connection,
    step: &Step,
    actor: &str,
) -> Result<(WriteOutcome, usize), Fail> {
    let by = |expiry: &Expiry| By {
        actor,
        expiry: *expiry,
    };
    let outcome = match step {
        Step::Create { key, text, expiry } => {
            inner.check_absent(conn, key)?;
            WriteOutcome::Written(inner.insert_new(conn, key, text, by(expiry))?)
        }
        Step::Put { key, text, expiry } => {
            WriteOutcome::Written(inner.put(conn, key, text, by(expiry))?)
        }
        Step::Patch {
            key,
            patch,
            expected_version,
            expiry,
        } => {
            let merged = inner.patch(conn, key, patch, *expected_version, by(expiry))?;
            let size = merged.size();
            return Ok((WriteOutcome::Written(merged.into_document()?), size));
        }
        Step::DeleteIf(write) => {
            batch::precondition(write, rows::version(conn, write.key(), inner.now())?)?;
            inner.remove(conn, write.key(), actor, inner.now())?;
            WriteOutcome::Deleted
        }
        Step::Check(write) => {
            batch::precondition(write, rows::version(conn, write.key(), inner.now())?)?;
            WriteOutcome::Checked
        }
        Step::Restore {
            key,
            metadata,
            text,
        } => {
            inner.restore(conn, key, metadata, text)?;
            WriteOutcome::Written(metadata.clone())
        }
    };
    Ok((outcome, 0))
}

/// Gives the documents [`apply`] returned for `Create`, `Put` and `Restore` the data of their
/// writes: the outcomes as the batch's caller gets them.
pub(crate) fn attach_data(writes: &[Write], outcomes: &mut [WriteOutcome]) {
    for (write, outcome) in writes.iter().zip(outcomes) {
        if let (
            Write::Create { data, .. }
            | Write::Put { data, .. }
            | Write::Restore {
                document: Document { data, .. },
                ..
            },
            WriteOutcome::Written(doc),
        ) = (write, outcome)
        {
            doc.data = data.clone();
        }
    }
}

/// Reads `keys` at `now` on `conn` inside one read transaction: one snapshot.
pub(crate) fn load_many(
    conn: &Connection,
    keys: &[Key],
    now: i64,
) -> Result<Vec<Option<Document>>, Fail> {
    // Dropped without commit: a read transaction has nothing to keep.
    let _snapshot = conn.unchecked_transaction()?;
    load_many_in(conn, keys, now)
}

/// Reads `keys` at `now` on `conn` inside the caller's transaction.
fn load_many_in(conn: &Connection, keys: &[Key], now: i64) -> Result<Vec<Option<Document>>, Fail> {
    keys.iter().map(|key| rows::load(conn, key, now)).collect()
}
