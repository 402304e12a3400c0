//! `update`, `update_if`, and `put` over a stored document on the memory store: the merge
//! patch (or the put's data) goes into the stored document in place, under the write lock,
//! and the change log keeps what the write displaced ([`Reversal`]) instead of the version
//! it replaced, so the write copies nothing of the document (unless a reader or an earlier
//! answer still shares its data, which is then copied first: `docs/contract.md`,
//! "Documents"). Every [`KEYFRAME_EVERY`]th update of a document copies it instead and the
//! log keeps the whole replaced version, which bounds what a feed read undoes.
//!
//! A write refused after its edit — the result over the size limit, or holding a unique
//! value another document holds — puts back what it displaced, so it changes nothing.

use crate::feed::{Before, DataUndo, KEYFRAME_EVERY, Logged, Reversal};
use crate::{
    Applied, By, Collection, MemoryStore, Placement, Retired, Shared, Site, Slot, reverse,
};
use docstore::batch::{CheckedBatch, Write};
use docstore::document::{check_size, data_size_bound};
use docstore::feed::ChangeKind;
use docstore::index::CompiledIndex;
use docstore::index::unique;
use docstore::{Data, Error, Key, Result};
use std::collections::HashMap;
use std::sync::Arc;

/// A write in place of a stored document (an update, or a put over one): the key, what it
/// does to the data, and the version it must find (`update_if`).
pub(crate) struct InPlace<'a> {
    pub(crate) key: &'a Key,
    pub(crate) edit: Edit<'a>,
    pub(crate) expected: Option<u64>,
}

/// What a write in place does to a document's data.
pub(crate) enum Edit<'a> {
    /// Merges `patch`, whose [`data_size_bound`] is `bound` (found before the write lock).
    Merge { patch: &'a Data, bound: usize },
    /// Replaces the data whole (a put), with its size bound when the front end measured it.
    Replace { data: Data, bound: Option<usize> },
}

impl Edit<'_> {
    /// The size bound of the data the edit leaves, given the stored data's (`stored`):
    /// the two added for a merge (never larger than both together), the new data's for a
    /// replacement; `None` when not known.
    fn bound_over(&self, stored: impl FnOnce() -> usize) -> Option<usize> {
        match self {
            Edit::Merge { bound, .. } => Some(stored().saturating_add(*bound)),
            Edit::Replace { bound, .. } => *bound,
        }
    }
}

/// What the edit of one write in place needs to know besides the document.
struct Editing<'a> {
    edit: Edit<'a>,
    by: By<'a>,
    now: i64,
    limit: usize,
}

/// An edit done in place: what the log keeps of the version it replaced, and the edited
/// data's size bound when it certainly fits (for a merge, the stored bound plus the patch's).
struct Edited {
    before: Before,
    size_bound: Option<usize>,
}

impl MemoryStore {
    /// Merges the patch into the document at its key under the write lock and logs it;
    /// [`Error::NotFound`] when there is none, [`Error::Conflict`] when it is not at the
    /// expected version.
    pub(crate) fn write_in_place(
        &self,
        sites: &mut HashMap<String, Site>,
        call: InPlace<'_>,
        (by, now): (By<'_>, i64),
        retired: &mut Retired,
    ) -> Result<Shared> {
        let InPlace {
            key,
            edit,
            expected,
        } = call;
        let defs = self.defs(key.collection());
        let collection = sites
            .get_mut(key.site())
            .and_then(|site| site.get_mut(key.collection()))
            .ok_or_else(|| Error::not_found(key))?;
        let editing = Editing {
            edit,
            by,
            now,
            limit: self.options.max_doc_bytes,
        };
        let slot = collection
            .docs
            .get_mut(key.id())
            .ok_or_else(|| Error::not_found(key))?;
        let (edited, placement) = edit_in_place(slot, defs, expected, &editing)?;
        // Searched again only when the document was filed anew (indexes, a new expiry).
        let slot = match placement {
            None => slot,
            Some(old) => {
                if let Err(err) = collection.refile(defs, key, old, editing.now) {
                    let slot = collection.docs.get_mut(key.id()).expect("just edited");
                    undo_edit(slot, edited.before);
                    return Err(err);
                }
                collection.docs.get_mut(key.id()).expect("just edited")
            }
        };
        let appended = self.feed.stored(Logged {
            key,
            kind: ChangeKind::Updated,
            after: &slot.doc,
            chain: slot.last_change,
            before: edited.before,
        });
        retired.entry = appended.evicted;
        slot.last_change = appended.position;
        slot.size_bound = edited.size_bound;
        Ok(Arc::clone(&slot.doc))
    }
}

/// A batch of updates merged in place, as single updates are, when nothing can refuse one
/// of them: then no write of the batch needs undoing, and none is copied first (a batch
/// decided whole merges a copy of every document: `docstore::batch::decide`).
impl MemoryStore {
    /// The batch's calls when every write is an `Update` or `UpdateIf` in a collection
    /// without unique indexes, so that [`MemoryStore::patch_all_locked`] may apply it: each
    /// patch's size bound found here, before the write lock, as a single update's is.
    pub(crate) fn batch_patches<'b>(&self, writes: &'b [Write]) -> Option<Vec<InPlace<'b>>> {
        let call = |write: &'b Write| {
            let (key, patch, expected) = match write {
                Write::Update { key, patch } => (key, patch, None),
                Write::UpdateIf {
                    key,
                    patch,
                    expected_version,
                } => (key, patch, Some(*expected_version)),
                _ => return None,
            };
            let defs = self.defs(key.collection());
            let edit = Edit::Merge {
                patch,
                bound: data_size_bound(patch),
            };
            (!defs.iter().any(CompiledIndex::is_unique)).then_some(InPlace {
                key,
                edit,
                expected,
            })
        };
        writes.iter().map(call).collect()
    }

    /// Applies the [`batch_patches`](Self::batch_patches) of `checked` under the write
    /// lock, each merged in place as a single update is, at `now`, when every one certainly
    /// applies ([`certain`](Self::certain)); `None`, having changed nothing, when one might
    /// not (the caller then decides the batch whole, which names the refusal).
    pub(crate) fn patch_all_locked(
        &self,
        sites: &mut HashMap<String, Site>,
        (calls, checked): (Vec<InPlace<'_>>, &CheckedBatch<'_>),
        (actor, now): (&str, i64),
        retired: &mut Vec<Retired>,
    ) -> Option<Vec<Applied>> {
        if !self.certain(sites, &calls, checked) {
            return None;
        }
        let applied = calls.into_iter().enumerate().map(|(index, call)| {
            let mut gone = Retired::default();
            let by = (actor, checked.expiry(index));
            let doc = self.write_in_place(sites, call, (by, now), &mut gone);
            retired.push(gone);
            Applied::Written(doc.expect("checked by `certain`: nothing refuses it"))
        });
        Some(applied.collect())
    }

    /// Whether every call certainly applies: its document is there, at the version an
    /// `UpdateIf` expects, the merge's size bound (the stored data's plus the patch's)
    /// within the document limit, and the batch's bytes counted with those bounds within
    /// [`MAX_BATCH_BYTES`](docstore::batch::MAX_BATCH_BYTES) (bounds are never below the
    /// sizes the batch decided whole would count). No unique index is involved
    /// ([`batch_patches`](Self::batch_patches)), and the write lock keeps it all true until
    /// applied.
    fn certain(
        &self,
        sites: &HashMap<String, Site>,
        calls: &[InPlace<'_>],
        checked: &CheckedBatch<'_>,
    ) -> bool {
        let mut bytes = checked.bytes();
        calls.iter().enumerate().all(|(index, call)| {
            let Some(slot) = Self::lookup_slot(sites, call.key) else {
                return false;
            };
            let bound = call
                .edit
                .bound_over(|| slot.data_bound())
                .unwrap_or(usize::MAX);
            call.expected
                .is_none_or(|version| version == slot.doc.version)
                && bound <= self.options.max_doc_bytes
                && bytes.add(index, bound).is_ok()
        })
    }
}

/// Edits `slot`'s document as `editing` says (a merge or a replacement), if at `expected`,
/// and stamps its next version; where it was filed before, when that may have moved (the
/// collection has indexes, or the write changed the expiry).
fn edit_in_place(
    slot: &mut Slot,
    defs: &[CompiledIndex],
    expected: Option<u64>,
    editing: &Editing<'_>,
) -> Result<(Edited, Option<Placement>)> {
    if let Some(expected) = expected
        && expected != slot.doc.version
    {
        return Err(Error::Conflict {
            current: slot.doc.version,
        });
    }
    let old = Placement {
        expires_at: slot.doc.expires_at,
        keys: defs.iter().map(|def| def.key(&slot.doc)).collect(),
    };
    let edited = editing.apply(slot)?;
    let moved = !defs.is_empty() || old.expires_at != slot.doc.expires_at;
    Ok((edited, moved.then_some(old)))
}

impl Collection {
    /// Files the edited document `key` names anew (expiry, index keys) from `old`, once its
    /// unique values are checked (a refusal changes nothing here: the caller undoes the
    /// merge).
    fn refile(
        &mut self,
        defs: &[CompiledIndex],
        key: &Key,
        old: Placement,
        now: i64,
    ) -> Result<()> {
        let doc = Arc::clone(&self.docs[key.id()].doc);
        if defs.iter().any(CompiledIndex::is_unique) {
            // The index maps still hold the document's old keys, which the check passes
            // over (they are its own).
            unique::check(defs, key, &doc, |_, claim, except| {
                Ok(self.holder(defs, claim, except, now))
            })?;
        }
        self.reindex(defs, Some(old), &doc);
        Ok(())
    }
}

impl Editing<'_> {
    /// Merges into `slot`'s document and stamps its next version: in place, keeping a
    /// reverse patch, or (every [`KEYFRAME_EVERY`]th update) into a copy, keeping the whole
    /// version it replaced. A result over the size limit is undone and refused.
    fn apply(&self, slot: &mut Slot) -> Result<Edited> {
        let size_bound = self
            .edit
            .bound_over(|| slot.data_bound())
            .filter(|bound| *bound <= self.limit);
        let keyframe = slot.patched_run + 1 >= KEYFRAME_EVERY;
        let before = if keyframe {
            self.in_a_copy(slot, size_bound.is_some())?
        } else {
            self.in_place(slot, size_bound.is_some())?
        };
        slot.patched_run = if keyframe { 0 } else { slot.patched_run + 1 };
        let (actor, expiry) = self.by;
        let doc = Arc::make_mut(&mut slot.doc);
        doc.stamp_next(actor, self.now);
        doc.expires_at = expiry.apply(doc.expires_at, doc.updated_at);
        Ok(Edited { before, size_bound })
    }

    /// The edit of the stored data itself; its reversal (the metadata still the replaced
    /// version's, stamped by the caller).
    fn in_place(&self, slot: &mut Slot, fits: bool) -> Result<Before> {
        let (actor, _) = self.by;
        let doc = Arc::make_mut(&mut slot.doc);
        let undo = match &self.edit {
            Edit::Merge { patch, .. } if patch.is_empty() => DataUndo::Recorded(Vec::new()),
            Edit::Merge { patch, .. } => {
                let displaced = reverse::merge(&mut doc.data, patch);
                DataUndo::Recorded(reverse::recorded(patch, displaced))
            }
            Edit::Replace { data, .. } => {
                DataUndo::Replaced(std::mem::replace(&mut doc.data, data.clone()))
            }
        };
        if !fits && let Err(err) = check_size(&doc.data, self.limit) {
            undo.restore(&mut doc.data);
            return Err(err);
        }
        let updated_by = (doc.updated_by != actor).then(|| std::mem::take(&mut doc.updated_by));
        Ok(Before::Patched(Box::new(Reversal {
            data: undo,
            updated_at: doc.updated_at,
            updated_by,
            expires_at: doc.expires_at,
        })))
    }

    /// The edit of a copy of the stored document, the log keeping the replaced version.
    fn in_a_copy(&self, slot: &mut Slot, fits: bool) -> Result<Before> {
        let kept = Arc::clone(&slot.doc);
        // `kept` shares the document: this copies it (and a merge its data below).
        let doc = Arc::make_mut(&mut slot.doc);
        match &self.edit {
            Edit::Merge { patch, .. } => docstore::merge_patch(&mut doc.data, patch),
            Edit::Replace { data, .. } => doc.data = data.clone(),
        }
        if !fits && let Err(err) = check_size(&doc.data, self.limit) {
            slot.doc = kept;
            return Err(err);
        }
        Ok(Before::Whole(kept))
    }
}

/// Makes `slot`'s document the version before the edit that kept `before` again (a write
/// refused after its edit), metadata included.
fn undo_edit(slot: &mut Slot, before: Before) {
    match before {
        Before::Whole(kept) => {
            slot.doc = kept;
            slot.patched_run = KEYFRAME_EVERY - 1;
        }
        Before::Patched(reversal) => {
            reversal.restore(Arc::make_mut(&mut slot.doc));
            slot.patched_run -= 1;
        }
        Before::Nothing => unreachable!("an update replaces a version"),
    }
}
