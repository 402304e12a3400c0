//! Reverse patches: an RFC 7386 merge patch applied in place that records what it displaced,
//! so that the change log can rebuild the version before the merge from the version after it
//! (`docs/contract.md`, "Change feed": each change carries `previous`) without the store
//! keeping, or copying, the version it replaced.
//!
//! [`merge`] is [`docstore::merge_patch`] on a map nobody else holds, moving every value the
//! patch replaces or removes out of the map into its record instead of dropping it; where
//! the patch merges an object into an object it records that object's displaced members the
//! same way, so nothing the patch leaves in place is copied. The record is aligned with the
//! patch: its `n`-th item is what the patch's `n`-th key displaced.
//!
//! The patch's keys and the record are then written as one piece of text ([`recorded`]),
//! which [`undo_recorded`] reads to rebuild the earlier version: for a feed read, on a copy,
//! and for a write refused after its merge (by the size limit or a unique index), on the
//! document itself. The log holds one allocation per update instead of the patch's and the
//! displaced values' dozen, and the caller's patch and the displaced values are freed by the
//! write itself, while in cache, instead of when the retention lets the change go (which had
//! the write that pushed it out free them from cold memory: a quarter of an update's time,
//! half of it with 16 writers on two threads; `docs/benchmarks.md`).

use serde_json::{Map, Value};

/// What one key of a merge patch displaced from the object the patch was merged into.
#[derive(Debug, PartialEq)]
pub(crate) enum Displaced {
    /// The key was absent (the patch added it, or removed nothing).
    Absent,
    /// The key's value before the patch replaced or removed it, moved out of the map.
    Was(Value),
    /// The key held an object and the patch's value is an object: merged member by member;
    /// what each of the patch value's keys displaced, in its key order.
    Merged(Vec<Displaced>),
}

/// Merges `patch` into `target` in place (RFC 7386, exactly as [`docstore::merge_patch`])
/// and returns what each of its keys displaced, in the patch's key order.
pub(crate) fn merge(target: &mut Map<String, Value>, patch: &Map<String, Value>) -> Vec<Displaced> {
    patch
        .iter()
        .map(|(key, value)| merge_key(target, key, value))
        .collect()
}

fn merge_key(target: &mut Map<String, Value>, key: &String, value: &Value) -> Displaced {
    if value.is_null() {
        return target.remove(key).map_or(Displaced::Absent, Displaced::Was);
    }
    match (target.get_mut(key), value) {
        (Some(Value::Object(inner)), Value::Object(members)) => {
            Displaced::Merged(merge(inner, members))
        }
        (Some(old), _) => Displaced::Was(std::mem::replace(old, fresh(value))),
        (None, _) => {
            target.insert(key.clone(), fresh(value));
            Displaced::Absent
        }
    }
}

/// What a patch value becomes where there is no object to merge it into: the value itself,
/// its objects' null members left out (RFC 7386).
fn fresh(value: &Value) -> Value {
    match value {
        Value::Object(members) => Value::Object(
            members
                .iter()
                .filter(|(_, member)| !member.is_null())
                .map(|(key, member)| (key.clone(), fresh(member)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The tags of a recorded item ([`recorded`]).
const ABSENT: u64 = 0;
const WAS: u64 = 1;
const MERGED: u64 = 2;

/// `patch` and its record `displaced` as JSON text: per key of the patch, in its order, the
/// key, then `0` (it was absent), `1` and the value it displaced, or `2` and the record of
/// the object it merged into as an array of the same items. The top level is a sequence of
/// JSON values separated by spaces, not an array, so the text nests no deeper than the data it came from
/// (within serde_json's recursion limit, as [`MAX_DEPTH`](docstore::document::MAX_DEPTH)
/// keeps data).
pub(crate) fn recorded(patch: &Map<String, Value>, displaced: Vec<Displaced>) -> Vec<u8> {
    // Room for a small patch's record: growing the buffer cost more than the serializing.
    let mut text = Vec::with_capacity(RECORD_ROOM);
    write_items(&mut text, patch, displaced, b' ');
    text
}

/// The bytes a record starts with room for.
const RECORD_ROOM: usize = 128;

fn write_items(
    text: &mut Vec<u8>,
    patch: &Map<String, Value>,
    displaced: Vec<Displaced>,
    separator: u8,
) {
    for (n, ((key, value), displaced)) in patch.iter().zip(displaced).enumerate() {
        if n > 0 {
            text.push(separator);
        }
        write_key(text, key);
        text.push(separator);
        match displaced {
            Displaced::Absent => text.push(b'0'),
            Displaced::Was(old) => {
                text.extend_from_slice(&[b'1', separator]);
                write_json(text, &old);
            }
            Displaced::Merged(inner) => {
                text.extend_from_slice(&[b'2', separator, b'[']);
                if let Value::Object(members) = value {
                    write_items(text, members, inner, b',');
                }
                text.push(b']');
            }
        }
    }
}

fn write_json(text: &mut Vec<u8>, value: &Value) {
    serde_json::to_writer(text, value).expect("a JSON value serializes");
}

fn write_key(text: &mut Vec<u8>, key: &str) {
    serde_json::to_writer(text, key).expect("a string serializes");
}

/// [`undo`] from the text [`recorded`] made: `target`, the result of the merge, back to what
/// it was before it.
pub(crate) fn undo_recorded(target: &mut Map<String, Value>, record: &[u8]) {
    let items = serde_json::Deserializer::from_slice(record).into_iter::<Value>();
    // The store wrote the text: failing to read it back is a bug, never a wrong `previous`.
    undo_items(target, items.map(|item| item.expect("a record reads back")));
}

/// [`undo_recorded`] of one object's items.
fn undo_items(target: &mut Map<String, Value>, mut items: impl Iterator<Item = Value>) {
    while let (Some(Value::String(key)), Some(tag)) = (items.next(), items.next()) {
        match tag.as_u64() {
            Some(ABSENT) => {
                target.remove(&key);
            }
            Some(WAS) => {
                let Some(old) = items.next() else { return };
                target.insert(key, old);
            }
            Some(MERGED) => {
                let Some(Value::Array(inner)) = items.next() else {
                    return;
                };
                if let Some(Value::Object(object)) = target.get_mut(&key) {
                    undo_items(object, inner.into_iter());
                }
            }
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    /// Merges `patch` into `doc`, checks that the result agrees with `docstore::merge_patch`
    /// and that undoing it from its record's text gives `doc` back.
    fn round_trip(doc: &Value, patch: &Value) {
        let (doc, patch) = (map(doc.clone()), map(patch.clone()));
        let mut expected = docstore::Data::from(doc.clone());
        docstore::merge_patch(&mut expected, &docstore::Data::from(patch.clone()));

        let mut merged = doc.clone();
        let displaced = merge(&mut merged, &patch);
        assert_eq!(merged, *expected, "merge of {patch:?} into {doc:?}");

        undo_recorded(&mut merged, &recorded(&patch, displaced));
        assert_eq!(merged, doc, "undo of {patch:?} from its text");
    }

    /// Every example of RFC 7386 appendix A, and a few of objects merged into objects.
    #[test]
    fn merges_as_rfc_7386_and_undoes_exactly() {
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"})),
            (json!({"a": "b"}), json!({"b": "c"})),
            (json!({"a": "b"}), json!({"a": null})),
            (json!({"a": "b", "b": "c"}), json!({"a": null})),
            (json!({"a": ["b"]}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
            ),
            (json!({"a": [{"b": "c"}]}), json!({"a": [1]})),
            (json!({"e": null}), json!({"a": 1})),
            (json!({}), json!({"a": {"bb": {"ccc": null}}})),
            (
                json!({"a": 1}),
                json!({"a": {"b": null, "c": {"d": null, "e": 2}}}),
            ),
            (
                json!({"a": {"b": {"c": 1, "d": 2}}}),
                json!({"a": {"b": {"c": null, "e": 3}}}),
            ),
            (json!({"a": {"b": 1}}), json!({"a": {}})),
            (json!({"a": {"b": 1}}), json!({"a": {"b": {"c": [null]}}})),
        ];
        for (doc, patch) in &cases {
            round_trip(doc, patch);
        }
    }

    /// `inner` under `depth` objects, each holding the next at key `a`.
    fn nested(depth: usize, inner: Value) -> Value {
        (0..depth).fold(inner, |value, _| json!({ "a": value }))
    }

    /// The record of a merge into data as deep as the store takes reads back whole: its
    /// text nests no deeper than the data, within serde_json's recursion limit.
    #[test]
    fn records_of_the_deepest_data_read_back() {
        let deepest = docstore::document::MAX_DEPTH;
        let depth_ok = |value: &Value| docstore::document::check_depth(&map(value.clone()).into());
        // The data object, then objects down to an array at the deepest level.
        let doc = nested(deepest - 2, json!({"x": 1, "y": [2]}));
        assert!(depth_ok(&doc).is_ok());
        assert!(
            depth_ok(&json!({ "a": doc })).is_err(),
            "one level more is refused"
        );
        // Merged all the way down, displacing the array at the bottom.
        round_trip(&doc, &nested(deepest - 2, json!({"x": 2, "y": null})));
        // The whole deep object displaced at the top.
        round_trip(&doc, &json!({"a": 0}));
    }

    /// A small deterministic generator (xorshift), so a failure repeats.
    struct Draw(u64);

    impl Draw {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// A value of up to `depth` levels over a small alphabet of keys, so that patches meet
    /// the document's keys often; nulls only in a patch.
    fn value(rng: &mut Draw, depth: u32, patch: bool) -> Value {
        match rng.below(if depth == 0 { 4 } else { 6 }) {
            0 if patch => Value::Null,
            0 | 1 => json!(rng.below(3)),
            2 => json!(["x", null]),
            3 => json!("s"),
            _ => {
                let members = (0..rng.below(4))
                    .map(|_| {
                        let key = ["a", "b", "c", "d"][rng.below(4) as usize].to_owned();
                        (key, value(rng, depth - 1, patch))
                    })
                    .collect();
                Value::Object(members)
            }
        }
    }

    #[test]
    fn random_patches_undo_exactly() {
        let mut rng = Draw(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2_000 {
            let doc = match value(&mut rng, 3, false) {
                Value::Object(members) => Value::Object(members),
                other => json!({ "a": other, "c": 1 }),
            };
            let patch = match value(&mut rng, 3, true) {
                Value::Object(members) => Value::Object(members),
                other => json!({ "b": other, "a": other }),
            };
            round_trip(&doc, &patch);
        }
    }
}
