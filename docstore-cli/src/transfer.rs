//! export, import and copy: moving documents with their metadata between stores.

use crate::exit::CliError;
use crate::record::Record;
use docstore::{Document, Error, Query, Store};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::io::{BufRead, IsTerminal, Write};

/// How many documents one page of a walk reads.
const PAGE: usize = 500;

/// What an import or copy did.
#[derive(Debug, Default, Serialize)]
pub struct Summary {
    /// Documents written.
    pub imported: u64,
    /// Documents skipped because their id already exists at the destination (a resumed run).
    pub already_present: u64,
    /// Documents or lines not written, and why.
    pub skipped: Vec<Skipped>,
}

/// One document or line that was not written.
#[derive(Debug, Serialize)]
pub struct Skipped {
    /// The input line (import only).
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

/// The collections to move: the given ones, or all of the site's, with their counts.
async fn collections(
    store: &dyn Store,
    site: &str,
    only: &[String],
) -> Result<Vec<(String, u64)>, CliError> {
    let all = store.collections(site).await?;
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

/// Restores one document into `store`, recording the outcome in `summary`. Transient and
/// backend errors stop the run (it can be resumed); per-document refusals are skipped.
async fn restore_one(
    store: &dyn Store,
    key: &docstore::Key,
    document: &Document,
    line: Option<u64>,
    summary: &mut Summary,
) -> Result<(), CliError> {
    match store.restore(key, document).await {
        Ok(()) => summary.imported += 1,
        Err(Error::AlreadyExists) => summary.already_present += 1,
        Err(
            err
            @ (Error::InvalidArgument(_) | Error::TooLarge { .. } | Error::QuotaExceeded { .. }),
        ) => {
            summary.skipped.push(Skipped {
                line,
                collection: Some(key.collection().to_owned()),
                id: Some(key.id().to_owned()),
                reason: err.to_string(),
            });
        }
        Err(err) => return Err(err.into()),
    }
    Ok(())
}

/// Restores every JSON line of `input` into `store`.
pub async fn import(store: &dyn Store, input: &mut dyn BufRead) -> Result<Summary, CliError> {
    let bar = progress(None, "import");
    let mut summary = Summary::default();
    let mut line_number = 0;
    let mut line = String::new();
    loop {
        line.clear();
        let read = input
            .read_line(&mut line)
            .map_err(|e| CliError::io("reading the import", e))?;
        if read == 0 {
            break;
        }
        line_number += 1;
        if line.trim().is_empty() {
            continue;
        }
        let skip = |reason: String| Skipped {
            line: Some(line_number),
            collection: None,
            id: None,
            reason,
        };
        let record: Record = match serde_json::from_str(&line) {
            Ok(record) => record,
            Err(err) => {
                summary
                    .skipped
                    .push(skip(format!("not a document line: {err}")));
                continue;
            }
        };
        let (key, document) = match record.into_parts() {
            Ok(parts) => parts,
            Err(err) => {
                summary.skipped.push(skip(err.to_string()));
                continue;
            }
        };
        restore_one(store, &key, &document, Some(line_number), &mut summary).await?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(summary)
}

/// Copies every document of the site (or of `only`) from `source` to `destination`.
pub async fn copy(
    source: &dyn Store,
    destination: &dyn Store,
    site: &str,
    only: &[String],
) -> Result<Summary, CliError> {
    let collections = collections(source, site, only).await?;
    let bar = progress(Some(collections.iter().map(|(_, n)| n).sum()), "copy");
    let mut summary = Summary::default();
    for (collection, _) in &collections {
        walk_collection(source, site, collection, async |document| {
            let key = docstore::Key::new(site, collection.as_str(), document.id.as_str())?;
            restore_one(destination, &key, &document, None, &mut summary).await?;
            bar.inc(1);
            Ok(())
        })
        .await?;
    }
    bar.finish_and_clear();
    Ok(summary)
}
