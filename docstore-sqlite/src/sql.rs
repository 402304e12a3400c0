//! Translating a compiled query into SQL text with bound parameters. Paths, values and
//! cursor positions are always parameters; the text holds only fixed SQL.
//!
//! Every filter expression evaluates to exactly 0 or 1 (never `NULL`), so `NOT`, `AND` and
//! `OR` are plain boolean logic, and each leaf is exactly the reference leaf:
//! - strings, `true`, `false` and `null` compare natively: `json_type` tells the JSON kind
//!   (SQLite's `json_extract` alone turns `true` into 1), `->>` gives the unescaped string,
//!   and SQLite compares text with `memcmp`, which is code point order for UTF-8 (each
//!   comparison with a string is followed by the check that the value is one: [`on_string`]);
//! - every other leaf (numbers of any kind, arrays, objects, `In`, `Contains`) calls
//!   `docstore_leaf`, which runs `docstore`'s own comparison on the value serde_json parses
//!   from the verbatim JSON text `data -> path` gives;
//! - sort keys are the metadata columns themselves, or for data paths `docstore_key` byte
//!   strings, whose order is the reference total order.

use crate::functions::{self, Op};
use docstore::index::key as sortkey;
use docstore::query::sql::{ConditionSql, filter_sql};
use docstore::query::{CompiledFilter, CursorPosition, FieldPath};
use rusqlite::types::Value as SqlValue;
use serde_json::Value;

/// SQL text and its parameters, numbered in order of appearance.
#[derive(Debug, Default)]
pub(crate) struct Sql {
    pub(crate) text: String,
    pub(crate) params: Vec<SqlValue>,
}

impl Sql {
    /// Binds `value` and returns its placeholder.
    pub(crate) fn bind(&mut self, value: SqlValue) -> String {
        self.params.push(value);
        format!("?{}", self.params.len())
    }

    fn bind_text(&mut self, text: impl Into<String>) -> String {
        self.bind(SqlValue::Text(text.into()))
    }

    fn bind_json(&mut self, value: &Value) -> String {
        self.bind_text(value.to_string())
    }

    /// Appends `filter` as a 0/1 expression.
    pub(crate) fn filter(&mut self, filter: &CompiledFilter) {
        let text = self.filter_expr(filter);
        self.text.push_str(&text);
    }

    /// `filter` as a 0/1 expression: the core's walk ([`filter_sql`]) over this backend's
    /// conditions, every one of which SQLite can say.
    fn filter_expr(&mut self, filter: &CompiledFilter) -> String {
        filter_sql(filter, self).expect("SQLite says every condition")
    }

    fn eq(&mut self, path: &FieldPath, value: &Value) -> String {
        let kind = match value {
            Value::String(_) => "text",
            Value::Bool(true) => "true",
            Value::Bool(false) => "false",
            Value::Null => "null",
            Value::Number(n) => {
                return match (Target::of(path), n.as_i64()) {
                    (Target::Column(column, ColumnKind::Integer), Some(i)) => {
                        format!("({column} = {})", self.bind(SqlValue::Integer(i)))
                    }
                    _ => self.leaf(Op::Eq, path, value),
                };
            }
            _ => return self.leaf(Op::Eq, path, value),
        };
        match (Target::of(path), value) {
            (Target::JsonPath(p), Value::String(s)) => {
                let p = self.bind_text(p);
                let s = self.bind_text(s.as_str());
                on_string(&p, &format!("(data ->> {p}) IS {s}"))
            }
            (Target::JsonPath(p), _) => {
                format!("(json_type(data, {}) IS '{kind}')", self.bind_text(p))
            }
            (Target::Column(column, ColumnKind::Text), Value::String(s)) => {
                format!("({column} IS {})", self.bind_text(s.as_str()))
            }
            (Target::Column(..), _) => "0".to_owned(),
            (Target::Resolve(_), _) => self.leaf(Op::Eq, path, value),
        }
    }

    fn range(&mut self, path: &FieldPath, bound: &Value, sql_op: &str, op: Op) -> String {
        match (Target::of(path), bound) {
            (Target::JsonPath(p), Value::String(s)) => {
                let p = self.bind_text(p);
                let s = self.bind_text(s.as_str());
                on_string(&p, &format!("(data ->> {p}) {sql_op} {s}"))
            }
            (Target::Column(column, ColumnKind::Text), Value::String(s)) => {
                format!("({column} {sql_op} {})", self.bind_text(s.as_str()))
            }
            (Target::Column(column, ColumnKind::Integer), Value::Number(n)) => match n.as_i64() {
                Some(i) => format!("({column} {sql_op} {})", self.bind(SqlValue::Integer(i))),
                None => self.leaf(op, path, bound),
            },
            // A text column never compares with another kind, nor an integer column with
            // anything but a number.
            (Target::Column(..), Value::String(_) | Value::Bool(_)) => "0".to_owned(),
            _ => self.leaf(op, path, bound),
        }
    }

    fn prefix(&mut self, path: &FieldPath, prefix: &str) -> String {
        let n = i64::try_from(prefix.len()).unwrap_or(i64::MAX);
        match Target::of(path) {
            // The empty prefix matches every string (and an empty blob would bind as NULL).
            Target::JsonPath(p) if prefix.is_empty() => {
                format!("(json_type(data, {}) IS 'text')", self.bind_text(p))
            }
            Target::Column(_, ColumnKind::Text) if prefix.is_empty() => "1".to_owned(),
            Target::JsonPath(p) => {
                let p = self.bind_text(p);
                let n = self.bind(SqlValue::Integer(n));
                let b = self.bind(SqlValue::Blob(prefix.as_bytes().to_vec()));
                on_string(
                    &p,
                    &format!("substr(CAST((data ->> {p}) AS BLOB), 1, {n}) IS {b}"),
                )
            }
            Target::Column(column, ColumnKind::Text) => {
                let n = self.bind(SqlValue::Integer(n));
                let b = self.bind(SqlValue::Blob(prefix.as_bytes().to_vec()));
                format!("(substr(CAST({column} AS BLOB), 1, {n}) IS {b})")
            }
            Target::Column(_, ColumnKind::Integer) => "0".to_owned(),
            Target::Resolve(_) => self.leaf(Op::Prefix, path, &Value::from(prefix)),
        }
    }

    /// `docstore_leaf(op, value, operand)`.
    fn leaf(&mut self, op: Op, path: &FieldPath, operand: &Value) -> String {
        let op = self.bind(SqlValue::Integer(op as i64));
        let value = self.value_expr(path);
        let operand = self.bind_json(operand);
        format!("{}({op}, {value}, {operand})", functions::LEAF)
    }

    /// An expression giving the field as JSON text (`NULL` when missing), or as an integer
    /// for the integer metadata columns.
    fn value_expr(&mut self, path: &FieldPath) -> String {
        match Target::of(path) {
            Target::JsonPath(p) => format!("(data -> {})", self.bind_text(p)),
            Target::Resolve(segments) => {
                let segments = serde_json::to_string(segments).expect("strings serialize");
                format!(
                    "{}(json(data), {})",
                    functions::RESOLVE,
                    self.bind_text(segments)
                )
            }
            Target::Column(column, ColumnKind::Text) => format!("json_quote({column})"),
            Target::Column(column, ColumnKind::Integer) => column.to_owned(),
        }
    }

    /// The sort key expression of `path`: the column itself for metadata (every row has a
    /// value, all of one kind, and SQLite orders integers by value and text by code point,
    /// as the reference does), a `docstore_key` byte string for data paths.
    pub(crate) fn key_expr(&mut self, path: &FieldPath) -> String {
        match Target::of(path) {
            Target::Column(column, _) => column.to_owned(),
            _ => format!("{}({})", functions::KEY, self.value_expr(path)),
        }
    }

    /// Appends the keyset condition "after `position`" for the sort keys `order` (already
    /// cut after a `$id` key), then the `$id` tie-break. `None` when the cursor holds, for a
    /// metadata column, a value of another kind than the column's (only a forged cursor can).
    pub(crate) fn after(
        &mut self,
        order: &[(FieldPath, bool)],
        position: &CursorPosition,
    ) -> Option<()> {
        let mut keys = Vec::with_capacity(order.len());
        for ((path, descending), value) in order.iter().zip(&position.keys) {
            let bound = match Target::of(path) {
                Target::Column(_, ColumnKind::Text) => {
                    SqlValue::Text(value.as_ref()?.as_str()?.to_owned())
                }
                Target::Column(_, ColumnKind::Integer) => {
                    SqlValue::Integer(value.as_ref()?.as_i64()?)
                }
                _ => SqlValue::Blob(sortkey::encode(value.as_ref())),
            };
            keys.push((self.key_expr(path), *descending, self.bind(bound)));
        }
        let ends_with_id = order.last().is_some_and(|(p, _)| *p == FieldPath::Id);
        // Built from the least significant key outwards.
        let mut condition = if ends_with_id {
            "0".to_owned()
        } else {
            format!("(id > {})", self.bind_text(position.id.as_str()))
        };
        for (key, descending, bound) in keys.into_iter().rev() {
            let past = if descending { "<" } else { ">" };
            condition = format!("({key} {past} {bound} OR ({key} = {bound} AND {condition}))");
        }
        self.text.push_str(&condition);
        Some(())
    }
}

impl ConditionSql for Sql {
    fn condition(&mut self, condition: &CompiledFilter) -> Option<String> {
        Some(match condition {
            CompiledFilter::Exists(path) => match Target::of(path) {
                Target::JsonPath(p) => {
                    format!("(json_type(data, {}) IS NOT NULL)", self.bind_text(p))
                }
                Target::Resolve(_) => format!("({} IS NOT NULL)", self.value_expr(path)),
                Target::Column(..) => "1".to_owned(),
            },
            CompiledFilter::Eq(path, value) => self.eq(path, value),
            CompiledFilter::Lt(path, v) => self.range(path, v, "<", Op::Lt),
            CompiledFilter::Lte(path, v) => self.range(path, v, "<=", Op::Lte),
            CompiledFilter::Gt(path, v) => self.range(path, v, ">", Op::Gt),
            CompiledFilter::Gte(path, v) => self.range(path, v, ">=", Op::Gte),
            CompiledFilter::In(_, values) if values.is_empty() => "0".to_owned(),
            CompiledFilter::In(path, values) => {
                self.leaf(Op::In, path, &Value::Array(values.clone()))
            }
            CompiledFilter::Prefix(path, prefix) => self.prefix(path, prefix),
            CompiledFilter::Contains(path, value) => self.leaf(Op::Contains, path, value),
            CompiledFilter::And(_) | CompiledFilter::Or(_) | CompiledFilter::Not(_) => {
                unreachable!("the core's walk takes these")
            }
        })
    }

    fn constant(&self, value: bool) -> &'static str {
        if value { "1" } else { "0" }
    }
}

/// `comparison` of the value at the path bound as `p`, true only where that value is a
/// string: the comparison first, then the kind check, as SQLite stops an `AND` at its first
/// false term, so a scan checks the kind only of the few values that compared (a selective
/// query over 100 000 documents: 76 → 65 ms, `docs/benchmarks.md`). The pair is still never
/// `NULL`: the comparison is `NULL` only where the value is missing, and the kind check is
/// then false.
fn on_string(p: &str, comparison: &str) -> String {
    format!("({comparison} AND json_type(data, {p}) IS 'text')")
}

/// The deepest expression tree SQLite accepts is 1000 levels (`SQLITE_MAX_EXPR_DEPTH`);
/// filters whose translation could come near it are evaluated in memory instead.
const MAX_PUSHED_DEPTH: usize = 500;

/// At most this many filter nodes are pushed down: each leaf binds up to 4 parameters, and
/// SQLite takes at most 32 766 per statement.
const MAX_PUSHED_NODES: usize = 2_000;

/// Whether `filter`'s translation stays well within SQLite's limits: expression depth (a
/// chain of `k` `AND`/`OR` terms nests `k` deep, and a leaf at most 5) and parameters.
pub(crate) fn pushable(filter: &CompiledFilter) -> bool {
    /// (depth, nodes)
    fn size(filter: &CompiledFilter) -> (usize, usize) {
        match filter {
            CompiledFilter::And(filters) | CompiledFilter::Or(filters) => {
                let (deepest, nodes) = filters
                    .iter()
                    .map(size)
                    .fold((0usize, 1usize), |(d, n), (cd, cn)| {
                        (d.max(cd), n.saturating_add(cn))
                    });
                (deepest.saturating_add(filters.len()), nodes)
            }
            CompiledFilter::Not(inner) => {
                let (d, n) = size(inner);
                (d + 1, n + 1)
            }
            _ => (5, 1),
        }
    }
    let (depth, nodes) = size(filter);
    depth <= MAX_PUSHED_DEPTH && nodes <= MAX_PUSHED_NODES
}

/// Where a field lives.
enum Target<'a> {
    /// A data path SQLite's JSON path syntax spells exactly.
    JsonPath(String),
    /// A data path it cannot spell (a key with `"`, `\` or a control character).
    Resolve(&'a [String]),
    /// A metadata column.
    Column(&'static str, ColumnKind),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ColumnKind {
    Text,
    Integer,
}

impl<'a> Target<'a> {
    fn of(path: &'a FieldPath) -> Self {
        match path {
            FieldPath::Id => Target::Column("id", ColumnKind::Text),
            FieldPath::CreatedBy => Target::Column("created_by", ColumnKind::Text),
            FieldPath::UpdatedBy => Target::Column("updated_by", ColumnKind::Text),
            FieldPath::CreatedAt => Target::Column("created_at", ColumnKind::Integer),
            FieldPath::UpdatedAt => Target::Column("updated_at", ColumnKind::Integer),
            FieldPath::Version => Target::Column("version", ColumnKind::Integer),
            FieldPath::Data(segments) => match json_path(segments) {
                Some(p) => Target::JsonPath(p),
                None => Target::Resolve(segments),
            },
        }
    }
}

/// `$."a"."b"`: SQLite's quoted labels end at the next `"` and treat a `\` as an escape, so
/// keys holding either (or a control character) are left to `docstore_resolve`.
fn json_path(segments: &[String]) -> Option<String> {
    let mut path = String::from("$");
    for segment in segments {
        if segment
            .chars()
            .any(|c| c == '"' || c == '\\' || c.is_control())
        {
            return None;
        }
        path.push_str(".\"");
        path.push_str(segment);
        path.push('"');
    }
    Some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_quoted_or_left_to_rust() {
        let seg = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            json_path(&seg(&["a.b", "$x", "')--", "[0]"])).as_deref(),
            Some(r#"$."a.b"."$x"."')--"."[0]""#)
        );
        assert_eq!(json_path(&seg(&["a\"b"])), None);
        assert_eq!(json_path(&seg(&["a\\b"])), None);
        assert_eq!(json_path(&seg(&["a\nb"])), None);
    }
}
