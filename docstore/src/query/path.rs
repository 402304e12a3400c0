//! Field paths: dot paths into `data`, or one of the six system fields.

use crate::Document;
use crate::{Error, Result};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

/// A parsed field path.
///
/// Text form: segments separated by `.` (`"address.city"`), where `\.` is a literal dot, `\\` a
/// literal backslash and `\$` a literal dollar; a path starting with an unescaped `$` must be
/// one of `$id $created_at $updated_at $created_by $updated_by $version`. Segments only step
/// into objects: a path through an array or a scalar does not resolve.
///
/// ```
/// use docstore::query::FieldPath;
///
/// assert_eq!(FieldPath::parse("$version").unwrap(), FieldPath::Version);
/// assert_eq!(
///     FieldPath::parse(r"a\.b.\$id").unwrap(),
///     FieldPath::Data(vec!["a.b".into(), "$id".into()])
/// );
/// assert!(FieldPath::parse("$nope").is_err());
/// assert!(FieldPath::parse("a..b").is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FieldPath {
    /// `$id`: the document id (a string).
    Id,
    /// `$created_at`: creation time in unix nanoseconds (a number).
    CreatedAt,
    /// `$updated_at`: last write time in unix nanoseconds (a number).
    UpdatedAt,
    /// `$created_by`: the creating actor (a string).
    CreatedBy,
    /// `$updated_by`: the last writing actor (a string).
    UpdatedBy,
    /// `$version`: the document version (a number).
    Version,
    /// A path into `data`, one unescaped key per segment.
    Data(Vec<String>),
}

const SYSTEM_FIELDS: [(&str, FieldPath); 6] = [
    ("$id", FieldPath::Id),
    ("$created_at", FieldPath::CreatedAt),
    ("$updated_at", FieldPath::UpdatedAt),
    ("$created_by", FieldPath::CreatedBy),
    ("$updated_by", FieldPath::UpdatedBy),
    ("$version", FieldPath::Version),
];

impl FieldPath {
    /// Parses the text form; a broken rule is [`Error::InvalidArgument`] quoting the path.
    pub fn parse(text: &str) -> Result<Self> {
        if text.starts_with('$') {
            return SYSTEM_FIELDS
                .iter()
                .find(|(name, _)| *name == text)
                .map(|(_, field)| field.clone())
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "field path {text:?}: unknown system field (the system fields are \
                         $id, $created_at, $updated_at, $created_by, $updated_by, $version; \
                         write a literal leading $ as \\$)"
                    ))
                });
        }
        let mut segments = Vec::new();
        let mut current = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some(escaped @ ('.' | '\\' | '$')) => current.push(escaped),
                    Some(other) => {
                        return Err(Error::invalid(format!(
                            "field path {text:?}: unknown escape \\{other} (only \\. \\\\ \\$)"
                        )));
                    }
                    None => {
                        return Err(Error::invalid(format!(
                            "field path {text:?}: ends with a lone backslash"
                        )));
                    }
                },
                '.' => {
                    if current.is_empty() {
                        return Err(empty_segment(text));
                    }
                    segments.push(std::mem::take(&mut current));
                }
                other => current.push(other),
            }
        }
        if current.is_empty() {
            return Err(empty_segment(text));
        }
        segments.push(current);
        Ok(FieldPath::Data(segments))
    }

    /// The value at this path in `doc`, or `None` when the path does not resolve.
    pub fn resolve<'a>(&self, doc: &'a Document) -> Option<Cow<'a, Value>> {
        Some(match self {
            FieldPath::Id => Cow::Owned(Value::String(doc.id.clone())),
            FieldPath::CreatedAt => Cow::Owned(Value::from(doc.created_at)),
            FieldPath::UpdatedAt => Cow::Owned(Value::from(doc.updated_at)),
            FieldPath::CreatedBy => Cow::Owned(Value::String(doc.created_by.clone())),
            FieldPath::UpdatedBy => Cow::Owned(Value::String(doc.updated_by.clone())),
            FieldPath::Version => Cow::Owned(Value::from(doc.version)),
            FieldPath::Data(segments) => Cow::Borrowed(resolve_in(&doc.data, segments)?),
        })
    }

    /// True for the six `$` system fields.
    pub fn is_system(&self) -> bool {
        !matches!(self, FieldPath::Data(_))
    }
}

/// The value at `segments` inside `data` (a [`Data`](crate::Data) or any JSON object),
/// stepping only into objects.
pub fn resolve_in<'a>(
    data: &'a serde_json::Map<String, Value>,
    segments: &[String],
) -> Option<&'a Value> {
    let (first, rest) = segments.split_first()?;
    let mut value = data.get(first)?;
    for segment in rest {
        value = value.as_object()?.get(segment)?;
    }
    Some(value)
}

fn empty_segment(text: &str) -> Error {
    Error::invalid(format!("field path {text:?}: empty segment"))
}

impl fmt::Display for FieldPath {
    /// The text form, escaped so that it parses back to the same path.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let FieldPath::Data(segments) = self else {
            let name = SYSTEM_FIELDS
                .iter()
                .find(|(_, field)| field == self)
                .map(|(n, _)| *n);
            return f.write_str(name.unwrap_or_default());
        };
        for (i, segment) in segments.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            for c in segment.chars() {
                if matches!(c, '.' | '\\' | '$') {
                    f.write_str("\\")?;
                }
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(segments: &[&str]) -> FieldPath {
        FieldPath::Data(segments.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn parses_paths() {
        assert_eq!(FieldPath::parse("a").unwrap(), data(&["a"]));
        assert_eq!(FieldPath::parse("a.b.c").unwrap(), data(&["a", "b", "c"]));
        assert_eq!(FieldPath::parse(r"a\.b").unwrap(), data(&["a.b"]));
        assert_eq!(FieldPath::parse(r"a\\.b").unwrap(), data(&["a\\", "b"]));
        assert_eq!(FieldPath::parse(r"\$id").unwrap(), data(&["$id"]));
        assert_eq!(FieldPath::parse("a.$id").unwrap(), data(&["a", "$id"]));
        assert_eq!(FieldPath::parse("a$").unwrap(), data(&["a$"]));
        assert_eq!(FieldPath::parse("é 'x\"").unwrap(), data(&["é 'x\""]));
        for (name, field) in SYSTEM_FIELDS {
            assert_eq!(FieldPath::parse(name).unwrap(), field);
        }
    }

    #[test]
    fn rejects_bad_paths() {
        for bad in [
            "", ".", "a.", ".a", "a..b", "\\", "a\\", r"a\n", r"\x", "$", "$ID", "$id.x", "$foo",
        ] {
            assert!(
                matches!(FieldPath::parse(bad), Err(Error::InvalidArgument(_))),
                "{bad:?} should be invalid"
            );
        }
    }

    #[test]
    fn display_round_trips() {
        for text in ["a", r"a\.b.c", r"\$id", r"x\\\.y", "$updated_by", "a.b"] {
            let path = FieldPath::parse(text).unwrap();
            assert_eq!(FieldPath::parse(&path.to_string()).unwrap(), path);
        }
    }

    #[test]
    fn resolves_only_through_objects() {
        let doc = Document {
            expires_at: None,
            id: "d".into(),
            data: crate::object(serde_json::json!({"a": {"b": 1}, "arr": [{"b": 2}], "n": null}))
                .unwrap(),
            created_at: 5,
            updated_at: 6,
            created_by: "c".into(),
            updated_by: "u".into(),
            version: 3,
        };
        let get = |p: &str| {
            FieldPath::parse(p)
                .unwrap()
                .resolve(&doc)
                .map(Cow::into_owned)
        };
        assert_eq!(get("a.b"), Some(serde_json::json!(1)));
        assert_eq!(get("n"), Some(Value::Null));
        assert_eq!(get("arr.0"), None);
        assert_eq!(get("arr.b"), None);
        assert_eq!(get("a.b.c"), None);
        assert_eq!(get("$version"), Some(serde_json::json!(3)));
        assert_eq!(get("$id"), Some(serde_json::json!("d")));
        assert_eq!(get("$updated_at"), Some(serde_json::json!(6)));
    }
}
