//! A `delete` or `delete_if` of a revision this store already knows ([`crate::known`]):
//! the delete's transaction is sent without reading first — the document's delete
//! conditioned on that revision, its stamp, the counter move (exact counters), the removal of
//! its expiry marker, and for a call with an identity the record of it appended under a
//! condition ([`crate::deleted::record_append`]). One request where the baseline `delete`
//! sends a read and the transaction.
//!
//! It is tried only where it can decide alone: the collection has no unique index (the
//! guards to release depend on the data, which is not remembered), the revision has not
//! expired, and for `delete_if` it is the expected version. When its condition fails (the
//! document changed, or the record holds the identity, is full or lapsed), nothing was
//! written and the delete goes the way that reads ([`DynamoStore::delete_document`]), which
//! also recognises a repeated call. After a lost answer, the stamp of the known revision (and
//! the record) say whether this call deleted it, as on the reading way.

use crate::history::Stored;
use crate::send::{Companion, Expect, Sent};
use crate::stamps::stamp_item;
use crate::store::DynamoStore;
use crate::writes::ItemShape;
use docstore::config::CounterMode;
use docstore::driver::Origin;
use docstore::{Key, Result, WriteId};

/// What the quick delete settled: the answer, or that the delete must read.
pub(crate) enum Quick {
    /// The delete's answer (`true`: it deleted the document).
    Answer(bool),
    /// Not settled; nothing of this call is applied: delete the way that reads.
    ReadFirst,
}

impl DynamoStore {
    /// The quick delete of `key` (see the [module docs](self)), with `w` as its identity
    /// (the caller's when `origin` has one).
    pub(crate) async fn delete_known(
        &self,
        key: &Key,
        expected_version: Option<u64>,
        origin: Origin<'_>,
        w: &WriteId,
    ) -> Result<Quick> {
        let Some(known) = self.known.get(key) else {
            return Ok(Quick::ReadFirst);
        };
        let now = self.options.clock.now();
        let expected = expected_version.is_none_or(|v| v == known.doc.version);
        let shape = self.item_shape().await?;
        if !expected || known.doc.is_expired(now) || !unguarded(&shape, key) {
            return Ok(Quick::ReadFirst);
        }
        let identified = origin.write_id.is_some();
        let with =
            self.quick_companions(&shape, key, &known, (origin.actor, now), w, identified)?;
        let moved = match self.counters {
            CounterMode::Exact => -1,
            CounterMode::Fast => 0,
        };
        let expect = Expect::Revision(&known);
        let sent = self.send_delete(key, expect, moved, w, with, &[]).await?;
        self.known.forget(key);
        let quick = match sent {
            Sent::Applied => Quick::Answer(true),
            Sent::Refused { resent: true, .. }
            | Sent::Contended {
                maybe_applied: true,
            } => match self.deleted_by(key, &known, w, identified).await? {
                true => Quick::Answer(true),
                false => Quick::ReadFirst,
            },
            Sent::Refused { .. } | Sent::Contended { .. } | Sent::Guarded { .. } => {
                Quick::ReadFirst
            }
            Sent::Unknown(err) => self.settle_quick(key, &known, w, identified, err).await?,
        };
        if matches!(quick, Quick::Answer(true)) {
            self.count_late(key, -1).await;
        }
        Ok(quick)
    }

    /// The items the quick delete `w` of `known` by `actor` at `now` writes or removes with
    /// it: its stamp, the conditional append of its record (`identified`), the removal of
    /// the revision's expiry marker.
    fn quick_companions(
        &self,
        shape: &ItemShape,
        key: &Key,
        known: &Stored,
        (actor, now): (&str, i64),
        w: &WriteId,
        identified: bool,
    ) -> Result<Vec<Companion>> {
        let layout = shape.layout;
        let mut with = vec![Companion::Put(stamp_item(
            layout, key, known, actor, now, w,
        ))];
        if identified {
            let append = crate::deleted::record_append(&self.table, layout, key, w, now)?;
            with.push(Companion::Update(append));
        }
        with.extend(crate::expiring::marker_changes(
            layout,
            key,
            Some(&known.doc),
            None,
        ));
        Ok(with)
    }

    /// Every answer to the quick delete `w` of `known` was lost: its stamp (or record) shows
    /// it applied; a stamp naming another call shows it was not (read, and delete again);
    /// neither: the outcome is unknown and `err` (`Unavailable`) stands.
    async fn settle_quick(
        &self,
        key: &Key,
        known: &Stored,
        w: &WriteId,
        identified: bool,
        err: docstore::Error,
    ) -> Result<Quick> {
        if let Ok(Some(stamp)) = self.stamp(key, known).await {
            return Ok(match stamp.deleter == w.as_str() {
                true => Quick::Answer(true),
                false => Quick::ReadFirst,
            });
        }
        if identified
            && self
                .recorded_deletes(key)
                .await
                .is_ok_and(|ids| ids.holds(w))
        {
            return Ok(Quick::Answer(true));
        }
        Err(err)
    }
}

/// Whether no unique index of `key`'s collection needs guards released by its deletes (and
/// none is declared without the table holding it, which the reading way reports).
fn unguarded(shape: &ItemShape, key: &Key) -> bool {
    let collection = key.collection();
    shape.registry.refuse_unheld(collection).is_ok()
        && !shape
            .registry
            .for_collection(collection)
            .any(|index| index.compiled.is_unique())
}
