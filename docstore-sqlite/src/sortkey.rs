//! Sort keys as bytes: an encoding of values whose byte order (SQLite compares BLOBs with
//! `memcmp`) is exactly the reference total order of `docstore::query::compare_values`.
//!
//! Layout, one tag byte per value then its body:
//! - missing `00`, null `01`, false `02`, true `03` (no body);
//! - number `04`: the largest `f64` not above the exact value, as order-preserving bits (8
//!   bytes), then the integer remainder (2 bytes; non-zero only for integers beyond 2^53,
//!   whose distance to that float is below 2^11 for anything in `i64`/`u64`);
//! - string `05`: the UTF-8 bytes with `00` written `00 FF`, then `00 00`;
//! - array `06`: each element's encoding, then `00` (below every tag, so a proper prefix
//!   sorts first);
//! - object `07`: its canonical JSON text (keys sorted) like a string.
//!
//! Every encoding is prefix-free, so element-wise array comparison never runs into the next
//! element, and equal values (`1` and `1.0`) encode to equal bytes.

use docstore::query::canonical_json;
use serde_json::{Number, Value};

/// The sort key of a possibly missing value.
pub(crate) fn encode(value: Option<&Value>) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    match value {
        None => out.push(0x00),
        Some(value) => push_value(value, &mut out),
    }
    out
}

fn push_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.push(0x01),
        Value::Bool(false) => out.push(0x02),
        Value::Bool(true) => out.push(0x03),
        Value::Number(n) => {
            out.push(0x04);
            let (float, remainder) = split_number(n);
            out.extend_from_slice(&ordered_bits(float).to_be_bytes());
            out.extend_from_slice(&remainder.to_be_bytes());
        }
        Value::String(s) => {
            out.push(0x05);
            push_escaped(s.as_bytes(), out);
        }
        Value::Array(items) => {
            out.push(0x06);
            for item in items {
                push_value(item, out);
            }
            out.push(0x00);
        }
        Value::Object(_) => {
            out.push(0x07);
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

#[cfg(test)]
mod tests {
    use super::*;
    use docstore::query::compare_values;
    use proptest::prelude::*;
    use serde_json::json;
    use std::cmp::Ordering;

    fn check(a: Option<&Value>, b: Option<&Value>) {
        assert_eq!(
            encode(a).cmp(&encode(b)),
            compare_values(a, b),
            "{a:?} vs {b:?}"
        );
    }

    #[test]
    fn edge_numbers_and_strings() {
        let values = [
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
        ];
        for a in &values {
            check(None, Some(a));
            check(Some(a), None);
            for b in &values {
                check(Some(a), Some(b));
            }
        }
        check(None, None);
        assert_eq!(encode(Some(&json!(1))), encode(Some(&json!(1.0))));
        assert_eq!(
            encode(Some(&json!(i64::MIN))).cmp(&encode(Some(&json!(-9.3e18)))),
            Ordering::Greater
        );
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

    proptest! {
        #[test]
        fn byte_order_is_the_total_order(
            a in prop::option::of(docstore::strategies::value(3)),
            b in prop::option::of(docstore::strategies::value(3)),
        ) {
            check(a.as_ref(), b.as_ref());
        }

        #[test]
        fn number_order_is_exact(a in big_number(), b in big_number()) {
            check(Some(&a), Some(&b));
            check(Some(&json!([a.clone(), 1])), Some(&json!([b.clone()])));
        }
    }
}
