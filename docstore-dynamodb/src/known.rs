//! The revisions this store last wrote or read, by key, so that a `delete` of one of them
//! needs no read first ([`crate::quick_delete`]).
//!
//! A delete must name the revision it removes: its stamp is keyed by that revision's write
//! identity ([`crate::stamps`]; the change feed finds the delete's actor and time from the
//! removed item alone), and its condition is that exact revision (a delete never touches a
//! document created after it, `docs/contract.md`). Without a read, only a revision the store
//! already saw can be named. A remembered revision that changed since costs nothing wrong:
//! the delete's condition fails and the delete reads as it would have.
//!
//! Only the metadata is kept (no data, the newest write identity of the history): about
//! 200 bytes a key, at most [`KEPT`] keys, an arbitrary one forgotten when full.

use crate::history::Stored;
use docstore::{Document, Key};
use std::collections::HashMap;
use std::sync::Mutex;

/// How many keys' revisions a store remembers.
pub(crate) const KEPT: usize = 8_192;

/// The remembered revisions, by key. See the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct KnownRevisions(Mutex<HashMap<Key, Stored>>);

impl KnownRevisions {
    /// Remembers that `key` holds `doc` as written by the write `w` (the newest entry of its
    /// history).
    pub(crate) fn remember(&self, key: &Key, doc: &Document, w: &str) {
        let revision = Stored {
            doc: doc.clone_without_data(),
            history: vec![w.to_owned()],
        };
        let mut known = self.lock();
        if known.len() >= KEPT
            && !known.contains_key(key)
            && let Some(any) = known.keys().next().cloned()
        {
            known.remove(&any);
        }
        known.insert(key.clone(), revision);
    }

    /// Remembers the revision `stored` read at `key`.
    pub(crate) fn remember_read(&self, key: &Key, stored: &Stored) {
        match stored.history.first() {
            Some(w) => self.remember(key, &stored.doc, w),
            // An item written before every write set its identity: its stamp is keyed by
            // version and creation time instead, which the remembered form cannot express.
            None => self.forget(key),
        }
    }

    /// The revision remembered at `key`: its document has no data and its history only the
    /// newest write identity.
    pub(crate) fn get(&self, key: &Key) -> Option<Stored> {
        self.lock().get(key).cloned()
    }

    /// Forgets `key` (deleted, or its outcome unknown).
    pub(crate) fn forget(&self, key: &Key) {
        self.lock().remove(key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Stored>> {
        // A panic while holding the map leaves it consistent (every change is one call).
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// `Document::clone` without copying the data.
trait WithoutData {
    fn clone_without_data(&self) -> Document;
}

impl WithoutData for Document {
    fn clone_without_data(&self) -> Document {
        Document {
            id: self.id.clone(),
            data: Default::default(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            created_by: self.created_by.clone(),
            updated_by: self.updated_by.clone(),
            version: self.version,
            expires_at: self.expires_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(version: u64) -> Document {
        Document {
            id: "i".into(),
            data: docstore::object(serde_json::json!({"big": "x"})).unwrap(),
            created_at: 5,
            updated_at: 7,
            created_by: "a".into(),
            updated_by: "b".into(),
            version,
            expires_at: Some(9),
        }
    }

    #[test]
    fn remembers_the_metadata_and_the_newest_write() {
        let known = KnownRevisions::default();
        let key = Key::new("s", "c", "i").unwrap();
        known.remember(&key, &doc(3), "w3");
        let got = known.get(&key).unwrap();
        assert_eq!(got.history, ["w3"]);
        assert_eq!(got.doc.version, 3);
        assert_eq!(got.doc.expires_at, Some(9));
        assert_eq!((got.doc.created_at, got.doc.updated_at), (5, 7));
        assert_eq!(got.doc.data, Default::default());
        known.forget(&key);
        assert!(known.get(&key).is_none());
        let legacy = Stored {
            doc: doc(1),
            history: vec![],
        };
        known.remember(&key, &doc(3), "w3");
        known.remember_read(&key, &legacy);
        assert!(
            known.get(&key).is_none(),
            "no identity: nothing to key a stamp by"
        );
    }

    #[test]
    fn stays_within_its_bound() {
        let known = KnownRevisions::default();
        for n in 0..KEPT + 10 {
            let key = Key::new("s", "c", n.to_string()).unwrap();
            known.remember(&key, &doc(1), "w");
        }
        assert_eq!(known.lock().len(), KEPT);
        let last = Key::new("s", "c", (KEPT + 9).to_string()).unwrap();
        assert!(known.get(&last).is_some(), "the newest is kept");
    }
}
