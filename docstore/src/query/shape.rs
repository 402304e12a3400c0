//! The canonical text of a query's shape — its scope, filter and order — that its cursors'
//! fingerprint hashes: the query's JSON form (`serde`), with every object's keys sorted and no
//! spaces, so that it does not depend on the key order of object values in the filter. It is
//! written straight from the query, without building the JSON value first: every query pays
//! for it.

use super::ordering::{try_write_list, write_canonical, write_list};
use super::{Filter, Order};
use serde_json::Value;

/// The canonical JSON of `[scope, filter, order]` (`[filter, order]` without a scope), as
/// [`canonical_json`](super::canonical_json) gives it for the `serde_json` value of that
/// tuple. `None` for a filter holding [`Filter::Unserializable`], which has no JSON form.
pub(crate) fn shape_text(
    scope: Option<(&str, &str)>,
    filter: Option<&Filter>,
    order: &[Order],
) -> Option<String> {
    let mut out = Vec::with_capacity(128);
    out.push(b'[');
    if let Some((site, collection)) = scope {
        out.push(b'[');
        string(site, &mut out);
        out.push(b',');
        string(collection, &mut out);
        out.extend_from_slice(b"],");
    }
    match filter {
        Some(filter) => write_filter(filter, &mut out)?,
        None => out.extend_from_slice(b"null"),
    }
    out.push(b',');
    write_list(order, &mut out, |key, out| {
        // Keys sorted: "descending" before "field".
        out.extend_from_slice(if key.descending {
            b"{\"descending\":true,\"field\":"
        } else {
            b"{\"descending\":false,\"field\":"
        });
        string(&key.field, out);
        out.push(b'}');
    });
    out.push(b']');
    Some(String::from_utf8(out).expect("JSON text is UTF-8"))
}

/// A filter as serde writes it (externally tagged, snake case): `{"<operator>": operands}`.
fn write_filter(filter: &Filter, out: &mut Vec<u8>) -> Option<()> {
    let (name, operands): (&str, Operands<'_>) = match filter {
        Filter::And(all) => ("and", Operands::Filters(all)),
        Filter::Or(any) => ("or", Operands::Filters(any)),
        Filter::Not(inner) => ("not", Operands::Filter(inner)),
        Filter::Eq(path, value) => ("eq", Operands::Value(path, value)),
        Filter::Ne(path, value) => ("ne", Operands::Value(path, value)),
        Filter::Lt(path, value) => ("lt", Operands::Value(path, value)),
        Filter::Lte(path, value) => ("lte", Operands::Value(path, value)),
        Filter::Gt(path, value) => ("gt", Operands::Value(path, value)),
        Filter::Gte(path, value) => ("gte", Operands::Value(path, value)),
        Filter::Contains(path, value) => ("contains", Operands::Value(path, value)),
        Filter::In(path, values) => ("in", Operands::Values(path, values)),
        Filter::Exists(path) => ("exists", Operands::Path(path)),
        Filter::Prefix(path, prefix) => ("prefix", Operands::Prefix(path, prefix)),
        Filter::Unserializable { .. } => return None,
    };
    out.extend_from_slice(b"{\"");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
    match operands {
        Operands::Filters(filters) => try_write_list(filters, out, write_filter)?,
        Operands::Filter(inner) => write_filter(inner, out)?,
        Operands::Value(path, value) => pair(path, out, |out| write_canonical(value, out)),
        Operands::Values(path, values) => {
            pair(path, out, |out| write_list(values, out, write_canonical))
        }
        Operands::Path(path) => string(path, out),
        Operands::Prefix(path, prefix) => pair(path, out, |out| string(prefix, out)),
    }
    out.push(b'}');
    Some(())
}

/// What an operator holds, as its JSON form groups it.
enum Operands<'a> {
    Filters(&'a [Filter]),
    Filter(&'a Filter),
    Value(&'a str, &'a Value),
    Values(&'a str, &'a [Value]),
    Path(&'a str),
    Prefix(&'a str, &'a str),
}

/// `["<path>", <second>]`: a tuple variant's operands.
fn pair(path: &str, out: &mut Vec<u8>, second: impl FnOnce(&mut Vec<u8>)) {
    out.push(b'[');
    string(path, out);
    out.push(b',');
    second(out);
    out.push(b']');
}

/// A JSON string literal, escaped as serde_json escapes it.
fn string(text: &str, out: &mut Vec<u8>) {
    serde_json::to_writer(&mut *out, text).expect("a string serializes");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::canonical_json;
    use proptest::prelude::*;

    /// The reference: the tuple's `serde_json` value in canonical text.
    fn through_serde(
        scope: Option<(&str, &str)>,
        filter: Option<&Filter>,
        order: &[Order],
    ) -> String {
        let value = match scope {
            None => serde_json::to_value((filter, order)),
            Some(scope) => serde_json::to_value((scope, filter, order)),
        };
        canonical_json(&value.expect("serializes"))
    }

    proptest! {
        /// The text written directly is the serde value's canonical text, byte for byte, so a
        /// cursor's fingerprint is what it has always been.
        #[test]
        fn shape_text_is_the_canonical_text_of_the_serde_value(
            query in crate::strategies::query(),
            scope in prop::option::of(("[a-z\"\\\\é\u{1}]{0,6}", "[a-z\"/]{0,6}")),
        ) {
            let scope = scope.as_ref().map(|(s, c)| (s.as_str(), c.as_str()));
            let direct = shape_text(scope, query.filter.as_ref(), &query.order);
            prop_assert_eq!(
                direct,
                Some(through_serde(scope, query.filter.as_ref(), &query.order))
            );
        }
    }

    #[test]
    fn a_filter_without_json_form_has_no_shape() {
        let filter = Filter::Unserializable {
            field: "a".into(),
            message: "no".into(),
        };
        assert_eq!(shape_text(None, Some(&filter), &[]), None);
        let nested = Filter::Not(Box::new(filter));
        assert_eq!(shape_text(Some(("s", "c")), Some(&nested), &[]), None);
    }

    #[test]
    fn object_values_are_written_with_sorted_keys() {
        let filter = Filter::Eq(
            "a".into(),
            serde_json::json!({"z": 1, "b": [{"y": 2, "x": 3}]}),
        );
        let order = [Order::desc("n")];
        assert_eq!(
            shape_text(Some(("s", "c")), Some(&filter), &order).unwrap(),
            r#"[["s","c"],{"eq":["a",{"b":[{"x":3,"y":2}],"z":1}]},[{"descending":true,"field":"n"}]]"#
        );
    }
}
