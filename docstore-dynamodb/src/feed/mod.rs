//! The change feed on DynamoDB Streams (`docs/contract.md`, "Change feed"; the crate docs,
//! "Change feed", give the guarantees): a page read walks the table's stream from a
//! [`Frontier`](cursor::Frontier) ([`walk`]), turns document records into changes
//! ([`records`]) and names each delete's actor and time from its stamp
//! ([`crate::stamps`]).

mod cursor;
mod records;
mod shards;
mod source;
mod walk;

use crate::store::DynamoStore;
use cursor::Frontier;
use docstore::Result;
use docstore::feed::{Change, ChangeCursor, ChangePage, FeedScope, FeedStart};
use records::Pending;
use source::StreamSource;
use walk::{Found, now_frontier, walk};

impl DynamoStore {
    /// A page of `scope`'s changes after `start` (see [`docstore::driver::Driver::changes`]).
    pub(crate) async fn read_changes(
        &self,
        scope: &FeedScope,
        start: &FeedStart,
        limit: usize,
    ) -> Result<ChangePage> {
        let stream_arn = self.stream_arn().await?;
        let source = StreamSource {
            store: self,
            stream_arn: &stream_arn,
        };
        let frontier = match start {
            FeedStart::Oldest => Frontier::oldest(&stream_arn),
            FeedStart::Now => now_frontier(&source, &stream_arn).await?,
            FeedStart::After(cursor) => Frontier::parse(cursor)?,
        };
        let walked = walk(&source, frontier, limit, |record| {
            records::pending(record, scope)
        })
        .await?;
        let mut changes = Vec::with_capacity(walked.found.len());
        for Found { item, cursor } in walked.found {
            changes.push(self.change(item, cursor).await?);
        }
        Ok(ChangePage {
            changes,
            next: walked.next.cursor(),
            caught_up: walked.caught_up,
        })
    }

    /// The change of a document write; a delete's actor and time come from its stamp.
    async fn change(&self, pending: Pending, cursor: ChangeCursor) -> Result<Change> {
        match pending {
            Pending::Stored {
                key,
                kind,
                document,
            } => Ok(Change::stored(key, kind, document, cursor)),
            Pending::Removed {
                key,
                removed,
                approximate_time,
            } => {
                let version = removed.doc.version;
                match self.stamp(&key, &removed).await? {
                    Some(stamp) => Ok(Change::deleted(
                        key,
                        version,
                        stamp.time,
                        stamp.actor,
                        cursor,
                    )),
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
                        Ok(Change::deleted(key, version, approximate_time, "", cursor))
                    }
                }
            }
        }
    }
}
