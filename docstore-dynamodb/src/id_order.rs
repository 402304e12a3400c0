//! A collection's documents in id order, merged over its partitions ([`crate::layout`]).
//!
//! Each partition is read with strongly consistent `Query` pages in id order; the merge hands
//! out the smallest id among the partitions' next items (the largest when descending).
//!
//! A walk first asks every partition, concurrently, for its share of what the caller wants
//! (its even share and half as much again: ids spread over the partitions by a hash, so
//! shares vary). A partition whose items run out while it holds more is read again for the
//! part of what the caller can still take that it supplied of the walk so far, and half as
//! much again: one that held the whole page so far is asked for all the page still takes, and
//! is not read again; one that held its share, for about its share. So a page without a
//! filter costs one request per partition, and about one more for each partition holding
//! much more than its share (ids that hash unevenly), never the run of ever smaller reads a
//! partition holding most of the page would otherwise take, nor reads of the whole remainder
//! from every partition; DynamoDB's 1 MB cap on a response, or a filter's sparse matches, may
//! add reads. With one partition this is a plain `Query` walk.

use crate::item::{Item, PK, SK, string, text};
use crate::store::DynamoStore;
use docstore::Result;
use futures_util::{StreamExt, TryStreamExt};
use std::collections::{HashMap, VecDeque};

/// A partition's first read asks for at least this many items when the walk is spread.
const SMALLEST_SHARE: usize = 4;
/// The most partitions read at once (a table has at most 100).
const READS_IN_FLIGHT: usize = 16;

/// One partition being read.
struct PartitionCursor {
    pk: String,
    buffer: VecDeque<Item>,
    /// Where its next page starts.
    start: Option<Item>,
    exhausted: bool,
    /// How many pages were read.
    reads: u32,
    /// How many of its items the walk took.
    taken: usize,
}

/// The documents of one collection in id order, from an optional position on.
pub(crate) struct IdOrderReader {
    partitions: Vec<PartitionCursor>,
    forward: bool,
    /// How many items the walk wants next in all (`None`: as many as a page holds).
    wanted: Option<usize>,
    /// Whether each partition's reads double (a filter's matches are sparse).
    grow: bool,
}

impl IdOrderReader {
    /// A walk over the partition keys `pks` that starts after the document id `after` (in
    /// the walk's direction), or at the first document.
    pub(crate) fn new(pks: Vec<String>, after: Option<&str>, forward: bool) -> Self {
        let partitions = pks
            .into_iter()
            .map(|pk| PartitionCursor {
                start: after.map(|id| {
                    HashMap::from([(PK.to_owned(), text(&pk)), (SK.to_owned(), text(id))])
                }),
                pk,
                buffer: VecDeque::new(),
                exhausted: false,
                reads: 0,
                taken: 0,
            })
            .collect();
        IdOrderReader {
            partitions,
            forward,
            wanted: None,
            grow: false,
        }
    }

    /// How many items the walk expects to take from now on: each partition read asks for a
    /// part of them ([`ReadPlan::limit`]); `grow` (a filter: matches may be sparse) doubles a
    /// partition's reads.
    pub(crate) fn expect(&mut self, wanted: Option<usize>, grow: bool) {
        self.wanted = wanted;
        self.grow = grow;
    }

    /// Whether taking the next item needs no request.
    pub(crate) fn next_is_buffered(&self) -> bool {
        self.partitions
            .iter()
            .all(|partition| !partition.buffer.is_empty() || partition.exhausted)
    }

    /// The next document item in the walk's order; `None` at the end.
    pub(crate) async fn next(&mut self, store: &DynamoStore) -> Result<Option<Item>> {
        if !self.next_is_buffered() {
            self.refill(store).await?;
        }
        let forward = self.forward;
        let fronts = self
            .partitions
            .iter()
            .enumerate()
            .filter_map(|(at, partition)| Some((at, sort_key(partition.buffer.front()?)?)));
        let chosen = if forward {
            fronts.min_by(|a, b| a.1.cmp(b.1))
        } else {
            fronts.max_by(|a, b| a.1.cmp(b.1))
        };
        let Some((at, _)) = chosen else {
            return Ok(None);
        };
        let partition = &mut self.partitions[at];
        partition.taken += 1;
        Ok(partition.buffer.pop_front())
    }

    /// Reads until every partition holds an item or is exhausted: the partitions that ran
    /// out, concurrently.
    async fn refill(&mut self, store: &DynamoStore) -> Result<()> {
        let plan = ReadPlan {
            wanted: self.wanted,
            partitions: self.partitions.len(),
            taken: self
                .partitions
                .iter()
                .filter(|partition| !partition.exhausted || !partition.buffer.is_empty())
                .map(|partition| partition.taken)
                .sum(),
            grow: self.grow,
        };
        let forward = self.forward;
        // Collected first: a stream holding these closures across `await` is not `Send`.
        let reads: Vec<_> = self
            .partitions
            .iter_mut()
            .filter(|partition| partition.buffer.is_empty() && !partition.exhausted)
            .map(|partition| {
                let limit = plan.limit(partition.reads, partition.taken);
                partition.fill(store, forward, limit)
            })
            .collect();
        futures_util::stream::iter(reads)
            .buffer_unordered(READS_IN_FLIGHT)
            .try_collect::<()>()
            .await
    }
}

/// What the partitions read next are asked for.
#[derive(Clone, Copy, Debug)]
struct ReadPlan {
    /// How many items the walk wants from now on (`None`: as many as a page holds).
    wanted: Option<usize>,
    /// The partitions of the walk.
    partitions: usize,
    /// How many items the walk took so far from the partitions that may give more (an
    /// exhausted partition's part of the walk is over).
    taken: usize,
    /// Whether a partition's reads double (a filter's matches are sparse).
    grow: bool,
}

impl ReadPlan {
    /// The `Limit` of a partition's next read, `reads` pages of it read already and `taken`
    /// of its items taken by the walk: first its [`share`]; later the part of what the walk
    /// still wants that it supplied of the walk so far (among the partitions not exhausted)
    /// and half as much again ([`supplied_part`]), so that a partition holding the whole
    /// page is asked once more for all of it, one holding its share for about its share.
    /// With `grow`, at least its first share doubled for each page it read.
    fn limit(self, reads: u32, taken: usize) -> Option<i32> {
        let wanted = self.wanted?;
        let first = share(wanted, self.partitions);
        let mut items = match (reads, self.taken) {
            (0, _) | (_, 0) => first,
            _ => supplied_part(wanted, taken, self.taken),
        };
        if self.grow {
            items = items.max(first.saturating_mul(1 << reads.min(16)));
        }
        Some(i32::try_from(items.max(1)).unwrap_or(i32::MAX))
    }
}

/// `taken / total` of `wanted`, and half as much again: at least [`SMALLEST_SHARE`], never
/// more than `wanted`.
fn supplied_part(wanted: usize, taken: usize, total: usize) -> usize {
    let part = (wanted as u128 * taken as u128).div_ceil(total as u128);
    let part = usize::try_from(part + part / 2).unwrap_or(usize::MAX);
    part.max(SMALLEST_SHARE).min(wanted)
}

impl PartitionCursor {
    /// Reads pages until the buffer holds an item or the partition ends (a page cut by
    /// `Limit` may hold none).
    async fn fill(&mut self, store: &DynamoStore, forward: bool, limit: Option<i32>) -> Result<()> {
        while self.buffer.is_empty() && !self.exhausted {
            let output = store
                .client
                .query()
                .table_name(&store.table)
                .consistent_read(true)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_values(":pk", text(&self.pk))
                .scan_index_forward(forward)
                .set_exclusive_start_key(self.start.take())
                .set_limit(limit)
                .send()
                .await
                .map_err(|e| store.error("Query", e))?;
            self.reads += 1;
            match output.last_evaluated_key {
                Some(key) if !key.is_empty() => self.start = Some(key),
                _ => self.exhausted = true,
            }
            self.buffer.extend(output.items.unwrap_or_default());
        }
        Ok(())
    }
}

/// A partition's share of `wanted` items over `partitions`: all of them with one partition;
/// otherwise its even share and half as much again, at least [`SMALLEST_SHARE`] (but never
/// more than `wanted`).
fn share(wanted: usize, partitions: usize) -> usize {
    if partitions <= 1 {
        return wanted;
    }
    let even = wanted / partitions;
    (even + even / 2 + 1).max(SMALLEST_SHARE).min(wanted.max(1))
}

fn sort_key(item: &Item) -> Option<&str> {
    string(item, SK).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(wanted: usize, taken: usize, grow: bool) -> ReadPlan {
        ReadPlan {
            wanted: Some(wanted),
            partitions: 8,
            taken,
            grow,
        }
    }

    #[test]
    fn one_partition_reads_exactly_what_is_wanted() {
        assert_eq!(share(11, 1), 11);
        let one = ReadPlan {
            partitions: 1,
            ..plan(11, 0, false)
        };
        assert_eq!(one.limit(0, 0), Some(11));
        assert_eq!(one.limit(1, 5), Some(11));
        let all = ReadPlan {
            partitions: 1,
            ..plan(usize::MAX, 0, false)
        };
        assert_eq!(all.limit(0, 0), Some(i32::MAX));
    }

    #[test]
    fn spread_partitions_read_their_share_and_half_again() {
        assert_eq!(share(800, 8), 151);
        assert_eq!(share(9, 8), 4, "at least the smallest share");
        assert_eq!(share(2, 8), 2, "never more than wanted");
        assert_eq!(share(0, 8), 1);
        assert_eq!(plan(101, 0, false).limit(0, 0), Some(19));
        assert_eq!(
            plan(0, 0, false).limit(0, 0),
            Some(1),
            "DynamoDB wants at least 1"
        );
    }

    #[test]
    fn a_partition_that_ran_out_is_asked_for_what_it_supplied_of_the_walk() {
        assert_eq!(
            plan(82, 19, false).limit(1, 19),
            Some(82),
            "it held the whole page so far: all the page still wants"
        );
        assert_eq!(
            plan(82, 40, false).limit(1, 20),
            Some(61),
            "half, and half again"
        );
        assert_eq!(plan(82, 160, false).limit(1, 20), Some(16), "its share");
        assert_eq!(plan(82, 1000, false).limit(1, 1), Some(4), "at least 4");
        let unbounded = ReadPlan {
            wanted: None,
            ..plan(0, 8, false)
        };
        assert_eq!(unbounded.limit(1, 8), None);
    }

    #[test]
    fn a_filtered_walk_grows_its_reads() {
        assert_eq!(plan(21, 0, true).limit(0, 0), Some(4));
        assert_eq!(
            plan(21, 8, true).limit(1, 8),
            Some(21),
            "what the page still takes"
        );
        assert_eq!(
            plan(21, 64, true).limit(3, 8),
            Some(32),
            "a share, doubled per read"
        );
    }
}
