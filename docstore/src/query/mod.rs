//! The query model and the reference evaluator.
//!
//! A [`Query`] is plain data (serde, so an application can accept it as JSON) with a builder
//! API. [`Query::compile`] checks it and gives a [`CompiledQuery`], whose answer on a set of
//! documents is *the* answer: every backend, whatever it pushes down, returns exactly the
//! documents and order that [`evaluate`] gives.
//!
//! ```
//! use docstore::query::{Filter, Query};
//!
//! let query = Query::new()
//!     .filter(Filter::eq("status", "open").and(Filter::gte("priority", 3)))
//!     .order_by_desc("$updated_at")
//!     .limit(20);
//! let json = serde_json::to_string(&query).unwrap();
//! assert_eq!(serde_json::from_str::<Query>(&json).unwrap(), query);
//! ```

mod cursor;
mod eval;
mod ordering;
mod path;
mod shape;
pub mod sql;
mod text;

pub(crate) use cursor::fingerprint;
pub use cursor::{Cursor, CursorPosition};
pub(crate) use eval::SortPosition;
pub use eval::{CompiledFilter, CompiledQuery, MAX_FILTER_DEPTH, evaluate, matches};
pub use ordering::{canonical_json, compare_numbers, compare_values, range_ordering, values_equal};
pub use path::{FieldPath, resolve_in};
pub use text::{MAX_QUERY_TEXT_BYTES, ParseError};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A query over one collection: filter, order, page size and where the page starts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Query {
    /// Which documents match (`None`: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Filter>,
    /// Sort keys, most significant first; ties are always broken by `$id` ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<Order>,
    /// The page size (`None`: all matches on one page; `0` is invalid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Where to continue: the `next` cursor of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
    /// Whether the answer must be strongly consistent (default `false`): `true` never reads
    /// an eventually consistent index (a DynamoDB GSI), so it reflects every write that
    /// finished before the query began; `false` lets such an index serve the query, which
    /// may then miss writes of the last moments. Memory and SQLite are always strongly
    /// consistent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub consistent: bool,
}

impl Query {
    /// A query matching every document, in id order, on one page.
    pub fn new() -> Self {
        Query::default()
    }

    /// Sets the filter.
    pub fn filter(mut self, filter: Filter) -> Self {
        self.filter = Some(filter);
        self
    }

    /// Adds an ascending sort key.
    pub fn order_by(mut self, field: impl Into<String>) -> Self {
        self.order.push(Order::asc(field));
        self
    }

    /// Adds a descending sort key.
    pub fn order_by_desc(mut self, field: impl Into<String>) -> Self {
        self.order.push(Order::desc(field));
        self
    }

    /// Sets the page size.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Continues after the given cursor (`None`: from the start).
    pub fn after(mut self, cursor: Option<Cursor>) -> Self {
        self.cursor = cursor;
        self
    }

    /// Asks for a strongly consistent answer (see [`Query::consistent`]).
    ///
    /// ```
    /// let query = docstore::Query::new().consistent(true);
    /// assert!(query.consistent);
    /// ```
    pub fn consistent(mut self, consistent: bool) -> Self {
        self.consistent = consistent;
        self
    }

    /// Checks the query (paths, limit, cursor) and prepares it for evaluation.
    pub fn compile(&self) -> crate::Result<CompiledQuery> {
        CompiledQuery::new(self)
    }

    /// [`compile`](Self::compile) for one collection of one site, as the front end runs it:
    /// the names are checked and the cursors are bound to them
    /// ([`CompiledQuery::for_collection`]).
    pub fn compile_for(&self, site: &str, collection: &str) -> crate::Result<CompiledQuery> {
        CompiledQuery::for_collection(site, collection, self)
    }

    /// Parses the text form people type at a terminal (the command line's language; see
    /// [`ParseError`] for where it stopped making sense):
    ///
    /// ```
    /// use docstore::{Filter, Query};
    ///
    /// let query = Query::parse(r#"status = "open" and priority >= 3 order by $updated_at desc limit 20"#)?;
    /// assert_eq!(query, Query::new()
    ///     .filter(Filter::eq("status", "open").and(Filter::gte("priority", 3)))
    ///     .order_by_desc("$updated_at")
    ///     .limit(20));
    /// # Ok::<(), docstore::query::ParseError>(())
    /// ```
    ///
    /// The grammar (keywords are case-insensitive; values are JSON):
    ///
    /// ```text
    /// query   := [filter] [ORDER BY field [ASC|DESC] {, field [ASC|DESC]}] [LIMIT n]
    /// filter  := and {OR and}
    /// and     := unary {AND unary}
    /// unary   := NOT unary | primary
    /// primary := ( filter ) | ALL( [filter {, filter}] ) | ANY( [filter {, filter}] )
    ///          | EXISTS field
    ///          | field (= | != | < | <= | > | >=) value
    ///          | field IN [value, ...] | field PREFIX "text" | field CONTAINS value
    /// field   := a path such as address.city, a\.dotted\.key or $updated_at; a part in
    ///            backquotes is one literal key: `odd name`, `a.b`, `$id` (a data key),
    ///            address.`zip code` (a backquote inside is doubled)
    /// ```
    pub fn parse(text: &str) -> Result<Query, ParseError> {
        text::parse(text)
    }

    /// The text form of the query, which [`Query::parse`] reads back as the same query
    /// (the cursor and `consistent` are not part of it).
    ///
    /// ```
    /// use docstore::{Filter, Query};
    ///
    /// let query = Query::new().filter(!Filter::exists("closed_at")).order_by_desc("priority");
    /// assert_eq!(query.to_text(), "NOT EXISTS closed_at ORDER BY priority DESC");
    /// assert_eq!(Query::parse(&query.to_text()).unwrap(), query);
    /// ```
    pub fn to_text(&self) -> String {
        text::to_text(self)
    }
}

/// A sort key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Order {
    /// The field path (see [`FieldPath`]).
    pub field: String,
    /// Reverse the total order for this key (missing fields then sort last).
    #[serde(default)]
    pub descending: bool,
}

impl Order {
    /// Ascending on `field`.
    pub fn asc(field: impl Into<String>) -> Self {
        Order {
            field: field.into(),
            descending: false,
        }
    }

    /// Descending on `field`.
    pub fn desc(field: impl Into<String>) -> Self {
        Order {
            field: field.into(),
            descending: true,
        }
    }
}

/// A filter over documents. Fields are text paths (see [`FieldPath`]), checked when the query
/// is compiled.
///
/// Serialized externally tagged in snake case, e.g. `{"eq": ["status", "open"]}`,
/// `{"and": [...]}`, `{"not": {...}}`, `{"exists": "a.b"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Filter {
    /// All of the filters match (an empty `And` matches everything).
    And(Vec<Filter>),
    /// Any of the filters matches (an empty `Or` matches nothing).
    Or(Vec<Filter>),
    /// The filter does not match.
    Not(Box<Filter>),
    /// The field is present and equal to the value (numbers by exact value).
    Eq(String, Value),
    /// Exactly `Not(Eq(field, value))`: a missing field is "not equal".
    Ne(String, Value),
    /// The field is less than the value (both numbers, both strings or both booleans).
    Lt(String, Value),
    /// The field is less than or equal to the value (same kinds only).
    Lte(String, Value),
    /// The field is greater than the value (same kinds only).
    Gt(String, Value),
    /// The field is greater than or equal to the value (same kinds only).
    Gte(String, Value),
    /// The field equals one of the values (an empty list matches nothing).
    In(String, Vec<Value>),
    /// The field resolves (a stored `null` exists).
    Exists(String),
    /// The field is a string starting with the prefix.
    Prefix(String, String),
    /// The field is an array with an element equal to the value.
    Contains(String, Value),
    /// A value given to a builder ([`Filter::eq`], ...) that did not serialize to JSON, with
    /// serde's message: compiling the query refuses it with
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming the field. Never
    /// serialized.
    #[serde(skip)]
    Unserializable {
        /// The field the value was for.
        field: String,
        /// Why serializing it failed.
        message: String,
    },
}

/// A builder's value as JSON, or the filter that says why it has none.
fn with_value(
    field: impl Into<String>,
    value: impl Serialize,
    make: fn(String, Value) -> Filter,
) -> Filter {
    let field = field.into();
    match serde_json::to_value(value) {
        Ok(value) => make(field, value),
        Err(err) => Filter::Unserializable {
            field,
            message: err.to_string(),
        },
    }
}

impl Filter {
    /// `field == value`.
    pub fn eq(field: impl Into<String>, value: impl Serialize) -> Self {
        with_value(field, value, Filter::Eq)
    }
    /// `field != value` (also true when the field is missing).
    pub fn ne(field: impl Into<String>, value: impl Serialize) -> Self {
        with_value(field, value, Filter::Ne)
    }
    /// `field < value`.
    pub fn lt(field: impl Into<String>, value: impl Serialize) -> Self {
        with_value(field, value, Filter::Lt)
    }
    /// `field <= value`.
    pub fn lte(field: impl Into<String>, value: impl Serialize) -> Self {
        with_value(field, value, Filter::Lte)
    }
    /// `field > value`.
    pub fn gt(field: impl Into<String>, value: impl Serialize) -> Self {
        with_value(field, value, Filter::Gt)
    }
    /// `field >= value`.
    pub fn gte(field: impl Into<String>, value: impl Serialize) -> Self {
        with_value(field, value, Filter::Gte)
    }
    /// `field` equals one of `values`.
    pub fn is_in<V: Serialize>(
        field: impl Into<String>,
        values: impl IntoIterator<Item = V>,
    ) -> Self {
        let values: Vec<V> = values.into_iter().collect();
        with_value(field, values, |field, values| match values {
            Value::Array(values) => Filter::In(field, values),
            other => Filter::In(field, vec![other]),
        })
    }
    /// `field` resolves.
    pub fn exists(field: impl Into<String>) -> Self {
        Filter::Exists(field.into())
    }
    /// `field` is a string starting with `prefix`.
    pub fn prefix(field: impl Into<String>, prefix: impl Into<String>) -> Self {
        Filter::Prefix(field.into(), prefix.into())
    }
    /// `field` is an array holding `value`.
    pub fn contains(field: impl Into<String>, value: impl Serialize) -> Self {
        with_value(field, value, Filter::Contains)
    }
    /// All of `filters`.
    pub fn all(filters: impl IntoIterator<Item = Filter>) -> Self {
        Filter::And(filters.into_iter().collect())
    }
    /// Any of `filters`.
    pub fn any(filters: impl IntoIterator<Item = Filter>) -> Self {
        Filter::Or(filters.into_iter().collect())
    }
    /// `self` and `other` (extends `self` when it already is an `And`).
    pub fn and(self, other: Filter) -> Self {
        match self {
            Filter::And(mut filters) => {
                filters.push(other);
                Filter::And(filters)
            }
            first => Filter::And(vec![first, other]),
        }
    }
    /// `self` or `other` (extends `self` when it already is an `Or`).
    pub fn or(self, other: Filter) -> Self {
        match self {
            Filter::Or(mut filters) => {
                filters.push(other);
                Filter::Or(filters)
            }
            first => Filter::Or(vec![first, other]),
        }
    }
}

impl std::ops::Not for Filter {
    type Output = Filter;

    /// `!filter` is `Filter::Not(filter)`.
    fn not(self) -> Filter {
        Filter::Not(Box::new(self))
    }
}
