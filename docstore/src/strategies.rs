//! Proptest strategies for documents, merge patches and queries (feature `proptest`).
//!
//! They are the ones the conformance suite uses, public so an application can run its own
//! property tests on top of docstore. Values are drawn from small pools of keys, strings and
//! numbers so that random filters hit random documents often, and they include the awkward
//! cases: integers beyond 2^53, `u64::MAX`, `i64::MIN`, floats equal to integers, nulls,
//! nested objects, arrays, keys with dots and dollars.
//!
//! ```
//! use proptest::strategy::{Strategy, ValueTree};
//! use proptest::test_runner::TestRunner;
//!
//! let mut runner = TestRunner::deterministic();
//! let data = docstore::strategies::data().new_tree(&mut runner).unwrap().current();
//! assert!(data.len() <= 6);
//! ```

use crate::Data;
use crate::query::{Filter, Order, Query};
use proptest::prelude::*;
use serde_json::{Map, Number, Value};

/// Data keys the strategies use; `a.b` contains a dot and `$x` a dollar.
pub const KEYS: [&str; 6] = ["a", "b", "n", "s", "a.b", "$x"];

/// Field paths the strategies query: data paths (nested, escaped, missing) and system fields.
pub const PATHS: [&str; 14] = [
    "a",
    "b",
    "n",
    "s",
    r"a\.b",
    r"\$x",
    "a.n",
    "a.s",
    "b.a",
    "missing",
    "$id",
    "$version",
    "$created_at",
    "$updated_by",
];

/// A number: small integers, floats equal to them, and the extremes.
pub fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (-3i64..4).prop_map(Value::from),
        2 => (-3i64..4).prop_map(|i| Value::from(i as f64)),
        1 => Just(Value::from(0.5)),
        1 => Just(Value::from(-2.5)),
        1 => Just(Value::from(u64::MAX)),
        1 => Just(Value::from(i64::MIN)),
        1 => Just(Value::from(9_007_199_254_740_993u64)),
        1 => Just(Value::from(9_007_199_254_740_992u64)),
        1 => Just(Value::Number(Number::from_f64(9_007_199_254_740_992.0).unwrap())),
        1 => Just(Value::from(5e-324)),
        1 => Just(Value::from(1.7976931348623157e308)),
    ]
}

/// A short string from a small pool (including empty, unicode and quote characters).
pub fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("a".to_owned()),
        Just("ab".to_owned()),
        Just("b".to_owned()),
        Just("B".to_owned()),
        Just("é".to_owned()),
        Just("😀".to_owned()),
        Just("it's \"q\"".to_owned()),
        Just("1".to_owned()),
    ]
}

/// A scalar JSON value.
pub fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        4 => number(),
        3 => string().prop_map(Value::String),
    ]
}

/// Any JSON value, nested at most `depth` levels.
pub fn value(depth: u32) -> BoxedStrategy<Value> {
    scalar()
        .prop_recursive(depth, 16, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::btree_map(key(), inner, 0..3)
                    .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
            ]
        })
        .boxed()
}

/// A data key from [`KEYS`].
pub fn key() -> impl Strategy<Value = String> {
    prop::sample::select(&KEYS[..]).prop_map(str::to_owned)
}

/// Document data: up to six keys from [`KEYS`], values nested up to two levels.
pub fn data() -> impl Strategy<Value = Data> {
    prop::collection::btree_map(key(), value(2), 0..6).prop_map(|m| m.into_iter().collect())
}

/// A merge patch: like [`data`], with `null`s that remove keys.
pub fn patch() -> impl Strategy<Value = Data> {
    let entry = prop_oneof![1 => Just(Value::Null), 3 => value(2)];
    prop::collection::btree_map(key(), entry, 0..4).prop_map(|m| m.into_iter().collect())
}

/// A field path from [`PATHS`].
pub fn path() -> impl Strategy<Value = String> {
    prop::sample::select(&PATHS[..]).prop_map(str::to_owned)
}

/// A comparison value: a scalar, sometimes an array or object.
fn operand() -> impl Strategy<Value = Value> {
    prop_oneof![6 => scalar(), 1 => value(1)]
}

/// A filter over [`PATHS`], every operator, nested up to `depth` levels.
pub fn filter(depth: u32) -> BoxedStrategy<Filter> {
    let leaf = prop_oneof![
        (path(), operand()).prop_map(|(f, v)| Filter::Eq(f, v)),
        (path(), operand()).prop_map(|(f, v)| Filter::Ne(f, v)),
        (path(), operand()).prop_map(|(f, v)| Filter::Lt(f, v)),
        (path(), operand()).prop_map(|(f, v)| Filter::Lte(f, v)),
        (path(), operand()).prop_map(|(f, v)| Filter::Gt(f, v)),
        (path(), operand()).prop_map(|(f, v)| Filter::Gte(f, v)),
        (path(), prop::collection::vec(scalar(), 0..3)).prop_map(|(f, v)| Filter::In(f, v)),
        path().prop_map(Filter::Exists),
        (path(), string()).prop_map(|(f, p)| Filter::Prefix(f, p)),
        (path(), scalar()).prop_map(|(f, v)| Filter::Contains(f, v)),
    ];
    leaf.prop_recursive(depth, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Filter::And),
            prop::collection::vec(inner.clone(), 0..3).prop_map(Filter::Or),
            inner.prop_map(|f| Filter::Not(Box::new(f))),
        ]
    })
    .boxed()
}

/// Up to three sort keys over [`PATHS`], either direction.
pub fn order() -> impl Strategy<Value = Vec<Order>> {
    prop::collection::vec(
        (path(), any::<bool>()).prop_map(|(field, descending)| Order { field, descending }),
        0..3,
    )
}

/// A query without a cursor: maybe a filter, maybe an order, maybe a limit (1–5).
pub fn query() -> impl Strategy<Value = Query> {
    (
        prop::option::of(filter(3)),
        order(),
        prop::option::of(1usize..6),
    )
        .prop_map(|(filter, order, limit)| Query {
            filter,
            order,
            limit,
            cursor: None,
            consistent: false,
        })
}

/// Query text near the grammar of [`Query::parse`]: words, operators, paths, values and
/// brackets of the language in random order, so that most of it almost parses.
pub fn query_text() -> impl Strategy<Value = String> {
    const WORDS: [&str; 40] = [
        "a",
        "a.b",
        r"a\.b",
        "`odd name`",
        "`a``b`",
        "$id",
        "$updated_at",
        "$x",
        "=",
        "!=",
        "<",
        "<=",
        ">",
        ">=",
        "and",
        "OR",
        "not",
        "exists",
        "in",
        "prefix",
        "contains",
        "all(",
        "any(",
        "(",
        ")",
        "[",
        "]",
        ",",
        "order by",
        "asc",
        "desc",
        "limit",
        "1",
        "-2.5e3",
        "18446744073709551616",
        "\"s\"",
        "\"é\\u00e9\"",
        "null",
        "{\"k\": [1]}",
        "\n",
    ];
    prop::collection::vec(prop::sample::select(&WORDS[..]), 0..24).prop_map(|words| words.join(" "))
}

/// A filter nested far deeper than [`MAX_FILTER_DEPTH`](crate::query::MAX_FILTER_DEPTH) (up to
/// 20 000 levels) in one of the grammar's nestings: parentheses, `NOT`, `ALL(`, `ANY(`, or
/// all of them in turn; closed or left open.
pub fn deep_query_text() -> impl Strategy<Value = String> {
    const OPENERS: [&str; 5] = ["(", "not ", "all(", "any(", "(not all(any("];
    (
        prop::sample::select(&OPENERS[..]),
        prop_oneof![1usize..200, 200usize..20_000],
        any::<bool>(),
    )
        .prop_map(|(opener, levels, closed)| {
            let closer: String = opener.chars().filter(|c| *c == '(').map(|_| ')').collect();
            let mut text = opener.repeat(levels);
            text.push_str("exists a");
            if closed {
                text.push_str(&closer.repeat(levels));
            }
            text
        })
}

/// Query cursor text: the encoding of an arbitrary position, sometimes cut short or with one
/// character changed, and sometimes base64 of arbitrary JSON.
pub fn cursor_text() -> impl Strategy<Value = String> {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let position = (
        "[0-9a-f]{0,16}",
        prop::collection::vec(prop::option::of(value(3)), 0..4),
        ".{0,8}",
    )
        .prop_map(|(fingerprint, keys, id)| {
            crate::query::CursorPosition {
                fingerprint,
                keys,
                id,
            }
            .encode()
            .as_str()
            .to_owned()
        });
    let json = value(4).prop_map(|value| URL_SAFE_NO_PAD.encode(value.to_string()));
    (
        prop_oneof![3 => position, 1 => json],
        any::<usize>(),
        0u8..4,
        any::<char>(),
    )
        .prop_map(|(text, at, change, c)| mutate(text, at, change, c))
}

/// Change feed cursor text in each backend's format (memory, SQLite, DynamoDB), sometimes
/// cut short or with one character changed.
pub fn change_cursor_text() -> impl Strategy<Value = String> {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let memory = (any::<u64>(), any::<u64>()).prop_map(|(i, p)| format!("memory:{i:016x}.{p}"));
    let sqlite = ("[a-z0-9-]{0,12}", any::<u64>()).prop_map(|(f, p)| format!("sqlite:{f}.{p}"));
    let shard = (
        "[a-zA-Z0-9-]{0,6}",
        prop_oneof![Just("-".to_owned()), Just("*".to_owned()), "[0-9]{19,42}"],
    )
        .prop_map(|(id, position)| format!("{id} {position}\n"));
    let dynamodb = (
        prop_oneof![Just("1".to_owned()), "[0-9]{0,2}"],
        ".{0,12}",
        prop::collection::vec(shard, 0..4),
    )
        .prop_map(|(version, arn, shards)| {
            let text = format!("{version}\n{arn}\n{}", shards.concat());
            format!("dynamodb:{}", URL_SAFE_NO_PAD.encode(text))
        });
    (
        prop_oneof![memory, sqlite, dynamodb, ".{0,12}"],
        any::<usize>(),
        0u8..4,
        any::<char>(),
    )
        .prop_map(|(text, at, change, c)| mutate(text, at, change, c))
}

/// `text` as it is (`change` 0 or 1), cut at a character boundary near `at` (2), or with the
/// character there replaced by `c` (3).
fn mutate(text: String, at: usize, change: u8, c: char) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() || change < 2 {
        return text;
    }
    let at = at % chars.len();
    match change {
        2 => chars[..at].iter().collect(),
        _ => chars
            .iter()
            .enumerate()
            .map(|(i, &old)| if i == at { c } else { old })
            .collect(),
    }
}
