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

    /// The shards the stream lists (a source may answer from a recent listing: see
    /// [`forget_shards`](Self::forget_shards)).
    async fn shards(&self) -> Result<Vec<ShardInfo>>;

    /// Makes the next [`shards`](Self::shards) list the stream again: a shard closed (its
    /// children may be new), or a cursor names a shard the listing did not hold.
    fn forget_shards(&self) {}

    /// The next records of `shard` after `position` (one read's worth; empty at the end of
    /// an open shard). An unread shard is read from `start` when given (its first sequence
    /// number: records trimmed since are [`docstore::Error::CursorExpired`]), else from the
    /// oldest record the stream retains (the trim horizon).
    async fn fetch(
        &self,
        shard: &str,
        position: &ShardPosition,
        start: Option<&str>,
    ) -> Result<Fetched<Self::Record>>;
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
/// or every shard is read to its end. `from_oldest`: `frontier` is the start of the stream
/// ([`docstore::FeedStart::Oldest`]), whose unread shards are read from what the stream still
/// retains; from a cursor, an unread shard is read from its first record, so that a shard
/// trimmed since the cursor was written expires the cursor instead of skipping records. `keep` turns a record into what the page returns, or
/// `None` for a record the page passes over (its position still moves). The frontier must
/// be valid for the stream (checked here: see [`check_retained`]).
pub(crate) async fn walk<S: ShardSource, T>(
    source: &S,
    mut frontier: Frontier,
    limit: usize,
    from_oldest: bool,
    mut keep: impl FnMut(S::Record) -> Result<Option<T>>,
) -> Result<Walked<T>> {
    let mut listed = source.shards().await?;
    let stream_arn = frontier.stream_arn.clone();
    if check_retained(&listed, &frontier, &stream_arn).is_err()
        || names_unlisted(&listed, &frontier)
    {
        // The listing may be older than the cursor: list again before judging it.
        source.forget_shards();
        listed = source.shards().await?;
    }
    check_retained(&listed, &frontier, &stream_arn)?;
    prune(&listed, &mut frontier);
    let mut found = Vec::new();
    let mut scanned = 0;
    loop {
        let mut moved = false;
        let mut closed = false;
        for shard in ready(&listed, &frontier) {
            let start = match from_oldest {
                true => None,
                false => listed
                    .iter()
                    .find(|s| s.id == shard)
                    .and_then(|s| s.start.as_deref()),
            };
            let fetched = source
                .fetch(&shard, frontier.position(&shard), start)
                .await?;
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
                closed = true;
            }
        }
        if closed {
            // A closed shard's children (a split, or the rollover) may not be listed yet.
            source.forget_shards();
            listed = source.shards().await?;
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

/// Whether `frontier` names a shard that `listed` does not hold (finished ones included: a
/// reader that finished a shard may also have read children this listing does not show).
fn names_unlisted(listed: &[ShardInfo], frontier: &Frontier) -> bool {
    frontier
        .shards
        .keys()
        .any(|shard| !listed.iter().any(|s| &s.id == shard))
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
            let fetched = source
                .fetch(&shard, frontier.position(&shard), None)
                .await?;
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

#[cfg(test)]
mod tests {
    //! Splits against a fake stream (the emulators keep one shard that never splits).
    use super::*;
    use std::cell::{Cell, RefCell};

    /// A fake stream: each shard's records (numbers, sequence = the number), closed or not.
    struct Fake {
        shards: Vec<(ShardInfo, Vec<u64>, bool)>,
        /// Records per fetch.
        page: usize,
        fetches: Cell<usize>,
        forgotten: Cell<usize>,
        reads: RefCell<Vec<String>>,
    }

    fn sequence(n: u64) -> String {
        format!("{n:021}")
    }

    /// `p` (closed) split into `c1` (closed, split into `g`) and `c2`; records are numbered
    /// in write order across shards, as a stream would hold them.
    fn stream(page: usize) -> Fake {
        let shard = |id: &str, parent: Option<&str>| ShardInfo {
            id: id.into(),
            parent: parent.map(Into::into),
            start: None,
        };
        Fake {
            shards: vec![
                (shard("c1", Some("p")), vec![10, 12, 14], true),
                (shard("c2", Some("p")), vec![11, 13, 15, 17, 19], false),
                (shard("g", Some("c1")), vec![16, 18, 20, 21], false),
                (shard("p", None), vec![1, 2, 3, 4, 5, 6, 7], true),
            ],
            page,
            fetches: Cell::new(0),
            forgotten: Cell::new(0),
            reads: RefCell::new(Vec::new()),
        }
    }

    impl ShardSource for Fake {
        type Record = (String, u64);

        async fn shards(&self) -> Result<Vec<ShardInfo>> {
            Ok(self.shards.iter().map(|(s, _, _)| s.clone()).collect())
        }

        fn forget_shards(&self) {
            self.forgotten.set(self.forgotten.get() + 1);
        }

        async fn fetch(
            &self,
            shard: &str,
            position: &ShardPosition,
            _start: Option<&str>,
        ) -> Result<Fetched<Self::Record>> {
            self.fetches.set(self.fetches.get() + 1);
            self.reads.borrow_mut().push(shard.to_owned());
            let (_, records, closed) = self.shards.iter().find(|(s, _, _)| s.id == shard).unwrap();
            let after: Vec<u64> = match position {
                ShardPosition::Unread => records.clone(),
                ShardPosition::After(seq) => records
                    .iter()
                    .copied()
                    .filter(|n| sequence(*n).as_str() > seq.as_str())
                    .collect(),
                ShardPosition::Finished => Vec::new(),
            };
            let taken: Vec<u64> = after.iter().copied().take(self.page).collect();
            Ok(Fetched {
                closed: *closed && taken.len() == after.len(),
                records: taken
                    .into_iter()
                    .map(|n| Sequenced {
                        sequence: sequence(n),
                        record: (shard.to_owned(), n),
                    })
                    .collect(),
            })
        }
    }

    /// Reads every page from `frontier` with page size `limit`; returns each kept record and
    /// the cursor after it. Odd numbers above 10 are passed over (internal items, say).
    fn read_all(fake: &Fake, mut frontier: Frontier, limit: usize) -> Vec<(u64, ChangeCursor)> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut all = Vec::new();
        for page in 0..100 {
            let walked = runtime
                .block_on(walk(fake, frontier, limit, page == 0, |(_, n)| {
                    Ok((n <= 10 || n % 2 == 0).then_some(n))
                }))
                .unwrap();
            assert!(walked.found.len() <= limit);
            all.extend(walked.found.into_iter().map(|f| (f.item, f.cursor)));
            if walked.caught_up {
                return all;
            }
            frontier = walked.next;
        }
        panic!("the walk never caught up");
    }

    /// The kept records, in number order.
    fn expected() -> Vec<u64> {
        vec![1, 2, 3, 4, 5, 6, 7, 10, 12, 14, 16, 18, 20]
    }

    /// Parents before children, every kept record once, per-shard order, whatever the page
    /// size of the feed and of the shard reads.
    #[test]
    fn a_split_stream_is_read_once_parents_first() {
        for page in 1..=4 {
            for limit in 1..=5 {
                let fake = stream(page);
                let read = read_all(&fake, Frontier::oldest("s"), limit);
                let numbers: Vec<u64> = read.iter().map(|(n, _)| *n).collect();
                let at = format!("page {page}, limit {limit}: {numbers:?}");
                let mut sorted = numbers.clone();
                sorted.sort();
                assert_eq!(sorted, expected(), "{at}: each once");
                let pos = |n: u64| numbers.iter().position(|m| *m == n).unwrap();
                assert!(pos(7) < pos(10), "{at}: parent before child");
                assert!(pos(14) < pos(16), "{at}: c1 before g");
                assert!(pos(10) < pos(12) && pos(12) < pos(14), "{at}: c1 in order");
                assert!(pos(16) < pos(18) && pos(18) < pos(20), "{at}: g in order");
                // Each closed shard made the walk list the stream again.
                assert!(fake.forgotten.get() >= 1, "{at}");
            }
        }
    }

    /// From the cursor of any record, the rest is exactly what followed it.
    #[test]
    fn every_cursor_resumes_with_the_rest() {
        for page in [1, 3] {
            let fake = stream(page);
            let read = read_all(&fake, Frontier::oldest("s"), 2);
            let numbers: Vec<u64> = read.iter().map(|(n, _)| *n).collect();
            for (i, (_, cursor)) in read.iter().enumerate() {
                let frontier = Frontier::parse(cursor).unwrap();
                for limit in [1, 4] {
                    let rest: Vec<u64> = read_all(&fake, frontier.clone(), limit)
                        .into_iter()
                        .map(|(n, _)| n)
                        .collect();
                    let mut want = numbers[i + 1..].to_vec();
                    let mut got = rest.clone();
                    want.sort();
                    got.sort();
                    assert_eq!(
                        got, want,
                        "page {page}, after #{i}, limit {limit}: {rest:?}"
                    );
                }
            }
        }
    }

    /// The frontier of "now" is past every record: nothing is read from it.
    #[test]
    fn now_is_after_everything() {
        let fake = stream(2);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let now = runtime.block_on(now_frontier(&fake, "s")).unwrap();
        assert!(read_all(&fake, now, 3).is_empty());
    }
}
