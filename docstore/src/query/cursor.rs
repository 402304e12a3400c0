//! Opaque keyset cursors.

use crate::document::MAX_DEPTH;
use crate::{Error, Result};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// Where the next page of a query starts: opaque text to hand back in [`Query::cursor`].
///
/// A cursor holds the last returned document's sort values and id (a keyset position), plus a
/// fingerprint of the query's filter and order. It stays valid while documents are inserted or
/// deleted, and a cursor used with another filter or order is [`Error::InvalidArgument`]. The
/// page size may change between pages.
///
/// [`Query::cursor`]: crate::query::Query::cursor
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Cursor(String);

impl Cursor {
    /// The cursor's text, for handing to a client.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<String> for Cursor {
    /// Wraps text a client handed back; it is checked when the query runs.
    fn from(text: String) -> Self {
        Cursor(text)
    }
}

impl From<&str> for Cursor {
    fn from(text: &str) -> Self {
        Cursor(text.to_owned())
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The decoded content of a cursor: the position after which the next page starts.
#[derive(Clone, Debug, PartialEq)]
pub struct CursorPosition {
    /// Fingerprint of the query (filter and order) the cursor belongs to.
    pub fingerprint: String,
    /// The last document's value for each order key (`None`: the field was missing, which
    /// sorts differently from a stored `null`).
    pub keys: Vec<Option<Value>>,
    /// The last document's id.
    pub id: String,
}

/// The cursor's JSON: each key is `[]` when missing and `[value]` when present, so that a
/// stored `null` and a missing field stay apart.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    f: String,
    k: Vec<Vec<Value>>,
    i: String,
}

/// How deep a cursor's JSON may nest: a sort value is a field of document data, so nested at
/// most [`MAX_DEPTH`]` - 1` levels, and the cursor holds it three levels down (the object,
/// its keys, the key). serde_json's own limit (128 levels) would refuse the deepest ones.
const MAX_WIRE_DEPTH: usize = MAX_DEPTH + 2;

impl CursorPosition {
    /// Encodes the position as cursor text.
    pub fn encode(&self) -> Cursor {
        let wire = Wire {
            f: self.fingerprint.clone(),
            k: self
                .keys
                .iter()
                .map(|key| key.iter().cloned().collect())
                .collect(),
            i: self.id.clone(),
        };
        let json = serde_json::to_vec(&wire).expect("a cursor position always serializes");
        Cursor(URL_SAFE_NO_PAD.encode(json))
    }

    /// Decodes cursor text; anything that is not a cursor is [`Error::InvalidArgument`].
    pub fn decode(cursor: &Cursor) -> Result<Self> {
        let bad = || Error::invalid("cursor is not a cursor of this store");
        let bytes = URL_SAFE_NO_PAD
            .decode(cursor.0.as_bytes())
            .map_err(|_| bad())?;
        let text = std::str::from_utf8(&bytes).map_err(|_| bad())?;
        let wire: Wire = crate::json::parse(text, MAX_WIRE_DEPTH).map_err(|_| bad())?;
        let keys = wire
            .k
            .into_iter()
            .map(|mut key| match key.len() {
                0 => Ok(None),
                1 => Ok(key.pop()),
                _ => Err(bad()),
            })
            .collect::<Result<_>>()?;
        Ok(CursorPosition {
            fingerprint: wire.f,
            keys,
            id: wire.i,
        })
    }
}

/// A query's fingerprint: the [`stable_hash`](crate::driver::stable_hash) of its shape, in
/// hex.
pub(crate) fn fingerprint(bytes: &[u8]) -> String {
    format!("{:016x}", crate::driver::stable_hash(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_exact_values() {
        let position = CursorPosition {
            fingerprint: fingerprint(b"q"),
            keys: vec![
                None,
                Some(Value::Null),
                Some(json!(u64::MAX)),
                Some(json!(5e-324)),
                Some(json!({"a": "é"})),
            ],
            id: "a\"b".into(),
        };
        assert_eq!(
            CursorPosition::decode(&position.encode()).unwrap(),
            position
        );
    }

    /// A sort value may be nested as deep as document data lets a field be: the cursor that
    /// holds it, nested three levels more, still reads back.
    #[test]
    fn the_deepest_sort_values_round_trip() {
        let mut data = json!(1);
        for _ in 1..crate::document::MAX_DEPTH {
            data = json!([data]);
        }
        let document = crate::object(json!({ "a": data.clone() })).unwrap();
        crate::document::check_depth(&document).unwrap();
        let position = CursorPosition {
            fingerprint: fingerprint(b"q"),
            keys: vec![Some(data)],
            id: "a".into(),
        };
        assert_eq!(
            CursorPosition::decode(&position.encode()).unwrap(),
            position
        );
    }

    #[test]
    fn garbage_is_invalid() {
        for text in ["", "!!!", "e30", "bm90IGpzb24"] {
            assert!(matches!(
                CursorPosition::decode(&Cursor::from(text)),
                Err(Error::InvalidArgument(_))
            ));
        }
    }
}
