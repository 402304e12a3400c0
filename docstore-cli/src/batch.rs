//! `docstore batch JSON|FILE|-` (atomic writes) and `docstore get-many` (several documents).
//!
//! A batch is a JSON array of writes, or JSON lines of them, each an object with `op` and the
//! key in the site given by `--site`:
//!
//! ```text
//! {"op": "create",    "collection": "c", "id": "a", "data": {...}}
//! {"op": "put",       "collection": "c", "id": "a", "data": {...}}
//! {"op": "update",    "collection": "c", "id": "a", "patch": {...}}
//! {"op": "update_if", "collection": "c", "id": "a", "patch": {...}, "version": 3}
//! {"op": "delete_if", "collection": "c", "id": "a", "version": 3}
//! {"op": "check",     "collection": "c", "id": "a", "version": 3}   (null: must not exist)
//! ```
//!
//! All or nothing (`Store::write_all`): the outcomes are printed as a JSON array in the same
//! order (`{"written": document}`, `{"deleted": true}`, `{"checked": true}`); when one write
//! fails, nothing is written and the error names the write (its position, from 1, with its
//! line number in JSON lines, and its key) with the exit code of its kind. Positions and line
//! numbers both count from 1, as `import` counts lines (docs/contract.md, "The command line").

use crate::exit::CliError;
use crate::output::Out;
use docstore::batch::{MAX_BATCH_BYTES, Write, WriteOutcome, key_bytes};
use docstore::document::{MAX_DEPTH, data_size};
use docstore::json;
use docstore::{Data, Error, Key, Store};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;

/// One write as the batch file spells it.
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
enum WriteText {
    Create {
        collection: String,
        id: String,
        data: Value,
    },
    Put {
        collection: String,
        id: String,
        data: Value,
    },
    Update {
        collection: String,
        id: String,
        patch: Value,
    },
    UpdateIf {
        collection: String,
        id: String,
        patch: Value,
        version: u64,
    },
    DeleteIf {
        collection: String,
        id: String,
        version: u64,
    },
    Check {
        collection: String,
        id: String,
        version: Option<u64>,
    },
}

/// The writes of a batch, with where each came from.
#[derive(Debug)]
pub struct Batch {
    /// The writes, in order.
    pub writes: Vec<Write>,
    /// Each write's line number (from 1) when the batch is JSON lines; empty for an array.
    lines: Vec<usize>,
}

impl Batch {
    /// How messages name write `index` (from 0, as `Error::Batch` counts): its position from
    /// 1, and its line number in JSON lines (blank lines make them differ).
    fn write_at(&self, index: usize) -> String {
        match self.lines.get(index) {
            Some(line) => format!("batch write {} (line {line})", index + 1),
            None => format!("batch write {}", index + 1),
        }
    }
}

/// The batch itself when INPUT is inline JSON: its first character other than white space
/// is `[` or `{`, as DATA of `put` is JSON text (a file whose name starts so is `@FILE` or
/// `./NAME`); `None` for a file name, `@FILE` or `-`.
pub fn inline(input: &std::path::Path) -> Option<&str> {
    let text = input.to_str()?;
    text.trim_start().starts_with(['[', '{']).then_some(text)
}

/// The writes of a batch file's text (a JSON array, or one JSON object per line).
pub fn parse(text: &str, site: &str) -> Result<Batch, CliError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = Vec::new();
    let items: Vec<Value> = if text.trim_start().starts_with('[') {
        json::parse(text, MAX_DEPTH + 2)
            .map_err(|e| CliError::invalid(format!("the batch is not valid JSON: {e}")))?
    } else {
        let mut items = Vec::new();
        for (number, line) in (1..).zip(text.lines()) {
            if line.trim().is_empty() {
                continue;
            }
            items.push(json::parse(line, MAX_DEPTH + 1).map_err(|e| {
                CliError::invalid(format!("batch line {number}: not valid JSON: {e}"))
            })?);
            lines.push(number);
        }
        items
    };
    let mut batch = Batch {
        writes: Vec::with_capacity(items.len()),
        lines,
    };
    for (index, item) in items.into_iter().enumerate() {
        let at = || batch.write_at(index);
        let text: WriteText = serde_json::from_value(item)
            .map_err(|e| CliError::invalid(format!("{}: {e}", at())))?;
        let write = write(text, site).map_err(|e| CliError::from(e).context(at()))?;
        batch.writes.push(write);
    }
    batch.check_whole()?;
    Ok(batch)
}

impl Batch {
    /// The rules on the batch as a whole that name writes — each key at most once, at most
    /// [`MAX_BATCH_BYTES`] of keys and data — checked here so that messages count writes as
    /// every other batch message does, from 1 (the library's count from 0). The library
    /// checks them again, and alone checks the data an update merges.
    fn check_whole(&self) -> Result<(), CliError> {
        let mut first_with_key: HashMap<&Key, usize> = HashMap::new();
        let mut bytes = 0usize;
        for (index, write) in self.writes.iter().enumerate() {
            let key = write.key();
            if let Some(first) = first_with_key.insert(key, index) {
                return Err(CliError::invalid(format!(
                    "{} repeats the key {key} of {}: each key at most once; nothing was written",
                    self.write_at(index),
                    self.write_at(first)
                )));
            }
            let data = match write {
                Write::Create { data, .. } | Write::Put { data, .. } => data_size(data),
                _ => 0,
            };
            bytes = bytes.saturating_add(key_bytes(key) + data);
            if bytes > MAX_BATCH_BYTES {
                return Err(CliError::invalid(format!(
                    "the batch writes more than {MAX_BATCH_BYTES} bytes (keys and data; {} \
                     brings it to {bytes}); nothing was written",
                    self.write_at(index)
                )));
            }
        }
        Ok(())
    }
}

fn write(text: WriteText, site: &str) -> Result<Write, Error> {
    let object = |value: Value| -> Result<Data, Error> { docstore::object(value) };
    Ok(match text {
        WriteText::Create {
            collection,
            id,
            data,
        } => Write::create(Key::new(site, collection, id)?, object(data)?),
        WriteText::Put {
            collection,
            id,
            data,
        } => Write::put(Key::new(site, collection, id)?, object(data)?),
        WriteText::Update {
            collection,
            id,
            patch,
        } => Write::update(Key::new(site, collection, id)?, object(patch)?),
        WriteText::UpdateIf {
            collection,
            id,
            patch,
            version,
        } => Write::update_if(Key::new(site, collection, id)?, object(patch)?, version),
        WriteText::DeleteIf {
            collection,
            id,
            version,
        } => Write::delete_if(Key::new(site, collection, id)?, version),
        WriteText::Check {
            collection,
            id,
            version,
        } => Write::check(Key::new(site, collection, id)?, version),
    })
}

/// Applies the batch's writes atomically and prints the outcomes.
pub async fn run(store: &Store, batch: &Batch, actor: &str, out: &mut Out) -> Result<(), CliError> {
    let writes = &batch.writes;
    let outcomes = store.write_all(writes, actor).await.map_err(|err| {
        let at = err
            .batch_failure()
            .map(|(index, _)| format!("{} ({})", batch.write_at(index), writes[index].key()));
        match (at, err) {
            (Some(at), Error::Batch { source, .. }) => {
                CliError::from(*source).context(format!("{at}; nothing was written"))
            }
            (_, err) => CliError::from(err),
        }
    })?;
    let shown: Vec<Value> = outcomes
        .iter()
        .map(|outcome| match outcome {
            WriteOutcome::Written(doc) => json!({ "written": out.document_value(doc) }),
            WriteOutcome::Deleted => json!({ "deleted": true }),
            _ => json!({ "checked": true }),
        })
        .collect();
    out.value(&shown)
}

/// Reads `ids` of `collection` at once and prints a JSON array of the documents, `null` where
/// there is none, in the ids' order.
pub async fn get_many(
    store: &Store,
    site: &str,
    collection: &str,
    ids: &[String],
    out: &mut Out,
) -> Result<(), CliError> {
    let keys = ids
        .iter()
        .map(|id| Key::new(site, collection, id))
        .collect::<Result<Vec<_>, _>>()?;
    let documents = store.get_many(&keys).await?;
    let shown: Vec<Value> = documents
        .iter()
        .map(|doc| doc.as_ref().map_or(Value::Null, |d| out.document_value(d)))
        .collect();
    out.value(&shown)
}
