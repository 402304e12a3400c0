//! export, import and copy: moving documents with their metadata between stores.
//!
//! Every document written goes through [`Pending`], which writes batches with
//! [`Store::write_all`] and falls back to [`write_one`], the one place that writes a single
//! document.

use crate::args::OnExisting;
use crate::exit::CliError;
use crate::json::{self, MAX_LINE_DEPTH};
use crate::record::Record;
use docstore::batch::{self, MAX_BATCH_BYTES, MAX_BATCH_WRITES, key_bytes};
use docstore::{Document, Error, Key, Query, RecountMode, Store, document};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::io::{BufRead, IsTerminal, Write};

/// How many documents one page of a walk reads.
const PAGE: usize = 500;

/// The UTF-8 byte order mark some editors put at the start of a file.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// What an import or copy did.
#[derive(Debug, Default, Serialize)]
pub struct Summary {
    /// Documents written where there was none.
    pub imported: u64,
    /// Stored documents replaced by the line's (`--on-existing newer|overwrite`).
    pub replaced: u64,
    /// Documents left as they were because their id is stored (a resumed run), or because the
    /// stored one is as new as the line's (`--on-existing newer`).
    pub already_present: u64,
    /// Documents or lines not written, and why.
    pub skipped: Vec<Skipped>,
}

/// One document or line that was not written.
#[derive(Debug, Serialize)]
pub struct Skipped {
    /// The input line, counted from 1 (import only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// The document's collection, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collection: Option<String>,
    /// The document's id, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Why it was not written.
    pub reason: String,
}

impl Skipped {
    /// Records a skip in `summary` and says it on standard error at once.
    fn record(self, summary: &mut Summary, bar: &ProgressBar) {
        let place = match (self.line, &self.collection, &self.id) {
            (Some(line), Some(c), Some(id)) => format!("line {line} ({c}/{id})"),
            (Some(line), _, _) => format!("line {line}"),
            (None, Some(c), Some(id)) => format!("{c}/{id}"),
            _ => String::new(),
        };
        bar.suspend(|| eprintln!("skipped {place}: {}", self.reason));
        summary.skipped.push(self);
    }
}

/// A progress bar on standard error when it is a terminal; nothing otherwise.
fn progress(total: Option<u64>, verb: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = match total {
        Some(total) => ProgressBar::new(total).with_style(
            ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({per_sec}, {eta})")
                .expect("a valid template")
                .progress_chars("=> "),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} {msg} {pos} ({per_sec})")
                .expect("a valid template"),
        ),
    };
    bar.with_message(verb.to_owned())
}

/// The collections to move, with their document counts: the given ones, or every collection
/// of the site that holds a document. Found by counting the documents themselves
/// ([`Store::recount`]), never from the counters, so a drifted or missing counter cannot
/// hide a collection.
async fn collections(
    store: &dyn Store,
    site: &str,
    only: &[String],
) -> Result<Vec<(String, u64)>, CliError> {
    let all = store.recount(site, RecountMode::Report).await?.collections;
    if only.is_empty() {
        return Ok(all);
    }
    Ok(only
        .iter()
        .map(|name| {
            let count = all.iter().find(|(n, _)| n == name).map_or(0, |(_, c)| *c);
            (name.clone(), count)
        })
        .collect())
}

/// Calls `each` with every document of `collection`, in id order, page by page.
async fn walk_collection(
    store: &dyn Store,
    site: &str,
    collection: &str,
    mut each: impl AsyncFnMut(Document) -> Result<(), CliError>,
) -> Result<(), CliError> {
    let mut cursor = None;
    loop {
        let query = Query::new().limit(PAGE).after(cursor);
        let page = store.query(site, collection, &query).await?;
        if page.exhausted_scan {
            return Err(CliError::new(
                1,
                format!(
                    "the store stopped reading {collection} early; the walk would be incomplete"
                ),
            ));
        }
        for document in page.documents {
            each(document).await?;
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(()),
        }
    }
}

/// Writes every document of the site (or of `only`) as JSON lines; returns how many.
pub async fn export(
    store: &dyn Store,
    site: &str,
    only: &[String],
    out: &mut dyn Write,
) -> Result<u64, CliError> {
    let collections = collections(store, site, only).await?;
    let bar = progress(Some(collections.iter().map(|(_, n)| n).sum()), "export");
    let mut written = 0;
    for (collection, _) in &collections {
        walk_collection(store, site, collection, async |document| {
            let line = serde_json::to_string(&Record::new(site, collection, document))
                .expect("records serialize");
            writeln!(out, "{line}").map_err(|e| CliError::io("writing the export", e))?;
            written += 1;
            bar.inc(1);
            Ok(())
        })
        .await?;
    }
    out.flush()
        .map_err(|e| CliError::io("writing the export", e))?;
    bar.finish_and_clear();
    Ok(written)
}

/// What [`write_one`] did with a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Written where there was none.
    Imported,
    /// Replaced the stored document.
    Replaced,
    /// Left the stored document as it was.
    AlreadyPresent,
}

/// Writes one document with its metadata: the one write call of import and copy.
///
/// A stored document with the same id is kept, or replaced by deleting it (conditioned on
/// the version just read) and restoring the new one: two writes, so a reader may see the id
/// absent in between, and a run interrupted there leaves it absent until the import is run
/// again. Someone else writing the document meanwhile makes this [`Error::Conflict`] or
/// [`Error::AlreadyExists`] and nothing of theirs is lost.
async fn write_one(
    store: &dyn Store,
    key: &Key,
    document: &Document,
    on_existing: OnExisting,
) -> docstore::Result<Outcome> {
    match store.restore(key, document).await {
        Ok(()) => Ok(Outcome::Imported),
        Err(Error::AlreadyExists) => match on_existing {
            OnExisting::Skip => Ok(Outcome::AlreadyPresent),
            OnExisting::Fail => Err(Error::AlreadyExists),
            OnExisting::Newer | OnExisting::Overwrite => {
                let Some(stored) = store.get(key).await? else {
                    store.restore(key, document).await?;
                    return Ok(Outcome::Imported);
                };
                let newer =
                    (document.version, document.updated_at) > (stored.version, stored.updated_at);
                if stored == *document || (on_existing == OnExisting::Newer && !newer) {
                    return Ok(Outcome::AlreadyPresent);
                }
                store.delete_if(key, stored.version).await?;
                store.restore(key, document).await?;
                Ok(Outcome::Replaced)
            }
        },
        Err(err) => Err(err),
    }
}

/// Writes one document and records the outcome in `summary`. Refusals of this document
/// (invalid, too large, over quota, changed meanwhile) are skipped; `--on-existing fail`
/// and transient or backend errors stop the run (it can be resumed).
async fn restore_one(
    store: &dyn Store,
    key: &Key,
    document: &Document,
    line: Option<u64>,
    on_existing: OnExisting,
    summary: &mut Summary,
    bar: &ProgressBar,
) -> Result<(), CliError> {
    match write_one(store, key, document, on_existing).await {
        Ok(Outcome::Imported) => summary.imported += 1,
        Ok(Outcome::Replaced) => summary.replaced += 1,
        Ok(Outcome::AlreadyPresent) => summary.already_present += 1,
        Err(Error::AlreadyExists) if on_existing == OnExisting::Fail => {
            let place = line.map(|l| format!("line {l}: ")).unwrap_or_default();
            return Err(CliError::new(
                4,
                format!("{place}{key} is already stored (--on-existing fail)"),
            ));
        }
        Err(
            err @ (Error::InvalidArgument(_)
            | Error::TooLarge { .. }
            | Error::QuotaExceeded { .. }
            | Error::Conflict { .. }
            | Error::AlreadyExists),
        ) => {
            let reason = match err {
                Error::Conflict { .. } | Error::AlreadyExists => {
                    format!("the stored document changed during the import ({err})")
                }
                err => err.to_string(),
            };
            Skipped {
                line,
                collection: Some(key.collection().to_owned()),
                id: Some(key.id().to_owned()),
                reason,
            }
            .record(summary, bar);
        }
        Err(err) => return Err(CliError::from(err).context(key)),
    }
    Ok(())
}

/// Documents waiting to be written together: import and copy write in atomic batches of
/// [`batch::Write::Restore`] through [`Store::write_all`] (one transaction — on SQLite one
/// commit — per batch), up to the shared batch limits. A batch the store refuses as a whole — one of its
/// ids already stored, one document invalid, too large or over the quota, an id given twice
/// in the input, or a store without batches — wrote nothing, and is written again document
/// by document through [`restore_one`], so each document gets exactly the outcome (skip,
/// replace, refusal) it would get alone and a resumed import keeps its meaning. Only
/// `Unavailable` (the batch may have been applied) stops the run, as it would alone.
struct Pending {
    /// The restores of the batch.
    writes: Vec<batch::Write>,
    /// Their input line numbers.
    lines: Vec<Option<u64>>,
    /// The bytes the batch writes, as [`MAX_BATCH_BYTES`] counts them.
    bytes: usize,
    /// The most writes in one batch; 1 writes every document alone (no `write_all`).
    capacity: usize,
    /// What to do with an id that is already stored.
    on_existing: OnExisting,
}

impl Pending {
    fn new(capacity: usize, on_existing: OnExisting) -> Self {
        Pending {
            writes: Vec::new(),
            lines: Vec::new(),
            bytes: 0,
            capacity: capacity.clamp(1, MAX_BATCH_WRITES),
            on_existing,
        }
    }

    /// Queues one document, first writing the batch when it is full.
    async fn push(
        &mut self,
        store: &dyn Store,
        key: Key,
        document: Document,
        line: Option<u64>,
        summary: &mut Summary,
        bar: &ProgressBar,
    ) -> Result<(), CliError> {
        let bytes = key_bytes(&key) + document::data_size(&document.data);
        if !self.writes.is_empty()
            && (self.writes.len() >= self.capacity || self.bytes + bytes > MAX_BATCH_BYTES)
        {
            self.flush(store, summary, bar).await?;
        }
        self.writes.push(batch::Write::restore(key, document));
        self.lines.push(line);
        self.bytes += bytes;
        if self.capacity == 1 {
            self.flush(store, summary, bar).await?;
        }
        Ok(())
    }

    /// Writes the queued documents: as one batch, or one by one when the batch is refused.
    async fn flush(
        &mut self,
        store: &dyn Store,
        summary: &mut Summary,
        bar: &ProgressBar,
    ) -> Result<(), CliError> {
        let writes = std::mem::take(&mut self.writes);
        let lines = std::mem::take(&mut self.lines);
        self.bytes = 0;
        if writes.len() > 1 {
            match store.write_all(&writes, "").await {
                Ok(outcomes) => {
                    summary.imported += outcomes.len() as u64;
                    return Ok(());
                }
                Err(err @ Error::Unavailable { .. }) => {
                    let first = writes[0].key();
                    return Err(CliError::from(err).context(format!(
                        "the batch of {} documents starting at {first}",
                        writes.len()
                    )));
                }
                // Nothing was written: each document on its own says what is wrong.
                Err(_) => {}
            }
        }
        for (write, line) in writes.into_iter().zip(lines) {
            let batch::Write::Restore { key, document } = write else {
                unreachable!("only restores are queued")
            };
            restore_one(store, &key, &document, line, self.on_existing, summary, bar).await?;
        }
        Ok(())
    }
}

/// Which lines an import writes, and how.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Only lines of this site; `None` writes every line into its own site (`--all-sites`).
    pub site: Option<String>,
    /// What to do with an id that is already stored.
    pub on_existing: OnExisting,
}

/// Restores every JSON line of `input` into `store`. A line that is not UTF-8, not a
/// document, of another site or refused by the store is skipped with its line number and the
/// import goes on.
pub async fn import(
    store: &dyn Store,
    input: &mut dyn BufRead,
    options: &ImportOptions,
) -> Result<Summary, CliError> {
    import_in_batches(store, input, options, MAX_BATCH_WRITES).await
}

/// [`import`] writing at most `per_batch` documents per `write_all` (1: one `restore` per
/// document, the path before batches; kept for the speed comparison in `transfer_measure`).
async fn import_in_batches(
    store: &dyn Store,
    input: &mut dyn BufRead,
    options: &ImportOptions,
    per_batch: usize,
) -> Result<Summary, CliError> {
    let mut pending = Pending::new(per_batch, options.on_existing);
    let bar = progress(None, "import");
    let mut summary = Summary::default();
    let mut line_number = 0;
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        let read = input
            .read_until(b'\n', &mut bytes)
            .map_err(|e| CliError::io("reading the import", e))?;
        if read == 0 {
            break;
        }
        line_number += 1;
        let mut line = bytes.as_slice();
        if line_number == 1 {
            line = line.strip_prefix(BOM).unwrap_or(line);
        }
        let skip = |reason: String| Skipped {
            line: Some(line_number),
            collection: None,
            id: None,
            reason,
        };
        let text = match std::str::from_utf8(line) {
            Ok(text) => text,
            Err(err) => {
                skip(format!(
                    "not UTF-8 (invalid byte at byte {} of the line)",
                    err.valid_up_to() + 1
                ))
                .record(&mut summary, &bar);
                continue;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        let record: Record = match json::parse(text, MAX_LINE_DEPTH) {
            Ok(record) => record,
            Err(err) => {
                skip(format!("not a document line: {err}")).record(&mut summary, &bar);
                continue;
            }
        };
        if let Some(site) = &options.site
            && record.site != *site
        {
            let mut skipped = skip(format!(
                "the line is for site {:?}, not {site:?}, the site being imported into \
                 (import it with --site {}, or restore every line into its own site with \
                 --all-sites)",
                record.site, record.site
            ));
            skipped.collection = Some(record.collection);
            skipped.id = Some(record.id);
            skipped.record(&mut summary, &bar);
            continue;
        }
        let (key, document) = match record.into_parts() {
            Ok(parts) => parts,
            Err(err) => {
                skip(err.to_string()).record(&mut summary, &bar);
                continue;
            }
        };
        pending
            .push(store, key, document, Some(line_number), &mut summary, &bar)
            .await?;
        bar.inc(1);
    }
    pending.flush(store, &mut summary, &bar).await?;
    bar.finish_and_clear();
    Ok(summary)
}

/// Copies every document of the site (or of `only`) from `source` to `destination`;
/// documents whose id exists at the destination are left there as they are.
pub async fn copy(
    source: &dyn Store,
    destination: &dyn Store,
    site: &str,
    only: &[String],
) -> Result<Summary, CliError> {
    let collections = collections(source, site, only).await?;
    let bar = progress(Some(collections.iter().map(|(_, n)| n).sum()), "copy");
    let mut summary = Summary::default();
    let mut pending = Pending::new(MAX_BATCH_WRITES, OnExisting::Skip);
    for (collection, _) in &collections {
        walk_collection(source, site, collection, async |document| {
            let key = Key::new(site, collection.clone(), document.id.clone())?;
            pending
                .push(destination, key, document, None, &mut summary, &bar)
                .await?;
            bar.inc(1);
            Ok(())
        })
        .await?;
    }
    pending.flush(destination, &mut summary, &bar).await?;
    bar.finish_and_clear();
    Ok(summary)
}

#[cfg(test)]
#[path = "transfer_measure.rs"]
mod measure;
