//! The short text form of a [`Query`], for people at a terminal.
//!
//! ```text
//! status = "open" and priority >= 3 order by $updated_at desc limit 20
//! ```
//!
//! Grammar (keywords are case-insensitive; values are JSON):
//!
//! ```text
//! query   := [filter] [ORDER BY field [ASC|DESC] {, field [ASC|DESC]}] [LIMIT n]
//! filter  := and {OR and}
//! and     := unary {AND unary}
//! unary   := NOT unary | primary
//! primary := ( filter ) | ALL( [filter {, filter}] ) | ANY( [filter {, filter}] )
//!          | EXISTS field
//!          | field (= | != | < | <= | > | >=) value
//!          | field IN [value, ...] | field PREFIX "text" | field CONTAINS value
//! field   := a path such as address.city, a\.dotted\.key or $updated_at; a part in
//!            backquotes is one literal key, whatever it holds: `odd name`, `a.b` (the key
//!            "a.b", not a -> b), `$id` (a data key, not the system field), address.`zip code`
//!            (a backquote inside is doubled)
//! ```
//!
//! `AND` binds tighter than `OR`; a chain `a AND b AND c` is one `And` of three. Errors name
//! the column where the text stopped making sense. [`Query::to_text`] prints a query so that
//! [`Query::parse`] gives it back unchanged (the cursor is not part of the text form).
//!
//! ```
//! use docstore::{Filter, Query};
//!
//! let query = Query::parse(r#"status = "open" and priority >= 3 order by $updated_at desc limit 20"#).unwrap();
//! assert_eq!(query, Query::new()
//!     .filter(Filter::eq("status", "open").and(Filter::gte("priority", 3)))
//!     .order_by_desc("$updated_at")
//!     .limit(20));
//! assert_eq!(Query::parse(&query.to_text()).unwrap(), query);
//! assert_eq!(Query::parse("status = ").unwrap_err().column, 10);
//! ```

use crate::query::{Filter, MAX_FILTER_DEPTH, Order, Query};
use serde_json::Value;
use std::fmt;

/// Where and why the text is not a query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line where the problem starts (queries may span lines).
    pub line: usize,
    /// 1-based column (in characters, within its line) where the problem starts.
    pub column: usize,
    /// What was expected or found there.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 1 {
            write!(f, "column {}: {}", self.column, self.message)
        } else {
            write!(
                f,
                "line {}, column {}: {}",
                self.line, self.column, self.message
            )
        }
    }
}

impl std::error::Error for ParseError {}

const KEYWORDS: [&str; 14] = [
    "and", "or", "not", "all", "any", "exists", "in", "prefix", "contains", "order", "by", "limit",
    "asc", "desc",
];

/// The longest query text accepted, in bytes. A query is typed or built by a program; a
/// megabyte holds an `IN` list of tens of thousands of values, and anything longer is refused
/// before it is read.
pub const MAX_QUERY_TEXT_BYTES: usize = 1 << 20;

/// Parses the text form.
pub(crate) fn parse(text: &str) -> Result<Query, ParseError> {
    if text.len() > MAX_QUERY_TEXT_BYTES {
        return Err(ParseError {
            line: 1,
            column: 1,
            message: format!(
                "the query text is {} bytes long; at most {MAX_QUERY_TEXT_BYTES} are accepted",
                text.len()
            ),
        });
    }
    let mut parser = Parser {
        text,
        pos: 0,
        depth: 0,
    };
    let mut query = Query::new();
    parser.skip_ws();
    if !parser.at_end() && !parser.at_keyword("order") && !parser.at_keyword("limit") {
        query.filter = Some(parser.or()?);
    }
    if parser.eat_keyword("order") {
        parser.expect_keyword("by")?;
        loop {
            let field = parser.field()?;
            let descending = if parser.eat_keyword("desc") {
                true
            } else {
                parser.eat_keyword("asc");
                false
            };
            query.order.push(Order { field, descending });
            if !parser.eat_symbol(",") {
                break;
            }
        }
    }
    if parser.eat_keyword("limit") {
        query.limit = Some(parser.integer()?);
    }
    parser.skip_ws();
    if !parser.at_end() {
        return Err(parser.error("expected AND, OR, ORDER BY, LIMIT or the end of the query"));
    }
    Ok(query)
}

/// A literal key as a path segment: `.`, `\\` and `$` escaped.
fn escape_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for c in key.chars() {
        if matches!(c, '.' | '\\' | '$') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The segments of a path as written (escapes kept), and each one unescaped; `None` for a
/// path that is not well formed.
fn split_path(path: &str) -> Option<Vec<(String, String)>> {
    let mut segments = Vec::new();
    let (mut raw, mut key) = (String::new(), String::new());
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let escaped = chars.next()?;
                raw.push(c);
                raw.push(escaped);
                key.push(escaped);
            }
            '.' => segments.push((std::mem::take(&mut raw), std::mem::take(&mut key))),
            c => {
                raw.push(c);
                key.push(c);
            }
        }
    }
    segments.push((raw, key));
    Some(segments)
}

/// Prints a query in the text form ([`parse`] gives it back; the cursor is left out).
pub(crate) fn to_text(query: &Query) -> String {
    let mut parts = Vec::new();
    if let Some(filter) = &query.filter {
        parts.push(filter_text(filter, true));
    }
    if !query.order.is_empty() {
        let keys: Vec<String> = query
            .order
            .iter()
            .map(|o| {
                format!(
                    "{}{}",
                    field_text(&o.field),
                    if o.descending { " DESC" } else { "" }
                )
            })
            .collect();
        parts.push(format!("ORDER BY {}", keys.join(", ")));
    }
    if let Some(limit) = query.limit {
        parts.push(format!("LIMIT {limit}"));
    }
    parts.join(" ")
}

fn filter_text(filter: &Filter, top: bool) -> String {
    let value = |v: &Value| serde_json::to_string(v).expect("JSON values print");
    let list = |name: &str, items: &[Filter]| {
        let inner: Vec<String> = items.iter().map(|f| filter_text(f, true)).collect();
        format!("{name}({})", inner.join(", "))
    };
    let chain = |items: &[Filter], joiner: &str| {
        let inner: Vec<String> = items.iter().map(|f| filter_text(f, false)).collect();
        let text = inner.join(joiner);
        if top { text } else { format!("({text})") }
    };
    match filter {
        Filter::And(items) if items.len() >= 2 => chain(items, " AND "),
        Filter::Or(items) if items.len() >= 2 => chain(items, " OR "),
        Filter::And(items) => list("ALL", items),
        Filter::Or(items) => list("ANY", items),
        Filter::Not(inner) => format!("NOT {}", filter_text(inner, false)),
        Filter::Eq(f, v) => format!("{} = {}", field_text(f), value(v)),
        Filter::Ne(f, v) => format!("{} != {}", field_text(f), value(v)),
        Filter::Lt(f, v) => format!("{} < {}", field_text(f), value(v)),
        Filter::Lte(f, v) => format!("{} <= {}", field_text(f), value(v)),
        Filter::Gt(f, v) => format!("{} > {}", field_text(f), value(v)),
        Filter::Gte(f, v) => format!("{} >= {}", field_text(f), value(v)),
        Filter::In(f, vs) => format!("{} IN {}", field_text(f), value(&Value::Array(vs.clone()))),
        Filter::Exists(f) => format!("EXISTS {}", field_text(f)),
        Filter::Prefix(f, p) => format!(
            "{} PREFIX {}",
            field_text(f),
            value(&Value::from(p.as_str()))
        ),
        Filter::Contains(f, v) => format!("{} CONTAINS {}", field_text(f), value(v)),
        // No text parses as this, as no query compiles with it.
        Filter::Unserializable { field, message } => {
            format!(
                "<value for {} that does not serialize: {message}>",
                field_text(field)
            )
        }
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '$' | '.' | '\\' | '-')
}

fn is_keyword(word: &str) -> bool {
    KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(word))
}

fn field_text(field: &str) -> String {
    if !field.is_empty() && field.chars().all(is_word_char) && !is_keyword(field) {
        return field.to_owned();
    }
    let quote = |key: &str| format!("`{}`", key.replace('`', "``"));
    match split_path(field) {
        Some(segments) if !field.starts_with('$') => segments
            .iter()
            .map(|(raw, key)| {
                // A lone segment gets here only when it needs quoting (e.g. a keyword).
                if segments.len() > 1 && !raw.is_empty() && raw.chars().all(is_word_char) {
                    raw.clone()
                } else {
                    quote(key)
                }
            })
            .collect::<Vec<_>>()
            .join("."),
        // Not a well-formed data path: quoting it whole keeps its text visible.
        _ => quote(field),
    }
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
    /// How many parentheses, `NOT`s, `ALL(`s and `ANY(`s enclose the current position. The
    /// parser recurses once per level, so the level is checked against [`MAX_FILTER_DEPTH`]
    /// before each step down: no text, however deep, can exhaust the stack.
    depth: usize,
}

impl<'a> Parser<'a> {
    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn at_end(&self) -> bool {
        self.pos == self.text.len()
    }

    fn error(&self, message: impl Into<String>) -> ParseError {
        let before = &self.text[..self.pos];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        ParseError {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
            message: message.into(),
        }
    }

    fn skip_ws(&mut self) {
        let trimmed = self.rest().trim_start();
        self.pos = self.text.len() - trimmed.len();
    }

    /// The bare word at the current position (after white space), without consuming it.
    fn peek_word(&mut self) -> &str {
        self.skip_ws();
        let end = self
            .rest()
            .find(|c: char| !is_word_char(c))
            .unwrap_or(self.rest().len());
        &self.rest()[..end]
    }

    fn at_keyword(&mut self, keyword: &str) -> bool {
        self.peek_word().eq_ignore_ascii_case(keyword)
    }

    fn eat_keyword(&mut self, keyword: &str) -> bool {
        if self.at_keyword(keyword) {
            self.pos += keyword.len();
            true
        } else {
            false
        }
    }

    fn expect_keyword(&mut self, keyword: &str) -> Result<(), ParseError> {
        if self.eat_keyword(keyword) {
            Ok(())
        } else {
            Err(self.error(format!("expected {}", keyword.to_uppercase())))
        }
    }

    fn eat_symbol(&mut self, symbol: &str) -> bool {
        self.skip_ws();
        if self.rest().starts_with(symbol) {
            self.pos += symbol.len();
            true
        } else {
            false
        }
    }

    fn expect_symbol(&mut self, symbol: &str) -> Result<(), ParseError> {
        if self.eat_symbol(symbol) {
            Ok(())
        } else {
            Err(self.error(format!("expected {symbol:?}")))
        }
    }

    fn or(&mut self) -> Result<Filter, ParseError> {
        let mut items = vec![self.and()?];
        while self.eat_keyword("or") {
            items.push(self.and()?);
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Filter::Or(items)
        })
    }

    fn and(&mut self) -> Result<Filter, ParseError> {
        let mut items = vec![self.unary()?];
        while self.eat_keyword("and") {
            items.push(self.unary()?);
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Filter::And(items)
        })
    }

    /// `NOT`s are counted in a loop rather than by recursion, and each counts as a level.
    fn unary(&mut self) -> Result<Filter, ParseError> {
        let outer = self.depth;
        let mut nots = 0;
        while self.at_keyword("not") {
            self.descend()?;
            self.pos += "not".len();
            nots += 1;
        }
        let mut filter = self.primary();
        self.depth = outer;
        for _ in 0..nots {
            filter = filter.map(|inner| Filter::Not(Box::new(inner)));
        }
        filter
    }

    /// Goes one level deeper, or says the text is nested too deep (at the token that would
    /// open the level, before anything below it is read).
    fn descend(&mut self) -> Result<(), ParseError> {
        self.skip_ws();
        if self.depth >= MAX_FILTER_DEPTH {
            return Err(self.error(format!(
                "the filter is nested more than {MAX_FILTER_DEPTH} levels deep (parentheses, \
                 NOT, ALL and ANY each open a level)"
            )));
        }
        self.depth += 1;
        Ok(())
    }

    /// Parses what `inner` reads one level deeper.
    fn nested<T>(
        &mut self,
        inner: impl FnOnce(&mut Self) -> Result<T, ParseError>,
    ) -> Result<T, ParseError> {
        self.descend()?;
        let result = inner(self);
        self.depth -= 1;
        result
    }

    fn primary(&mut self) -> Result<Filter, ParseError> {
        self.skip_ws();
        if self.rest().starts_with('(') {
            return self.nested(|parser| {
                parser.pos += 1;
                let inner = parser.or()?;
                parser.expect_symbol(")")?;
                Ok(inner)
            });
        }
        for (keyword, all) in [("all", true), ("any", false)] {
            if self.at_keyword(keyword) {
                let items = self.nested(|parser| {
                    parser.pos += keyword.len();
                    parser.filter_list()
                })?;
                return Ok(if all {
                    Filter::And(items)
                } else {
                    Filter::Or(items)
                });
            }
        }
        if self.eat_keyword("exists") {
            return Ok(Filter::Exists(self.field()?));
        }
        let field = self.field()?;
        self.skip_ws();
        for (symbol, make) in [
            ("!=", Filter::Ne as fn(String, Value) -> Filter),
            ("<=", Filter::Lte),
            (">=", Filter::Gte),
            ("=", Filter::Eq),
            ("<", Filter::Lt),
            (">", Filter::Gt),
        ] {
            if self.eat_symbol(symbol) {
                return Ok(make(field, self.value()?));
            }
        }
        if self.eat_keyword("in") {
            let start = self.clone_pos();
            return match self.value()? {
                Value::Array(items) => Ok(Filter::In(field, items)),
                _ => Err(start.error("IN takes a JSON array, e.g. [1, \"two\"]")),
            };
        }
        if self.eat_keyword("prefix") {
            let start = self.clone_pos();
            return match self.value()? {
                Value::String(prefix) => Ok(Filter::Prefix(field, prefix)),
                _ => Err(start.error("PREFIX takes a JSON string, e.g. \"abc\"")),
            };
        }
        if self.eat_keyword("contains") {
            return Ok(Filter::Contains(field, self.value()?));
        }
        Err(self.error("expected an operator (= != < <= > >= IN PREFIX CONTAINS)"))
    }

    fn clone_pos(&mut self) -> Parser<'a> {
        self.skip_ws();
        Parser {
            text: self.text,
            pos: self.pos,
            depth: self.depth,
        }
    }

    fn filter_list(&mut self) -> Result<Vec<Filter>, ParseError> {
        self.expect_symbol("(")?;
        let mut items = Vec::new();
        if self.eat_symbol(")") {
            return Ok(items);
        }
        loop {
            items.push(self.or()?);
            if self.eat_symbol(")") {
                return Ok(items);
            }
            self.expect_symbol(",")?;
        }
    }

    /// A field: bare path text and backquoted literal keys, written next to each other.
    fn field(&mut self) -> Result<String, ParseError> {
        self.skip_ws();
        let start = self.clone_pos();
        let mut field = String::new();
        let mut quoted_any = false;
        loop {
            if let Some(quoted) = self.rest().strip_prefix('`') {
                let mut key = String::new();
                let mut end = None;
                let mut chars = quoted.char_indices();
                while let Some((i, c)) = chars.next() {
                    if c == '`' {
                        if quoted[i + 1..].starts_with('`') {
                            key.push('`');
                            chars.next();
                        } else {
                            end = Some(i);
                            break;
                        }
                    } else {
                        key.push(c);
                    }
                }
                let Some(end) = end else {
                    return Err(self.error("unclosed backquote"));
                };
                self.pos += 1 + end + 1;
                field.push_str(&escape_key(&key));
                quoted_any = true;
            } else {
                let rest = self.rest();
                let end = rest.find(|c: char| !is_word_char(c)).unwrap_or(rest.len());
                if end == 0 {
                    break;
                }
                field.push_str(&rest[..end]);
                self.pos += end;
            }
        }
        if field.is_empty() && !quoted_any {
            return Err(start.error("expected a field"));
        }
        if !quoted_any && is_keyword(&field) {
            return Err(start.error(format!(
                "expected a field, found the keyword {field:?} (write `{field}` for a field of that name)"
            )));
        }
        // A path that would not compile (an unknown escape, an empty part, an unknown `$`
        // name) is refused here, where its column is known; the text form of a query never
        // holds one, so printing a query and reading it back keeps its meaning.
        if let Err(err) = crate::query::FieldPath::parse(&field) {
            let why = match err {
                crate::Error::InvalidArgument(why) => why,
                other => other.to_string(),
            };
            return Err(start.error(why));
        }
        Ok(field)
    }

    fn value(&mut self) -> Result<Value, ParseError> {
        self.skip_ws();
        if self.at_end() {
            return Err(self.error("expected a JSON value"));
        }
        let mut values = serde_json::Deserializer::from_str(self.rest()).into_iter::<Value>();
        let first = values.next();
        let end = values.byte_offset();
        // The stream reader refuses a number or literal followed by `)`; the value itself
        // ends at `end`, so read just that part.
        let value = match first {
            Some(Ok(value)) => Some(value),
            Some(Err(_)) if end > 0 => serde_json::from_str(&self.rest()[..end]).ok(),
            _ => None,
        };
        match value {
            Some(value) => {
                if let Err(err) = crate::json::check(&self.rest()[..end], usize::MAX) {
                    return Err(self.error(err.message));
                }
                self.pos += end;
                Ok(value)
            }
            None => Err(self.error(
                "expected a JSON value (\"text\", 12, 1.5, true, false, null, [...] or {...})",
            )),
        }
    }

    fn integer(&mut self) -> Result<usize, ParseError> {
        let word = self.peek_word().to_owned();
        match word.parse::<usize>() {
            Ok(n) if word.chars().all(|c| c.is_ascii_digit()) => {
                self.pos += word.len();
                Ok(n)
            }
            _ if !word.is_empty() && word.chars().all(|c| c.is_ascii_digit()) => {
                Err(self.error(format!(
                    "LIMIT {word} is too large: a page holds at most {} documents (leave LIMIT \
                     out to get every match)",
                    usize::MAX
                )))
            }
            _ => Err(self.error("expected a whole number")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::TestCaseError;
    use serde_json::json;

    fn err(text: &str) -> (usize, String) {
        let e = parse(text).unwrap_err();
        (e.column, e.message)
    }

    #[test]
    fn every_operator_parses() {
        let cases = [
            ("a = 1", Filter::eq("a", 1)),
            ("a != \"x\"", Filter::ne("a", "x")),
            ("a < 1.5", Filter::lt("a", 1.5)),
            ("a <= -2", Filter::lte("a", -2)),
            ("a > true", Filter::gt("a", true)),
            ("a >= null", Filter::gte("a", Value::Null)),
            (
                "a IN [1, \"b\", null]",
                Filter::is_in("a", [json!(1), json!("b"), Value::Null]),
            ),
            ("EXISTS a.b", Filter::exists("a.b")),
            ("a PREFIX \"pre\"", Filter::prefix("a", "pre")),
            (
                "tags CONTAINS {\"k\": [1]}",
                Filter::contains("tags", json!({"k": [1]})),
            ),
            ("NOT a = 1", !Filter::eq("a", 1)),
            ("ALL()", Filter::all([])),
            ("ANY()", Filter::any([])),
            ("ALL(a = 1)", Filter::all([Filter::eq("a", 1)])),
            (
                "a = 1 and b = 2 or c = 3",
                Filter::eq("a", 1)
                    .and(Filter::eq("b", 2))
                    .or(Filter::eq("c", 3)),
            ),
            (
                "a = 1 and (b = 2 or c = 3)",
                Filter::eq("a", 1).and(Filter::eq("b", 2).or(Filter::eq("c", 3))),
            ),
            ("`odd name` = 1", Filter::eq("odd name", 1)),
            ("`a.b` = 1", Filter::eq(r"a\.b", 1)),
            ("`$id` = 1", Filter::eq(r"\$id", 1)),
            (r"`a\b` = 1", Filter::eq(r"a\\b", 1)),
            ("address.`zip code` = 1", Filter::eq("address.zip code", 1)),
            ("`x.y`.z = 1", Filter::eq(r"x\.y.z", 1)),
            ("`a``b` = 1", Filter::eq("a`b", 1)),
            ("`order` = 1", Filter::eq("order", 1)),
            (r"a\.b = 1", Filter::eq(r"a\.b", 1)),
            ("$updated_at > 5", Filter::gt("$updated_at", 5)),
            ("n = 18446744073709551615", Filter::eq("n", u64::MAX)),
            ("n=1", Filter::eq("n", 1)),
        ];
        for (text, filter) in cases {
            assert_eq!(parse(text).unwrap(), Query::new().filter(filter), "{text}");
        }
        assert_eq!(
            parse("order by a, b desc, c asc limit 5").unwrap(),
            Query::new()
                .order_by("a")
                .order_by_desc("b")
                .order_by("c")
                .limit(5)
        );
        assert_eq!(parse("  ").unwrap(), Query::new());
        assert_eq!(parse("LIMIT 3").unwrap(), Query::new().limit(3));
    }

    #[test]
    fn errors_point_at_the_column() {
        assert_eq!(err("a = ").0, 5);
        assert_eq!(err("a").0, 2);
        assert!(err("a").1.contains("operator"));
        assert_eq!(err("a = 1 b = 2").0, 7);
        assert_eq!(err("(a = 1").0, 7);
        assert_eq!(err("a IN 5").0, 6);
        assert!(err("a IN 5").1.contains("array"));
        assert_eq!(err("a PREFIX 5").0, 10);
        assert_eq!(err("order = 1"), (7, "expected BY".to_string()));
        assert!(err("and = 1").1.contains("keyword"));
        assert_eq!(err("order a").0, 7);
        assert_eq!(err("limit x").0, 7);
        assert_eq!(err("limit -1").0, 7);
        assert_eq!(err("é = {bad").0, 5);
        assert_eq!(err("`open").0, 1);
        assert_eq!(err("ALL(a = 1 b)").0, 11);
        assert_eq!(err("= 1").0, 1);
        assert!(err("n = 18446744073709551616").1.contains("exactly"));
        assert!(err("n IN [1e-400]").1.contains("too small"));
        // Paths that would not compile: an unknown escape (a backslash before a backquoted
        // part), an empty part, an unknown system field.
        assert_eq!(err("\\`>` > 9").0, 1);
        assert_eq!(err("a..b = 1").0, 1);
        assert_eq!(err("x = 1 and $nope = 1").0, 11);
        let huge = parse("limit 99999999999999999999").unwrap_err();
        assert_eq!(huge.column, 7);
        assert!(huge.message.contains("too large"), "{}", huge.message);
    }

    #[test]
    fn errors_count_columns_within_their_line() {
        let e = parse("status = \"open\"\n  and priority >=\n  order by x").unwrap_err();
        assert_eq!((e.line, e.column), (3, 3), "{e}");
        assert_eq!(e.to_string(), format!("line 3, column 3: {}", e.message));
        let e = parse("a = 1 and\n`open").unwrap_err();
        assert_eq!((e.line, e.column), (2, 1));
    }

    #[test]
    fn literal_keys_print_in_backquotes() {
        for field in [
            r"a\.b",
            r"x\.y.z",
            "odd name",
            "address.zip code",
            r"\$id",
            "order",
        ] {
            let query = Query::new().filter(Filter::exists(field));
            assert_eq!(
                parse(&to_text(&query)).unwrap(),
                query,
                "{}",
                to_text(&query)
            );
        }
        assert_eq!(field_text("address.zip code"), "address.`zip code`");
        assert_eq!(field_text(r"a\.b"), r"a\.b");
    }

    /// Runs `parse` on a thread with a tokio worker's stack (2 MiB, a quarter of the main
    /// thread's), where a parser that recursed once per level of hostile text overflowed at
    /// about 2 000 levels (8 000 on the main thread).
    fn parse_on_a_small_stack(text: String) -> Result<Query, ParseError> {
        std::thread::Builder::new()
            .name("parse on a tokio worker's stack".into())
            .stack_size(2 * 1024 * 1024)
            .spawn(move || parse(&text))
            .expect("thread starts")
            .join()
            .expect("the parser does not panic")
    }

    #[test]
    fn nesting_beyond_the_limit_is_an_error_at_the_level_that_exceeds_it() {
        let parens = |n: usize| format!("{}exists a{}", "(".repeat(n), ")".repeat(n));
        let nots = |n: usize| format!("{}exists a", "not ".repeat(n));
        let alls = |n: usize| format!("{}exists a{}", "all(".repeat(n), ")".repeat(n));
        let mixed = |n: usize| format!("{}exists a{}", "not (any(".repeat(n), "))".repeat(n));
        for text in [parens(20_000), nots(100_000), alls(20_000), mixed(20_000)] {
            let err = parse_on_a_small_stack(text.clone()).unwrap_err();
            assert!(err.message.contains("nested more than 64"), "{err}");
            assert!(err.column <= 4 * 65, "{err}");
        }
        assert_eq!(parse(&parens(65)).unwrap_err().column, 65);
        assert_eq!(parse(&nots(65)).unwrap_err().column, 4 * 64 + 1);
        for text in [parens(64), nots(63), alls(64), mixed(21)] {
            let query = parse_on_a_small_stack(text.clone()).unwrap();
            assert!(query.filter.is_some(), "{text}");
        }
        // A filter at the evaluator's limit prints as text that parses back.
        let mut deepest = Filter::exists("a");
        for _ in 1..MAX_FILTER_DEPTH {
            deepest = !deepest;
        }
        let query = Query::new().filter(deepest);
        assert!(query.compile().is_ok());
        assert_eq!(parse(&to_text(&query)).unwrap(), query);
    }

    #[test]
    fn text_longer_than_the_limit_is_refused_before_it_is_read() {
        let long = format!("a IN [{}1]", "1, ".repeat(MAX_QUERY_TEXT_BYTES / 3));
        let err = parse(&long).unwrap_err();
        assert_eq!((err.line, err.column), (1, 1));
        assert!(err.message.contains("bytes long"), "{err}");
        let fits = format!("a IN [{}1]", "1,".repeat((MAX_QUERY_TEXT_BYTES - 16) / 2));
        assert!(parse(&fits).is_ok());
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn printing_then_parsing_gives_the_query_back(query in crate::strategies::query()) {
            let text = to_text(&query);
            let parsed = parse(&text).map_err(|e| TestCaseError::fail(format!("{e} in {text}")))?;
            prop_assert_eq!(parsed, query, "{}", text);
        }
    }
}
