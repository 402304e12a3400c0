//! RFC 7386 JSON merge patch on document data.

use crate::Data;
use serde_json::Value;

/// Applies an RFC 7386 merge patch to `data`: a `null` removes a key, objects merge
/// recursively, any other value replaces.
///
/// The patch is an object, so the result is always an object (a top-level non-object patch,
/// which would replace the whole document, cannot be expressed).
///
/// ```
/// use serde_json::json;
///
/// let mut data = docstore::object(json!({"a": 1, "b": {"c": 2, "d": 3}})).unwrap();
/// let patch = docstore::object(json!({"a": null, "b": {"c": 5}})).unwrap();
/// docstore::merge_patch(&mut data, &patch);
/// assert_eq!(serde_json::Value::from(data), json!({"b": {"c": 5, "d": 3}}));
/// ```
///
/// `data` is copied first only if another holder shares it ([`Data`]), and then once.
pub fn merge_patch(data: &mut Data, patch: &Data) {
    if patch.is_empty() {
        return;
    }
    let data: &mut serde_json::Map<String, Value> = data;
    for (key, patch_value) in patch {
        if patch_value.is_null() {
            data.remove(key);
            continue;
        }
        match data.get_mut(key) {
            Some(target) => json_patch::merge(target, patch_value),
            None => {
                let mut target = Value::Null;
                json_patch::merge(&mut target, patch_value);
                data.insert(key.clone(), target);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Removal, recursive merge and replacement; the conformance suite runs every example
    /// of RFC 7386 appendix A through each backend's `update`.
    #[test]
    fn removes_merges_and_replaces() {
        let cases = [
            (
                json!({"a":"b","b":"c"}),
                json!({"a":null}),
                json!({"b":"c"}),
            ),
            (
                json!({"a":{"b":"c"}}),
                json!({"a":{"b":"d","c":null}}),
                json!({"a":{"b":"d"}}),
            ),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (
                json!({}),
                json!({"a":{"bb":{"ccc":null}}}),
                json!({"a":{"bb":{}}}),
            ),
        ];
        for (target, patch, expected) in cases {
            let mut data = crate::object(target.clone()).unwrap();
            merge_patch(&mut data, &crate::object(patch.clone()).unwrap());
            assert_eq!(Value::from(data), expected, "{target} + {patch}");
        }
    }
}
