//! Reading JSON text exactly: every document the store accepts can be read back, and no
//! number is changed on the way in.
//!
//! serde_json (without `arbitrary_precision`) turns an integer beyond 64 bits into the nearest
//! float and `1e-400` into `0.0`, silently; and it refuses text nested more than 128 levels,
//! while an export line wraps data that may itself be nested [`MAX_DEPTH`] levels. So before
//! parsing, one pass over the text (no recursion) checks the nesting against a known bound
//! and every number literal:
//! - an integer literal (no fraction, no exponent) must fit `i64` or `u64`, or it would not
//!   stay an integer;
//! - a literal with a fraction or an exponent must be a finite `f64` that is not `0` unless
//!   the literal is zero (`1e-400` is refused; `0.1` is the nearest float, as always).
//!
//! Then serde_json parses with its recursion limit off, which is safe because the pass
//! bounded the depth.

use crate::document::MAX_DEPTH;
use serde::de::DeserializeOwned;

/// Why a text is not acceptable JSON.
#[derive(Debug)]
pub struct JsonError {
    /// What is wrong, with the line and column when known.
    pub message: String,
}

impl std::fmt::Display for JsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Parses `text` as a `T`, refusing text nested deeper than `max_depth` and numbers that
/// cannot be kept exactly.
pub fn parse<T: DeserializeOwned>(text: &str, max_depth: usize) -> Result<T, JsonError> {
    check(text, max_depth)?;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    deserializer.disable_recursion_limit();
    let value = T::deserialize(&mut deserializer).map_err(|e| JsonError {
        message: e.to_string(),
    })?;
    deserializer.end().map_err(|e| JsonError {
        message: e.to_string(),
    })?;
    Ok(value)
}

/// Checks the nesting depth, the number literals and the object keys of JSON `text` (outside
/// strings): no object may name a key twice, since one of the two values would be dropped.
/// Text that is not JSON at all passes here and fails in the parser, which names the problem.
pub fn check(text: &str, max_depth: usize) -> Result<(), JsonError> {
    let mut scan = Scan {
        text,
        max_depth,
        open: Vec::new(),
    };
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        i = match bytes[i] {
            b'"' => scan.string(i)?,
            b'[' => scan.open(i, None)?,
            b'{' => scan.open(i, Some(ObjectKeys::default()))?,
            b']' | b'}' => {
                scan.open.pop();
                i + 1
            }
            b',' => {
                if let Some(Some(keys)) = scan.open.last_mut() {
                    keys.expecting_key = true;
                }
                i + 1
            }
            b'-' | b'0'..=b'9' => scan.number(i)?,
            _ => i + 1,
        };
    }
    Ok(())
}

/// The state of [`check`]'s one pass: the arrays (`None`) and objects open at the current
/// position, innermost last.
struct Scan<'a> {
    text: &'a str,
    max_depth: usize,
    open: Vec<Option<ObjectKeys<'a>>>,
}

/// The keys an open object has named so far, and whether a key comes next.
#[derive(Default)]
struct ObjectKeys<'a> {
    seen: std::collections::HashSet<std::borrow::Cow<'a, str>>,
    expecting_key: bool,
}

impl<'a> Scan<'a> {
    /// Opens an array or an object at `start`; gives the offset after it.
    fn open(&mut self, start: usize, object: Option<ObjectKeys<'a>>) -> Result<usize, JsonError> {
        if self.open.len() >= self.max_depth {
            let max_depth = self.max_depth;
            return Err(at(
                self.text,
                start,
                format!(
                    "nested more than {max_depth} levels deep (document data may be nested at \
                     most {MAX_DEPTH} levels)"
                ),
            ));
        }
        self.open.push(object.map(|keys| ObjectKeys {
            expecting_key: true,
            ..keys
        }));
        Ok(start + 1)
    }

    /// Skips the string that opens at `start` (escapes included; memchr, as a string's bytes
    /// are most of a document line's) and checks it when it is an object's key. Gives the
    /// offset after the closing quote.
    fn string(&mut self, start: usize) -> Result<usize, JsonError> {
        let bytes = self.text.as_bytes();
        let mut i = start + 1;
        let mut escaped = false;
        while let Some(at) = bytes
            .get(i..)
            .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
        {
            i += at;
            if bytes[i] == b'"' {
                break;
            }
            escaped = true;
            i += 2;
        }
        if i >= bytes.len() || bytes[i] != b'"' {
            // Unterminated: the parser names the problem.
            return Ok(bytes.len());
        }
        if let Some(Some(keys)) = self.open.last_mut()
            && std::mem::take(&mut keys.expecting_key)
        {
            let raw = &self.text[start + 1..i];
            let key = if escaped {
                match serde_json::from_str::<String>(&self.text[start..=i]) {
                    Ok(key) => std::borrow::Cow::Owned(key),
                    Err(_) => return Ok(i + 1), // a bad escape: the parser names it
                }
            } else {
                std::borrow::Cow::Borrowed(raw)
            };
            if let Some(key) = keys.seen.replace(key) {
                return Err(at(
                    self.text,
                    start,
                    format!(
                        "the key {} appears twice in one object; JSON is kept exactly, so \
                         each key may appear once",
                        shown_key(&key)
                    ),
                ));
            }
        }
        Ok(i + 1)
    }

    /// Checks the number literal that starts at `start`; gives the offset after it.
    fn number(&self, start: usize) -> Result<usize, JsonError> {
        let bytes = self.text.as_bytes();
        let mut i = start + 1;
        while i < bytes.len() && matches!(bytes[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
        {
            i += 1;
        }
        check_number(&self.text[start..i]).map_err(|why| at(self.text, start, why))?;
        Ok(i)
    }
}

/// Why a number literal cannot be stored exactly, if it cannot.
fn check_number(literal: &str) -> Result<(), String> {
    let is_integer = !literal.contains(['.', 'e', 'E']);
    if is_integer {
        if literal.parse::<i64>().is_ok() || literal.parse::<u64>().is_ok() {
            return Ok(());
        }
        // Not a well-formed integer at all (e.g. "-" or "01"): the parser will say so.
        if literal.trim_start_matches('-').is_empty()
            || !literal
                .trim_start_matches('-')
                .bytes()
                .all(|b| b.is_ascii_digit())
        {
            return Ok(());
        }
        return Err(format!(
            "the integer {} cannot be stored exactly: integers must lie between {} and {} \
             (write a larger one as a string)",
            shorten(literal),
            i64::MIN,
            u64::MAX
        ));
    }
    let Ok(value) = literal.parse::<f64>() else {
        return Ok(()); // malformed: the parser names it
    };
    if !value.is_finite() {
        return Err(format!(
            "the number {} is beyond the range of a 64-bit float (about ±1.8e308)",
            shorten(literal)
        ));
    }
    let mantissa = literal.split(['e', 'E']).next().unwrap_or("");
    let literal_is_zero = mantissa.bytes().all(|b| matches!(b, b'0' | b'.' | b'-'));
    if value == 0.0 && !literal_is_zero {
        return Err(format!(
            "the number {} is too small for a 64-bit float (the smallest is about 5e-324) \
             and would be stored as 0",
            shorten(literal)
        ));
    }
    Ok(())
}

/// A number literal as an error message shows it: its first 20 characters and its length
/// when it is long.
fn shorten(literal: &str) -> String {
    if literal.len() <= 40 {
        literal.to_owned()
    } else {
        format!("{}…({} digits)", first_chars(literal, 20), literal.len())
    }
}

/// A key as an error message shows it: quoted, and cut after 40 characters.
fn shown_key(key: &str) -> String {
    if key.chars().count() <= 40 {
        format!("{key:?}")
    } else {
        format!("{:?}…", first_chars(key, 40))
    }
}

/// The first `count` characters of `text` (never cut inside a character).
fn first_chars(text: &str, count: usize) -> &str {
    let end = text
        .char_indices()
        .nth(count)
        .map_or(text.len(), |(at, _)| at);
    &text[..end]
}

fn at(text: &str, offset: usize, message: String) -> JsonError {
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    JsonError {
        message: format!("{message} at line {line} column {column}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// An export line's depth: the line object, then the data.
    const MAX_LINE_DEPTH: usize = MAX_DEPTH + 1;

    fn value(text: &str) -> Result<Value, String> {
        parse::<Value>(text, MAX_DEPTH).map_err(|e| e.message)
    }

    #[test]
    fn exact_numbers_pass() {
        for text in [
            "18446744073709551615",
            "-9223372036854775808",
            "0",
            "-0",
            "0.0",
            "0e10",
            "5e-324",
            "1.7976931348623157e308",
            "0.1",
            "1E2",
            r#"{"s": "18446744073709551616 1e-400 [[[[", "n": 1}"#,
        ] {
            assert!(value(text).is_ok(), "{text}: {:?}", value(text));
        }
        assert_eq!(value("[1.0, 2]").unwrap(), json!([1.0, 2]));
    }

    #[test]
    fn numbers_that_would_change_are_refused() {
        for text in [
            "18446744073709551616",
            "-9223372036854775809",
            &"9".repeat(100),
            "1e-400",
            "-2.5e-330",
            "1e400",
        ] {
            let err = value(&format!("{{\"n\": [1, {text}]}}")).unwrap_err();
            assert!(err.contains("line 1 column 11"), "{text}: {err}");
        }
    }

    #[test]
    fn depth_is_bounded_and_deep_text_parses() {
        let deep = |levels: usize| format!("{}{}", "[".repeat(levels), "]".repeat(levels));
        // serde_json alone refuses this; the bounded pass lets it through.
        assert!(serde_json::from_str::<Value>(&deep(MAX_LINE_DEPTH)).is_err());
        assert!(parse::<Value>(&deep(MAX_LINE_DEPTH), MAX_LINE_DEPTH).is_ok());
        let err = parse::<Value>(&deep(MAX_LINE_DEPTH + 1), MAX_LINE_DEPTH).unwrap_err();
        assert!(err.message.contains("nested more than"), "{err}");
    }

    /// Strings are skipped whole, escapes included: what looks like nesting or a number
    /// inside a string is not checked, and what follows a string still is.
    #[test]
    fn strings_are_skipped_with_their_escapes() {
        let nested = format!(
            r#"{{"s": "a\"{}\\", "t": "\\\"", "n": 1}}"#,
            "[".repeat(300)
        );
        assert!(value(&nested).is_ok(), "{:?}", value(&nested));
        let after = r#"{"s": "x\"y\\", "n": 1e-400}"#;
        assert!(value(after).unwrap_err().contains("column 22"), "{after}");
        let deep_after = format!(r#"["\\"{}"#, ",[".repeat(MAX_DEPTH));
        assert!(value(&deep_after).unwrap_err().contains("nested more than"));
        // Unterminated strings are the parser's to name.
        for text in [r#"{"s": "abc"#, r#"{"s": "abc\"#, r#"["\""#] {
            assert!(value(text).is_err(), "{text}");
        }
    }

    #[test]
    fn a_key_named_twice_in_one_object_is_refused() {
        for (text, column) in [
            (r#"{"x":1,"x":2}"#, 8),
            (r#"{"a": {"x": 1, "y": [], "x": 2}}"#, 25),
            (r#"[{"x": 1}, {"y": 1, "\u0079": 2}]"#, 21),
            (r#"{"x": {"x": 1}, "y": {"x": {}}, "x\n": 3, "x": 4}"#, 43),
        ] {
            let err = value(text).unwrap_err();
            assert!(err.contains("appears twice"), "{text}: {err}");
            assert!(err.contains(&format!("column {column}")), "{text}: {err}");
        }
        // The same key in sibling or nested objects, and keys' text as values, are fine.
        for text in [
            r#"{"x": {"x": {"x": 1}}, "y": {"x": 2}}"#,
            r#"[{"x": 1}, {"x": 2}]"#,
            r#"{"x": "x", "y": ["x", "x"], "z": {"a": "x", "x": "a"}}"#,
            r#"{"x\"": 1, "x": 2, "x\\": 3}"#,
        ] {
            assert!(value(text).is_ok(), "{text}: {:?}", value(text));
        }
    }

    /// A long key is cut in the message at a character, never inside one.
    #[test]
    fn a_long_duplicate_key_is_shown_cut_at_a_character() {
        let key = "é".repeat(30);
        let err = value(&format!(r#"{{"{key}": 1, "{key}": 2}}"#)).unwrap_err();
        assert!(
            err.contains(&format!("the key {key:?} appears twice")),
            "{err}"
        );
        let long = "ü".repeat(50);
        let err = value(&format!(r#"{{"{long}": 1, "{long}": 2}}"#)).unwrap_err();
        assert!(err.contains(&format!("{:?}…", "ü".repeat(40))), "{err}");
    }

    #[test]
    fn malformed_text_is_the_parser_s_to_name() {
        assert!(value("{nope").unwrap_err().contains("line 1"));
        assert!(value("01").is_err());
        assert!(value("{} x").is_err());
    }
}
