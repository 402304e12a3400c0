//! [`Data`], the JSON object a document holds, shared and copied on write.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// The JSON object a document holds: a `serde_json` map behind an [`Arc`], so a clone is a
/// reference count, not a copy. Holders share one map until one of them changes it: the
/// first change through [`DerefMut`] copies the map if anyone else still holds it
/// ([`Arc::make_mut`]), so no holder ever sees another's change (`docs/contract.md`,
/// "Documents").
///
/// It reads as the map it holds (`Deref<Target = Map<String, Value>>`), serializes exactly
/// as that map does (transparent), and converts from a map and into a [`Value::Object`].
///
/// ```
/// use serde_json::json;
///
/// let stored = docstore::object(json!({"title": "hello", "tags": ["a"]})).unwrap();
/// let mut answer = stored.clone(); // shares the map: no copy
/// assert!(docstore::Data::ptr_eq(&stored, &answer));
/// answer.insert("title".into(), json!("changed")); // copies it now, once
/// assert_eq!(stored["title"], "hello");
/// assert_eq!(answer["title"], "changed");
/// // Serialized as the map itself, no wrapper.
/// assert_eq!(serde_json::to_value(&stored).unwrap(), json!({"title": "hello", "tags": ["a"]}));
/// assert_eq!(serde_json::Value::from(answer), json!({"title": "changed", "tags": ["a"]}));
/// ```
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Data(Arc<Map<String, Value>>);

impl Data {
    /// An empty object.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `a` and `b` share one map (a clone of the other, neither changed since).
    pub fn ptr_eq(a: &Data, b: &Data) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// The map itself: moved out when this is its only holder, else a copy.
    pub fn into_map(self) -> Map<String, Value> {
        Arc::unwrap_or_clone(self.0)
    }

    /// The map, moved out when this is its only holder; else `self` back, untouched.
    pub(crate) fn try_unwrap(self) -> Result<Map<String, Value>, Data> {
        Arc::try_unwrap(self.0).map_err(Data)
    }
}

impl Deref for Data {
    type Target = Map<String, Value>;

    fn deref(&self) -> &Map<String, Value> {
        &self.0
    }
}

impl DerefMut for Data {
    /// The map, to change: copied first when another holder shares it.
    fn deref_mut(&mut self) -> &mut Map<String, Value> {
        Arc::make_mut(&mut self.0)
    }
}

impl PartialEq for Data {
    fn eq(&self, other: &Data) -> bool {
        Data::ptr_eq(self, other) || *self.0 == *other.0
    }
}

impl Eq for Data {}

impl fmt::Debug for Data {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<Map<String, Value>> for Data {
    fn from(map: Map<String, Value>) -> Self {
        Data(Arc::new(map))
    }
}

impl From<Data> for Value {
    fn from(data: Data) -> Self {
        Value::Object(data.into_map())
    }
}

impl FromIterator<(String, Value)> for Data {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        Data::from(Map::from_iter(iter))
    }
}

impl IntoIterator for Data {
    type Item = (String, Value);
    type IntoIter = serde_json::map::IntoIter;

    fn into_iter(self) -> Self::IntoIter {
        self.into_map().into_iter()
    }
}

impl<'a> IntoIterator for &'a Data {
    type Item = (&'a String, &'a Value);
    type IntoIter = serde_json::map::Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Data {
        crate::object(json!({"a": 1, "b": {"c": [1.0, "x"]}})).unwrap()
    }

    #[test]
    fn a_change_copies_only_a_shared_map() {
        let mut only = sample();
        let before = Arc::as_ptr(&only.0);
        only.insert("d".into(), json!(true));
        assert_eq!(
            Arc::as_ptr(&only.0),
            before,
            "a sole holder changes in place"
        );

        let stored = sample();
        let mut copy = stored.clone();
        copy.remove("a");
        assert!(!Data::ptr_eq(&stored, &copy));
        assert_eq!(stored, sample());
        assert_eq!(Value::from(copy), json!({"b": {"c": [1.0, "x"]}}));
    }

    #[test]
    fn serializes_and_reads_as_the_map() {
        let data = sample();
        let text = serde_json::to_string(&data).unwrap();
        assert_eq!(text, serde_json::to_string(&*data).unwrap());
        let back: Data = serde_json::from_str(&text).unwrap();
        assert_eq!(back, data);
        assert!(back["b"]["c"][0].is_f64(), "1.0 stays a float");
        assert_eq!(format!("{data:?}"), format!("{:?}", *data));
        let collected: Data = data.clone().into_iter().collect();
        assert_eq!(collected, data);
        assert_eq!((&data).into_iter().count(), 2);
    }
}
