//! The caller write identities the memory backend keeps: on each document written with one,
//! and on each key a caller-identified delete removed (for
//! [`DELETE_IDS_KEPT_FOR`](docstore::identity::DELETE_IDS_KEPT_FOR)).
//!
//! Writes without a caller identity cannot be repeated, so nothing is kept for them and they
//! cost nothing here but the removal of a deleted document's entry.

use docstore::identity::{DELETE_IDS_KEPT_FOR_NANOS, KeptIds, WriteIds};
use docstore::{Key, WriteId};
use std::collections::{HashMap, VecDeque};

/// Every kept identity, under the store's write lock.
#[derive(Debug, Default)]
pub(crate) struct Identities {
    /// The identities of the writes to each stored document that had one.
    live: HashMap<Key, WriteIds>,
    /// The identities of the deletes of each deleted key, with when the last one happened.
    deleted: HashMap<Key, KeptIds>,
    /// When each delete in `deleted` happened, oldest first, to forget them in order.
    expiry: VecDeque<(i64, Key)>,
}

impl Identities {
    /// Whether the document at `key` keeps `id`.
    pub(crate) fn written(&self, key: &Key, id: &WriteId) -> bool {
        self.live.get(key).is_some_and(|ids| ids.holds(id))
    }

    /// Keeps `id` on the document at `key`, just written.
    pub(crate) fn record_write(&mut self, key: &Key, id: &WriteId) {
        self.live.entry(key.clone()).or_default().record(id);
    }

    /// Forgets the identities of the document at `key`, just removed.
    pub(crate) fn forget(&mut self, key: &Key) {
        if !self.live.is_empty() {
            self.live.remove(key);
        }
    }

    /// Whether a delete with `id` removed the document at `key` no longer ago than the
    /// identities of deletes are kept.
    pub(crate) fn deleted(&self, key: &Key, id: &WriteId, now: i64) -> bool {
        self.deleted
            .get(key)
            .is_some_and(|kept| kept.repeats_delete(id, now))
    }

    /// Records that a delete with `id` removed the document at `key` at `now` (after the
    /// identities of earlier deletes of the key), and forgets deletes past the window.
    pub(crate) fn record_delete(&mut self, key: &Key, id: &WriteId, now: i64) {
        self.forget(key);
        self.prune(now);
        let kept = KeptIds::deleted(id, self.deleted.get(key), now);
        self.deleted.insert(key.clone(), kept);
        self.expiry.push_back((now, key.clone()));
    }

    /// Forgets the deletes that happened longer ago than the window.
    fn prune(&mut self, now: i64) {
        while let Some((at, _)) = self.expiry.front() {
            if now - at < DELETE_IDS_KEPT_FOR_NANOS {
                break;
            }
            let (at, key) = self.expiry.pop_front().expect("just looked");
            // A later delete of the key keeps its record.
            if self
                .deleted
                .get(&key)
                .is_some_and(|d| d.deleted_at == Some(at))
            {
                self.deleted.remove(&key);
            }
        }
    }
}
