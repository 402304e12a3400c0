//! Value equality and the one total order used for sorting and cursors.

use serde_json::{Number, Value};
use std::cmp::Ordering;

/// JSON equality with numbers compared by exact value (`1 == 1.0`, and integers beyond 2^53
/// stay distinct), recursively through arrays and objects.
///
/// ```
/// use serde_json::json;
/// use docstore::query::values_equal;
///
/// assert!(values_equal(&json!([1, {"a": 2.0}]), &json!([1.0, {"a": 2}])));
/// assert!(!values_equal(&json!(9007199254740993u64), &json!(9007199254740992u64)));
/// ```
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y) == Ordering::Equal,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| values_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

/// Compares two JSON numbers by their exact mathematical value.
pub fn compare_numbers(a: &Number, b: &Number) -> Ordering {
    match (exact(a), exact(b)) {
        (Exact::Int(x), Exact::Int(y)) => x.cmp(&y),
        (Exact::Float(x), Exact::Float(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        (Exact::Int(x), Exact::Float(y)) => compare_int_float(x, y),
        (Exact::Float(x), Exact::Int(y)) => compare_int_float(y, x).reverse(),
    }
}

enum Exact {
    Int(i128),
    Float(f64),
}

fn exact(n: &Number) -> Exact {
    if let Some(u) = n.as_u64() {
        Exact::Int(i128::from(u))
    } else if let Some(i) = n.as_i64() {
        Exact::Int(i128::from(i))
    } else {
        Exact::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// Exact comparison of an integer with a finite float, without rounding the integer.
fn compare_int_float(int: i128, float: f64) -> Ordering {
    const TWO_POW_127: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    if float.is_nan() {
        return Ordering::Equal;
    }
    let truncated = float.trunc();
    if truncated >= TWO_POW_127 {
        return Ordering::Less;
    }
    if truncated < -TWO_POW_127 {
        return Ordering::Greater;
    }
    // `truncated` is integral and within i128, so the conversion is exact.
    match int.cmp(&(truncated as i128)) {
        Ordering::Equal => 0.0_f64
            .partial_cmp(&(float - truncated))
            .unwrap_or(Ordering::Equal),
        unequal => unequal,
    }
}

/// The rank of a value's kind in the total order.
fn rank(value: Option<&Value>) -> u8 {
    match value {
        None => 0,
        Some(Value::Null) => 1,
        Some(Value::Bool(false)) => 2,
        Some(Value::Bool(true)) => 3,
        Some(Value::Number(_)) => 4,
        Some(Value::String(_)) => 5,
        Some(Value::Array(_)) => 6,
        Some(Value::Object(_)) => 7,
    }
}

/// The total sort order: missing < null < false < true < numbers (by value) < strings (by
/// code point) < arrays (element-wise, a proper prefix first) < objects (by canonical
/// serialization).
///
/// ```
/// use serde_json::json;
/// use std::cmp::Ordering;
/// use docstore::query::compare_values;
///
/// assert_eq!(compare_values(None, Some(&json!(null))), Ordering::Less);
/// assert_eq!(compare_values(Some(&json!(true)), Some(&json!(-5))), Ordering::Less);
/// assert_eq!(compare_values(Some(&json!(2)), Some(&json!(1.5))), Ordering::Greater);
/// assert_eq!(compare_values(Some(&json!([1])), Some(&json!([1, 0]))), Ordering::Less);
/// ```
pub fn compare_values(a: Option<&Value>, b: Option<&Value>) -> Ordering {
    match (a, b) {
        (Some(x), Some(y)) => compare_present(x, y),
        _ => rank(a).cmp(&rank(b)),
    }
}

fn compare_present(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y) {
                match compare_present(p, q) {
                    Ordering::Equal => {}
                    unequal => return unequal,
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(_), Value::Object(_)) => canonical_json(a).cmp(&canonical_json(b)),
        _ => rank(Some(a)).cmp(&rank(Some(b))),
    }
}

/// The canonical serialization of a value: object keys sorted, no spaces.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::with_capacity(64);
    write_canonical(value, &mut out);
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

pub(super) fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Array(items) => write_list(items, out, write_canonical),
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|x, y| x.0.cmp(y.0));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key).expect("a string serializes");
                out.push(b':');
                write_canonical(item, out);
            }
            out.push(b'}');
        }
        scalar => serde_json::to_writer(&mut *out, scalar).expect("a scalar serializes"),
    }
}

/// `[a,b,…]`, each item written by `write`.
pub(super) fn write_list<T>(items: &[T], out: &mut Vec<u8>, write: impl Fn(&T, &mut Vec<u8>)) {
    let written = try_write_list(items, out, |item, out| {
        write(item, out);
        Some(())
    });
    debug_assert!(written.is_some());
}

/// [`write_list`] with a `write` that may refuse an item: `None` as soon as one does.
pub(super) fn try_write_list<T>(
    items: &[T],
    out: &mut Vec<u8>,
    write: impl Fn(&T, &mut Vec<u8>) -> Option<()>,
) -> Option<()> {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(item, out)?;
    }
    out.push(b']');
    Some(())
}

/// How a range operator (`Lt`, `Lte`, `Gt`, `Gte`) sees `value` against `bound`: their order
/// when both are numbers, both strings or both booleans, `None` (no range matches) otherwise.
///
/// ```
/// use serde_json::json;
/// use docstore::query::range_ordering;
///
/// assert!(range_ordering(&json!(2), &json!(1.5)).is_some_and(|o| o.is_gt()));
/// assert_eq!(range_ordering(&json!("2"), &json!(1)), None);
/// assert_eq!(range_ordering(&json!([1]), &json!([0])), None);
/// ```
pub fn range_ordering(value: &Value, bound: &Value) -> Option<Ordering> {
    let comparable = matches!(
        (value, bound),
        (Value::Number(_), Value::Number(_))
            | (Value::String(_), Value::String(_))
            | (Value::Bool(_), Value::Bool(_))
    );
    comparable.then(|| compare_present(value, bound))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cmp(a: Value, b: Value) -> Ordering {
        compare_values(Some(&a), Some(&b))
    }

    #[test]
    fn numbers_compare_exactly() {
        assert_eq!(cmp(json!(1), json!(1.0)), Ordering::Equal);
        assert_eq!(cmp(json!(u64::MAX), json!(u64::MAX - 1)), Ordering::Greater);
        assert_eq!(cmp(json!(i64::MIN), json!(u64::MAX)), Ordering::Less);
        // 2^53 + 1 is not representable as f64; it is above the float 2^53.
        assert_eq!(
            cmp(
                json!(9_007_199_254_740_993u64),
                json!(9_007_199_254_740_992.0)
            ),
            Ordering::Greater
        );
        assert_eq!(
            cmp(
                json!(9_007_199_254_740_992u64),
                json!(9_007_199_254_740_992.0)
            ),
            Ordering::Equal
        );
        assert_eq!(
            cmp(json!(u64::MAX), json!(1.8446744073709552e19)),
            Ordering::Less
        );
        assert_eq!(cmp(json!(-3), json!(-2.5)), Ordering::Less);
        assert_eq!(cmp(json!(-2), json!(-2.5)), Ordering::Greater);
        assert_eq!(cmp(json!(2), json!(2.5)), Ordering::Less);
        assert_eq!(cmp(json!(3), json!(2.5)), Ordering::Greater);
        assert_eq!(cmp(json!(0), json!(-0.0)), Ordering::Equal);
        assert_eq!(cmp(json!(0), json!(5e-324)), Ordering::Less);
        assert_eq!(cmp(json!(i64::MIN), json!(-1e300)), Ordering::Greater);
        assert_eq!(
            cmp(json!(u64::MAX), json!(1.7976931348623157e308)),
            Ordering::Less
        );
        assert_eq!(cmp(json!(1.5), json!(2.5)), Ordering::Less);
    }

    #[test]
    fn kinds_are_ordered() {
        let ascending = [
            json!(null),
            json!(false),
            json!(true),
            json!(-1e10),
            json!(3),
            json!(""),
            json!("a"),
            json!("é"),
            json!([]),
            json!([null]),
            json!([1]),
            json!([1, 2]),
            json!([2]),
            // Objects compare by canonical text, where `"` sorts before `}`.
            json!({"a": 1}),
            json!({"b": 0}),
            json!({}),
        ];
        assert_eq!(compare_values(None, Some(&ascending[0])), Ordering::Less);
        for pair in ascending.windows(2) {
            assert_eq!(
                cmp(pair[0].clone(), pair[1].clone()),
                Ordering::Less,
                "{pair:?}"
            );
            assert_eq!(
                cmp(pair[1].clone(), pair[0].clone()),
                Ordering::Greater,
                "{pair:?}"
            );
        }
    }

    #[test]
    fn strings_compare_by_code_point() {
        // U+FF21 (fullwidth A) is above U+00E9 and U+1F600 above both, whatever UTF-16 says.
        assert_eq!(cmp(json!("é"), json!("Ａ")), Ordering::Less);
        assert_eq!(cmp(json!("\u{ffff}"), json!("😀")), Ordering::Less);
        assert_eq!(cmp(json!("Z"), json!("a")), Ordering::Less);
    }

    #[test]
    fn equality_is_by_value() {
        assert!(values_equal(
            &json!({"a": [1, 2.0]}),
            &json!({"a": [1.0, 2]})
        ));
        assert!(!values_equal(&json!({"a": 1}), &json!({"a": 1, "b": null})));
        assert!(!values_equal(&json!(null), &json!(false)));
        assert!(!values_equal(&json!(0), &json!(false)));
        assert!(!values_equal(&json!("1"), &json!(1)));
    }

    #[test]
    fn canonical_sorts_keys() {
        assert_eq!(
            canonical_json(&json!({"b": 1, "a": [true, {"d": 1.5, "c": "x"}]})),
            r#"{"a":[true,{"c":"x","d":1.5}],"b":1}"#
        );
    }
}
