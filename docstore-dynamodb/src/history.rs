//! The write history every document item carries: the identities of its last
//! [`HISTORY_LEN`] writes, so a write whose answer was lost can recognise its own effect on
//! the item its resend meets, even after other writers got in between.
//!
//! On the item: `w` (S) is the identity of the write that produced this revision (the original layout's
//! attribute, now set by every write), and `wh` (L of S) the identities of the writes before
//! it, most recent first, at most `HISTORY_LEN - 1` of them (absent after a creation).
//!
//! Why 16: a resend follows its lost attempt after the SDK's backoff, which this backend sets
//! to at most 20 ms before the first resend and 40 ms before the second (`write_retry` in
//! `store.rs`, set by `DynamoStore::connect`), plus
//! one round trip. Writes to one item are serialized by its conditions: each competing writer
//! needs a read and a conditional write (two round trips, about 5–10 ms in a region), so
//! about 8 other writes fit in the window under heavy contention. 16 is twice that, and
//! costs about 530 bytes per item (15 × 33 + `w`). A write displaced from the history by more
//! writes than that is not lost: the call then cannot tell, and says `Unavailable`.

use crate::item::{Item, WRITE_HISTORY, WRITE_ID, parse_document};
use aws_sdk_dynamodb::types::AttributeValue;
use docstore::{Document, Result, WriteId};

/// How many write identities an item keeps (`w` and up to 15 in `wh`).
pub(crate) const HISTORY_LEN: usize = 16;

/// A document item as read: the document and its write history, most recent first.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Stored {
    pub(crate) doc: Document,
    pub(crate) history: Vec<String>,
}

impl Stored {
    /// Parses a document item with its history.
    pub(crate) fn from_item(item: &Item) -> Result<Stored> {
        let doc = parse_document(item)?;
        let mut history = Vec::new();
        if let Some(AttributeValue::S(w)) = item.get(WRITE_ID) {
            history.push(w.clone());
        }
        if let Some(AttributeValue::L(earlier)) = item.get(WRITE_HISTORY) {
            history.extend(earlier.iter().filter_map(|value| match value {
                AttributeValue::S(w) => Some(w.clone()),
                _ => None,
            }));
        }
        Ok(Stored { doc, history })
    }

    /// Whether the write `w` is one of this item's last writes.
    pub(crate) fn holds(&self, w: &WriteId) -> bool {
        self.history.iter().any(|h| h == w.as_str())
    }

    /// The history of the revision that the write `w` makes on top of this one.
    pub(crate) fn next_history(&self, w: &WriteId) -> Vec<String> {
        std::iter::once(w.as_str().to_owned())
            .chain(self.history.iter().take(HISTORY_LEN - 1).cloned())
            .collect()
    }

    /// Whether `self` is a later (or the same) revision of the same incarnation as `read`
    /// — not a document deleted and created again since.
    ///
    /// Different creation stamps are different incarnations. With equal stamps, the history
    /// decides while `read`'s write can still be in it: a later revision of the same
    /// incarnation holds it until `HISTORY_LEN` more writes displaced it. Beyond that, or for
    /// items written before histories existed, equal creation stamps (nanoseconds and actor)
    /// are taken as the same incarnation.
    pub(crate) fn same_incarnation(&self, read: &Stored) -> bool {
        if self.doc.created_at != read.doc.created_at || self.doc.created_by != read.doc.created_by
        {
            return false;
        }
        let Some(read_w) = read.history.first() else {
            return self.doc.version >= read.doc.version;
        };
        if self.history.iter().any(|h| h == read_w) {
            return true;
        }
        self.doc.version >= read.doc.version + HISTORY_LEN as u64
    }

    /// Whether the write `w`, made on top of `read`, provably was not applied to the
    /// incarnation `self` belongs to: `self` is the same incarnation, and few enough writes
    /// followed `read` that `w` would still be in the history.
    pub(crate) fn proves_not_applied(&self, read: &Stored, w: &WriteId) -> bool {
        !self.holds(w)
            && self.same_incarnation(read)
            && self.doc.version < read.doc.version + HISTORY_LEN as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::document_item;
    use docstore::Key;

    fn stored(version: u64, created_at: i64, history: &[&str]) -> Stored {
        let key = Key::new("s", "c", "i").unwrap();
        let doc = Document {
            expires_at: None,
            id: "i".into(),
            data: Default::default(),
            created_at,
            updated_at: created_at,
            created_by: "a".into(),
            updated_by: "a".into(),
            version,
        };
        let history: Vec<String> = history.iter().map(|h| (*h).to_owned()).collect();
        Stored::from_item(&document_item(
            &key,
            &doc,
            &history,
            crate::layout::Layout::SINGLE,
        ))
        .unwrap()
    }

    #[test]
    fn the_history_keeps_the_last_sixteen_writes() {
        let mut item = stored(1, 1, &["w0"]);
        let mut ws = vec![];
        for _ in 0..40 {
            let w = WriteId::random();
            item.history = item.next_history(&w);
            ws.push(w);
        }
        assert_eq!(item.history.len(), HISTORY_LEN);
        assert!(ws.iter().rev().take(HISTORY_LEN).all(|w| item.holds(w)));
        assert!(ws.iter().rev().skip(HISTORY_LEN).all(|w| !item.holds(w)));
    }

    #[test]
    fn incarnations_are_told_apart() {
        let read = stored(3, 10, &["r", "q"]);
        // Updated since: holds the read's write.
        assert!(stored(5, 10, &["x", "y", "r"]).same_incarnation(&read));
        // Deleted and created again, even at the same nanosecond by the same actor.
        assert!(!stored(1, 10, &["n"]).same_incarnation(&read));
        assert!(!stored(5, 10, &["n", "m"]).same_incarnation(&read));
        assert!(!stored(5, 11, &["x", "y", "r"]).same_incarnation(&read));
        // Too many writes since to tell by history: the creation stamp decides.
        assert!(stored(3 + HISTORY_LEN as u64, 10, &["z"]).same_incarnation(&read));
    }

    #[test]
    fn not_applied_needs_the_write_to_be_missing_from_a_short_history() {
        let read = stored(3, 10, &["r"]);
        let w = WriteId::from_stored("mine");
        assert!(stored(4, 10, &["x", "r"]).proves_not_applied(&read, &w));
        assert!(!stored(4, 10, &["mine", "r"]).proves_not_applied(&read, &w));
        assert!(!stored(1, 10, &["n"]).proves_not_applied(&read, &w));
        assert!(!stored(3 + HISTORY_LEN as u64, 10, &["z"]).proves_not_applied(&read, &w));
    }
}
