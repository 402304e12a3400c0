//! Unique indexes in SQLite (`docs/contract.md`, "Unique indexes"): the declared index's
//! entries in `index_entries` are the holders. A write is checked inside its own
//! transaction (its savepoint, in a group commit), after it wrote: the stored document's key
//! in each unique index of its collection is computed by `docstore_index_key`, and an entry
//! of another document starting with the same claim refuses the write, which is then rolled
//! back. Checking after the write makes a batch judged as it leaves the documents (moves and
//! swaps of values go through), and the writer's lock makes the lookup exact. Every query
//! is parameterized, the index's fields included.

use crate::error::{Fail, corrupt};
use crate::index::{INDEX_KEY, Indexes, fields_json};
use crate::store::Inner;
use docstore::index::unique::{self, DuplicateFinder};
use docstore::index::{CompiledIndex, Index, IndexSet};
use docstore::{Data, Error, Key, UniqueProblem};
use rusqlite::{Connection, OptionalExtension, params};

/// The values a write's data claims, computed before the write from the data it stores
/// (no JSON parsed in SQL): the unique index's row id and the claim.
pub(crate) struct Claims(Vec<(i64, Vec<u8>)>);

impl Claims {
    /// The claims `data`, about to be stored in `key`'s collection, makes.
    pub(crate) fn of(indexes: &Indexes, key: &Key, data: &Data) -> Claims {
        let claims = indexes
            .unique_of(key.collection())
            .into_iter()
            .filter_map(|(id, index)| Some((id, index.claim_in(data)?)))
            .collect();
        Claims(claims)
    }

    /// Refuses the write that just stored these claims' data at `key` when another document
    /// holds one of them; the write is then rolled back.
    pub(crate) fn check(&self, conn: &Connection, inner: &Inner, key: &Key) -> Result<(), Fail> {
        for (index_id, claim) in &self.0 {
            if let Some(holder) = claim_holder(conn, inner, *index_id, key, claim)? {
                let unique = inner.indexes.unique_of(key.collection());
                let (_, index) = unique
                    .iter()
                    .find(|(id, _)| id == index_id)
                    .expect("a claim of one of the collection's unique indexes");
                return refuse(conn, inner, index, key, &holder);
            }
        }
        Ok(())
    }
}

/// How an update of a document of `key`'s collection by `patch` is checked.
pub(crate) enum PatchCheck {
    /// The patch changes no unique value: nothing to check.
    Unchanged,
    /// The patch alone decides every unique value it changes: these claims.
    Claims(Claims),
    /// Some value depends on the document: read from the stored row after the merge.
    Stored,
}

impl PatchCheck {
    pub(crate) fn of(indexes: &Indexes, key: &Key, patch: &Data) -> PatchCheck {
        let unique = indexes.unique_of(key.collection());
        let changed: Vec<_> = unique
            .into_iter()
            .filter(|(_, index)| index.patch_may_change_claim(patch))
            .collect();
        if changed.is_empty() {
            return PatchCheck::Unchanged;
        }
        let mut claims = Vec::with_capacity(changed.len());
        for (id, index) in changed {
            match index.claim_after_patch(patch) {
                None => return PatchCheck::Stored,
                Some(None) => {}
                Some(Some(claim)) => claims.push((id, claim)),
            }
        }
        PatchCheck::Claims(Claims(claims))
    }

    /// Refuses the update that just merged its patch into the document at `key` when
    /// another document holds one of the values it set.
    pub(crate) fn check(&self, conn: &Connection, inner: &Inner, key: &Key) -> Result<(), Fail> {
        match self {
            PatchCheck::Unchanged => Ok(()),
            PatchCheck::Claims(claims) => claims.check(conn, inner, key),
            PatchCheck::Stored => check_stored(conn, inner, key),
        }
    }
}

/// The refusal of the write that stored the document at `key`, naming `holder`.
fn refuse(
    conn: &Connection,
    inner: &Inner,
    index: &CompiledIndex,
    key: &Key,
    holder: &str,
) -> Result<(), Fail> {
    let doc = crate::rows::load(conn, key, inner.now())?.ok_or_else(|| Error::not_found(key))?;
    Err(unique::violation(index, &doc, holder).into())
}

/// Refuses the write that just stored the document at `key` when another document of its
/// collection holds one of its unique values ([`Error::UniqueViolation`]); its claims read
/// from the stored row (a merge made in SQL).
pub(crate) fn check_stored(conn: &Connection, inner: &Inner, key: &Key) -> Result<(), Fail> {
    for (index_id, index) in inner.indexes.unique_of(key.collection()) {
        if let Some(holder) = holder(conn, inner, index_id, index, key)? {
            return refuse(conn, inner, index, key, &holder);
        }
    }
    Ok(())
}

/// [`check_stored`] for each document a batch stored (its position and key), in batch
/// order, once every write of the batch is applied; a refusal is the batch's, at the
/// position of the first write whose value another document holds.
pub(crate) fn check_batch<'k>(
    conn: &Connection,
    inner: &Inner,
    stored: impl IntoIterator<Item = (usize, &'k Key)>,
) -> Result<(), Fail> {
    for (position, key) in stored {
        check_stored(conn, inner, key).map_err(|fail| match fail {
            Fail::Store(err) => Fail::Store(docstore::batch::failed(position, err)),
            sql => sql,
        })?;
    }
    Ok(())
}

/// The smallest id, other than `key`'s, whose entry in unique index `index_id` carries the
/// claim of the document stored at `key` (none when that document claims nothing).
fn holder(
    conn: &Connection,
    inner: &Inner,
    index_id: i64,
    index: &CompiledIndex,
    key: &Key,
) -> Result<Option<String>, Fail> {
    let stored: Option<Vec<u8>> = conn
        .prepare_cached(&format!(
            "SELECT {INDEX_KEY}(?1, json(data), id, created_at, updated_at, created_by, \
             updated_by, version) FROM documents WHERE site = ?2 AND collection = ?3 AND id = ?4"
        ))?
        .query_row(
            params![
                fields_json(index.declaration()),
                key.site(),
                key.collection(),
                key.id()
            ],
            |row| row.get(0),
        )
        .optional()?;
    let Some(claim) = stored.as_deref().and_then(|k| index.claim_of_key(k)) else {
        return Ok(None);
    };
    claim_holder(conn, inner, index_id, key, claim)
}

/// The document, other than `key`'s, holding `claim` in unique index `index_id`. A holder
/// that has expired holds nothing (`docs/contract.md`, "Expiry"): the write removes it, with
/// its change, and looks again.
fn claim_holder(
    conn: &Connection,
    inner: &Inner,
    index_id: i64,
    key: &Key,
    claim: &[u8],
) -> Result<Option<String>, Fail> {
    loop {
        let Some(holder) = first_other_entry(conn, index_id, key, claim)? else {
            return Ok(None);
        };
        let holder_key = Key::new(key.site(), key.collection(), holder.as_str())
            .map_err(|err| corrupt(format!("index entry id: {err}")))?;
        if !inner.expire_due(conn, &holder_key)? {
            return Ok(Some(holder));
        }
    }
}

/// The smallest id, other than `key`'s, whose entry in unique index `index_id` carries
/// `claim`.
fn first_other_entry(
    conn: &Connection,
    index_id: i64,
    key: &Key,
    claim: &[u8],
) -> Result<Option<String>, Fail> {
    let (start, end) = unique::claim_range(claim);
    // Two statements rather than `(?4 IS NULL OR entry_key < ?4)`: SQLite bounds a range
    // scan only by a plain comparison, and an unbounded scan past the claim would read every
    // later entry of the index when no other document holds it.
    let holder = match end {
        Some(end) => conn
            .prepare_cached(
                "SELECT entry_id FROM index_entries WHERE index_id = ?1 AND entry_site = ?2 \
                 AND entry_key >= ?3 AND entry_key < ?4 AND entry_id <> ?5 \
                 ORDER BY entry_key LIMIT 1",
            )?
            .query_row(params![index_id, key.site(), start, end, key.id()], |row| {
                row.get(0)
            })
            .optional()?,
        None => conn
            .prepare_cached(
                "SELECT entry_id FROM index_entries WHERE index_id = ?1 AND entry_site = ?2 \
                 AND entry_key >= ?3 AND entry_id <> ?4 ORDER BY entry_key LIMIT 1",
            )?
            .query_row(params![index_id, key.site(), start, key.id()], |row| {
                row.get(0)
            })
            .optional()?,
    };
    Ok(holder)
}

/// The values of `site` that several documents share, in each unique index (only a change
/// from outside the store, such as a hand-edited file, can cause one): for `fsck`.
pub(crate) fn shared_values(
    conn: &Connection,
    indexes: &Indexes,
    site: &str,
) -> Result<Vec<UniqueProblem>, Fail> {
    let mut problems = Vec::new();
    for index in indexes.usable.iter().filter(|index| index.is_unique()) {
        let Some((index_id, _)) = indexes
            .unique_of(index.collection())
            .into_iter()
            .find(|(_, unique)| unique.name() == index.name())
        else {
            continue;
        };
        let mut stmt = conn.prepare_cached(
            "SELECT entry_key, entry_id FROM index_entries WHERE index_id = ?1 \
             AND entry_site = ?2 ORDER BY entry_key",
        )?;
        let mut rows = stmt.query(params![index_id, site])?;
        let mut group: (Option<Vec<u8>>, Vec<String>) = (None, Vec::new());
        let mut flush = |group: &mut (Option<Vec<u8>>, Vec<String>)| {
            if group.1.len() > 1 {
                problems.push(UniqueProblem::Shared {
                    collection: index.collection().to_owned(),
                    index: index.name().to_owned(),
                    ids: std::mem::take(&mut group.1),
                });
            }
            group.1.clear();
        };
        while let Some(row) = rows.next()? {
            let (key, id): (Vec<u8>, String) = (row.get(0)?, row.get(1)?);
            let claim = index.claim_of_key(&key).map(<[u8]>::to_vec);
            if claim.is_none() || claim != group.0 {
                flush(&mut group);
                group.0 = claim.clone();
            }
            if claim.is_some() {
                group.1.push(id);
            }
        }
        flush(&mut group);
    }
    Ok(problems)
}

/// Refuses to build the unique index `index` (row id `index_id`, entries just written) when
/// documents already share a value: [`Error::InvalidArgument`] naming up to 10 pairs; the
/// build's transaction is then rolled back.
pub(crate) fn refuse_duplicates(
    conn: &Connection,
    index_id: i64,
    index: &Index,
) -> Result<(), Fail> {
    let set = IndexSet::new([index.clone()])?;
    let compiled = &set.for_collection(&index.collection)[0];
    let mut finder = DuplicateFinder::new(compiled);
    let mut stmt = conn.prepare(
        "SELECT entry_site, entry_key FROM index_entries WHERE index_id = ?1 \
         ORDER BY entry_site, entry_key",
    )?;
    let mut rows = stmt.query(params![index_id])?;
    while let Some(row) = rows.next()? {
        let (site, key): (String, Vec<u8>) = (row.get(0)?, row.get(1)?);
        finder.add(&site, &key);
    }
    match finder.refusal() {
        Some(err) => Err(err.into()),
        None => Ok(()),
    }
}
