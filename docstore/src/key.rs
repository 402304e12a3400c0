//! Document addresses and the rules for their names.

use crate::{Error, Result};
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The longest site or collection name, in characters.
pub const MAX_NAME_LEN: usize = 64;
/// The longest document id, in bytes of UTF-8.
pub const MAX_ID_BYTES: usize = 512;

/// The address of one document: `(site, collection, id)`.
///
/// A `Key` can only be built through [`Key::new`], which checks every rule, so a store never
/// sees an invalid name:
/// - `site` and `collection`: 1–64 characters of `[A-Za-z0-9_-]`, not starting with `__`
///   (reserved for the backends' own bookkeeping);
/// - `id`: 1–512 bytes of UTF-8 without control characters.
///
/// The three names live in one shared buffer: building a key allocates once, and a clone
/// (every write request, every change a log keeps) is a reference count. Keys compare,
/// order and hash as the tuple `(site, collection, id)`.
///
/// ```
/// use docstore::{Error, Key};
///
/// let key = Key::new("acme", "tickets", "T-1").unwrap();
/// assert_eq!(key.collection(), "tickets");
/// assert!(matches!(Key::new("acme", "__x", "1"), Err(Error::InvalidArgument(_))));
/// ```
#[derive(Clone)]
pub struct Key {
    /// `site`, `collection` and `id`, one after the other.
    names: Arc<str>,
    /// Where `collection` starts in `names` (a site is at most 64 bytes).
    collection_at: u8,
    /// Where `id` starts in `names` (after at most 128 bytes of names).
    id_at: u8,
}

impl Key {
    /// Checks the three names and builds the key; a broken rule is [`Error::InvalidArgument`]
    /// naming the field and the rule.
    pub fn new(
        site: impl AsRef<str>,
        collection: impl AsRef<str>,
        id: impl AsRef<str>,
    ) -> Result<Self> {
        let (site, collection, id) = (site.as_ref(), collection.as_ref(), id.as_ref());
        validate_site(site)?;
        validate_collection(collection)?;
        validate_id(id)?;
        let mut names = String::with_capacity(site.len() + collection.len() + id.len());
        names.push_str(site);
        names.push_str(collection);
        names.push_str(id);
        // The checks above bound both names to MAX_NAME_LEN (64) ASCII bytes.
        let collection_at = site.len() as u8;
        let id_at = (site.len() + collection.len()) as u8;
        Ok(Key {
            names: Arc::from(names),
            collection_at,
            id_at,
        })
    }

    /// The site (tenant) the document belongs to.
    pub fn site(&self) -> &str {
        &self.names[..usize::from(self.collection_at)]
    }

    /// The collection within the site.
    pub fn collection(&self) -> &str {
        &self.names[usize::from(self.collection_at)..usize::from(self.id_at)]
    }

    /// The document id within the collection.
    pub fn id(&self) -> &str {
        &self.names[usize::from(self.id_at)..]
    }

    /// The three names, in the order keys compare.
    fn parts(&self) -> (&str, &str, &str) {
        (self.site(), self.collection(), self.id())
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        // Equal buffers split at the same places are equal tuples, and back.
        self.collection_at == other.collection_at
            && self.id_at == other.id_at
            && self.names == other.names
    }
}

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> Ordering {
        self.parts().cmp(&other.parts())
    }
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Key")
            .field("site", &self.site())
            .field("collection", &self.collection())
            .field("id", &self.id())
            .finish()
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.site(), self.collection(), self.id())
    }
}

/// Checks a site name: 1–64 characters of `[A-Za-z0-9_-]`, not starting with `__`.
pub fn validate_site(site: &str) -> Result<()> {
    validate_name("site", site)
}

/// Checks a collection name: 1–64 characters of `[A-Za-z0-9_-]`, not starting with `__`.
pub fn validate_collection(collection: &str) -> Result<()> {
    validate_name("collection", collection)
}

/// Checks a document id: 1–512 bytes of UTF-8 with no control characters.
pub fn validate_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid("id must not be empty"));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(Error::invalid(format!(
            "id is {} bytes, at most {MAX_ID_BYTES} are allowed",
            id.len()
        )));
    }
    if let Some(c) = id.chars().find(|c| c.is_control()) {
        return Err(Error::invalid(format!(
            "id must not contain control characters (found U+{:04X})",
            c as u32
        )));
    }
    Ok(())
}

fn validate_name(field: &str, name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid(format!("{field} must not be empty")));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(Error::invalid(format!(
            "{field} may only contain A-Z, a-z, 0-9, '_' and '-' (found {c:?})"
        )));
    }
    // Only ASCII is left, so bytes are characters.
    if name.len() > MAX_NAME_LEN {
        return Err(Error::invalid(format!(
            "{field} is {} characters, at most {MAX_NAME_LEN} are allowed",
            name.len()
        )));
    }
    if name.starts_with("__") {
        return Err(Error::invalid(format!(
            "{field} must not start with \"__\" (reserved)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(r: Result<Key>) -> bool {
        matches!(r, Err(Error::InvalidArgument(_)))
    }

    #[test]
    fn name_boundaries() {
        assert!(Key::new("a", "b", "c").is_ok());
        assert!(Key::new("a".repeat(64), "b".repeat(64), "c").is_ok());
        assert!(invalid(Key::new("a".repeat(65), "b", "c")));
        assert!(invalid(Key::new("a", "b".repeat(65), "c")));
        assert!(invalid(Key::new("", "b", "c")));
        assert!(invalid(Key::new("a", "", "c")));
        assert!(invalid(Key::new("a#b", "b", "c")));
        assert!(invalid(Key::new("a", "b.c", "c")));
        assert!(invalid(Key::new("é", "b", "c")));
        assert!(invalid(Key::new("__a", "b", "c")));
        assert!(invalid(Key::new("a", "__collections", "c")));
        assert!(Key::new("_a", "a__", "c").is_ok());
        assert!(Key::new("A-z_0-9", "-", "c").is_ok());
    }

    #[test]
    fn id_boundaries() {
        assert!(Key::new("a", "b", "x".repeat(512)).is_ok());
        assert!(invalid(Key::new("a", "b", "x".repeat(513))));
        // 256 two-byte characters are 512 bytes; one more byte is too many.
        assert!(Key::new("a", "b", "é".repeat(256)).is_ok());
        assert!(invalid(Key::new("a", "b", format!("{}x", "é".repeat(256)))));
        assert!(invalid(Key::new("a", "b", "")));
        assert!(invalid(Key::new("a", "b", "a\nb")));
        assert!(invalid(Key::new("a", "b", "a\u{7f}")));
        assert!(invalid(Key::new("a", "b", "\u{85}")));
        assert!(Key::new("a", "b", "a b/#?.$\\\"'").is_ok());
    }

    /// The shared buffer reads back as the three names and compares as their tuple, even
    /// where the concatenations would order otherwise (`a` + `bc` against `ab` + `c`).
    #[test]
    fn compares_and_hashes_as_the_tuple() {
        use std::collections::hash_map::DefaultHasher;
        let key = Key::new("acme", "tickets", "T-1").unwrap();
        assert_eq!(
            (key.site(), key.collection(), key.id()),
            ("acme", "tickets", "T-1")
        );
        assert_eq!(key.to_string(), "acme/tickets/T-1");
        let (a, b) = (
            Key::new("a", "bc", "x").unwrap(),
            Key::new("ab", "c", "x").unwrap(),
        );
        assert_ne!(a, b);
        assert!(a < b, "site a before site ab");
        assert_eq!(a.cmp(&b), ("a", "bc", "x").cmp(&("ab", "c", "x")));
        let (c, d) = (
            Key::new("s", "c", "b").unwrap(),
            Key::new("s", "cb", "a").unwrap(),
        );
        assert!(c < d, "collection c before cb, whatever the ids");
        let hash = |k: &Key| {
            let mut h = DefaultHasher::new();
            k.hash(&mut h);
            h.finish()
        };
        let same = Key::new(String::from("a"), "bc", "x").unwrap();
        assert_eq!((a.clone(), hash(&a)), (same.clone(), hash(&same)));
        assert_ne!(hash(&a), hash(&b));
        assert_eq!(
            format!("{a:?}"),
            r#"Key { site: "a", collection: "bc", id: "x" }"#
        );
    }

    #[test]
    fn messages_name_the_field() {
        let Err(Error::InvalidArgument(m)) = Key::new("a", "b!", "c") else {
            panic!()
        };
        assert!(m.contains("collection"), "{m}");
        let Err(Error::InvalidArgument(m)) = Key::new("a", "b", "") else {
            panic!()
        };
        assert!(m.contains("id"), "{m}");
    }
}
