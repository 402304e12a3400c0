//! export, import and copy: moving documents with their metadata between stores.
//!
//! Every document written goes through [`Pending`], which writes batches with
//! [`Store::write_all`], several in flight at once, and falls back to [`write_one`], the one
//! place that writes a single document.

use crate::args::OnExisting;
use crate::exit::{self, CliError};
use crate::record::Record;
use crate::timefmt::TimeFormat;
use docstore::batch::{self, MAX_BATCH_BYTES, MAX_BATCH_WRITES, key_bytes};
use docstore::document::MAX_DEPTH;
use docstore::json;
use docstore::{Document, Error, Key, Query, RecountMode, Store, WriteOutcome, document};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{BufRead, IsTerminal, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};

/// The deepest nesting an export line may have: the line object, then the data.
const MAX_LINE_DEPTH: usize = MAX_DEPTH + 1;

/// How many documents one page of a walk reads.
const PAGE: usize = 500;

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
    /// Lines of other sites than the one imported into (not written), counted per site.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub other_sites: BTreeMap<String, u64>,
    /// The `--max-errors` budget of an import (unlimited for a copy).
    #[serde(skip)]
    errors: Arc<ErrorBudget>,
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
    /// Records a skip in `summary` and says it on standard error at once; `code` is the
    /// exit code of its kind, the import's when this rejection spends its `--max-errors`.
    fn record(self, code: i32, summary: &mut Summary, bar: &ProgressBar) -> Result<(), CliError> {
        let place = match (self.line, &self.collection, &self.id) {
            (Some(line), Some(c), Some(id)) => format!("line {line} ({c}/{id})"),
            (Some(line), _, _) => format!("line {line}"),
            (None, Some(c), Some(id)) => format!("{c}/{id}"),
            _ => String::new(),
        };
        bar.suspend(|| eprintln!("skipped {place}: {}", self.reason));
        let line = self.line;
        summary.skipped.push(self);
        if summary.errors.reject() {
            return Err(summary.errors.stopped(code, line));
        }
        Ok(())
    }

    /// Records a line skipped while reading, in its place among the batches `pending` has
    /// in flight ([`Pending::skip`]).
    async fn record_in(
        self,
        pending: &mut Pending<'_>,
        summary: &mut Summary,
        bar: &ProgressBar,
    ) -> Result<(), CliError> {
        pending.skip(self, summary, bar).await
    }
}

/// `import --max-errors`: how many rejected lines (skipped with a reason; lines of other sites
/// are not rejected) an import takes before it stops. Shared with the reader of plain
/// documents ([`crate::plain`]), whose rejections count too.
#[derive(Debug, Default)]
pub struct ErrorBudget {
    /// The rejected lines that stop the import; `None`: it never stops for them.
    max: Option<u64>,
    /// The lines rejected so far.
    rejected: AtomicU64,
}

impl ErrorBudget {
    /// A budget of `max` rejected lines (`None`: unlimited).
    pub fn new(max: Option<u64>) -> Self {
        ErrorBudget {
            max,
            rejected: AtomicU64::new(0),
        }
    }

    /// Counts one rejected line; whether that spends the budget.
    pub fn reject(&self) -> bool {
        let rejected = self.rejected.fetch_add(1, Ordering::Relaxed) + 1;
        self.max.is_some_and(|max| rejected >= max)
    }

    /// Whether the budget is spent.
    pub fn spent(&self) -> bool {
        let rejected = self.rejected.load(Ordering::Relaxed);
        self.max.is_some_and(|max| rejected >= max)
    }

    /// The error that stops the import when the budget is spent at `line`, with the exit
    /// `code` of the rejection that spent it: what is committed and how to resume.
    fn stopped(&self, code: i32, line: Option<u64>) -> CliError {
        let max = self.max.unwrap_or_default();
        let at = line
            .map(|line| format!(" at line {line}"))
            .unwrap_or_default();
        CliError::new(
            code,
            format!(
                "import stopped{at}: {max} lines rejected (--max-errors {max}; each is said \
                 above). At least {} documents are committed or found stored, each batch \
                 whole; the batches around this line may be written or not. Fix what made the \
                 lines fail (or raise --max-errors), then run the same import again to resume: \
                 what is stored already is skipped without a write",
                crate::interrupt::settled()
            ),
        )
    }
}

/// A progress bar on standard error when it is a terminal (and no `-q`); nothing otherwise.
fn progress(total: Option<u64>, verb: &str) -> ProgressBar {
    if crate::progress::quiet() || !std::io::stderr().is_terminal() {
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
    store: &Store,
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
    store: &Store,
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
                exit::FAILURE,
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

/// Writes every document of the site (or of `only`) as JSON lines, timestamps in `time`;
/// returns how many.
pub async fn export(
    store: &Store,
    site: &str,
    only: &[String],
    time: TimeFormat,
    out: &mut dyn Write,
) -> Result<u64, CliError> {
    let collections = collections(store, site, only).await?;
    let bar = progress(Some(collections.iter().map(|(_, n)| n).sum()), "export");
    let exported = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let said = exported.clone();
    crate::interrupt::explain_ctrl_c(move || {
        Some(interrupted_export(
            said.load(std::sync::atomic::Ordering::Relaxed),
        ))
    });
    let mut written = 0;
    for (collection, _) in &collections {
        walk_collection(store, site, collection, async |document| {
            let line = Record::new(site, collection, document).to_line(time);
            writeln!(out, "{line}").map_err(|e| CliError::io("writing the export", e))?;
            written += 1;
            exported.store(written, std::sync::atomic::Ordering::Relaxed);
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

/// What Ctrl-C says during `export`: the output ends early, and the export is run again (it
/// reads; nothing needs resuming).
fn interrupted_export(exported: u64) -> String {
    format!(
        "export: interrupted after {exported} documents; the output is incomplete (its last \
         lines may be missing or cut): run the export again for every document"
    )
}

impl Summary {
    /// Counts what was done with one document, once its write is settled (and for Ctrl-C's
    /// message, [`crate::interrupt::settled_one`]).
    fn record(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Imported => self.imported += 1,
            Outcome::Replaced => self.replaced += 1,
            Outcome::AlreadyPresent => self.already_present += 1,
        }
        crate::interrupt::settled_one();
    }
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
    store: &Store,
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
    store: &Store,
    key: &Key,
    document: &Document,
    line: Option<u64>,
    on_existing: OnExisting,
    summary: &mut Summary,
    bar: &ProgressBar,
) -> Result<(), CliError> {
    match write_one(store, key, document, on_existing).await {
        Ok(outcome) => summary.record(outcome),
        Err(Error::AlreadyExists) if on_existing == OnExisting::Fail => {
            let place = line.map(|l| format!("line {l}: ")).unwrap_or_default();
            return Err(CliError::new(
                exit::ALREADY_EXISTS,
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
            let code = exit::code_of(&err);
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
            .record(code, summary, bar)?;
        }
        Err(err) => return Err(CliError::from(err).context(key)),
    }
    Ok(())
}

/// How many batches import and copy keep in flight at once (see [`Pending`]).
pub const MAX_BATCHES_IN_FLIGHT: usize = 4;

/// How many batches may be in flight for writes into a store with this per-site quota:
/// [`MAX_BATCHES_IN_FLIGHT`], or one at a time under a quota. Batches in flight race each
/// other like concurrent creates, and near a (soft) `max_docs_per_site` the order they land
/// in would decide which documents are written and which are refused; one at a time keeps
/// that decided by the input order, as it always was.
pub fn batches_in_flight(max_docs_per_site: Option<u64>) -> usize {
    match max_docs_per_site {
        Some(_) => 1,
        None => MAX_BATCHES_IN_FLIGHT,
    }
}

/// What the store held at one write's key when its batch read them (see [`Pending`]).
#[derive(Debug)]
enum Found {
    /// Nothing: the write goes into the batch's `write_all`.
    Free,
    /// This document.
    Stored(Document),
    /// Not read (the batch was written without reading, or an earlier write of the same
    /// batch has this key): the write is settled on its own through [`restore_one`].
    Unknown,
}

/// What a batch's trip to the store gave back.
struct Sent {
    /// The batch's writes, in input order.
    writes: Vec<batch::Write>,
    /// What was stored at each write's key, when the batch read it first.
    found: Vec<Found>,
    /// Which writes went into the `write_all`.
    sent: Vec<bool>,
    /// The store's answer to the `write_all` (`None`: nothing sent — fewer than two writes
    /// to send; those go through [`restore_one`]).
    result: Option<docstore::Result<Vec<WriteOutcome>>>,
}

impl Sent {
    /// A batch of `writes` not sent (yet): each one settled on its own.
    fn unsent(writes: Vec<batch::Write>) -> Self {
        let count = writes.len();
        Sent {
            writes,
            found: (0..count).map(|_| Found::Unknown).collect(),
            sent: vec![false; count],
            result: None,
        }
    }
}

/// Whether `result` is a batch refused because one of its ids is stored: the sign of a
/// resumed run.
fn refused_for_a_stored_id(result: &docstore::Result<Vec<WriteOutcome>>) -> bool {
    match result {
        Err(Error::AlreadyExists) => true,
        Err(Error::Batch { source, .. }) => matches!(**source, Error::AlreadyExists),
        _ => false,
    }
}

/// Writes one batch: at once with `write_all` — unless `resuming` says recent batches met
/// stored ids, or this one is refused for a stored id — and otherwise after reading its keys
/// with one `get_many` (on DynamoDB `BatchGetItem`): only the writes whose key is free go
/// into the `write_all`, the others are settled from what was read ([`Pending::settle_write`]).
/// `resuming` is set when a batch meets a stored id and cleared when a read finds none, so a
/// fresh import never reads and a resumed one never sends a write per stored line.
///
/// With `--on-existing fail` nothing is read: a refused batch is written one document at a
/// time, so that nothing after the first stored id is written.
async fn write_batch(
    store: &Store,
    writes: Vec<batch::Write>,
    on_existing: OnExisting,
    resuming: &AtomicBool,
) -> Sent {
    let mut sent = Sent::unsent(writes);
    if sent.writes.len() < 2 {
        return sent;
    }
    if on_existing == OnExisting::Fail {
        sent.result = Some(store.write_all(&sent.writes, "").await);
        sent.sent.fill(true);
        return sent;
    }
    if !resuming.load(Ordering::Relaxed) {
        let result = store.write_all(&sent.writes, "").await;
        if !refused_for_a_stored_id(&result) {
            sent.sent.fill(true);
            sent.result = Some(result);
            return sent;
        }
        resuming.store(true, Ordering::Relaxed);
    }
    let Some(found) = read_keys(store, &sent.writes).await else {
        // The read failed: each write on its own says what is wrong.
        return sent;
    };
    resuming.store(
        found.iter().any(|f| matches!(f, Found::Stored(_))),
        Ordering::Relaxed,
    );
    sent.found = found;
    let free: Vec<batch::Write> = sent
        .writes
        .iter()
        .zip(&sent.found)
        .filter(|(_, found)| matches!(found, Found::Free))
        .map(|(write, _)| write.clone())
        .collect();
    if free.len() >= 2 {
        for (sent, found) in sent.sent.iter_mut().zip(&sent.found) {
            *sent = matches!(found, Found::Free);
        }
        sent.result = Some(store.write_all(&free, "").await);
    }
    sent
}

/// What is stored at the keys of `writes`, read with one `get_many`: [`Found::Unknown`] for
/// a key an earlier write of the batch has; `None` when the read failed.
async fn read_keys(store: &Store, writes: &[batch::Write]) -> Option<Vec<Found>> {
    let mut seen = std::collections::HashSet::new();
    let first: Vec<bool> = writes.iter().map(|w| seen.insert(w.key())).collect();
    let keys: Vec<Key> = writes
        .iter()
        .zip(&first)
        .filter(|(_, first)| **first)
        .map(|(w, _)| w.key().clone())
        .collect();
    let mut stored = store.get_many(&keys).await.ok()?.into_iter();
    let found = first
        .iter()
        .map(|first| match first {
            false => Found::Unknown,
            true => match stored.next().flatten() {
                Some(document) => Found::Stored(document),
                None => Found::Free,
            },
        })
        .collect();
    Some(found)
}

/// Whether a write alone would leave the stored document as it is (`AlreadyPresent`):
/// the document is restorable, and `--on-existing` keeps `stored` (`skip`; `newer` when
/// it is not newer; `overwrite` when it is equal). `fail` and every replacement go through
/// [`restore_one`], which decides them as before.
fn leaves_stored(
    store: &Store,
    key: &Key,
    document: &Document,
    stored: &Document,
    on_existing: OnExisting,
) -> bool {
    let max_doc_bytes = store.driver().options().max_doc_bytes;
    if document::check_restorable(key, document, max_doc_bytes).is_err() {
        return false;
    }
    let newer = (document.version, document.updated_at) > (stored.version, stored.updated_at);
    match on_existing {
        OnExisting::Skip => true,
        OnExisting::Fail => false,
        OnExisting::Newer => stored == document || !newer,
        OnExisting::Overwrite => stored == document,
    }
}

/// A batch's `write_all` under way in a task of its own, awaited by the importing task.
type Sending<'s> = Pin<Box<dyn Future<Output = Sent> + Send + 's>>;

/// A batch task's answer; a panic in the task goes on in the importing task.
fn joined(answer: Result<Sent, tokio::task::JoinError>) -> Sent {
    match answer {
        Ok(sent) => sent,
        // Tasks are never aborted: only a panic ends one early.
        Err(err) => std::panic::resume_unwind(err.into_panic()),
    }
}

/// Reads one line of the import's input into `bytes`. On a multi-threaded runtime the wait
/// is off the runtime's workers ([`tokio::task::block_in_place`]), so the batches in flight
/// are written meanwhile.
fn read_line(input: &mut dyn BufRead, bytes: &mut Vec<u8>) -> std::io::Result<usize> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let mut read = || crate::text::read_line(input, bytes);
    match Handle::try_current().map(|runtime| runtime.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(read),
        _ => read(),
    }
}

/// A batch handed to the store, in input order.
struct InFlight<'s> {
    /// The call under way, or its answer once it came.
    state: State<'s>,
    /// The input line numbers of its writes.
    lines: Vec<Option<u64>>,
    /// Lines skipped while reading after this batch was sent: recorded after its outcomes,
    /// where the one-batch-at-a-time import recorded them.
    after: Vec<Skipped>,
}

/// Where a batch in flight stands.
enum State<'s> {
    /// Its reads and writes are under way.
    Sending(Sending<'s>),
    /// The store answered.
    Sent(Sent),
}

/// Documents waiting to be written together: import and copy write in atomic batches of
/// [`batch::Write::Restore`] through [`Store::write_all`] (one transaction — on SQLite one
/// commit — per batch), up to the shared batch limits. A batch the store refuses as a whole — one
/// document invalid, too large or over the quota, an id given twice in the input, or a store
/// without batches — wrote nothing, and is written again document by document through
/// [`restore_one`], so each document gets exactly the outcome (skip, replace, refusal) it
/// would get alone. Only `Unavailable` (the batch may have been applied) stops the run, as it
/// would alone.
///
/// **A resumed run reads before it writes.** A batch refused because one of its ids is
/// stored reads its keys with one `get_many` (on DynamoDB one `BatchGetItem`) and writes
/// only the documents whose id is free, in one `write_all`; so do the batches after it,
/// until a read finds no stored id (see [`write_batch`]). A stored document the line would
/// leave as it is (`skip`; `newer` or `overwrite` finding it as new or equal) is counted
/// `already_present` from that read, without a write; the rest (`fail`, replacements, a
/// later line with the same id in the batch) goes through [`restore_one`] as before. So
/// re-running an import costs a read per batch of stored lines, not a write per line, and
/// every line gets the outcome it would get alone (a document written by someone else
/// between the read and the write makes the batch's `write_all` refused, and its documents
/// are written one by one).
///
/// **A pipeline.** Up to `depth` batches ([`MAX_BATCHES_IN_FLIGHT`]) are sent at once while
/// the input is read on: their `write_all` futures are polled together in the calling task
/// (no spawned task, so the store stays borrowed), so the SQLite writer commits the batches
/// queued meanwhile in one transaction and DynamoDB has several `TransactWriteItems` under
/// way. Nothing observable changes:
///
/// - *Answers are taken in input order.* The oldest batch is settled (counted, or written
///   again document by document) before any later one, and a line skipped while reading is
///   recorded after the batches sent before it was read (see [`Pending::skip`]), so the
///   summary, the skipped lines in their order, the messages on standard error and the first
///   error that stops the run are those of one batch at a time.
/// - *One key is never in two batches under way.* A document whose key is in a batch still in
///   flight waits until that batch (and every older one) is settled, so the writes of one key
///   happen in input order and `--on-existing newer|overwrite` decide exactly as before. (Two
///   lines with one id in the same batch make the store refuse it, as always.)
/// - *`--on-existing fail` sends one batch at a time*: it promises to stop at the first line
///   whose id is stored, so nothing after that line may be written; with batches in flight
///   behind it, later lines would already be. Under a per-site quota, one at a time too (see
///   [`batches_in_flight`]).
/// - *When the run stops on an error* (a batch or document `Unavailable`, a backend error;
///   never a refusal, which is skipped) the batches sent after the failing one are dropped
///   unanswered: each is written whole or not at all, as a run interrupted anywhere leaves
///   it, and running the import again (`skip`, the default; or `newer`/`overwrite`, which
///   find those documents equal) completes it.
///
/// Memory stays bounded: at most `depth` batches in flight plus the one being filled.
///
/// Concurrency on SQLite needs a lone write not to finish within its first poll: true on the
/// CLI's current-thread runtime, where SQLite runs it on a blocking thread; on a multi-thread
/// runtime SQLite writes a lone call in place (`block_in_place`) and the batches would be
/// written one after the other, still correctly.
struct Pending<'s> {
    /// Where the batches go.
    store: &'s Store,
    /// The restores of the batch being filled.
    writes: Vec<batch::Write>,
    /// Their input line numbers.
    lines: Vec<Option<u64>>,
    /// The bytes the batch writes, as [`MAX_BATCH_BYTES`] counts them (or more: documents
    /// are measured by a cheap upper bound while the batch stays far from the limit).
    bytes: usize,
    /// The most writes in one batch; 1 writes every document alone (no `write_all`).
    capacity: usize,
    /// What to do with an id that is already stored.
    on_existing: OnExisting,
    /// The most batches in flight at once.
    depth: usize,
    /// The batches sent and not yet settled, oldest first.
    in_flight: VecDeque<InFlight<'s>>,
    /// The keys of the batches in flight, with how many times each.
    keys_in_flight: HashMap<Key, usize>,
    /// Whether recent batches met stored ids: the next ones read their keys before writing
    /// ([`write_batch`]).
    resuming: Arc<AtomicBool>,
}

impl<'s> Pending<'s> {
    /// Batches of up to `capacity` documents into `store`, up to `depth` of them in flight
    /// (one with `--on-existing fail`).
    fn new(store: &'s Store, capacity: usize, depth: usize, on_existing: OnExisting) -> Self {
        let depth = match on_existing {
            OnExisting::Fail => 1,
            _ => depth.clamp(1, MAX_BATCHES_IN_FLIGHT),
        };
        Pending {
            store,
            writes: Vec::new(),
            lines: Vec::new(),
            bytes: 0,
            capacity: capacity.clamp(1, MAX_BATCH_WRITES),
            on_existing,
            depth,
            in_flight: VecDeque::new(),
            keys_in_flight: HashMap::new(),
            resuming: Arc::default(),
        }
    }

    /// Queues one document, first sending the batch when it is full, then waiting for the
    /// batches in flight with its key (the one just sent included).
    async fn push(
        &mut self,
        key: Key,
        document: Document,
        line: Option<u64>,
        summary: &mut Summary,
        bar: &ProgressBar,
    ) -> Result<(), CliError> {
        // A bound (no serialization) unless it would end the batch: exactly measured then.
        let mut bytes = key_bytes(&key).saturating_add(document::data_size_bound(&document.data));
        if self.bytes.saturating_add(bytes) > MAX_BATCH_BYTES {
            bytes = key_bytes(&key) + document::data_size(&document.data);
        }
        if !self.writes.is_empty()
            && (self.writes.len() >= self.capacity || self.bytes + bytes > MAX_BATCH_BYTES)
        {
            self.send(summary, bar).await?;
        }
        while self.keys_in_flight.contains_key(&key) {
            self.settle_oldest(summary, bar).await?;
        }
        self.writes.push(batch::Write::restore(key, document));
        self.lines.push(line);
        self.bytes += bytes;
        if self.capacity == 1 {
            self.send(summary, bar).await?;
        }
        Ok(())
    }

    /// Records a line skipped while reading, where one batch at a time would have: after
    /// the outcomes of every batch sent so far (at once when none is in flight).
    async fn skip(
        &mut self,
        skipped: Skipped,
        summary: &mut Summary,
        bar: &ProgressBar,
    ) -> Result<(), CliError> {
        self.settle_answered(summary, bar).await?;
        match self.in_flight.back_mut() {
            Some(last) => last.after.push(skipped),
            None => skipped.record(exit::INVALID_ARGUMENT, summary, bar)?,
        }
        Ok(())
    }

    /// Sends the queued documents and settles every batch: the end of the run.
    async fn finish(&mut self, summary: &mut Summary, bar: &ProgressBar) -> Result<(), CliError> {
        self.send(summary, bar).await?;
        while !self.in_flight.is_empty() {
            self.settle_oldest(summary, bar).await?;
        }
        Ok(())
    }

    /// Sends the batch being filled (nothing when it is empty), once fewer than `depth`
    /// batches are in flight.
    async fn send(&mut self, summary: &mut Summary, bar: &ProgressBar) -> Result<(), CliError> {
        if self.writes.is_empty() {
            return Ok(());
        }
        while self.in_flight.len() >= self.depth {
            self.settle_oldest(summary, bar).await?;
        }
        let writes = std::mem::take(&mut self.writes);
        let lines = std::mem::take(&mut self.lines);
        self.bytes = 0;
        for write in &writes {
            *self.keys_in_flight.entry(write.key().clone()).or_default() += 1;
        }
        let state = if writes.len() > 1 {
            let (store, resuming) = (self.store.clone(), self.resuming.clone());
            let on_existing = self.on_existing;
            // A task of its own: it goes on while the importing task waits for its input
            // (an input that stalls, like `tail -f`, leaves no batch sent and unwritten).
            let task =
                tokio::spawn(
                    async move { write_batch(&store, writes, on_existing, &resuming).await },
                );
            State::Sending(Box::pin(async move { joined(task.await) }))
        } else {
            State::Sent(Sent::unsent(writes))
        };
        self.in_flight.push_back(InFlight {
            state,
            lines,
            after: Vec::new(),
        });
        // Start it now (and take the answers that came), not when the pipeline is full.
        self.settle_answered(summary, bar).await
    }

    /// Polls every batch in flight once, then settles the oldest ones already answered.
    async fn settle_answered(
        &mut self,
        summary: &mut Summary,
        bar: &ProgressBar,
    ) -> Result<(), CliError> {
        std::future::poll_fn(|cx| {
            poll_in_flight(&mut self.in_flight, cx);
            Poll::Ready(())
        })
        .await;
        while self
            .in_flight
            .front()
            .is_some_and(|oldest| matches!(oldest.state, State::Sent(_)))
        {
            self.settle_oldest(summary, bar).await?;
        }
        Ok(())
    }

    /// Waits for the oldest batch in flight (polling all of them meanwhile) and settles it:
    /// counts it, or writes it again document by document when the store refused it, then
    /// records the lines skipped after it.
    async fn settle_oldest(
        &mut self,
        summary: &mut Summary,
        bar: &ProgressBar,
    ) -> Result<(), CliError> {
        let in_flight = &mut self.in_flight;
        let oldest = std::future::poll_fn(|cx| {
            poll_in_flight(in_flight, cx);
            match in_flight.front() {
                None => Poll::Ready(None),
                Some(InFlight {
                    state: State::Sent(_),
                    ..
                }) => Poll::Ready(in_flight.pop_front()),
                Some(_) => Poll::Pending,
            }
        })
        .await;
        let Some(InFlight {
            state: State::Sent(sent),
            lines,
            after,
        }) = oldest
        else {
            return Ok(());
        };
        if let Some(Err(Error::Unavailable { .. })) = &sent.result {
            let Some(Err(err)) = sent.result else {
                unreachable!("matched above")
            };
            let first = sent.writes[0].key();
            return Err(CliError::from(err).context(format!(
                "the batch of {} documents starting at {first}",
                sent.writes.len()
            )));
        }
        let written = matches!(sent.result, Some(Ok(_)));
        for (((write, found), in_write_all), line) in
            sent.writes.iter().zip(sent.found).zip(sent.sent).zip(lines)
        {
            let batch::Write::Restore { key, document } = write else {
                unreachable!("only restores are queued")
            };
            let settled = SettledWrite {
                key,
                document,
                found,
                written: in_write_all && written,
                line,
            };
            self.settle_write(settled, summary, bar).await?;
        }
        for write in &sent.writes {
            if let Some(count) = self.keys_in_flight.get_mut(write.key()) {
                *count -= 1;
                if *count == 0 {
                    self.keys_in_flight.remove(write.key());
                }
            }
        }
        for skipped in after {
            skipped.record(exit::INVALID_ARGUMENT, summary, bar)?;
        }
        Ok(())
    }
}

/// One write of a settled batch and what its batch learned of it.
struct SettledWrite<'a> {
    key: &'a Key,
    document: &'a Document,
    /// What the batch's read found at the key ([`Found::Unknown`] when it read nothing).
    found: Found,
    /// Whether the batch's `write_all` wrote it.
    written: bool,
    /// Its input line (import only).
    line: Option<u64>,
}

impl Pending<'_> {
    /// Counts one write of a settled batch: imported when its `write_all` wrote it, already
    /// present when what was read before says the write would leave the stored document as
    /// it is ([`leaves_stored`]), and otherwise written on its own ([`restore_one`]).
    async fn settle_write(
        &self,
        write: SettledWrite<'_>,
        summary: &mut Summary,
        bar: &ProgressBar,
    ) -> Result<(), CliError> {
        let SettledWrite {
            key,
            document,
            found,
            written,
            line,
        } = write;
        if written {
            summary.record(Outcome::Imported);
            return Ok(());
        }
        if let Found::Stored(stored) = &found
            && leaves_stored(self.store, key, document, stored, self.on_existing)
        {
            summary.record(Outcome::AlreadyPresent);
            return Ok(());
        }
        restore_one(
            self.store,
            key,
            document,
            line,
            self.on_existing,
            summary,
            bar,
        )
        .await
    }
}

/// Polls every batch still being sent, keeping the answers that came.
fn poll_in_flight(in_flight: &mut VecDeque<InFlight<'_>>, cx: &mut Context<'_>) {
    for batch in in_flight.iter_mut() {
        if let State::Sending(sending) = &mut batch.state
            && let Poll::Ready(sent) = sending.as_mut().poll(cx)
        {
            batch.state = State::Sent(sent);
        }
    }
}

/// Which lines an import writes, and how.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Only lines of this site; `None` writes every line into its own site (`--all-sites`).
    pub site: Option<String>,
    /// What to do with an id that is already stored.
    pub on_existing: OnExisting,
    /// The most batches in flight at once ([`batches_in_flight`]; `--on-existing fail`
    /// always sends one at a time).
    pub in_flight: usize,
    /// `--max-errors`: the rejected lines after which the import stops.
    pub errors: Arc<ErrorBudget>,
}

/// Restores every JSON line of `input` into `store`. A line that is not UTF-8, not a
/// document, of another site or refused by the store is skipped with its line number and the
/// import goes on.
pub async fn import(
    store: &Store,
    input: &mut dyn BufRead,
    options: &ImportOptions,
) -> Result<Summary, CliError> {
    import_in_batches(store, input, options, MAX_BATCH_WRITES).await
}

/// [`import`] writing at most `per_batch` documents per `write_all` (1: one `restore` per
/// document, the path before batches; kept for the speed comparison in `transfer_measure`).
async fn import_in_batches(
    store: &Store,
    input: &mut dyn BufRead,
    options: &ImportOptions,
    per_batch: usize,
) -> Result<Summary, CliError> {
    let mut pending = Pending::new(store, per_batch, options.in_flight, options.on_existing);
    let bar = progress(None, "import");
    let mut summary = Summary {
        errors: Arc::clone(&options.errors),
        ..Summary::default()
    };
    let mut line_number = 0;
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        let read =
            read_line(input, &mut bytes).map_err(|e| CliError::io("reading the import", e))?;
        if read == 0 {
            break;
        }
        line_number += 1;
        if options.errors.spent() {
            // A plain document rejected while reading spent it ([`crate::plain`]).
            return Err(options
                .errors
                .stopped(exit::INVALID_ARGUMENT, Some(line_number)));
        }
        let skip = |reason: String| Skipped {
            line: Some(line_number),
            collection: None,
            id: None,
            reason,
        };
        let record = match read_record(&bytes, line_number == 1) {
            Ok(Some(record)) => record,
            Ok(None) => continue,
            Err(reason) => {
                skip(reason)
                    .record_in(&mut pending, &mut summary, &bar)
                    .await?;
                continue;
            }
        };
        if let Some(site) = &options.site
            && record.site != *site
        {
            *summary.other_sites.entry(record.site).or_default() += 1;
            continue;
        }
        let (key, document) = match record.into_parts() {
            Ok(parts) => parts,
            Err(err) => {
                skip(err.to_string())
                    .record_in(&mut pending, &mut summary, &bar)
                    .await?;
                continue;
            }
        };
        pending
            .push(key, document, Some(line_number), &mut summary, &bar)
            .await?;
        bar.inc(1);
    }
    pending.finish(&mut summary, &bar).await?;
    bar.finish_and_clear();
    Ok(summary)
}

/// The record of one import line (its bytes as read, the first line possibly starting with
/// a byte order mark): `None` for a blank line, else why the line is skipped.
pub(crate) fn read_record(line: &[u8], first_line: bool) -> Result<Option<Record>, String> {
    let Some(text) = crate::text::line_text(line, first_line)? else {
        return Ok(None);
    };
    json::parse(text, MAX_LINE_DEPTH)
        .map(Some)
        .map_err(|err| format!("not a document line: {err}"))
}

/// Copies every document of the site (or of `only`) from `source` to `destination`, up to
/// `in_flight` batches at once ([`batches_in_flight`]); documents whose id exists at the
/// destination are left there as they are.
pub async fn copy(
    source: &Store,
    destination: &Store,
    site: &str,
    only: &[String],
    in_flight: usize,
) -> Result<Summary, CliError> {
    let collections = collections(source, site, only).await?;
    let bar = progress(Some(collections.iter().map(|(_, n)| n).sum()), "copy");
    let mut summary = Summary::default();
    let mut pending = Pending::new(destination, MAX_BATCH_WRITES, in_flight, OnExisting::Skip);
    for (collection, _) in &collections {
        walk_collection(source, site, collection, async |document| {
            let key = Key::new(site, collection.clone(), document.id.clone())?;
            pending
                .push(key, document, None, &mut summary, &bar)
                .await?;
            bar.inc(1);
            Ok(())
        })
        .await?;
    }
    pending.finish(&mut summary, &bar).await?;
    bar.finish_and_clear();
    Ok(summary)
}

#[cfg(test)]
#[path = "transfer_measure.rs"]
mod measure;

#[cfg(test)]
#[path = "transfer_pipeline.rs"]
mod pipeline;
