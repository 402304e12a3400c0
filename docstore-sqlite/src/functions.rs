//! SQL functions that let one statement apply the reference semantics exactly where SQLite's
//! own operators would not (number kinds, integers beyond `i64`, mixed kinds, arrays,
//! objects). Each one calls `docstore`'s own comparison code on values parsed by serde_json
//! from the verbatim JSON text SQLite extracts.
//!
//! Value arguments: SQL `NULL` is a missing field, `TEXT` is JSON text (what `data -> path`
//! gives), `INTEGER` is a number (the integer metadata columns).

use docstore::Data;
use docstore::index::CompiledIndex;
use docstore::index::key as sortkey;
use docstore::query::FieldPath;
use docstore::query::{range_ordering, values_equal};
use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, Error as SqlError};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use std::cmp::Ordering;
use std::sync::Arc;

/// `docstore_leaf(op, value, operand)`: 1 when the filter leaf `op` holds, else 0.
pub(crate) const LEAF: &str = "docstore_leaf";
/// `docstore_key(value)`: the value's sort key ([`docstore::index::key`]).
pub(crate) const KEY: &str = "docstore_key";
/// `docstore_resolve(data_json, segments_json)`: the JSON text at a path that SQLite's path
/// syntax cannot spell, or `NULL` when it does not resolve.
pub(crate) const RESOLVE: &str = "docstore_resolve";

/// The filter leaves `docstore_leaf` evaluates; the operand is JSON text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Eq = 1,
    Lt = 2,
    Lte = 3,
    Gt = 4,
    Gte = 5,
    /// The operand is the array of candidates.
    In = 6,
    /// The operand is the prefix string.
    Prefix = 7,
    Contains = 8,
}

impl Op {
    fn from_code(code: i64) -> Option<Op> {
        Some(match code {
            1 => Op::Eq,
            2 => Op::Lt,
            3 => Op::Lte,
            4 => Op::Gt,
            5 => Op::Gte,
            6 => Op::In,
            7 => Op::Prefix,
            8 => Op::Contains,
            _ => return None,
        })
    }
}

/// Registers the functions on a connection.
pub(crate) fn register(conn: &Connection) -> rusqlite::Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8
        | FunctionFlags::SQLITE_DETERMINISTIC
        | FunctionFlags::SQLITE_INNOCUOUS;
    conn.create_scalar_function(LEAF, 3, flags, |ctx| {
        let op = Op::from_code(ctx.get::<i64>(0)?)
            .ok_or_else(|| user_error("docstore_leaf: unknown operator"))?;
        let operand: Arc<Value> = ctx.get_or_create_aux(2, parse_text)?;
        let value = value_arg(ctx, 1)?;
        Ok(i64::from(leaf(op, value.as_ref(), &operand)))
    })?;
    conn.create_scalar_function(KEY, 1, flags, |ctx| {
        Ok(sortkey::encode(value_arg(ctx, 0)?.as_ref()))
    })?;
    conn.create_scalar_function(crate::index::INDEX_KEY, 8, flags, |ctx| {
        let index: Arc<CompiledIndex> = ctx.get_or_create_aux(0, |raw| {
            let text = raw.as_str().map_err(|e| user_error(&e.to_string()))?;
            let fields: Vec<String> =
                serde_json::from_str(text).map_err(|e| user_error(&e.to_string()))?;
            let index = docstore::Index::parse("index", "index", fields)
                .map_err(|e| user_error(&e.to_string()))?;
            let set = docstore::IndexSet::new([index]).map_err(|e| user_error(&e.to_string()))?;
            Ok::<_, SqlError>(set.for_collection("index")[0].clone())
        })?;
        let text = ctx
            .get_raw(1)
            .as_str()
            .map_err(|e| user_error(&e.to_string()))?;
        let data = indexed_members(text, &index)?;
        let version: i64 = ctx.get(7)?;
        let doc = docstore::Document {
            expires_at: None,
            id: ctx.get(2)?,
            data,
            created_at: ctx.get(3)?,
            updated_at: ctx.get(4)?,
            created_by: ctx.get(5)?,
            updated_by: ctx.get(6)?,
            version: u64::try_from(version).map_err(|_| user_error("negative version"))?,
        };
        Ok(index.key(&doc))
    })?;
    conn.create_scalar_function(RESOLVE, 2, flags, |ctx| {
        let segments: Arc<Vec<String>> = ctx.get_or_create_aux(1, |raw| {
            let text = raw.as_str().map_err(|e| user_error(&e.to_string()))?;
            serde_json::from_str::<Vec<String>>(text).map_err(|e| user_error(&e.to_string()))
        })?;
        let data = match ctx.get_raw(0) {
            ValueRef::Null => return Ok(None),
            raw => parse_text(raw)?,
        };
        let Value::Object(map) = data else {
            return Ok(None);
        };
        Ok(docstore::query::resolve_in(&map, &segments).map(Value::to_string))
    })?;
    Ok(())
}

/// The semantics of `CompiledFilter::matches` for one leaf on the resolved value.
fn leaf(op: Op, value: Option<&Value>, operand: &Value) -> bool {
    let Some(value) = value else {
        return false;
    };
    let range = |accept: fn(Ordering) -> bool| range_ordering(value, operand).is_some_and(accept);
    match op {
        Op::Eq => values_equal(value, operand),
        Op::Lt => range(Ordering::is_lt),
        Op::Lte => range(Ordering::is_le),
        Op::Gt => range(Ordering::is_gt),
        Op::Gte => range(Ordering::is_ge),
        Op::In => operand
            .as_array()
            .is_some_and(|candidates| candidates.iter().any(|c| values_equal(value, c))),
        Op::Prefix => match (value.as_str(), operand.as_str()) {
            (Some(s), Some(prefix)) => s.starts_with(prefix),
            _ => false,
        },
        Op::Contains => value
            .as_array()
            .is_some_and(|items| items.iter().any(|i| values_equal(i, operand))),
    }
}

/// The members of the JSON object `text` that `index`'s fields start with, parsed; every
/// other member is only scanned (`IgnoredAny`: nothing built), since a key depends on nothing
/// else. A trigger computes keys from each written row, old and new, for every index, so this
/// spares building the whole document each time. A member given twice keeps its last value,
/// as a parsed object does.
fn indexed_members(text: &str, index: &CompiledIndex) -> rusqlite::Result<Data> {
    struct Members<'i>(Vec<&'i str>);

    impl<'de> DeserializeSeed<'de> for Members<'_> {
        type Value = Data;

        fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Data, D::Error> {
            deserializer.deserialize_map(self)
        }
    }

    impl<'de> Visitor<'de> for Members<'_> {
        type Value = Data;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Data, A::Error> {
            let mut data = Data::new();
            while let Some(key) = map.next_key::<String>()? {
                if self.0.contains(&key.as_str()) {
                    data.insert(key, map.next_value::<Value>()?);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(data)
        }
    }

    let wanted = index
        .fields()
        .iter()
        .filter_map(|(path, _)| match path {
            FieldPath::Data(segments) => segments.first().map(String::as_str),
            _ => None,
        })
        .collect();
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let data = Members(wanted)
        .deserialize(&mut deserializer)
        .and_then(|data| deserializer.end().map(|()| data))
        .map_err(|e| user_error(&format!("docstore_index_key: data: {e}")))?;
    Ok(data)
}

fn value_arg(ctx: &Context<'_>, index: usize) -> rusqlite::Result<Option<Value>> {
    match ctx.get_raw(index) {
        ValueRef::Null => Ok(None),
        ValueRef::Integer(i) => Ok(Some(Value::from(i))),
        raw => parse_text(raw).map(Some),
    }
}

fn parse_text(raw: ValueRef<'_>) -> rusqlite::Result<Value> {
    let text = raw.as_str().map_err(|e| user_error(&e.to_string()))?;
    serde_json::from_str(text).map_err(|e| user_error(&format!("bad JSON argument: {e}")))
}

fn user_error(message: &str) -> SqlError {
    SqlError::UserFunctionError(message.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use docstore::{Document, Index, IndexSet};

    /// The key from the members an index reads equals the key from the whole document, for
    /// present, missing, null, nested and system fields, with escapes in member names.
    #[test]
    fn keys_from_the_indexed_members_equal_keys_from_the_whole_document() {
        let text = r#"{"status":"open","a":{"b":[1,2],"c":null},"n":12.5,"x":{"deep":{"er":1}},
            "we\u0069rd.key":"w","body":"long text with \"escapes\" and \\ slashes"}"#;
        let data: Data = serde_json::from_str(text).unwrap();
        let doc = Document {
            expires_at: None,
            id: "doc-1".into(),
            data,
            created_at: 5,
            updated_at: 7,
            created_by: "me".into(),
            updated_by: "you".into(),
            version: 3,
        };
        let declarations = [
            vec!["status", "-n"],
            vec!["a.b", "a.c", "missing"],
            vec!["x.deep.er", "-$updated_at"],
            vec![r"weird\.key", "$version", "$id"],
            vec!["$created_by", "body"],
        ];
        for (i, fields) in declarations.iter().enumerate() {
            let index = Index::parse("c", format!("i{i}"), fields.iter().copied()).unwrap();
            let set = IndexSet::new([index]).unwrap();
            let compiled = &set.for_collection("c")[0];
            let members = indexed_members(text, compiled).unwrap();
            assert!(members.len() <= fields.len(), "{fields:?}: {members:?}");
            let reduced = Document {
                data: members,
                ..doc.clone()
            };
            assert_eq!(compiled.key(&reduced), compiled.key(&doc), "{fields:?}");
        }
        let index = Index::parse("c", "i", ["status"]).unwrap();
        let set = IndexSet::new([index]).unwrap();
        assert!(indexed_members("[1]", &set.for_collection("c")[0]).is_err());
        assert!(indexed_members(r#"{"status":1} x"#, &set.for_collection("c")[0]).is_err());
    }
}
