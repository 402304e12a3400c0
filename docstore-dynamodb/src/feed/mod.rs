//! The change feed on DynamoDB Streams (`docs/contract.md`, "Change feed"; the crate docs,
//! "Change feed", give the guarantees): a page read walks the table's stream from a
//! [`Frontier`](cursor::Frontier) ([`walk`]), turns document records into changes
//! ([`records`]) and names each delete's actor and time from its stamp
//! ([`crate::stamps`]).

mod cache;
mod cursor;
mod records;
mod shards;
mod source;
mod walk;

use crate::stamps::Stamp;
use crate::store::DynamoStore;
pub(crate) use cache::FeedCache;
use cursor::Frontier;
use docstore::Result;
use docstore::feed::{Change, ChangeCursor, ChangePage, FeedScope, FeedStart};
use records::Pending;
use source::StreamSource;
use walk::{Found, now_frontier, walk};

/// Reads a change cursor as a DynamoDB store's feed does and writes the position back as
/// cursor text (the same text for the same position): [`docstore::Error::InvalidArgument`]
/// for one this backend did not write. Only the fuzz targets and their replay test call it.
pub fn reencode_cursor(cursor: &ChangeCursor) -> Result<ChangeCursor> {
    Frontier::parse(cursor).map(|frontier| frontier.cursor())
}

impl DynamoStore {
    /// A page of `scope`'s changes after `start` (see [`docstore::driver::Driver::changes`]).
    pub(crate) async fn read_changes(
        &self,
        scope: &FeedScope,
        start: &FeedStart,
        limit: usize,
    ) -> Result<ChangePage> {
        let parsed = match start {
            FeedStart::After(cursor) => Some(Frontier::parse(cursor)?),
            FeedStart::Snapshot => return Err(FeedStart::snapshot_refused()),
            FeedStart::Oldest | FeedStart::Now => None,
        };
        let stream_arn = match self.feed_cache.arn() {
            // A cursor of another stream than the one remembered: the stream may have been
            // enabled again since (by another process), so ask the table.
            Some(arn) if parsed.as_ref().is_none_or(|f| f.stream_arn == arn) => arn,
            _ => {
                let arn = self.stream_arn().await?;
                self.feed_cache.set_arn(&arn);
                arn
            }
        };
        let source = StreamSource {
            store: self,
            stream_arn: &stream_arn,
        };
        let frontier = match (start, parsed) {
            (_, Some(frontier)) => frontier,
            (FeedStart::Now, None) => now_frontier(&source, &stream_arn).await?,
            _ => Frontier::oldest(&stream_arn),
        };
        let from_oldest = matches!(start, FeedStart::Oldest);
        let walked = walk(&source, frontier, limit, from_oldest, |record| {
            records::pending(record, scope)
        })
        .await?;
        let removed: Vec<_> = walked
            .found
            .iter()
            .filter_map(|found| match &found.item {
                Pending::Removed { key, removed, .. } => Some((key, removed)),
                Pending::Stored { .. } => None,
            })
            .collect();
        let mut stamps = self.stamps(&removed).await?.into_iter();
        let mut changes = Vec::with_capacity(walked.found.len());
        for Found { item, cursor } in walked.found {
            let stamp = match item {
                Pending::Removed { .. } => stamps.next().flatten(),
                Pending::Stored { .. } => None,
            };
            changes.push(change(item, stamp, cursor));
        }
        Ok(ChangePage {
            changes,
            next: walked.next.cursor(),
            caught_up: walked.caught_up,
        })
    }
}

/// The change of a document write; a delete's actor and time come from its stamp.
fn change(pending: Pending, stamp: Option<Stamp>, cursor: ChangeCursor) -> Change {
    match pending {
        Pending::Stored {
            key,
            kind,
            document,
            previous,
        } => Change::stored(key, kind, document, cursor).with_previous(previous),
        Pending::Removed {
            key,
            removed,
            approximate_time,
        } => {
            let version = removed.doc.version;
            let change = match stamp {
                Some(stamp) if stamp.expired => Change::expired(key, &removed.doc, cursor),
                Some(stamp) => Change::deleted(key, version, stamp.time, stamp.actor, cursor),
                // The service's time to live removes a document the sweep missed
                // (`crate::expiring`) one day after it expired: its expiry.
                None if removed.doc.is_expired(approximate_time) => {
                    tracing::warn!(
                        %key,
                        version,
                        "the change feed shows an expired document removed by DynamoDB's time \
                         to live, which no sweep removed: the collection counter still counts \
                         it until a sweep or `recount` (docstore fsck) settles it"
                    );
                    Change::expired(key, &removed.doc, cursor)
                }
                None => {
                    // Every docstore delete writes its stamp in its own transaction:
                    // this delete came from elsewhere (the console, another SDK, time to
                    // live), so nobody docstore knows deleted it.
                    tracing::warn!(
                        %key,
                        version,
                        "the change feed shows a delete that docstore did not make: its \
                         actor is empty and its time is the stream's approximate time"
                    );
                    Change::deleted(key, version, approximate_time, "", cursor)
                }
            };
            change.with_previous(Some(removed.doc))
        }
    }
}
