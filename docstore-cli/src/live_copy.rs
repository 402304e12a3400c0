//! `docstore copy --follow`: a live migration. The source's feed position is taken before the
//! copy starts, so every write made during or after the copy is in the feed from there; after
//! the copy, the feed is applied to the destination ([`Store::replay`]) until Ctrl-C or
//! `--until-idle`; then both stores are walked side by side and every document's version
//! compared. Ctrl-C during the copy or the verification says what is committed and how to go
//! on, and ends the command with exit code 130 (docs/contract.md, "The command line").

use crate::exit::CliError;
use crate::interrupt;
use crate::transfer::{self, Summary};
use crate::watch::{self, Until};
use docstore::feed::FeedScope;
use docstore::{Document, FeedStart, Query, Store};
use futures_util::TryStreamExt;
use serde::Serialize;

/// Mismatches `verify` lists in full; beyond that it only counts them.
const MAX_LISTED_MISMATCHES: usize = 100;

/// What a live copy did.
#[derive(Debug, Default, Serialize)]
pub struct LiveCopy {
    /// The copy itself.
    #[serde(flatten)]
    pub copy: Summary,
    /// Changes of the feed applied to the destination after the copy.
    pub followed: u64,
    /// Documents compared at the end, present in either store.
    pub verified: u64,
    /// Documents whose version differs between the stores (or that only one holds).
    pub mismatched: Vec<Mismatch>,
    /// Mismatches beyond the ones listed.
    pub more_mismatched: u64,
}

/// One document that differs after a live copy.
#[derive(Debug, Serialize)]
pub struct Mismatch {
    /// The collection.
    pub collection: String,
    /// The id.
    pub id: String,
    /// Its version in the source (`None`: not there).
    pub source: Option<u64>,
    /// Its version in the destination.
    pub destination: Option<u64>,
}

/// Copies the site's documents (or `only` these collections) to `destination`, follows the
/// feed, then verifies.
pub async fn copy_and_follow(
    source: &Store,
    destination: &Store,
    site: &str,
    only: &[String],
    in_flight: usize,
    until: Until,
) -> Result<LiveCopy, CliError> {
    explain_ctrl_c_while_copying();
    let scope = FeedScope::site(site)?;
    let before = source.changes(&scope, &FeedStart::Now, 1).await?.next;
    let copy = transfer::copy(source, destination, site, only, in_flight).await?;
    eprintln!("copied; following the feed of {site} (Ctrl-C to stop and verify)");
    // Ctrl-C now ends the follow (see `watch::follow`), and the verification runs.
    interrupt::explain_ctrl_c(|| None);
    let mut followed = 0;
    let start = FeedStart::After(before);
    watch::follow(source, &scope, start, until, async |change| {
        if only.is_empty() || only.iter().any(|c| c == change.key.collection()) {
            destination.replay(&change).await?;
            followed += 1;
        }
        Ok(())
    })
    .await?;
    let copied = copy.imported + copy.already_present;
    interrupt::explain_ctrl_c(move || Some(interrupted_verifying(copied, followed)));
    let mut live = LiveCopy {
        copy,
        followed,
        ..LiveCopy::default()
    };
    verify(source, destination, site, only, &mut live).await?;
    Ok(live)
}

/// From now on, Ctrl-C says what the copy stage of `copy --follow` has committed and how
/// to resume (see [`interrupted_copying`]); called before the stores open, too.
pub fn explain_ctrl_c_while_copying() {
    interrupt::explain_ctrl_c(|| Some(interrupted_copying(interrupt::settled())));
}

/// What Ctrl-C during the copy stage of `copy --follow` says: `settled` documents are
/// committed or found stored, nothing of the feed is applied, and the same command resumes.
fn interrupted_copying(settled: u64) -> String {
    format!(
        "interrupted: copy --follow stopped while copying, before following the feed, with at \
         least {settled} documents committed or found stored. Every batch written so far is \
         committed whole (no document is half-written); no change of the feed was applied \
         yet. Run the same copy --follow again to resume: what is stored already is skipped \
         without a write, the feed is read from before that new copy, and the verification \
         at its end lists any copied document that changed in the source in between"
    )
}

/// What Ctrl-C during the verification of `copy --follow` says: the copy and the changes
/// followed are committed; only the comparison is unfinished.
fn interrupted_verifying(copied: u64, followed: u64) -> String {
    format!(
        "interrupted: copy --follow stopped while verifying. The copy ({copied} documents \
         committed or found stored) and the {followed} changes followed are committed in the \
         destination; only the comparison of the two stores is unfinished. To verify, run \
         the same copy --follow --until-idle: it skips what is stored, follows the feed \
         from its own start, and compares every document"
    )
}

/// Walks every collection of the site (or `only`) in both stores in id order, side by side,
/// and records each document whose version differs.
async fn verify(
    source: &Store,
    destination: &Store,
    site: &str,
    only: &[String],
    live: &mut LiveCopy,
) -> Result<(), CliError> {
    let mut names: Vec<String> = Vec::new();
    for store in [source, destination] {
        let collections = store
            .collections(site)
            .await?
            .into_iter()
            .map(|(name, _)| name);
        names.extend(collections.filter(|name| only.is_empty() || only.contains(name)));
    }
    names.sort();
    names.dedup();
    for collection in &names {
        verify_collection(source, destination, site, collection, live).await?;
    }
    Ok(())
}

async fn verify_collection(
    source: &Store,
    destination: &Store,
    site: &str,
    collection: &str,
    live: &mut LiveCopy,
) -> Result<(), CliError> {
    let query = Query::new();
    let mut left = source.stream(site, collection, &query);
    let mut right = destination.stream(site, collection, &query);
    let (mut a, mut b) = (left.try_next().await?, right.try_next().await?);
    loop {
        let (source_doc, destination_doc) = match (&a, &b) {
            (None, None) => return Ok(()),
            (Some(x), Some(y)) if x.id == y.id => (Some(x), Some(y)),
            (Some(x), Some(y)) if x.id < y.id => (Some(x), None),
            (Some(x), None) => (Some(x), None),
            (_, y) => (None, y.as_ref()),
        };
        record(collection, source_doc, destination_doc, live);
        if source_doc.is_some() {
            a = left.try_next().await?;
        }
        if destination_doc.is_some() {
            b = right.try_next().await?;
        }
    }
}

/// Counts one compared document, listing it when the versions differ.
fn record(
    collection: &str,
    source: Option<&Document>,
    destination: Option<&Document>,
    live: &mut LiveCopy,
) {
    live.verified += 1;
    let versions = (source.map(|d| d.version), destination.map(|d| d.version));
    if versions.0 == versions.1 {
        return;
    }
    if live.mismatched.len() == MAX_LISTED_MISMATCHES {
        live.more_mismatched += 1;
        return;
    }
    let id = source
        .or(destination)
        .map(|d| d.id.clone())
        .unwrap_or_default();
    live.mismatched.push(Mismatch {
        collection: collection.to_owned(),
        id,
        source: versions.0,
        destination: versions.1,
    });
}
