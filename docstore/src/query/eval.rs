//! The reference evaluator: the answer every backend must give.

use super::cursor::{CursorPosition, fingerprint};
use super::ordering::{compare_values, range_ordering, values_equal};
use super::{Cursor, FieldPath, Filter, Query};
use crate::document::Document;
use crate::driver::Page;
use crate::{Error, Result};
use serde_json::Value;
use std::borrow::Cow;
use std::cmp::Ordering;

/// A filter with its paths parsed; `Ne` is compiled to `Not(Eq)`.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)] // the variants mirror `Filter`'s
pub enum CompiledFilter {
    And(Vec<CompiledFilter>),
    Or(Vec<CompiledFilter>),
    Not(Box<CompiledFilter>),
    Eq(FieldPath, Value),
    Lt(FieldPath, Value),
    Lte(FieldPath, Value),
    Gt(FieldPath, Value),
    Gte(FieldPath, Value),
    In(FieldPath, Vec<Value>),
    Exists(FieldPath),
    Prefix(FieldPath, String),
    Contains(FieldPath, Value),
}

/// The deepest nesting of `And`, `Or` and `Not` a filter may have; a deeper one is
/// [`Error::InvalidArgument`] (evaluation is recursive, and no useful filter is that deep).
pub const MAX_FILTER_DEPTH: usize = 64;

impl CompiledFilter {
    /// Parses every path of `filter` and checks its nesting against [`MAX_FILTER_DEPTH`].
    pub fn new(filter: &Filter) -> Result<Self> {
        Self::at_depth(filter, 1)
    }

    fn at_depth(filter: &Filter, depth: usize) -> Result<Self> {
        if depth > MAX_FILTER_DEPTH {
            return Err(Error::invalid(format!(
                "filter is nested more than {MAX_FILTER_DEPTH} levels deep"
            )));
        }
        let path = |field: &str| FieldPath::parse(field);
        let all = |filters: &[Filter]| {
            filters
                .iter()
                .map(|f| CompiledFilter::at_depth(f, depth + 1))
                .collect::<Result<Vec<_>>>()
        };
        Ok(match filter {
            Filter::And(filters) => CompiledFilter::And(all(filters)?),
            Filter::Or(filters) => CompiledFilter::Or(all(filters)?),
            Filter::Not(inner) => {
                CompiledFilter::Not(Box::new(CompiledFilter::at_depth(inner, depth + 1)?))
            }
            Filter::Eq(f, v) => CompiledFilter::Eq(path(f)?, v.clone()),
            Filter::Ne(f, v) => {
                CompiledFilter::Not(Box::new(CompiledFilter::Eq(path(f)?, v.clone())))
            }
            Filter::Lt(f, v) => CompiledFilter::Lt(path(f)?, v.clone()),
            Filter::Lte(f, v) => CompiledFilter::Lte(path(f)?, v.clone()),
            Filter::Gt(f, v) => CompiledFilter::Gt(path(f)?, v.clone()),
            Filter::Gte(f, v) => CompiledFilter::Gte(path(f)?, v.clone()),
            Filter::In(f, vs) => CompiledFilter::In(path(f)?, vs.clone()),
            Filter::Exists(f) => CompiledFilter::Exists(path(f)?),
            Filter::Prefix(f, p) => CompiledFilter::Prefix(path(f)?, p.clone()),
            Filter::Contains(f, v) => CompiledFilter::Contains(path(f)?, v.clone()),
            Filter::Unserializable { field, message } => {
                return Err(Error::invalid(format!(
                    "the value for field {field:?} does not serialize to JSON: {message}"
                )));
            }
        })
    }

    /// Whether `doc` matches.
    pub fn matches(&self, doc: &Document) -> bool {
        let range = |path: &FieldPath, bound: &Value, accept: fn(Ordering) -> bool| {
            path.resolve(doc)
                .is_some_and(|value| range_ordering(&value, bound).is_some_and(accept))
        };
        match self {
            CompiledFilter::And(filters) => filters.iter().all(|f| f.matches(doc)),
            CompiledFilter::Or(filters) => filters.iter().any(|f| f.matches(doc)),
            CompiledFilter::Not(inner) => !inner.matches(doc),
            CompiledFilter::Eq(path, expected) => path
                .resolve(doc)
                .is_some_and(|value| values_equal(&value, expected)),
            CompiledFilter::Lt(path, bound) => range(path, bound, Ordering::is_lt),
            CompiledFilter::Lte(path, bound) => range(path, bound, Ordering::is_le),
            CompiledFilter::Gt(path, bound) => range(path, bound, Ordering::is_gt),
            CompiledFilter::Gte(path, bound) => range(path, bound, Ordering::is_ge),
            CompiledFilter::In(path, candidates) => path
                .resolve(doc)
                .is_some_and(|value| candidates.iter().any(|c| values_equal(&value, c))),
            CompiledFilter::Exists(path) => path.resolve(doc).is_some(),
            CompiledFilter::Prefix(path, prefix) => path.resolve(doc).is_some_and(|value| {
                value
                    .as_str()
                    .is_some_and(|s| s.starts_with(prefix.as_str()))
            }),
            CompiledFilter::Contains(path, element) => path.resolve(doc).is_some_and(|value| {
                value
                    .as_array()
                    .is_some_and(|items| items.iter().any(|i| values_equal(i, element)))
            }),
        }
    }
}

/// A checked query, ready to evaluate.
#[derive(Clone, Debug)]
pub struct CompiledQuery {
    filter: Option<CompiledFilter>,
    order: Vec<(FieldPath, bool)>,
    limit: Option<usize>,
    after: Option<CursorPosition>,
    fingerprint: String,
    consistent: bool,
}

/// A document's place in a query's order: its sort values and its id.
#[derive(Clone, Debug)]
pub(crate) struct SortPosition {
    keys: Box<[Option<Value>]>,
    /// The document's id.
    pub(crate) id: String,
}

/// One document's sort values, borrowed where it can.
type SortKey<'a> = Vec<Option<Cow<'a, Value>>>;

impl CompiledQuery {
    /// Checks `query`: every path, `limit` (not 0), and the cursor (decodable, and made by a
    /// query with the same filter and order).
    pub fn new(query: &Query) -> Result<Self> {
        Self::with_scope(query, None)
    }

    /// [`new`](Self::new) for a query over one collection of one site (both names checked):
    /// its cursors carry the scope, so a cursor of another site or collection is refused.
    pub fn for_collection(site: &str, collection: &str, query: &Query) -> Result<Self> {
        crate::key::validate_site(site)?;
        crate::key::validate_collection(collection)?;
        Self::with_scope(query, Some((site, collection)))
    }

    fn with_scope(query: &Query, scope: Option<(&str, &str)>) -> Result<Self> {
        let filter = query.filter.as_ref().map(CompiledFilter::new).transpose()?;
        let order = query
            .order
            .iter()
            .map(|o| Ok((FieldPath::parse(&o.field)?, o.descending)))
            .collect::<Result<Vec<_>>>()?;
        if query.limit == Some(0) {
            return Err(Error::invalid(
                "limit must be at least 1 (or absent for all)",
            ));
        }
        // Canonical text, so that the fingerprint does not depend on the key order of object
        // values in the filter (serde_json keeps insertion order under `preserve_order`).
        let shape = super::shape::shape_text(scope, query.filter.as_ref(), &query.order)
            .expect("a filter compiled above has a JSON form");
        let fingerprint = fingerprint(shape.as_bytes());
        let after = match &query.cursor {
            None => None,
            Some(cursor) => {
                let position = CursorPosition::decode(cursor)?;
                if position.fingerprint != fingerprint || position.keys.len() != order.len() {
                    return Err(Error::invalid(
                        "cursor belongs to a query with another filter or order, or of another site or collection",
                    ));
                }
                Some(position)
            }
        };
        Ok(CompiledQuery {
            filter,
            order,
            limit: query.limit,
            after,
            fingerprint,
            consistent: query.consistent,
        })
    }

    /// Whether the query asked for a strongly consistent answer ([`Query::consistent`]).
    pub fn consistent(&self) -> bool {
        self.consistent
    }

    /// The compiled filter, if any.
    pub fn filter(&self) -> Option<&CompiledFilter> {
        self.filter.as_ref()
    }

    /// The sort keys as `(path, descending)`, without the implicit `$id` tie-break.
    pub fn order(&self) -> &[(FieldPath, bool)] {
        &self.order
    }

    /// The page size.
    pub fn limit(&self) -> Option<usize> {
        self.limit
    }

    /// The decoded cursor the page starts after, if any.
    pub fn after(&self) -> Option<&CursorPosition> {
        self.after.as_ref()
    }

    /// `Some(descending)` when the result order is the id order (no sort key, or `$id` first),
    /// so that a backend reading in id order can stop once the page is full.
    pub fn id_order(&self) -> Option<bool> {
        match self.order.first() {
            None => Some(false),
            Some((FieldPath::Id, descending)) => Some(*descending),
            Some(_) => None,
        }
    }

    /// Whether `doc` passes the filter.
    pub fn matches(&self, doc: &Document) -> bool {
        self.filter.as_ref().is_none_or(|f| f.matches(doc))
    }

    /// The result order of two documents: the sort keys, then `$id` ascending.
    pub fn compare(&self, a: &Document, b: &Document) -> Ordering {
        self.compare_keys(&self.sort_key(a), &a.id, &self.sort_key(b), &b.id)
    }

    /// Whether `doc` comes after the cursor (always true without a cursor).
    pub fn is_after_cursor(&self, doc: &Document) -> bool {
        self.after.as_ref().is_none_or(|position| {
            let cursor_key: SortKey<'_> = position
                .keys
                .iter()
                .map(|k| k.as_ref().map(Cow::Borrowed))
                .collect();
            self.compare_keys(&self.sort_key(doc), &doc.id, &cursor_key, &position.id)
                == Ordering::Greater
        })
    }

    /// Where `doc` stands in the query's order, owned (a walk that sorts once keeps one per
    /// match instead of the documents).
    pub(crate) fn position(&self, doc: &Document) -> SortPosition {
        SortPosition {
            keys: self
                .sort_key(doc)
                .into_iter()
                .map(|k| k.map(Cow::into_owned))
                .collect(),
            id: doc.id.clone(),
        }
    }

    /// The position the query's cursor points after, if it has one.
    pub(crate) fn start_position(&self) -> Option<SortPosition> {
        self.after.as_ref().map(|position| SortPosition {
            keys: position.keys.clone().into_boxed_slice(),
            id: position.id.clone(),
        })
    }

    /// The result order of two positions.
    pub(crate) fn compare_positions(&self, a: &SortPosition, b: &SortPosition) -> Ordering {
        self.compare_in_order(
            a.keys.iter().map(Option::as_ref),
            &a.id,
            b.keys.iter().map(Option::as_ref),
            &b.id,
        )
    }

    /// The cursor that continues after `position`.
    pub(crate) fn cursor_at(&self, position: &SortPosition) -> Cursor {
        CursorPosition {
            fingerprint: self.fingerprint.clone(),
            keys: position.keys.to_vec(),
            id: position.id.clone(),
        }
        .encode()
    }

    /// The cursor that continues after `doc`.
    pub fn cursor_after(&self, doc: &Document) -> Cursor {
        self.cursor_at(&self.position(doc))
    }

    /// The page this query gives over `docs` (in any order): filter, skip to the cursor,
    /// sort, cut at the limit. `next` is set exactly when more matches follow.
    pub fn evaluate<'a>(&self, docs: impl IntoIterator<Item = &'a Document>) -> Page {
        let (selected, more) = self.select(docs.into_iter().enumerate());
        self.page(
            selected.into_iter().map(|(_, doc)| doc.clone()).collect(),
            more,
        )
    }

    /// [`evaluate`](Self::evaluate) over documents the caller owns: the page's documents
    /// are moved out of `docs` instead of copied.
    pub fn evaluate_owned(&self, docs: Vec<Document>) -> Page {
        let (selected, more) = self.select(docs.iter().enumerate());
        let positions: Vec<usize> = selected.into_iter().map(|(i, _)| i).collect();
        let mut slots: Vec<Option<Document>> = docs.into_iter().map(Some).collect();
        let documents = positions
            .into_iter()
            .filter_map(|i| slots[i].take())
            .collect();
        self.page(documents, more)
    }

    /// The page over `docs` that are already matches after the cursor, in result order (as
    /// an index read in the query's order keeps them): [`evaluate_owned`](Self::evaluate_owned)
    /// without checking or sorting again, only the cut at the limit. `more_follow`: a
    /// match follows `docs` beyond them (one the caller did not hand over), so the page,
    /// which `docs` must then fill, has a next.
    pub fn page_in_order(&self, mut docs: Vec<Document>, more_follow: bool) -> Page {
        debug_assert!(
            !more_follow || self.limit.is_some_and(|limit| docs.len() >= limit),
            "more matches follow a page that is not full"
        );
        debug_assert!(
            docs.iter()
                .all(|doc| self.matches(doc) && self.is_after_cursor(doc)),
            "a document given as in order is not a match after the cursor"
        );
        debug_assert!(
            docs.windows(2).all(|pair| {
                let (a, b) = (self.sort_key(&pair[0]), self.sort_key(&pair[1]));
                self.compare_keys(&a, &pair[0].id, &b, &pair[1].id).is_lt()
            }),
            "documents given as in order are not in the query's order"
        );
        let more = more_follow || self.limit.is_some_and(|limit| docs.len() > limit);
        if let Some(limit) = self.limit {
            docs.truncate(limit);
        }
        self.page(docs, more)
    }

    /// The page's documents (with their positions in the input), in result order, and
    /// whether more matches follow them. Only matching documents are kept while reading.
    fn select<'a>(
        &self,
        docs: impl Iterator<Item = (usize, &'a Document)>,
    ) -> (Vec<(usize, &'a Document)>, bool) {
        let width = self.order.len();
        // Every match's sort values in one vector, `width` each in match order: a scan
        // matching thousands of documents allocates no key per match.
        let mut values: Vec<Option<Cow<'a, Value>>> = Vec::new();
        let mut found: Vec<(usize, &'a Document)> = Vec::new();
        for (i, doc) in docs {
            if self.matches(doc) && self.is_after_cursor(doc) {
                values.extend(self.sort_values(doc));
                found.push((i, doc));
            }
        }
        let key = |m: usize| &values[m * width..(m + 1) * width];
        let by_order = |a: &usize, b: &usize| {
            self.compare_keys(key(*a), &found[*a].1.id, key(*b), &found[*b].1.id)
        };
        let mut selected: Vec<usize> = (0..found.len()).collect();
        let more = self.limit.is_some_and(|limit| selected.len() > limit);
        if let (true, Some(limit)) = (more, self.limit) {
            selected.select_nth_unstable_by(limit, by_order);
            selected.truncate(limit);
        }
        selected.sort_unstable_by(by_order);
        (selected.into_iter().map(|m| found[m]).collect(), more)
    }

    fn page(&self, documents: Vec<Document>, more: bool) -> Page {
        let next = if more {
            documents.last().map(|doc| self.cursor_after(doc))
        } else {
            None
        };
        Page {
            documents,
            next,
            exhausted_scan: false,
        }
    }

    fn sort_key<'a>(&self, doc: &'a Document) -> SortKey<'a> {
        self.sort_values(doc).collect()
    }

    /// `doc`'s values of the order's fields, in order.
    fn sort_values<'a>(
        &self,
        doc: &'a Document,
    ) -> impl Iterator<Item = Option<Cow<'a, Value>>> + use<'a, '_> {
        self.order.iter().map(move |(path, _)| path.resolve(doc))
    }

    fn compare_keys(
        &self,
        a: &[Option<Cow<'_, Value>>],
        a_id: &str,
        b: &[Option<Cow<'_, Value>>],
        b_id: &str,
    ) -> Ordering {
        self.compare_in_order(
            a.iter().map(|x| x.as_deref()),
            a_id,
            b.iter().map(|y| y.as_deref()),
            b_id,
        )
    }

    /// The result order of two documents given as their sort values and ids.
    fn compare_in_order<'x>(
        &self,
        a: impl Iterator<Item = Option<&'x Value>>,
        a_id: &str,
        b: impl Iterator<Item = Option<&'x Value>>,
        b_id: &str,
    ) -> Ordering {
        for ((x, y), (_, descending)) in a.zip(b).zip(&self.order) {
            let ordering = compare_values(x, y);
            let ordering = if *descending {
                ordering.reverse()
            } else {
                ordering
            };
            if ordering != Ordering::Equal {
                return ordering;
            }
        }
        a_id.cmp(b_id)
    }
}

/// Whether `doc` matches `filter`; a bad path is [`Error::InvalidArgument`].
pub fn matches(filter: &Filter, doc: &Document) -> Result<bool> {
    Ok(CompiledFilter::new(filter)?.matches(doc))
}

/// The reference answer of `query` over `docs`: one page, exactly as every backend must
/// return it.
///
/// ```
/// use docstore::Document;
/// use docstore::query::{Filter, Query, evaluate};
///
/// let doc = |id: &str, n: i64| Document {
///     id: id.into(),
///     data: docstore::object(serde_json::json!({"n": n})).unwrap(),
///     created_at: 0, updated_at: 0, created_by: String::new(), updated_by: String::new(),
///     version: 1, expires_at: None,
/// };
/// let docs = [doc("a", 3), doc("b", 1), doc("c", 2)];
/// let query = Query::new().filter(Filter::gte("n", 2)).order_by("n").limit(1);
/// let page = evaluate(&docs, &query).unwrap();
/// assert_eq!(page.documents[0].id, "c");
/// let rest = evaluate(&docs, &query.clone().after(page.next)).unwrap();
/// assert_eq!(rest.documents[0].id, "a");
/// assert!(rest.next.is_none());
/// ```
pub fn evaluate<'a>(docs: impl IntoIterator<Item = &'a Document>, query: &Query) -> Result<Page> {
    Ok(query.compile()?.evaluate(docs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::Order;
    use serde_json::json;

    fn doc(id: &str, data: Value) -> Document {
        Document {
            expires_at: None,
            id: id.into(),
            data: crate::object(data).unwrap(),
            created_at: 10,
            updated_at: 20,
            created_by: "c".into(),
            updated_by: "u".into(),
            version: 2,
        }
    }

    fn hits(filter: Filter, docs: &[Document]) -> Vec<String> {
        let query = Query::new().filter(filter);
        evaluate(docs, &query)
            .unwrap()
            .documents
            .into_iter()
            .map(|d| d.id)
            .collect()
    }

    #[test]
    fn operators_follow_the_contract() {
        let docs = [
            doc("a", json!({"n": 1, "t": ["x"], "s": "pre"})),
            doc("b", json!({"n": 1.0, "s": 5})),
            doc("c", json!({"n": null})),
            doc("d", json!({})),
        ];
        assert_eq!(hits(Filter::eq("n", 1), &docs), ["a", "b"]);
        assert_eq!(hits(Filter::ne("n", 1), &docs), ["c", "d"]);
        assert_eq!(hits(Filter::eq("n", Value::Null), &docs), ["c"]);
        assert_eq!(hits(Filter::exists("n"), &docs), ["a", "b", "c"]);
        assert_eq!(hits(Filter::gte("n", 1), &docs), ["a", "b"]);
        assert_eq!(
            hits(Filter::lt("n", Value::Null), &docs),
            Vec::<String>::new()
        );
        assert_eq!(hits(!Filter::lt("n", 5), &docs), ["c", "d"]);
        assert_eq!(hits(Filter::prefix("s", ""), &docs), ["a"]);
        assert_eq!(hits(Filter::contains("t", "x"), &docs), ["a"]);
        assert_eq!(
            hits(Filter::contains("s", "p"), &docs),
            Vec::<String>::new()
        );
        assert_eq!(
            hits(Filter::is_in("n", [Value::Null, json!(1.0)]), &docs),
            ["a", "b", "c"]
        );
        assert_eq!(hits(Filter::all([]), &docs).len(), 4);
        assert!(hits(Filter::any([]), &docs).is_empty());
        assert_eq!(
            hits(Filter::eq("$version", 2).and(Filter::eq("$id", "d")), &docs),
            ["d"]
        );
    }

    #[test]
    fn pages_walk_the_whole_answer_and_cursors_are_bound_to_their_query() {
        let docs: Vec<Document> = (0..10)
            .map(|i| doc(&format!("d{i}"), json!({"k": i % 3})))
            .collect();
        let base = Query::new().order_by_desc("k");
        let all = evaluate(&docs, &base).unwrap().documents;
        let mut walked = Vec::new();
        let mut cursor = None;
        loop {
            let page = evaluate(&docs, &base.clone().limit(3).after(cursor)).unwrap();
            walked.extend(page.documents);
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(walked, all);
        let first = evaluate(&docs, &base.clone().limit(3)).unwrap();
        let foreign = Query::new()
            .order_by("k")
            .limit(3)
            .after(first.next.clone());
        assert!(matches!(
            evaluate(&docs, &foreign),
            Err(Error::InvalidArgument(_))
        ));
        let resized = base.clone().limit(50).after(first.next);
        assert_eq!(evaluate(&docs, &resized).unwrap().documents.len(), 7);
    }

    #[test]
    fn filter_depth_is_limited() {
        let nest = |levels: usize| (1..levels).fold(Filter::exists("a"), |f, _| !f);
        assert!(CompiledFilter::new(&nest(MAX_FILTER_DEPTH)).is_ok());
        let too_deep = CompiledFilter::new(&nest(MAX_FILTER_DEPTH + 1));
        assert!(matches!(too_deep, Err(Error::InvalidArgument(_))));
        let wide_then_deep = Filter::all([Filter::exists("a"), nest(MAX_FILTER_DEPTH)]);
        assert!(CompiledFilter::new(&wide_then_deep).is_err());
        // Far deeper than any stack allows to recurse: refused before recursing.
        let hostile = nest(100_000);
        assert!(CompiledFilter::new(&hostile).is_err());
        std::mem::forget(hostile); // dropping it would recurse as deep
    }

    /// Documents `d00`..`d29` whose `k` cycles through 0..4: ties for every order on `k`.
    fn thirty_docs() -> Vec<Document> {
        (0..30)
            .map(|i| doc(&format!("d{i:02}"), json!({"k": i % 4})))
            .collect()
    }

    #[test]
    fn owned_evaluation_gives_the_same_page() {
        let docs = thirty_docs();
        for query in [
            Query::new().order_by_desc("k").limit(7),
            Query::new().filter(Filter::gte("k", 2)),
            Query::new().order_by("k").limit(100),
        ] {
            let compiled = query.compile().unwrap();
            assert_eq!(
                compiled.evaluate_owned(docs.clone()),
                compiled.evaluate(&docs)
            );
        }
    }

    /// Matches already in the query's order make the reference page without a sort; a
    /// backend that hands over documents out of order is caught in debug builds.
    #[test]
    fn a_page_in_order_is_the_reference_page() {
        let docs = thirty_docs();
        for query in [
            Query::new().order_by_desc("k").limit(7),
            Query::new().filter(Filter::gte("k", 2)).limit(5),
            Query::new().order_by("k"),
        ] {
            let compiled = query.compile().unwrap();
            let reference = compiled.evaluate(&docs);
            let mut sorted = compiled.clone();
            sorted.limit = None;
            let in_order = sorted.evaluate(&docs).documents;
            assert_eq!(
                compiled.page_in_order(in_order.clone(), false),
                reference,
                "{query:?}"
            );
            if let Some(limit) = compiled.limit.filter(|l| *l < in_order.len()) {
                // The page alone, with word that a match follows it: the same page.
                let page_only = in_order[..limit].to_vec();
                assert_eq!(
                    compiled.page_in_order(page_only, true),
                    reference,
                    "{query:?}"
                );
            }
        }
        if cfg!(debug_assertions) {
            let compiled = Query::new().order_by("k").compile().unwrap();
            let out_of_order =
                std::panic::catch_unwind(|| compiled.page_in_order(docs.clone(), false));
            assert!(out_of_order.is_err(), "documents out of order were taken");
        }
    }

    #[test]
    fn exact_limit_has_no_next() {
        let docs = [doc("a", json!({})), doc("b", json!({}))];
        assert!(
            evaluate(&docs, &Query::new().limit(2))
                .unwrap()
                .next
                .is_none()
        );
        assert!(
            evaluate(&docs, &Query::new().limit(1))
                .unwrap()
                .next
                .is_some()
        );
        assert!(matches!(
            evaluate(&docs, &Query::new().limit(0)),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn id_order_is_recognised() {
        let compile = |q: Query| q.compile().unwrap().id_order();
        assert_eq!(compile(Query::new()), Some(false));
        assert_eq!(compile(Query::new().order_by_desc("$id")), Some(true));
        assert_eq!(
            compile(Query::new().order_by("$id").order_by("x")),
            Some(false)
        );
        assert_eq!(compile(Query::new().order_by("x")), None);
        let order = vec![Order::asc("$version")];
        assert_eq!(
            compile(Query {
                order,
                ..Query::default()
            }),
            None
        );
    }

    #[test]
    fn queries_have_a_readable_json_form() {
        let text = r#"{
            "filter": {"and": [{"eq": ["status", "open"]}, {"not": {"exists": "closed_at"}},
                               {"in": ["p", [1, 2]]}]},
            "order": [{"field": "$updated_at", "descending": true}, {"field": "title"}],
            "limit": 20
        }"#;
        let query: Query = serde_json::from_str(text).unwrap();
        let expected = Query::new()
            .filter(Filter::all([
                Filter::eq("status", "open"),
                !Filter::exists("closed_at"),
                Filter::is_in("p", [1, 2]),
            ]))
            .order_by_desc("$updated_at")
            .order_by("title")
            .limit(20);
        assert_eq!(query, expected);
        assert!(serde_json::from_str::<Query>(r#"{"limit": 1, "lmit": 2}"#).is_err());
    }
}
