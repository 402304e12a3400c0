//! Reading a stream's shards from a [`Frontier`]: one page (records in shard order, parents
//! before children, each with the cursor right after it) and the frontier of "now". Generic
//! over where the records come from ([`ShardSource`]), so that splits — which the emulators
//! never do — are tested against a fake stream.

use super::cursor::{Frontier, ShardPosition};
use super::shards::{ShardInfo, check_retained, has_child, prune, ready};
use docstore::Result;
use docstore::feed::ChangeCursor;

/// The most records one page looks at (like the memory feed's bound): a scoped read in a
/// stream full of other scopes' changes answers with `caught_up: false` and goes on next
/// time, instead of reading 24 hours of records in one call.
pub(crate) const MAX_SCANNED: usize = 10_000;

/// One read of a shard.
#[derive(Debug)]
pub(crate) struct Fetched<R> {
    /// Records after the position read from, oldest first, each with its sequence number.
    pub(crate) records: Vec<Sequenced<R>>,
    /// The shard is closed and these were its last records.
    pub(crate) closed: bool,
}

/// A record and its sequence number.
#[derive(Debug)]
pub(crate) struct Sequenced<R> {
    pub(crate) sequence: String,
    pub(crate) record: R,
}

/// Where a stream's shards and records come from: DynamoDB Streams, or a fake in tests.
pub(crate) trait ShardSource {
    /// A stream record.
    type Record;

    /// Every shard the stream lists now.
    async fn shards(&self) -> Result<Vec<ShardInfo>>;

    /// The next records of `shard` after `position` (one read's worth; empty at the end of
    /// an open shard).
    async fn fetch(&self, shard: &str, position: &ShardPosition) -> Result<Fetched<Self::Record>>;
}

/// What one page read found.
#[derive(Debug)]
pub(crate) struct Walked<T> {
    /// What `keep` made of the records it kept, each with the cursor right after it.
    pub(crate) found: Vec<Found<T>>,
    /// Where the next page starts.
    pub(crate) next: Frontier,
    /// Every shard was read to its end (as far as the stream showed).
    pub(crate) caught_up: bool,
}

/// A kept record and the cursor after it.
#[derive(Debug)]
pub(crate) struct Found<T> {
    pub(crate) item: T,
    pub(crate) cursor: ChangeCursor,
}

/// Reads from `frontier` until `limit` records were kept, [`MAX_SCANNED`] were looked at,
/// or every shard is read to its end. `keep` turns a record into what the page returns, or
/// `None` for a record the page passes over (its position still moves). The frontier must
/// be valid for the stream (checked here: see [`check_retained`]).
pub(crate) async fn walk<S: ShardSource, T>(
    source: &S,
    mut frontier: Frontier,
    limit: usize,
    mut keep: impl FnMut(S::Record) -> Result<Option<T>>,
) -> Result<Walked<T>> {
    let listed = source.shards().await?;
    let stream_arn = frontier.stream_arn.clone();
    check_retained(&listed, &frontier, &stream_arn)?;
    prune(&listed, &mut frontier);
    let mut found = Vec::new();
    let mut scanned = 0;
    loop {
        let mut moved = false;
        for shard in ready(&listed, &frontier) {
            let fetched = source.fetch(&shard, frontier.position(&shard)).await?;
            moved |= fetched.closed || !fetched.records.is_empty();
            for Sequenced { sequence, record } in fetched.records {
                frontier
                    .shards
                    .insert(shard.clone(), ShardPosition::After(sequence));
                scanned += 1;
                if let Some(item) = keep(record)? {
                    let cursor = frontier.cursor();
                    found.push(Found { item, cursor });
                }
                if found.len() == limit || scanned == MAX_SCANNED {
                    return Ok(Walked {
                        found,
                        next: frontier,
                        caught_up: false,
                    });
                }
            }
            if fetched.closed {
                frontier.shards.insert(shard, ShardPosition::Finished);
            }
        }
        if !moved {
            return Ok(Walked {
                found,
                next: frontier,
                caught_up: true,
            });
        }
    }
}

/// The frontier after every record the stream holds now: closed shards finished, open
/// ones read to their end (Streams cannot say where a shard ends without reading it, so
/// this reads what the open shards retain, once).
pub(crate) async fn now_frontier<S: ShardSource>(source: &S, stream_arn: &str) -> Result<Frontier> {
    let listed = source.shards().await?;
    let mut frontier = Frontier::oldest(stream_arn);
    for shard in &listed {
        if has_child(&listed, &shard.id) {
            frontier
                .shards
                .insert(shard.id.clone(), ShardPosition::Finished);
        }
    }
    for shard in ready_or_open(&listed, &frontier) {
        loop {
            let fetched = source.fetch(&shard, frontier.position(&shard)).await?;
            let end = fetched.records.is_empty() || fetched.closed;
            if let Some(last) = fetched.records.into_iter().last() {
                frontier
                    .shards
                    .insert(shard.clone(), ShardPosition::After(last.sequence));
            }
            if fetched.closed {
                frontier
                    .shards
                    .insert(shard.clone(), ShardPosition::Finished);
            }
            if end {
                break;
            }
        }
    }
    Ok(frontier)
}

/// The shards without a listed child: the ones that may still be written to.
fn ready_or_open(listed: &[ShardInfo], frontier: &Frontier) -> Vec<String> {
    listed
        .iter()
        .filter(|shard| !frontier.finished(&shard.id))
        .map(|shard| shard.id.clone())
        .collect()
}
