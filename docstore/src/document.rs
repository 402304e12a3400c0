//! Stored documents.

use crate::{Data, Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One stored document: its data and the metadata the store keeps for it.
///
/// `data` round-trips exactly: integers stay integers (up to `u64::MAX` and down to
/// `i64::MIN`), floats stay floats, strings come back byte for byte.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Document {
    /// The id, unique within its collection.
    pub id: String,
    /// The document body, always a JSON object.
    pub data: Data,
    /// When the document was created, in unix nanoseconds (UTC). Never changes.
    pub created_at: i64,
    /// When the document was last written, in unix nanoseconds; `>= created_at`, never
    /// decreasing.
    pub updated_at: i64,
    /// The actor passed to the write that created the document.
    pub created_by: String,
    /// The actor passed to the last write.
    pub updated_by: String,
    /// 1 after the first write, plus exactly 1 for every successful write.
    pub version: u64,
    /// When the document expires, in unix nanoseconds (`docs/contract.md`, "Expiry"): from
    /// that instant of the store's clock it reads, counts and holds unique values as if it
    /// were deleted, and a sweep removes it; `None`: it never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

/// Version stamping, the one place every backend takes it from: the first version of a
/// document, and the next version of a stored one.
///
/// ```
/// use docstore::Document;
///
/// let first = Document::first("T-1", docstore::Data::new(), "ann", 100);
/// assert_eq!((first.version, first.created_at, first.updated_by.as_str()), (1, 100, "ann"));
/// // A clock that stepped back never moves `updated_at` back.
/// let next = first.next(docstore::Data::new(), "bob", 50);
/// assert_eq!((next.version, next.updated_at, next.created_by.as_str()), (2, 100, "ann"));
/// ```
impl Document {
    /// Version 1 of the document `id` holding `data`, created and updated by `actor` at `now`.
    pub fn first(id: impl Into<String>, data: Data, actor: &str, now: i64) -> Document {
        Document {
            expires_at: None,
            id: id.into(),
            data,
            created_at: now,
            updated_at: now,
            created_by: actor.to_owned(),
            updated_by: actor.to_owned(),
            version: 1,
        }
    }

    /// The version after this one, holding `data`, written by `actor` at `now`: `created_*`
    /// and `expires_at` kept, `version + 1`, `updated_at` never before this version's
    /// ([`next_updated_at`](crate::clock::next_updated_at)).
    pub fn next(&self, data: Data, actor: &str, now: i64) -> Document {
        let mut next = Document {
            expires_at: self.expires_at,
            id: self.id.clone(),
            data,
            created_at: self.created_at,
            updated_at: self.updated_at,
            created_by: self.created_by.clone(),
            updated_by: String::new(),
            version: self.version,
        };
        next.stamp_next(actor, now);
        next
    }

    /// Whether the document has expired at `now` (its [`expires_at`](Self::expires_at) is
    /// not after it): from then on it reads as deleted.
    ///
    /// ```
    /// let mut doc = docstore::Document::first("s-1", docstore::Data::new(), "ann", 100);
    /// assert!(!doc.is_expired(i64::MAX));
    /// doc.expires_at = Some(200);
    /// assert!(!doc.is_expired(199) && doc.is_expired(200));
    /// ```
    pub fn is_expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }

    /// Makes this document its own next version in place (its data already changed by the
    /// caller): [`next`](Self::next) without copying the data.
    pub fn stamp_next(&mut self, actor: &str, now: i64) {
        self.updated_at = crate::clock::next_updated_at(now, Some(self.updated_at));
        actor.clone_into(&mut self.updated_by);
        self.version += 1;
    }
}

/// The size of `data` as the store measures it against `max_doc_bytes`: the length of its
/// compact JSON serialization.
pub fn data_size(data: &Data) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, data).expect("a JSON map always serializes");
    counter.0
}

/// The deepest nesting document data may have, the data object itself counting as level 1.
/// serde_json refuses to read deeper JSON text (its recursion limit), so a backend storing
/// text could write such a document but never read it back; every backend refuses it.
pub const MAX_DEPTH: usize = 127;

/// Checks that `data` can be stored: nested at most [`MAX_DEPTH`] levels
/// ([`Error::InvalidArgument`]) and at most `limit` bytes serialized ([`Error::TooLarge`],
/// with the exact size).
///
/// One pass over the data checks the depth and adds up an upper bound of the serialized size;
/// only data whose bound exceeds the limit is serialized to measure it exactly, so documents
/// well under the limit cost no serialization here.
pub fn check_size(data: &Data, limit: usize) -> Result<()> {
    checked_size_bound(data, limit).map(drop)
}

/// [`check_size`], answering an upper bound of the data's size when it passes: its
/// [`data_size_bound`], or its exact size when that bound was over the limit. A store may
/// keep it to check a later merge into the data ([`merged_fits`]'s sum) without walking the
/// data again.
///
/// ```
/// use docstore::document::{checked_size_bound, data_size};
///
/// let data = docstore::object(serde_json::json!({"title": "hello"})).unwrap();
/// let bound = checked_size_bound(&data, 1_000).unwrap();
/// assert!(bound >= data_size(&data));
/// // Near the limit the data is measured: the bound is then its exact size.
/// assert_eq!(checked_size_bound(&data, data_size(&data)).unwrap(), data_size(&data));
/// assert!(checked_size_bound(&data, 5).is_err());
/// ```
pub fn checked_size_bound(data: &Data, limit: usize) -> Result<usize> {
    let bound = size_bound(data)?;
    if bound <= limit {
        return Ok(bound);
    }
    let size = data_size(data);
    if size > limit {
        return Err(Error::TooLarge { size, limit });
    }
    Ok(size)
}

/// Whether merging `patch` into `data` certainly gives data that passes [`check_size`]
/// with `limit`: both within [`MAX_DEPTH`] and their size bounds adding up to at most
/// `limit` (a merge result is never larger than the two together, nor deeper than the deeper
/// one). When this is true a store may merge in place, without a copy to fall back on; when
/// false it must merge a copy and check that.
pub fn merged_fits(data: &Data, patch: &Data, limit: usize) -> bool {
    match (size_bound(data), size_bound(patch)) {
        (Ok(a), Ok(b)) => a.saturating_add(b) <= limit,
        _ => false,
    }
}

/// An upper bound of [`data_size`], in one pass that does not look inside strings (every
/// string byte may become a 6-byte escape, a number takes at most 24 characters): for a
/// caller that only needs to stay under a limit and measures exactly only near it.
/// `usize::MAX` for data nested deeper than [`MAX_DEPTH`].
///
/// ```
/// let data = docstore::object(serde_json::json!({"a": "b", "n": [1, 2.5]})).unwrap();
/// let bound = docstore::document::data_size_bound(&data);
/// assert!(bound >= docstore::document::data_size(&data));
/// ```
pub fn data_size_bound(data: &Data) -> usize {
    size_bound(data).unwrap_or(usize::MAX)
}

/// Refuses data nested deeper than [`MAX_DEPTH`] ([`Error::InvalidArgument`]), looking no
/// deeper than that (a hostile value cannot exhaust the stack here). [`check_size`] includes it;
/// a backend that serializes the data anyway can call this and compare the text's length.
pub fn check_depth(data: &Data) -> Result<()> {
    size_bound(data).map(drop)
}

/// Checks the depth and returns an upper bound of the compact serialization's length: every
/// string byte may become a 6-byte escape, a number takes at most 24 characters. It recurses
/// into a container only within [`MAX_DEPTH`], so a hostile value cannot exhaust the stack,
/// and allocates nothing (an explicit stack of pending containers cost a `malloc` and a
/// `free` per document with any nesting, on every write).
fn size_bound(data: &serde_json::Map<String, Value>) -> Result<usize> {
    members_bound(data, 1)
}

/// A string's bound: quotes, and every byte escaped.
fn string_bound(s: &str) -> usize {
    s.len().saturating_mul(6).saturating_add(2)
}

/// The bound of an object's braces, separators and members, the object at `depth` (the
/// document's data is at 1).
fn members_bound(map: &serde_json::Map<String, Value>, depth: usize) -> Result<usize> {
    let mut bound = map.len() + 2;
    for (key, value) in map {
        let member = string_bound(key).saturating_add(1);
        bound = bound
            .saturating_add(member)
            .saturating_add(value_bound(value, depth + 1)?);
    }
    Ok(bound)
}

/// The bound of `value`, at `depth`; a container deeper than [`MAX_DEPTH`] is refused before
/// anything inside it is looked at.
fn value_bound(value: &Value, depth: usize) -> Result<usize> {
    Ok(match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 24,
        Value::String(s) => string_bound(s),
        _ if depth > MAX_DEPTH => return Err(too_deep()),
        Value::Array(items) => {
            let mut bound = items.len() + 2;
            for item in items {
                bound = bound.saturating_add(value_bound(item, depth + 1)?);
            }
            bound
        }
        Value::Object(map) => members_bound(map, depth)?,
    })
}

fn too_deep() -> Error {
    Error::invalid(format!(
        "document data is nested more than {MAX_DEPTH} levels deep"
    ))
}

/// The longest actor (`created_by` / `updated_by`), in bytes of UTF-8.
pub const MAX_ACTOR_BYTES: usize = 256;

/// Checks an actor, the name a write records as `created_by` / `updated_by`: 0–256 bytes of
/// UTF-8 without control characters (`char::is_control`); else [`Error::InvalidArgument`]
/// naming the rule. Every backend calls it before any write, so nothing is written with a bad
/// actor.
///
/// ```
/// use docstore::document::validate_actor;
///
/// assert!(validate_actor("").is_ok());
/// assert!(validate_actor("alice@example.com").is_ok());
/// assert!(validate_actor("bell\u{7}").is_err());
/// assert!(validate_actor(&"x".repeat(257)).is_err());
/// ```
pub fn validate_actor(actor: &str) -> Result<()> {
    if actor.len() > MAX_ACTOR_BYTES {
        return Err(Error::invalid(format!(
            "actor is {} bytes, at most {MAX_ACTOR_BYTES} are allowed",
            actor.len()
        )));
    }
    if let Some(c) = actor.chars().find(|c| c.is_control()) {
        return Err(Error::invalid(format!(
            "actor must not contain control characters (found U+{:04X})",
            c as u32
        )));
    }
    Ok(())
}

/// Checks a document handed to [`Store::restore`](crate::Store::restore) for `key`: same id,
/// `1 <= version <= i64::MAX` (so that every backend can store it), `created_at <=
/// updated_at`, `created_by` and `updated_by` valid actors ([`validate_actor`]; all these are
/// [`Error::InvalidArgument`]), and data within `max_doc_bytes` ([`Error::TooLarge`]).
pub fn check_restorable(key: &crate::Key, document: &Document, max_doc_bytes: usize) -> Result<()> {
    check_restorable_metadata(key, document)?;
    check_size(&document.data, max_doc_bytes)
}

/// [`check_restorable`] without the data: the id, version, timestamps and actors only, for a
/// backend that checks the data's size itself while serializing it.
///
/// ```
/// use docstore::{Document, Key};
/// use docstore::document::check_restorable_metadata;
///
/// let key = Key::new("s", "c", "a").unwrap();
/// let mut doc = Document {
///     id: "a".into(),
///     data: Default::default(),
///     created_at: 1,
///     updated_at: 2,
///     created_by: "ann".into(),
///     updated_by: "bob".into(),
///     version: 3,
///     expires_at: None,
/// };
/// assert!(check_restorable_metadata(&key, &doc).is_ok());
/// doc.version = 0;
/// assert!(check_restorable_metadata(&key, &doc).is_err());
/// ```
pub fn check_restorable_metadata(key: &crate::Key, document: &Document) -> Result<()> {
    for (field, actor) in [
        ("created_by", &document.created_by),
        ("updated_by", &document.updated_by),
    ] {
        validate_actor(actor).map_err(|err| match err {
            Error::InvalidArgument(message) => {
                Error::InvalidArgument(format!("document {field}: {message}"))
            }
            other => other,
        })?;
    }
    if document.id != key.id() {
        return Err(Error::invalid(format!(
            "document id {:?} differs from the key's id {:?}",
            document.id,
            key.id()
        )));
    }
    if document.version == 0 || document.version > i64::MAX as u64 {
        return Err(Error::invalid(format!(
            "document version must be between 1 and {} (found {})",
            i64::MAX,
            document.version
        )));
    }
    if document.created_at > document.updated_at {
        return Err(Error::invalid(
            "document created_at must not be after its updated_at",
        ));
    }
    Ok(())
}

/// Turns a JSON value into document data; anything but an object is
/// [`Error::InvalidArgument`].
///
/// ```
/// let data = docstore::object(serde_json::json!({"title": "hello"})).unwrap();
/// assert_eq!(data["title"], "hello");
/// assert!(docstore::object(serde_json::json!([1])).is_err());
/// ```
pub fn object(value: Value) -> Result<Data> {
    match value {
        Value::Object(map) => Ok(map.into()),
        other => Err(Error::invalid(format!(
            "document data must be a JSON object, not {}",
            kind_name(&other)
        ))),
    }
}

pub(crate) fn kind_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Data whose deepest value sits at `depth` (the data object is level 1).
    fn nested(depth: usize) -> Data {
        let mut value = json!(1);
        for _ in 2..depth {
            value = json!([value]);
        }
        object(json!({ "a": value })).unwrap()
    }

    #[test]
    fn depth_limit_matches_what_serde_json_reads_back() {
        let deepest = nested(MAX_DEPTH + 1);
        let text = serde_json::to_string(&deepest).unwrap();
        assert!(check_size(&deepest, usize::MAX).is_ok());
        assert_eq!(serde_json::from_str::<Data>(&text).unwrap(), deepest);
        let too_deep = nested(MAX_DEPTH + 2);
        let text = serde_json::to_string(&too_deep).unwrap();
        assert!(
            serde_json::from_str::<Data>(&text).is_err(),
            "serde_json's limit moved"
        );
        assert!(matches!(
            check_size(&too_deep, usize::MAX),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn the_bound_is_never_below_the_size() {
        let awkward = object(json!({
            "\u{0}\"\\": ["\u{1f}\u{7f}é😀", -1.7976931348623157e308, -2.2250738585072014e-308],
            "n": [i64::MIN, u64::MAX, null, true, false, {}, []],
            "": {"": {"": ""}}
        }))
        .unwrap();
        assert!(size_bound(&awkward).unwrap() >= data_size(&awkward));
        let size = data_size(&awkward);
        assert!(check_size(&awkward, size).is_ok());
        assert!(matches!(
            check_size(&awkward, size - 1),
            Err(Error::TooLarge { size: s, limit }) if s == size && limit == size - 1
        ));
    }

    #[cfg(feature = "proptest")]
    proptest::proptest! {
        #[test]
        fn the_bound_holds_for_random_data(data in crate::strategies::data()) {
            proptest::prop_assert!(size_bound(&data).unwrap() >= data_size(&data));
        }
    }

    #[cfg(feature = "proptest")]
    proptest::proptest! {
        #[test]
        fn merged_fits_only_when_the_merge_passes(
            data in crate::strategies::data(),
            patch in crate::strategies::patch(),
            limit in 0usize..400,
        ) {
            if merged_fits(&data, &patch, limit) {
                let mut merged = data.clone();
                crate::merge_patch(&mut merged, &patch);
                proptest::prop_assert!(check_size(&merged, limit).is_ok());
            }
        }
    }

    #[test]
    fn size_is_compact_serialization() {
        let data = object(json!({"a": [1, 2], "b": "é"})).unwrap();
        assert_eq!(
            data_size(&data),
            serde_json::to_string(&data).unwrap().len()
        );
        assert!(check_size(&data, data_size(&data)).is_ok());
        assert!(matches!(
            check_size(&data, data_size(&data) - 1),
            Err(Error::TooLarge { .. })
        ));
    }
}
