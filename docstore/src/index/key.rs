//! The order-preserving key encoding: values as bytes whose byte order (`memcmp`, as SQLite
//! compares BLOBs and DynamoDB binary sort keys) is exactly the reference total order of
//! [`compare_values`](crate::query::compare_values).
//!
//! Layout, one tag byte per value then its body:
//! - missing `00`, null `01`, false `02`, true `03` (no body);
//! - number `04`: the largest `f64` not above the exact value, as order-preserving bits (8
//!   bytes), then the integer remainder (2 bytes; non-zero only for integers beyond 2^53,
//!   whose distance to that float is below 2^11 for anything in `i64`/`u64`). Numbers are
//!   normalized: `1`, `1.0` and `-0.0`/`0` encode to the same bytes, as they compare equal;
//! - string `05`: the UTF-8 bytes with `00` written `00 FF`, then `00 00`;
//! - array `06`: each element's encoding, then `00` (below every tag, so a proper prefix
//!   sorts first);
//! - object `07`: its canonical JSON text (keys sorted) like a string.
//!
//! Every encoding is prefix-free: two different encodings differ at a byte both have. So
//! element-wise array comparison never runs into the next element, a *descending* component
//! is the ascending encoding with every byte inverted (`!b`, which reverses the order of
//! prefix-free codes), and a *composite* key — one component per indexed field, then the
//! document id as an ascending string — orders by its first component, then its second, and
//! so on.
//!
//! Equal encodings mean [`compare_values`](crate::query::compare_values) says equal. For
//! values holding no object that is also [`values_equal`](crate::query::values_equal)
//! equality; objects compare by their canonical text, so `{"a":1}` and `{"a":1.0}` — equal
//! for `Eq` — encode differently (the planner never uses an object for key equality).
//!
//! ```
//! use docstore::index::key::{encode, encode_descending};
//! use serde_json::json;
//!
//! assert!(encode(Some(&json!(2))) < encode(Some(&json!(10))));
//! assert_eq!(encode(Some(&json!(1))), encode(Some(&json!(1.0))));
//! assert!(encode(None) < encode(Some(&json!(null))));
//! assert!(encode_descending(Some(&json!(2))) > encode_descending(Some(&json!(10))));
//! ```

use crate::query::canonical_json;
use serde_json::{Number, Value};

/// Tag of a missing value (and the end of an array).
pub const TAG_MISSING: u8 = 0x00;
/// Tag of `null`.
pub const TAG_NULL: u8 = 0x01;
/// Tag of `false`.
pub const TAG_FALSE: u8 = 0x02;
/// Tag of `true`.
pub const TAG_TRUE: u8 = 0x03;
/// Tag of a number.
pub const TAG_NUMBER: u8 = 0x04;
/// Tag of a string.
pub const TAG_STRING: u8 = 0x05;
/// Tag of an array.
pub const TAG_ARRAY: u8 = 0x06;
/// Tag of an object.
pub const TAG_OBJECT: u8 = 0x07;

/// The ascending encoding of a possibly missing value.
pub fn encode(value: Option<&Value>) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    push(value, false, &mut out);
    out
}

/// The descending encoding of a possibly missing value: [`encode`] with every byte inverted,
/// so byte order is the reverse of the total order (missing sorts last).
pub fn encode_descending(value: Option<&Value>) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    push(value, true, &mut out);
    out
}

/// Appends the encoding of `value` to `out`, inverted when `descending`.
pub fn push(value: Option<&Value>, descending: bool, out: &mut Vec<u8>) {
    let start = out.len();
    match value {
        None => out.push(TAG_MISSING),
        Some(value) => push_value(value, out),
    }
    if descending {
        invert(&mut out[start..]);
    }
}

/// The document id encoded by [`push_id`] at the start of `bytes` (the end of a composite
/// key); `None` when `bytes` do not start with one.
///
/// ```
/// let mut key = Vec::new();
/// docstore::index::key::push_id("a\0b", &mut key);
/// assert_eq!(docstore::index::key::decode_id(&key).as_deref(), Some("a\0b"));
/// ```
pub fn decode_id(bytes: &[u8]) -> Option<String> {
    let (&TAG_STRING, mut rest) = bytes.split_first()? else {
        return None;
    };
    let mut id = Vec::with_capacity(rest.len());
    loop {
        match rest {
            [0x00, 0x00, ..] => return String::from_utf8(id).ok(),
            [0x00, 0xFF, tail @ ..] => {
                id.push(0x00);
                rest = tail;
            }
            [b, tail @ ..] if *b != 0x00 => {
                id.push(*b);
                rest = tail;
            }
            _ => return None,
        }
    }
}

/// Appends the encoding of a document id: an ascending string (the last component of every
/// composite key).
pub fn push_id(id: &str, out: &mut Vec<u8>) {
    out.push(TAG_STRING);
    push_escaped(id.as_bytes(), out);
}

fn invert(bytes: &mut [u8]) {
    for b in bytes {
        *b = !*b;
    }
}

fn push_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.push(TAG_NULL),
        Value::Bool(false) => out.push(TAG_FALSE),
        Value::Bool(true) => out.push(TAG_TRUE),
        Value::Number(n) => {
            out.push(TAG_NUMBER);
            let (float, remainder) = split_number(n);
            out.extend_from_slice(&ordered_bits(float).to_be_bytes());
            out.extend_from_slice(&remainder.to_be_bytes());
        }
        Value::String(s) => {
            out.push(TAG_STRING);
            push_escaped(s.as_bytes(), out);
        }
        Value::Array(items) => {
            out.push(TAG_ARRAY);
            for item in items {
                push_value(item, out);
            }
            out.push(TAG_MISSING);
        }
        Value::Object(_) => {
            out.push(TAG_OBJECT);
            push_escaped(canonical_json(value).as_bytes(), out);
        }
    }
}

/// `(f, d)` with `f` the largest float not above the number's exact value and `d` the exact
/// integer distance from `f` to the value.
fn split_number(n: &Number) -> (f64, u16) {
    let int = if let Some(u) = n.as_u64() {
        i128::from(u)
    } else if let Some(i) = n.as_i64() {
        i128::from(i)
    } else {
        let float = n.as_f64().unwrap_or(0.0);
        // -0.0 equals 0.
        return (if float == 0.0 { 0.0 } else { float }, 0);
    };
    // Rounds to nearest; step down when that rounded up. Every i64/u64 is within f64 range,
    // and the floats used here are integral and below 2^64, so `as i128` is exact.
    let mut float = int as f64;
    if float as i128 > int {
        float = float.next_down();
    }
    let remainder = int - float as i128;
    (
        float,
        u16::try_from(remainder).expect("below 2^11 for 64-bit integers"),
    )
}

/// The bits of a float, flipped so that unsigned comparison is numeric comparison.
fn ordered_bits(float: f64) -> u64 {
    let bits = float.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

fn push_escaped(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0x00, 0x00]);
}

/// The smallest byte string above every string that starts with `prefix`: the prefix with
/// its trailing `FF` bytes dropped and its last byte incremented; `None` when no such string
/// exists (empty or all `FF`: the range is unbounded above).
///
/// ```
/// use docstore::index::key::prefix_end;
///
/// assert_eq!(prefix_end(&[1, 2]), Some(vec![1, 3]));
/// assert_eq!(prefix_end(&[1, 0xFF]), Some(vec![2]));
/// assert_eq!(prefix_end(&[0xFF]), None);
/// ```
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The length of the first encoded component of `bytes` (ascending, or inverted when
/// `descending`); `None` when `bytes` does not start with a complete encoding.
pub fn component_len(bytes: &[u8], descending: bool) -> Option<usize> {
    let at = |i: usize| -> Option<u8> {
        let b = *bytes.get(i)?;
        Some(if descending { !b } else { b })
    };
    value_len(&at, 0)
}

fn value_len(at: &dyn Fn(usize) -> Option<u8>, start: usize) -> Option<usize> {
    let tag = at(start)?;
    Some(match tag {
        TAG_MISSING | TAG_NULL | TAG_FALSE | TAG_TRUE => 1,
        TAG_NUMBER => {
            at(start + 10)?;
            11
        }
        TAG_STRING | TAG_OBJECT => {
            let mut i = start + 1;
            loop {
                match (at(i)?, at(i + 1)?) {
                    (0x00, 0x00) => break i + 2 - start,
                    (0x00, _) => i += 2,
                    _ => i += 1,
                }
            }
        }
        TAG_ARRAY => {
            let mut i = start + 1;
            loop {
                if at(i)? == TAG_MISSING {
                    break i + 1 - start;
                }
                i += value_len(at, i)?;
            }
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::compare_values;
    use proptest::prelude::*;
    use serde_json::json;
    use std::cmp::Ordering;

    fn check(a: Option<&Value>, b: Option<&Value>) {
        assert_eq!(
            encode(a).cmp(&encode(b)),
            compare_values(a, b),
            "{a:?} vs {b:?}"
        );
        assert_eq!(
            encode_descending(a).cmp(&encode_descending(b)),
            compare_values(a, b).reverse(),
            "descending {a:?} vs {b:?}"
        );
        assert_eq!(component_len(&encode(a), false), Some(encode(a).len()));
        assert_eq!(
            component_len(&encode_descending(a), true),
            Some(encode(a).len())
        );
    }

    fn edge_values() -> Vec<Value> {
        vec![
            json!(i64::MIN),
            json!(-9_007_199_254_740_993i64),
            json!(-9_007_199_254_740_992.0),
            json!(-2.5),
            json!(-0.0),
            json!(0),
            json!(5e-324),
            json!(1),
            json!(1.0),
            json!(9_007_199_254_740_992u64),
            json!(9_007_199_254_740_992.0),
            json!(9_007_199_254_740_993u64),
            json!(i64::MAX),
            json!(9_223_372_036_854_775_808u64),
            json!(9.223372036854776e18),
            json!(u64::MAX - 1),
            json!(u64::MAX),
            json!(1.8446744073709552e19),
            json!(1.7976931348623157e308),
            json!(-1.7976931348623157e308),
            json!(""),
            json!("\u{0}"),
            json!("a"),
            json!("a\u{0}"),
            json!("a\u{0}b"),
            json!("ab"),
            json!("é"),
            json!("😀"),
            json!([]),
            json!([null]),
            json!([[]]),
            json!(["a"]),
            json!(["a", 1]),
            json!(["a\u{0}"]),
            json!([1, 2]),
            json!([1.0, 2]),
            json!({}),
            json!({"a": 1}),
            json!({"a": 1.0}),
            json!({"a": {"b": null}}),
            json!(null),
            json!(true),
            json!(false),
        ]
    }

    #[test]
    fn edge_numbers_and_strings() {
        let values = edge_values();
        for a in &values {
            check(None, Some(a));
            check(Some(a), None);
            for b in &values {
                check(Some(a), Some(b));
            }
        }
        check(None, None);
        assert_eq!(encode(Some(&json!(1))), encode(Some(&json!(1.0))));
        assert_eq!(encode(Some(&json!(0))), encode(Some(&json!(-0.0))));
        assert_ne!(encode(None), encode(Some(&Value::Null)));
        assert_eq!(
            encode(Some(&json!(i64::MIN))).cmp(&encode(Some(&json!(-9.3e18)))),
            Ordering::Greater
        );
    }

    #[test]
    fn prefix_end_bounds_every_extension() {
        for value in edge_values() {
            let bytes = encode(Some(&value));
            let end = prefix_end(&bytes).expect("tags are below FF");
            let mut longer = bytes.clone();
            longer.extend_from_slice(&[0xFF, 0xFF, 0xFF]);
            assert!(longer < end);
            assert!(bytes < end);
        }
    }

    fn big_number() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            (any::<i64>(), -3i64..4)
                .prop_map(|(i, d)| Value::from((i as f64 + d as f64).clamp(-9.2e18, 9.2e18))),
        ]
    }

    fn any_value() -> impl Strategy<Value = Option<Value>> {
        prop::option::of(crate::strategies::value(3))
    }

    proptest! {
        #[test]
        fn byte_order_is_the_total_order(a in any_value(), b in any_value()) {
            check(a.as_ref(), b.as_ref());
        }

        #[test]
        fn number_order_is_exact(a in big_number(), b in big_number()) {
            check(Some(&a), Some(&b));
            check(Some(&json!([a.clone(), 1])), Some(&json!([b.clone()])));
        }

        /// Composite keys (any directions, the id last) order as a query with the same
        /// sort keys orders documents: field by field, then `$id` ascending.
        #[test]
        fn composite_order_is_the_query_order(
            a in prop::collection::vec(any_value(), 3),
            b in prop::collection::vec(any_value(), 3),
            ids in (prop::sample::select(vec!["", "a", "a\u{0}", "b", "é"]),
                    prop::sample::select(vec!["", "a", "a\u{0}", "b", "é"])),
            directions in prop::collection::vec(any::<bool>(), 3),
        ) {
            let key = |values: &[Option<Value>], id: &str| {
                let mut out = Vec::new();
                for (value, descending) in values.iter().zip(&directions) {
                    push(value.as_ref(), *descending, &mut out);
                }
                push_id(id, &mut out);
                out
            };
            let mut expected = Ordering::Equal;
            for ((x, y), descending) in a.iter().zip(&b).zip(&directions) {
                let ordering = compare_values(x.as_ref(), y.as_ref());
                let ordering = if *descending { ordering.reverse() } else { ordering };
                if ordering != Ordering::Equal {
                    expected = ordering;
                    break;
                }
            }
            if expected == Ordering::Equal {
                expected = ids.0.cmp(ids.1);
            }
            prop_assert_eq!(key(&a, ids.0).cmp(&key(&b, ids.1)), expected);
        }
    }
}
