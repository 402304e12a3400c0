//! Declared indexes: what they are, how their keys are encoded and how a query is planned
//! over them.
//!
//! An [`Index`] is declared for a collection name (in every site) with the fields it orders
//! by; declarations are checked together into an [`IndexSet`], the form
//! [`StoreOptions`](crate::StoreOptions) and the config hold. A backend keeps, for every
//! document, one key per declared index of its collection ([`CompiledIndex::key`], encoded by
//! [`key`]: byte order is the query order, the id last), and asks which index and key ranges
//! serve a query: [`candidates`] lists every index able to, and [`Candidates::choose`] applies
//! the cost rule (a plan that must sort a whole range in memory never wins over one that
//! stops at the page, unless the range is known to be small), given what the backend knows ([`Statistics`]); [`plan`] is that choice knowing nothing. An index never
//! changes an answer, only its cost.
//!
//! ```
//! use docstore::index::{Index, IndexSet};
//! use docstore::query::Query;
//! use docstore::{Filter, StoreOptions};
//!
//! let indexes = IndexSet::new([
//!     Index::parse("tickets", "by_status", ["status", "-$updated_at"])?,
//! ])?;
//! let options = StoreOptions::default().with_indexes(indexes.clone());
//! let query = Query::new()
//!     .filter(Filter::eq("status", "open"))
//!     .order_by_desc("$updated_at")
//!     .limit(20)
//!     .compile()?;
//! let plan = docstore::index::plan(&indexes, "tickets", &query).expect("served");
//! assert_eq!(plan.index, "by_status");
//! assert!(plan.exact_order && !plan.reverse);
//! # Ok::<(), docstore::Error>(())
//! ```

pub mod chunks;
mod cost;
pub mod key;
mod plan;
pub mod unique;

pub use cost::{Candidate, Candidates, Choice, Estimate, Fit, Reading, Statistics};
pub use plan::{IndexPlan, KeyRange, MAX_RANGES, RangeWalk, Step, candidates, plan};

use crate::document::Document;
use crate::query::{FieldPath, Order};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The most fields one index may have (a key holds one component per field, then the id).
pub const MAX_INDEX_FIELDS: usize = 8;

/// The most indexes one collection may have (every write updates each of them).
pub const MAX_INDEXES_PER_COLLECTION: usize = 16;

/// The longest index name, in characters.
pub const MAX_INDEX_NAME_LEN: usize = 64;

/// One index declaration: for collection `collection` (in every site), named `name`, ordered
/// by `fields` (most significant first; each ascending or descending). Keys end with the
/// document id, so every key is unique and the order is total.
///
/// In configuration files the fields are strings, `-` in front for descending
/// (`fields = ["status", "-$updated_at"]`); a leading `+` says ascending explicitly, so a
/// data key that itself starts with `-` or `+` is written `+-key` / `++key`.
///
/// ```
/// use docstore::index::Index;
/// use docstore::query::Order;
///
/// let index = Index::parse("tickets", "open_by_age", ["status", "-$updated_at"])?;
/// assert_eq!(index.fields, vec![Order::asc("status"), Order::desc("$updated_at")]);
/// let toml_like: Index = serde_json::from_value(serde_json::json!({
///     "collection": "tickets", "name": "open_by_age", "fields": ["status", "-$updated_at"]
/// })).unwrap();
/// assert_eq!(toml_like, index);
/// # Ok::<(), docstore::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "IndexText", into = "IndexText")]
pub struct Index {
    /// The collection name the index is declared for (in every site).
    pub collection: String,
    /// The index name: 1–64 characters of `[A-Za-z0-9_-]`, unique within the collection.
    pub name: String,
    /// The fields, most significant first.
    pub fields: Vec<Order>,
    /// Whether at most one document of a site's collection may hold each value of the
    /// fields (`docs/contract.md`, "Unique indexes"); set with [`Index::unique`].
    pub unique: bool,
}

/// The text form of an [`Index`] (config files).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct IndexText {
    collection: String,
    name: String,
    fields: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    unique: bool,
}

impl TryFrom<IndexText> for Index {
    type Error = Error;

    fn try_from(text: IndexText) -> Result<Self> {
        let index = Index::parse(text.collection, text.name, text.fields)?;
        let index = if text.unique { index.unique() } else { index };
        index.validate()?;
        Ok(index)
    }
}

impl From<Index> for IndexText {
    fn from(index: Index) -> Self {
        IndexText {
            fields: index.fields.iter().map(field_text).collect(),
            collection: index.collection,
            name: index.name,
            unique: index.unique,
        }
    }
}

/// `-path` for descending, `path` (or `+path` when the path starts with a sign) ascending.
fn field_text(order: &Order) -> String {
    if order.descending {
        format!("-{}", order.field)
    } else if order.field.starts_with(['-', '+']) {
        format!("+{}", order.field)
    } else {
        order.field.clone()
    }
}

impl Index {
    /// A declaration from its parts (checked when it joins an [`IndexSet`]).
    pub fn new(
        collection: impl Into<String>,
        name: impl Into<String>,
        fields: impl IntoIterator<Item = Order>,
    ) -> Self {
        Index {
            collection: collection.into(),
            name: name.into(),
            fields: fields.into_iter().collect(),
            unique: false,
        }
    }

    /// The same declaration made unique: within a site's collection at most one document
    /// holds each value of its fields; a document missing one of them, or holding `null`
    /// there, is not constrained (`docs/contract.md`, "Unique indexes"). Only data fields
    /// may be unique (checked with the rest of the declaration).
    ///
    /// ```
    /// use docstore::index::Index;
    ///
    /// let by_email = Index::parse("users", "by_email", ["email"])?.unique();
    /// assert!(by_email.unique);
    /// assert_eq!(by_email.to_string(), "users.by_email(email) unique");
    /// assert!(Index::parse("users", "x", ["$updated_at"])?.unique().validate().is_err());
    /// # Ok::<(), docstore::Error>(())
    /// ```
    pub fn unique(mut self) -> Self {
        self.unique = true;
        self
    }

    /// A declaration with its fields in text form (`"-f"` descending, `"f"` or `"+f"`
    /// ascending), checked ([`Index::validate`]).
    pub fn parse<S: AsRef<str>>(
        collection: impl Into<String>,
        name: impl Into<String>,
        fields: impl IntoIterator<Item = S>,
    ) -> Result<Self> {
        let fields = fields
            .into_iter()
            .map(|text| {
                let text = text.as_ref();
                if let Some(path) = text.strip_prefix('-') {
                    Order::desc(path)
                } else if let Some(path) = text.strip_prefix('+') {
                    Order::asc(path)
                } else {
                    Order::asc(text)
                }
            })
            .collect::<Vec<_>>();
        let index = Index::new(collection, name, fields);
        index.validate()?;
        Ok(index)
    }

    /// Checks the declaration alone: the collection name (as for keys), the index name
    /// (1–64 characters of `[A-Za-z0-9_-]`), 1 to [`MAX_INDEX_FIELDS`] fields, each a valid
    /// field path, no field twice, `$id` only as the last field (every key ends with the
    /// id anyway), and in a unique index data fields only. Each failure is [`Error::InvalidArgument`] naming the index and the rule.
    pub fn validate(&self) -> Result<()> {
        self.compile().map(drop)
    }

    fn compile(&self) -> Result<CompiledIndex> {
        let fail = |rule: String| {
            Error::invalid(format!(
                "index {:?} of collection {:?}: {rule}",
                self.name, self.collection
            ))
        };
        crate::key::validate_collection(&self.collection)
            .map_err(|err| fail(format!("bad collection name: {err}")))?;
        let name_ok = !self.name.is_empty()
            && self.name.chars().count() <= MAX_INDEX_NAME_LEN
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !name_ok {
            return Err(fail(format!(
                "the name must be 1-{MAX_INDEX_NAME_LEN} characters of [A-Za-z0-9_-]"
            )));
        }
        if self.fields.is_empty() || self.fields.len() > MAX_INDEX_FIELDS {
            return Err(fail(format!(
                "an index has 1 to {MAX_INDEX_FIELDS} fields, not {}",
                self.fields.len()
            )));
        }
        let mut fields: Vec<(FieldPath, bool)> = Vec::with_capacity(self.fields.len());
        for (i, order) in self.fields.iter().enumerate() {
            let path = FieldPath::parse(&order.field)
                .map_err(|err| fail(format!("field {}: {err}", i + 1)))?;
            if fields.iter().any(|(p, _)| *p == path) {
                return Err(fail(format!("field {:?} is listed twice", order.field)));
            }
            if path == FieldPath::Id && i + 1 != self.fields.len() {
                return Err(fail(
                    "$id may only be the last field (every key ends with the id)".into(),
                ));
            }
            if self.unique && !matches!(path, FieldPath::Data(_)) {
                return Err(fail(format!(
                    "a unique index holds data fields only, not {:?}",
                    order.field
                )));
            }
            fields.push((path, order.descending));
        }
        Ok(CompiledIndex {
            declaration: self.clone(),
            fields,
        })
    }
}

impl fmt::Display for Index {
    /// `collection.name(field, -field, ...)`, then ` unique` for a unique index.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fields: Vec<String> = self.fields.iter().map(field_text).collect();
        write!(
            f,
            "{}.{}({})",
            self.collection,
            self.name,
            fields.join(", ")
        )?;
        if self.unique {
            f.write_str(" unique")?;
        }
        Ok(())
    }
}

/// A checked declaration with its paths parsed: what backends keep and key documents by.
#[derive(Clone, Debug, PartialEq)]
pub struct CompiledIndex {
    declaration: Index,
    fields: Vec<(FieldPath, bool)>,
}

impl CompiledIndex {
    /// The declaration.
    pub fn declaration(&self) -> &Index {
        &self.declaration
    }

    /// The index name.
    pub fn name(&self) -> &str {
        &self.declaration.name
    }

    /// The collection it is declared for.
    pub fn collection(&self) -> &str {
        &self.declaration.collection
    }

    /// The fields as `(path, descending)`, most significant first.
    pub fn fields(&self) -> &[(FieldPath, bool)] {
        &self.fields
    }

    /// The document's key in this index: one [`key`] component per field (inverted for
    /// descending fields; a missing field is a component too), then the id. Byte order of
    /// keys is the order of a query sorting by the index's fields, ties broken by `$id`.
    ///
    /// ```
    /// use docstore::index::{Index, IndexSet};
    /// # let doc = |id: &str, n: i64| docstore::Document { id: id.into(),
    /// #     data: docstore::object(serde_json::json!({"n": n})).unwrap(), created_at: 0,
    /// #     updated_at: 0, created_by: String::new(), updated_by: String::new(), version: 1,
    /// #     expires_at: None };
    /// let set = IndexSet::new([Index::parse("c", "by_n", ["-n"])?])?;
    /// let index = &set.for_collection("c")[0];
    /// assert!(index.key(&doc("a", 5)) < index.key(&doc("b", 3)));
    /// assert!(index.key(&doc("a", 3)) < index.key(&doc("b", 3)));
    /// # Ok::<(), docstore::Error>(())
    /// ```
    pub fn key(&self, doc: &Document) -> Vec<u8> {
        let mut out = Vec::with_capacity(32 + doc.id.len());
        for (path, descending) in &self.fields {
            key::push(path.resolve(doc).as_deref(), *descending, &mut out);
        }
        key::push_id(&doc.id, &mut out);
        out
    }

    /// Whether the index is unique ([`Index::unique`]).
    pub fn is_unique(&self) -> bool {
        self.declaration.unique
    }

    /// The value `doc` claims in this index when it is unique: the components of its key
    /// without the id (so every key of a holder starts with it, see
    /// [`unique::claim_range`]); `None` when the index is not unique or a field is missing
    /// or `null` in `doc` (such a document is not constrained).
    pub fn claim(&self, doc: &Document) -> Option<Vec<u8>> {
        self.claim_in(&doc.data)
    }

    /// [`claim`](Self::claim) from the data alone: a unique index holds data fields only.
    pub fn claim_in(&self, data: &crate::Data) -> Option<Vec<u8>> {
        if !self.is_unique() {
            return None;
        }
        let mut out = Vec::with_capacity(32);
        for (path, descending) in &self.fields {
            let FieldPath::Data(segments) = path else {
                return None;
            };
            let value = crate::query::resolve_in(data, segments);
            if value.is_none_or(serde_json::Value::is_null) {
                return None;
            }
            key::push(value, *descending, &mut out);
        }
        Some(out)
    }

    /// The claim of a document after `patch` is merged into it, when the patch alone decides
    /// it — it sets every field (or removes one, or replaces a member on a field's path with
    /// a non-object): `Some(claim)`; `None` when a field's value comes from the document.
    ///
    /// ```
    /// use docstore::index::{Index, IndexSet};
    ///
    /// let set = IndexSet::new([Index::parse("u", "by_email", ["email"])?.unique()])?;
    /// let index = &set.for_collection("u")[0];
    /// let patch = |v: serde_json::Value| docstore::object(v).unwrap();
    /// assert!(index.claim_after_patch(&patch(serde_json::json!({"email": "x"}))).unwrap().is_some());
    /// assert_eq!(index.claim_after_patch(&patch(serde_json::json!({"email": null}))), Some(None));
    /// assert_eq!(index.claim_after_patch(&patch(serde_json::json!({"age": 3}))), None);
    /// # Ok::<(), docstore::Error>(())
    /// ```
    pub fn claim_after_patch(&self, patch: &crate::Data) -> Option<Option<Vec<u8>>> {
        if !self.is_unique() {
            return Some(None);
        }
        let mut out = Vec::with_capacity(32);
        let mut constrained = true;
        for (path, descending) in &self.fields {
            let FieldPath::Data(segments) = path else {
                return None;
            };
            match patched_value(patch, segments)? {
                Some(value) if !value.is_null() => key::push(Some(value), *descending, &mut out),
                _ => constrained = false,
            }
        }
        Some(constrained.then_some(out))
    }

    /// Whether merging `patch` may change this index's claim: it sets or removes the
    /// top-level member holding one of the fields. A patch that does not leaves the claim
    /// as it was, so a store need not check it again.
    pub fn patch_may_change_claim(&self, patch: &crate::Data) -> bool {
        self.is_unique()
            && self.fields.iter().any(|(path, _)| match path {
                FieldPath::Data(segments) => segments
                    .first()
                    .is_some_and(|first| patch.contains_key(first)),
                _ => true,
            })
    }

    /// The claim ([`claim`](Self::claim)) of the document whose key in this index is `key`:
    /// its components without the id, `None` when one is missing or `null` (or the bytes are
    /// not a key of this index).
    pub fn claim_of_key<'k>(&self, key: &'k [u8]) -> Option<&'k [u8]> {
        let mut at = 0;
        for (_, descending) in &self.fields {
            let tag = key.get(at).map(|b| if *descending { !b } else { *b })?;
            if tag == key::TAG_MISSING || tag == key::TAG_NULL {
                return None;
            }
            at += key::component_len(key.get(at..)?, *descending)?;
        }
        key.get(..at)
    }

    /// The document id a key of this index ends with.
    pub fn id_of_key(&self, key: &[u8]) -> Option<String> {
        let prefix = self.key_prefix(key, self.fields.len())?;
        key::decode_id(&key[prefix.len()..])
    }

    /// The value of this index's fields in `doc`, as a refusal names it: the one field's
    /// value, or the array of them for several fields.
    pub fn value_of(&self, doc: &Document) -> serde_json::Value {
        let mut values: Vec<serde_json::Value> = self
            .fields
            .iter()
            .map(|(path, _)| {
                path.resolve(doc)
                    .map_or(serde_json::Value::Null, |v| v.into_owned())
            })
            .collect();
        match values.len() {
            1 => values.remove(0),
            _ => serde_json::Value::Array(values),
        }
    }

    /// The first `fields` components of `key` (a key of this index): the part that decides
    /// a tie group of [`IndexPlan::tie_fields`]. `None` for bytes that are not such a key.
    pub fn key_prefix<'k>(&self, key: &'k [u8], fields: usize) -> Option<&'k [u8]> {
        let mut at = 0;
        for (_, descending) in self.fields.iter().take(fields) {
            at += key::component_len(key.get(at..)?, *descending)?;
        }
        key.get(..at)
    }
}

/// The value at `segments` after `patch` is merged into a document, when the patch alone
/// decides it: `Some(Some(value))` set, `Some(None)` removed or cut off by a non-object on
/// the way; `None` when it depends on the document (the patch does not reach the field, or
/// merges an object into it).
fn patched_value<'p>(
    patch: &'p crate::Data,
    segments: &[String],
) -> Option<Option<&'p serde_json::Value>> {
    let mut members: &serde_json::Map<String, serde_json::Value> = patch;
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match members.get(segment)? {
            serde_json::Value::Null => return Some(None),
            serde_json::Value::Object(_) if last => return None,
            serde_json::Value::Object(inner) => members = inner,
            value if last => return Some(Some(value)),
            _ => return Some(None),
        }
    }
    None
}

/// A checked set of index declarations: each valid, no two with the same name in one
/// collection, no two with the same fields in one collection, at most
/// [`MAX_INDEXES_PER_COLLECTION`] per collection. The only way to build one is
/// [`IndexSet::new`] (or deserializing, which calls it), so a store never sees an invalid
/// declaration.
///
/// Serialized as the list of declarations.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IndexSet {
    by_collection: BTreeMap<String, Vec<CompiledIndex>>,
}

impl IndexSet {
    /// Checks `indexes` (see [`Index::validate`] and the set rules above); the first broken
    /// rule is [`Error::InvalidArgument`] naming the index.
    ///
    /// ```
    /// use docstore::index::{Index, IndexSet};
    ///
    /// let twice = IndexSet::new([
    ///     Index::parse("c", "x", ["a"])?,
    ///     Index::parse("c", "x", ["b"])?,
    /// ]);
    /// assert!(twice.unwrap_err().to_string().contains("\"x\""));
    /// # Ok::<(), docstore::Error>(())
    /// ```
    pub fn new(indexes: impl IntoIterator<Item = Index>) -> Result<Self> {
        let mut by_collection: BTreeMap<String, Vec<CompiledIndex>> = BTreeMap::new();
        for index in indexes {
            let compiled = index.compile()?;
            let siblings = by_collection.entry(index.collection.clone()).or_default();
            if siblings.iter().any(|s| s.name() == index.name) {
                return Err(Error::invalid(format!(
                    "index {:?} of collection {:?} is declared twice",
                    index.name, index.collection
                )));
            }
            if let Some(twin) = siblings.iter().find(|s| s.fields == compiled.fields) {
                return Err(Error::invalid(format!(
                    "index {:?} of collection {:?} has the same fields as index {:?}",
                    index.name,
                    index.collection,
                    twin.name()
                )));
            }
            if siblings.len() == MAX_INDEXES_PER_COLLECTION {
                return Err(Error::invalid(format!(
                    "index {:?}: collection {:?} may have at most \
                     {MAX_INDEXES_PER_COLLECTION} indexes",
                    index.name, index.collection
                )));
            }
            siblings.push(compiled);
        }
        Ok(IndexSet { by_collection })
    }

    /// The indexes of `collection`, in declaration order.
    pub fn for_collection(&self, collection: &str) -> &[CompiledIndex] {
        self.by_collection
            .get(collection)
            .map_or(&[], Vec::as_slice)
    }

    /// Every index, by collection name then declaration order.
    pub fn iter(&self) -> impl Iterator<Item = &CompiledIndex> {
        self.by_collection.values().flatten()
    }

    /// Whether no index is declared.
    pub fn is_empty(&self) -> bool {
        self.by_collection.is_empty()
    }

    /// The declarations, by collection name then declaration order.
    pub fn declarations(&self) -> Vec<Index> {
        self.iter().map(|i| i.declaration.clone()).collect()
    }
}

impl Serialize for IndexSet {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        self.declarations().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for IndexSet {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        let declarations = Vec::<Index>::deserialize(deserializer)?;
        IndexSet::new(declarations).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(result: Result<impl fmt::Debug>) -> String {
        match result {
            Err(Error::InvalidArgument(message)) => message,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn declarations_are_checked() {
        assert!(err(Index::parse("c", "", ["a"])).contains("name"));
        assert!(err(Index::parse("c", "a b", ["a"])).contains("[A-Za-z0-9_-]"));
        assert!(err(Index::parse("c", "x".repeat(65), ["a"])).contains("1-64"));
        assert!(err(Index::parse("__c", "i", ["a"])).contains("collection"));
        assert!(err(Index::parse("c", "i", Vec::<&str>::new())).contains("1 to 8"));
        assert!(err(Index::parse("c", "i", ["a"; 9])).contains("1 to 8"));
        assert!(err(Index::parse("c", "i", ["a", "-a"])).contains("twice"));
        assert!(err(Index::parse("c", "i", ["$nope"])).contains("$nope"));
        assert!(err(Index::parse("c", "i", ["a..b"])).contains("field 1"));
        assert!(err(Index::parse("c", "i", ["$id", "a"])).contains("$id"));
        assert!(Index::parse("c", "i", ["a", "-$id"]).is_ok());
        let same_fields = IndexSet::new([
            Index::parse("c", "one", ["a", "-b"]).unwrap(),
            Index::parse("c", "two", ["a", "-b"]).unwrap(),
        ]);
        assert!(err(same_fields).contains("same fields as index \"one\""));
        let too_many = IndexSet::new(
            (0..17).map(|i| Index::parse("c", format!("i{i}"), [format!("f{i}")]).unwrap()),
        );
        assert!(err(too_many).contains("at most 16"));
        // The same name in another collection is another index.
        let set = IndexSet::new([
            Index::parse("c", "i", ["a"]).unwrap(),
            Index::parse("d", "i", ["a"]).unwrap(),
        ])
        .unwrap();
        assert_eq!(set.iter().count(), 2);
        // An unchecked declaration is checked when it joins a set.
        let raw = Index::new("c", "i", [Order::asc("")]);
        assert!(err(IndexSet::new([raw])).contains("empty segment"));
    }

    #[test]
    fn text_form_round_trips_signs() {
        let index = Index::parse("c", "i", ["-$updated_at", "+-x", "++y", "z", r"\$w"]).unwrap();
        assert_eq!(
            index.fields,
            vec![
                Order::desc("$updated_at"),
                Order::asc("-x"),
                Order::asc("+y"),
                Order::asc("z"),
                Order::asc(r"\$w"),
            ]
        );
        let json = serde_json::to_value(&index).unwrap();
        assert_eq!(
            json["fields"],
            serde_json::json!(["-$updated_at", "+-x", "++y", "z", r"\$w"])
        );
        assert_eq!(serde_json::from_value::<Index>(json).unwrap(), index);
        let bad = serde_json::from_value::<IndexSet>(serde_json::json!([
            {"collection": "c", "name": "i", "fields": ["a"]},
            {"collection": "c", "name": "i", "fields": ["b"]},
        ]));
        assert!(bad.unwrap_err().to_string().contains("declared twice"));
        let typo = serde_json::from_value::<Index>(
            serde_json::json!({"collection": "c", "name": "i", "field": ["a"]}),
        );
        assert!(typo.is_err());
    }
}
