//! Unique indexes: the value each document claims and the one rule every backend enforces
//! in the write's own atomic unit (`docs/contract.md`, "Unique indexes").
//!
//! A document claims, in every unique index of its collection, the components of its key
//! without the id ([`CompiledIndex::claim`]) — unless a field is missing or `null`. Two
//! documents of one site's collection never hold the same claim of one index. Values are
//! equal as the index orders them: numbers by value (`1` and `1.0` are one value), strings
//! byte for byte, objects by their canonical text.
//!
//! A backend finds holders its own way (an ordered map, an index table, guard items) and asks
//! [`check`] (one write) or [`check_batch`] (a batch, whose writes may move a value from one
//! of its documents to another) whether the write may go in. A backend that learns of a clash
//! only by writing (a constraint that fails the transaction) reads the holders afterwards and
//! has [`judge`] say what the request is: refused, blocked by stale holders, or to run again.
//!
//! ```
//! use docstore::index::{Index, IndexSet, unique};
//! use docstore::{Document, Error, Key};
//!
//! let set = IndexSet::new([Index::parse("users", "by_email", ["email"])?.unique()])?;
//! let indexes = set.for_collection("users");
//! let user = |id: &str, email: &str| {
//!     let data = docstore::object(serde_json::json!({ "email": email })).unwrap();
//!     Document::first(id, data, "ann", 0)
//! };
//! // u-1 holds ann@example.com; u-2 may not take it, u-1 may write it again.
//! let held = |_: &Key, claim: &unique::Claim<'_>, except: &str| {
//!     let taken = claim.value == indexes[0].claim(&user("u-1", "ann@example.com")).unwrap();
//!     Ok((taken && except != "u-1").then(|| "u-1".to_owned()))
//! };
//! let key = Key::new("acme", "users", "u-2")?;
//! let err = unique::check(indexes, &key, &user("u-2", "ann@example.com"), held).unwrap_err();
//! assert!(matches!(err, Error::UniqueViolation { ref holder, .. } if holder == "u-1"));
//! let own = Key::new("acme", "users", "u-1")?;
//! assert!(unique::check(indexes, &own, &user("u-1", "ann@example.com"), held).is_ok());
//! # Ok::<(), docstore::Error>(())
//! ```

use super::CompiledIndex;
use crate::{Document, Error, Key, Result};

mod clash;

pub use clash::{Clash, Holder, judge};

/// One value a document claims in one unique index.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim<'a> {
    /// The unique index.
    pub index: &'a CompiledIndex,
    /// The claimed value: the index key's components without the id.
    pub value: Vec<u8>,
}

/// Every claim `doc` makes in `indexes` (the indexes of its collection; the ones not unique
/// claim nothing).
pub fn claims<'a>(indexes: &'a [CompiledIndex], doc: &Document) -> Vec<Claim<'a>> {
    indexes
        .iter()
        .filter_map(|index| index.claim(doc).map(|value| Claim { index, value }))
        .collect()
}

/// What a write does to its document's claims in `indexes` (those of its collection), from
/// the document before it (`None`: no document, or one that expired) to the one after
/// (`None`: removed): each unique index whose claim changes, with the claim after (`None`:
/// the value is released). For a backend keeping claims beside the documents.
///
/// ```
/// use docstore::index::{Index, IndexSet, unique};
///
/// let set = IndexSet::new([Index::parse("u", "by_email", ["email"])?.unique()])?;
/// let indexes = set.for_collection("u");
/// let user = |email: serde_json::Value| {
///     docstore::Document::first("a", docstore::object(serde_json::json!({"email": email})).unwrap(), "", 0)
/// };
/// let (x, y) = (user("x".into()), user("y".into()));
/// assert!(unique::claim_changes(indexes, Some(&x), Some(&x)).is_empty());
/// assert_eq!(unique::claim_changes(indexes, Some(&x), Some(&y))[0].1, indexes[0].claim(&y));
/// assert_eq!(unique::claim_changes(indexes, Some(&x), None)[0].1, None);
/// # Ok::<(), docstore::Error>(())
/// ```
pub fn claim_changes<'a>(
    indexes: &'a [CompiledIndex],
    before: Option<&Document>,
    after: Option<&Document>,
) -> Vec<(&'a CompiledIndex, Option<Vec<u8>>)> {
    let claim = |index: &CompiledIndex, doc: Option<&Document>| doc.and_then(|d| index.claim(d));
    indexes
        .iter()
        .filter(|index| index.is_unique())
        .filter_map(|index| {
            let now = claim(index, after);
            (claim(index, before) != now).then_some((index, now))
        })
        .collect()
}

/// The index keys of the documents holding `value`: from `value` (inclusive) to the end
/// (exclusive; `None`: to the end of the index). Every key of a holder starts with the
/// value and ends with its id.
pub fn claim_range(value: &[u8]) -> (Vec<u8>, Option<Vec<u8>>) {
    (value.to_vec(), super::key::prefix_end(value))
}

/// The refusal of a write of `doc` whose value in `index` the document `holder` holds.
pub fn violation(index: &CompiledIndex, doc: &Document, holder: &str) -> Error {
    Error::UniqueViolation {
        index: index.name().to_owned(),
        value: index.value_of(doc),
        holder: holder.to_owned(),
    }
}

/// Checks one write storing `doc` at `key` against the documents already stored:
/// `holder_of(key, claim, except)` answers the smallest id of a document of `key`'s site and
/// collection holding `claim`, other than `except` (the id written). The first claim held is
/// [`Error::UniqueViolation`].
pub fn check<F>(
    indexes: &[CompiledIndex],
    key: &Key,
    doc: &Document,
    mut holder_of: F,
) -> Result<()>
where
    F: FnMut(&Key, &Claim<'_>, &str) -> Result<Option<String>>,
{
    for claim in claims(indexes, doc) {
        if let Some(holder) = holder_of(key, &claim, &doc.id)? {
            return Err(violation(claim.index, doc, &holder));
        }
    }
    Ok(())
}

/// One write of a batch, as [`check_batch`] sees it: the key and what the batch leaves
/// there (`Some`: the document it stores; `None`: it removes the document).
#[derive(Clone, Copy, Debug)]
pub struct BatchWrite<'a> {
    /// The write's position in the batch.
    pub position: usize,
    /// Its key.
    pub key: &'a Key,
    /// The document it stores, or `None` for a delete.
    pub stored: Option<&'a Document>,
}

/// Checks a batch's writes (those that store or remove a document; a check-only write
/// changes no claim) against the documents stored before it, `holder_of` answering as for
/// [`check`]. A holder the batch itself rewrites or removes counts as it stands after the
/// batch, so a batch may move a value from one of its documents to another (or swap two).
/// The first write, in batch order, whose claim another document holds after the batch is
/// refused: [`Error::Batch`] at its position wrapping [`Error::UniqueViolation`] naming the
/// smallest such holder.
pub fn check_batch<'i, I, F>(
    writes: &[BatchWrite<'_>],
    indexes_of: I,
    mut holder_of: F,
) -> Result<()>
where
    I: Fn(&str) -> &'i [CompiledIndex],
    F: FnMut(&Key, &Claim<'_>, &str) -> Result<Option<String>>,
{
    for write in writes {
        let Some(doc) = write.stored else { continue };
        for claim in claims(indexes_of(write.key.collection()), doc) {
            let outside = holder_of(write.key, &claim, &doc.id)?
                .filter(|holder| !rewrites(writes, write.key, holder));
            let inside = writes
                .iter()
                .filter(|other| {
                    other.position != write.position && same_collection(other.key, write.key)
                })
                .filter_map(|other| other.stored)
                .filter(|other| claim.index.claim(other).as_ref() == Some(&claim.value))
                .map(|other| other.id.clone());
            if let Some(holder) = outside.into_iter().chain(inside).min() {
                return Err(crate::batch::failed(
                    write.position,
                    violation(claim.index, doc, &holder),
                ));
            }
        }
    }
    Ok(())
}

/// The most pairs of documents sharing a value that [`DuplicateFinder::refusal`] names.
pub const MAX_NAMED_DUPLICATES: usize = 10;

/// Finds the documents that share a value when an index is declared unique over stored
/// documents: fed the index's keys in key order, site by site
/// ([`add`](Self::add)), it remembers the pairs of neighbours with one claim.
///
/// ```
/// use docstore::index::{Index, IndexSet, unique::DuplicateFinder};
///
/// let set = IndexSet::new([Index::parse("u", "by_email", ["email"])?.unique()])?;
/// let index = &set.for_collection("u")[0];
/// let user = |id: &str, email: &str| {
///     let data = docstore::object(serde_json::json!({ "email": email })).unwrap();
///     docstore::Document::first(id, data, "ann", 0)
/// };
/// let mut keys = vec![index.key(&user("a", "x")), index.key(&user("b", "x")), index.key(&user("c", "y"))];
/// keys.sort();
/// let mut finder = DuplicateFinder::new(index);
/// for key in &keys {
///     finder.add("acme", key);
/// }
/// let refusal = finder.refusal().expect("a and b share x");
/// assert!(refusal.to_string().contains("acme/u/a and acme/u/b"), "{refusal}");
/// # Ok::<(), docstore::Error>(())
/// ```
#[derive(Debug)]
pub struct DuplicateFinder<'a> {
    index: &'a CompiledIndex,
    previous: Option<(String, Vec<u8>, String)>,
    pairs: Vec<String>,
    count: u64,
}

impl<'a> DuplicateFinder<'a> {
    /// A finder for the unique index `index`.
    pub fn new(index: &'a CompiledIndex) -> Self {
        DuplicateFinder {
            index,
            previous: None,
            pairs: Vec::new(),
            count: 0,
        }
    }

    /// The next key of the index in `site` (keys in order within a site).
    pub fn add(&mut self, site: &str, key: &[u8]) {
        let Some(claim) = self.index.claim_of_key(key) else {
            return;
        };
        let Some(id) = self.index.id_of_key(key) else {
            return;
        };
        if let Some((prev_site, prev_claim, prev_id)) = &self.previous
            && prev_site == site
            && prev_claim.as_slice() == claim
        {
            self.count += 1;
            if self.pairs.len() < MAX_NAMED_DUPLICATES {
                let collection = self.index.collection();
                self.pairs.push(format!(
                    "{site}/{collection}/{prev_id} and {site}/{collection}/{id}"
                ));
            }
        }
        self.previous = Some((site.to_owned(), claim.to_vec(), id));
    }

    /// `None` when no two documents share a value; otherwise the refusal of the declaration,
    /// [`Error::InvalidArgument`] naming up to [`MAX_NAMED_DUPLICATES`] pairs.
    pub fn refusal(&self) -> Option<Error> {
        (self.count > 0).then(|| {
            Error::invalid(format!(
                "unique index {:?} of collection {:?}: {} pairs of documents share a value, \
                 e.g. {}; make the values distinct before declaring it unique",
                self.index.name(),
                self.index.collection(),
                self.count,
                self.pairs.join(", ")
            ))
        })
    }
}

/// One document's claim in a unique index built over stored documents ([`build`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltClaim {
    /// The document's site.
    pub site: String,
    /// The document's id.
    pub id: String,
    /// The value it claims.
    pub value: Vec<u8>,
}

/// The claims `documents` (each with its site) make in the unique index `index`, for a backend
/// building it over stored documents, in site and key order; the refusal of the declaration
/// ([`DuplicateFinder::refusal`]) when two documents of one site share a value.
///
/// ```
/// use docstore::index::{Index, IndexSet, unique};
///
/// let set = IndexSet::new([Index::parse("u", "by_email", ["email"])?.unique()])?;
/// let user = |id: &str, email: &str| {
///     let data = docstore::object(serde_json::json!({ "email": email })).unwrap();
///     docstore::Document::first(id, data, "ann", 0)
/// };
/// let index = &set.for_collection("u")[0];
/// let built = unique::build(index, [("s".into(), user("b", "x")), ("t".into(), user("a", "x"))])?;
/// assert_eq!((built[0].site.as_str(), built[0].id.as_str()), ("s", "b"));
/// assert!(unique::build(index, [("s".into(), user("b", "x")), ("s".into(), user("a", "x"))]).is_err());
/// # Ok::<(), docstore::Error>(())
/// ```
pub fn build(
    index: &CompiledIndex,
    documents: impl IntoIterator<Item = (String, Document)>,
) -> Result<Vec<BuiltClaim>> {
    let mut keyed: Vec<(Vec<u8>, BuiltClaim)> = documents
        .into_iter()
        .filter_map(|(site, doc)| {
            let value = index.claim(&doc)?;
            let claim = BuiltClaim {
                site,
                value,
                id: doc.id.clone(),
            };
            Some((index.key(&doc), claim))
        })
        .collect();
    keyed.sort_by(|(a, x), (b, y)| (&x.site, a).cmp(&(&y.site, b)));
    let mut finder = DuplicateFinder::new(index);
    keyed
        .iter()
        .for_each(|(key, claim)| finder.add(&claim.site, key));
    match finder.refusal() {
        Some(refusal) => Err(refusal),
        None => Ok(keyed.into_iter().map(|(_, claim)| claim).collect()),
    }
}

/// Whether the batch rewrites or removes the document `id` of `key`'s site and collection.
fn rewrites(writes: &[BatchWrite<'_>], key: &Key, id: &str) -> bool {
    writes
        .iter()
        .any(|write| same_collection(write.key, key) && write.key.id() == id)
}

fn same_collection(a: &Key, b: &Key) -> bool {
    a.site() == b.site() && a.collection() == b.collection()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Index, IndexSet};
    use std::collections::BTreeMap;

    fn doc(id: &str, data: serde_json::Value) -> Document {
        Document::first(id, crate::object(data).unwrap(), "t", 0)
    }

    fn set() -> IndexSet {
        IndexSet::new([
            Index::parse("u", "by_email", ["email"]).unwrap().unique(),
            Index::parse("u", "by_team_role", ["team", "-role"])
                .unwrap()
                .unique(),
            Index::parse("u", "by_age", ["age"]).unwrap(),
        ])
        .unwrap()
    }

    #[test]
    fn missing_and_null_fields_claim_nothing() {
        let set = set();
        let indexes = set.for_collection("u");
        let full = doc(
            "a",
            serde_json::json!({"email": "x", "team": 1, "role": "r", "age": 3}),
        );
        assert_eq!(
            claims(indexes, &full).len(),
            2,
            "the plain index claims nothing"
        );
        let partial = doc("a", serde_json::json!({"email": null, "team": 1}));
        assert!(claims(indexes, &partial).is_empty());
        // Numbers are one value whatever their form.
        let one = doc("a", serde_json::json!({"email": 1}));
        let one_float = doc("b", serde_json::json!({"email": 1.0}));
        assert_eq!(
            claims(indexes, &one)[0].value,
            claims(indexes, &one_float)[0].value
        );
        assert_eq!(indexes[1].value_of(&full), serde_json::json!([1, "r"]));
    }

    #[test]
    fn a_patch_decides_a_claim_only_when_it_reaches_every_field() {
        let set = IndexSet::new([Index::parse("u", "nested", ["a.b"]).unwrap().unique()]).unwrap();
        let index = &set.for_collection("u")[0];
        let after =
            |patch: serde_json::Value| index.claim_after_patch(&crate::object(patch).unwrap());
        let doc_claim = index.claim(&doc("x", serde_json::json!({"a": {"b": 1}})));
        assert_eq!(after(serde_json::json!({"a": {"b": 1.0}})), Some(doc_claim));
        assert_eq!(after(serde_json::json!({"a": 5})), Some(None));
        assert_eq!(after(serde_json::json!({"a": {"b": null}})), Some(None));
        assert_eq!(after(serde_json::json!({"a": {"c": 1}})), None);
        assert_eq!(after(serde_json::json!({"a": {"b": {"x": 1}}})), None);
        assert!(
            !index.patch_may_change_claim(&crate::object(serde_json::json!({"c": 1})).unwrap())
        );
    }

    /// A store of `(id, doc)` as the holder lookup of a backend would answer.
    fn holders(
        stored: &[Document],
    ) -> impl FnMut(&Key, &Claim<'_>, &str) -> Result<Option<String>> {
        let by_claim: BTreeMap<(String, Vec<u8>), Vec<String>> =
            stored.iter().fold(BTreeMap::new(), |mut map, d| {
                for index in set().for_collection("u") {
                    if let Some(value) = index.claim(d) {
                        map.entry((index.name().to_owned(), value))
                            .or_insert_with(Vec::new)
                            .push(d.id.clone());
                    }
                }
                map
            });
        move |_, claim, except| {
            Ok(by_claim
                .get(&(claim.index.name().to_owned(), claim.value.clone()))
                .and_then(|ids| ids.iter().filter(|id| *id != except).min().cloned()))
        }
    }

    #[test]
    fn a_batch_may_move_and_swap_values_but_not_claim_one_twice() {
        let set = set();
        let stored = [
            doc("a", serde_json::json!({"email": "x"})),
            doc("b", serde_json::json!({"email": "y"})),
        ];
        let keys: Vec<Key> = ["a", "b", "c"]
            .iter()
            .map(|id| Key::new("s", "u", *id).unwrap())
            .collect();
        let swap_a = doc("a", serde_json::json!({"email": "y"}));
        let swap_b = doc("b", serde_json::json!({"email": "x"}));
        let swap = [
            BatchWrite {
                position: 0,
                key: &keys[0],
                stored: Some(&swap_a),
            },
            BatchWrite {
                position: 1,
                key: &keys[1],
                stored: Some(&swap_b),
            },
        ];
        check_batch(&swap, |c| set.for_collection(c), holders(&stored)).unwrap();
        // A value moved from a removed document.
        let takes_x = doc("c", serde_json::json!({"email": "x"}));
        let moved = [
            BatchWrite {
                position: 0,
                key: &keys[2],
                stored: Some(&takes_x),
            },
            BatchWrite {
                position: 1,
                key: &keys[0],
                stored: None,
            },
        ];
        check_batch(&moved, |c| set.for_collection(c), holders(&stored)).unwrap();
        // Taking a value nobody in the batch gives up.
        let taken = [BatchWrite {
            position: 0,
            key: &keys[2],
            stored: Some(&takes_x),
        }];
        let err = check_batch(&taken, |c| set.for_collection(c), holders(&stored)).unwrap_err();
        assert!(err.to_string().contains("held by document a"), "{err}");
        // Two writes of the batch claiming one value: the first is refused, naming the second.
        let z_a = doc("a", serde_json::json!({"email": "z"}));
        let z_c = doc("c", serde_json::json!({"email": "z"}));
        let twice = [
            BatchWrite {
                position: 0,
                key: &keys[2],
                stored: Some(&z_c),
            },
            BatchWrite {
                position: 1,
                key: &keys[0],
                stored: Some(&z_a),
            },
        ];
        match check_batch(&twice, |c| set.for_collection(c), holders(&stored)).unwrap_err() {
            Error::Batch { index: 0, source } => {
                assert!(
                    matches!(*source, Error::UniqueViolation { ref holder, .. } if holder == "a")
                );
            }
            other => panic!("{other}"),
        }
    }
}
