//! `import --id-field`: plain JSON documents (JSON lines, or one JSON array) turned into the
//! lines `import` reads, one line out per document in, so the import's line numbers are the
//! input's (in an array, the documents' positions from 1).
//!
//! Each document is a new document of the --site site and --collection collection: version
//! 1, created and updated now by the --actor actor, its id the string in the named top-level
//! field. The field stays in the stored data (as `_id` stays in a mongoimport document), so
//! `export | jq -c .data` gives back the documents as they came in, ready to import again.
//! A document without the field, with a field that is not a string or not a valid id, or
//! that is not a JSON object is skipped with its line number and the reason — counted with
//! the import's other skipped lines — and becomes an empty line, which the import passes
//! over.

use crate::exit::{self, CliError};
use crate::record::Record;
use crate::timefmt::TimeFormat;
use crate::transfer::{ErrorBudget, Skipped, Summary};
use docstore::document::MAX_DEPTH;
use docstore::{Document, Key, json};
use serde_json::Value;
use std::collections::VecDeque;
use std::io::{BufRead, Read};
use std::sync::Arc;

/// Where the plain documents go and how their ids are found.
#[derive(Debug, Clone)]
pub struct PlainTarget {
    /// The site (already checked).
    pub site: String,
    /// The collection.
    pub collection: String,
    /// The top-level field holding each document's id.
    pub id_field: String,
    /// The actor recorded as creator and last writer.
    pub actor: String,
}

/// Where the documents come from: lines read one at a time, or an array read whole.
enum Source<'r> {
    Lines(&'r mut dyn BufRead),
    Array(VecDeque<Value>),
}

/// A [`BufRead`] of export lines made from plain documents: hand it to
/// [`transfer::import`](crate::transfer::import), then add [`PlainInput::skipped`] to the
/// summary with [`PlainInput::add_skipped_to`].
pub struct PlainInput<'r> {
    source: Source<'r>,
    target: PlainTarget,
    number: u64,
    line: Vec<u8>,
    position: usize,
    skipped: Vec<Skipped>,
    /// The import's `--max-errors` budget, which the documents skipped here spend too.
    errors: Arc<ErrorBudget>,
}

impl<'r> PlainInput<'r> {
    /// Reads `input` as one JSON array when its first character (after a byte order mark and
    /// white space) is `[` — read and parsed whole, before anything is written: an input that
    /// is not one JSON array is an invalid argument — and as JSON lines otherwise.
    pub fn new(input: &'r mut dyn BufRead, target: PlainTarget) -> Result<Self, CliError> {
        let source = if starts_an_array(input)? {
            Source::Array(read_array(input)?)
        } else {
            Source::Lines(input)
        };
        Ok(PlainInput {
            source,
            target,
            number: 0,
            line: Vec::new(),
            position: 0,
            skipped: Vec::new(),
            errors: Arc::default(),
        })
    }

    /// Counts the documents skipped here against the import's `--max-errors` budget (the
    /// import stops at the line that spends it).
    pub fn with_errors(mut self, errors: Arc<ErrorBudget>) -> Self {
        self.errors = errors;
        self
    }

    /// Adds the documents skipped while reading to `summary`, in line order.
    pub fn add_skipped_to(self, summary: &mut Summary) {
        summary.skipped.extend(self.skipped);
        summary.skipped.sort_by_key(|skipped| skipped.line);
    }

    /// Makes the next output line; `false` at the end of the input.
    fn next_line(&mut self) -> std::io::Result<bool> {
        let document = match &mut self.source {
            Source::Array(values) => match values.pop_front() {
                Some(value) => Ok(Some(value)),
                None => return Ok(false),
            },
            Source::Lines(input) => {
                let mut bytes = Vec::new();
                if crate::text::read_line(input, &mut bytes)? == 0 {
                    return Ok(false);
                }
                parse_line(&bytes, self.number == 0)
            }
        };
        self.number += 1;
        self.line.clear();
        self.position = 0;
        match document.and_then(|document| document.map(|d| self.record(d)).transpose()) {
            Ok(Some(record)) => self
                .line
                .extend(record.to_line(TimeFormat::Ns).into_bytes()),
            Ok(None) => {} // a blank line
            Err(reason) => self.skip(reason),
        }
        self.line.push(b'\n');
        Ok(true)
    }

    /// The export record of one plain document, or why it cannot be one.
    fn record(&self, document: Value) -> Result<Record, String> {
        let Value::Object(data) = document else {
            return Err(format!("not a JSON object but {}", kind(&document)));
        };
        let id = id_of(&data, &self.target.id_field)?;
        let key = Key::new(&self.target.site, &self.target.collection, id)
            .map_err(|err| format!("id {id:?} (field {:?}): {err}", self.target.id_field))?;
        let now = now_nanos();
        let document = Document {
            expires_at: None,
            id: key.id().to_owned(),
            data: data.into(),
            created_at: now,
            updated_at: now,
            created_by: self.target.actor.clone(),
            updated_by: self.target.actor.clone(),
            version: 1,
        };
        Ok(Record::new(key.site(), key.collection(), document))
    }

    /// Records and says a skipped document, as the import says its own.
    fn skip(&mut self, reason: String) {
        eprintln!("skipped line {}: {reason}", self.number);
        self.skipped.push(Skipped {
            line: Some(self.number),
            collection: Some(self.target.collection.clone()),
            id: None,
            reason,
        });
        self.errors.reject();
    }
}

impl Read for PlainInput<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for PlainInput<'_> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.position >= self.line.len() && !self.next_line()? {
            return Ok(&[]);
        }
        Ok(&self.line[self.position..])
    }

    fn consume(&mut self, amount: usize) {
        self.position += amount;
    }
}

/// Whether the first character of `input`, after a byte order mark and white space, is `[`
/// (nothing is consumed but those).
fn starts_an_array(input: &mut dyn BufRead) -> Result<bool, CliError> {
    let mut at_start = true;
    loop {
        let buffer = input
            .fill_buf()
            .map_err(|e| CliError::io("reading the import", e))?;
        if buffer.is_empty() {
            return Ok(false);
        }
        let skip_bom = if at_start && buffer.starts_with(crate::text::BOM) {
            crate::text::BOM.len()
        } else {
            0
        };
        at_start = false;
        let rest = &buffer[skip_bom..];
        let blank = rest.iter().take_while(|b| b.is_ascii_whitespace()).count();
        if let Some(&first) = rest.get(blank) {
            let starts = first == b'[';
            input.consume(skip_bom + blank);
            return Ok(starts);
        }
        input.consume(skip_bom + blank);
    }
}

/// The documents of an input that is one JSON array.
fn read_array(input: &mut dyn BufRead) -> Result<VecDeque<Value>, CliError> {
    let text = crate::text::read_text(input, "the import")?;
    let values: Vec<Value> = json::parse(&text, MAX_DEPTH + 1).map_err(|err| {
        CliError::new(
            exit::INVALID_ARGUMENT,
            format!(
                "import --id-field: the input starts with '[' but is not one JSON array: {err}"
            ),
        )
    })?;
    Ok(values.into())
}

/// One input line as a document (`None` for a blank line), or why it is none.
fn parse_line(bytes: &[u8], first: bool) -> Result<Option<Value>, String> {
    let Some(text) = crate::text::line_text(bytes, first)? else {
        return Ok(None);
    };
    json::parse(text, MAX_DEPTH)
        .map(Some)
        .map_err(|err| format!("not JSON: {err}"))
}

/// The id in `field` of `data`, or why there is none.
fn id_of<'d>(data: &'d serde_json::Map<String, Value>, field: &str) -> Result<&'d str, String> {
    match data.get(field) {
        None => Err(format!("no {field:?} field (--id-field)")),
        Some(Value::String(id)) => Ok(id),
        Some(other) => Err(format!(
            "the {field:?} field is {}, not a string (ids are strings)",
            kind(other)
        )),
    }
}

/// What kind of JSON value `value` is, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Now, in unix nanoseconds (the time of a new document).
fn now_nanos() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_nanos()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> PlainTarget {
        PlainTarget {
            site: "s".into(),
            collection: "c".into(),
            id_field: "_id".into(),
            actor: "me".into(),
        }
    }

    fn lines_of(input: &str) -> (Vec<String>, Vec<Skipped>) {
        let mut reader = std::io::Cursor::new(input.as_bytes().to_vec());
        let mut plain = PlainInput::new(&mut reader, target()).unwrap();
        let mut text = String::new();
        plain.read_to_string(&mut text).unwrap();
        let skipped = std::mem::take(&mut plain.skipped);
        (text.lines().map(str::to_owned).collect(), skipped)
    }

    #[test]
    fn one_line_out_per_document_in_and_bad_ones_said() {
        let input =
            "\u{feff}{\"_id\":\"a\",\"n\":1}\n\n{\"n\":2}\n{\"_id\":3}\n[1]\n{\"_id\":\"\"}\n";
        let (lines, skipped) = lines_of(input);
        assert_eq!(lines.len(), 6);
        let first: Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(first["id"], "a");
        assert_eq!(first["data"], serde_json::json!({"_id": "a", "n": 1}));
        assert_eq!(first["version"], 1);
        assert!(lines[1..].iter().all(String::is_empty));
        let said: Vec<(Option<u64>, &str)> = skipped
            .iter()
            .map(|s| (s.line, s.reason.as_str()))
            .collect();
        assert_eq!(said[0], (Some(3), "no \"_id\" field (--id-field)"));
        assert!(said[1].1.contains("is a number, not a string"), "{said:?}");
        assert!(
            said[2].1.contains("not a JSON object but an array"),
            "{said:?}"
        );
        assert!(said[3].1.starts_with("id \"\" (field \"_id\")"), "{said:?}");
        assert_eq!(said.len(), 4);
    }

    #[test]
    fn an_array_is_read_whole_and_counted_by_position() {
        let (lines, skipped) = lines_of("  [{\"_id\":\"a\"}, {\"x\":1}, {\"_id\":\"b\"}]");
        assert_eq!(lines.len(), 3);
        assert!(lines[1].is_empty());
        assert_eq!(skipped[0].line, Some(2));
        let mut reader = std::io::Cursor::new(b"[{\"_id\":\"a\"}".to_vec());
        let err = PlainInput::new(&mut reader, target()).err().unwrap();
        assert_eq!(err.code, exit::INVALID_ARGUMENT);
    }
}
