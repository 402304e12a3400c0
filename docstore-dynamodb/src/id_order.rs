//! A collection's documents in id order, merged over its partitions ([`crate::layout`]).
//!
//! Each partition is read with strongly consistent `Query` pages in id order, a chunk at a
//! time; the merge hands out the smallest id among the partitions' next items (the largest
//! when descending), reading a partition's next chunk when it runs out — all the partitions
//! that ran out at once, concurrently. With one partition this is a plain `Query` walk.

use crate::item::{Item, PK, SK, string, text};
use crate::store::DynamoStore;
use docstore::Result;
use std::collections::{HashMap, VecDeque};

/// A partition's chunk asks for at least this many items when the walk is spread.
const SMALLEST_SHARE: usize = 4;

/// One partition being read.
struct PartitionCursor {
    pk: String,
    buffer: VecDeque<Item>,
    /// Where its next page starts.
    start: Option<Item>,
    exhausted: bool,
    /// How many pages were read.
    reads: u32,
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
            })
            .collect();
        IdOrderReader {
            partitions,
            forward,
            wanted: None,
            grow: false,
        }
    }

    /// How many items the walk expects to take from now on: each partition's next read asks
    /// for its share of them (half as much again, since ids spread unevenly) — doubled for
    /// each page the partition already read when `grow` (a filter: matches may be sparse).
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
        let chosen = chosen.map(|(at, _)| at);
        Ok(chosen.and_then(|at| self.partitions[at].buffer.pop_front()))
    }

    /// Reads until every partition holds an item or is exhausted.
    async fn refill(&mut self, store: &DynamoStore) -> Result<()> {
        let share = self
            .wanted
            .map(|wanted| share(wanted, self.partitions.len()));
        let (forward, grow) = (self.forward, self.grow);
        let reads = self
            .partitions
            .iter_mut()
            .filter(|partition| partition.buffer.is_empty() && !partition.exhausted)
            .map(|partition| {
                let doubled = if grow { partition.reads.min(16) } else { 0 };
                let limit = share.map(|share| share.saturating_mul(1 << doubled));
                partition.fill(store, forward, limit)
            });
        futures_util::future::try_join_all(reads).await?;
        Ok(())
    }
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
fn share(wanted: usize, partitions: usize) -> i32 {
    let items = if partitions <= 1 {
        wanted
    } else {
        let even = wanted / partitions;
        (even + even / 2 + 1).max(SMALLEST_SHARE).min(wanted.max(1))
    };
    i32::try_from(items).unwrap_or(i32::MAX)
}

fn sort_key(item: &Item) -> Option<&str> {
    string(item, SK).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_partition_reads_exactly_what_is_wanted() {
        assert_eq!(share(11, 1), 11);
        assert_eq!(share(usize::MAX, 1), i32::MAX);
    }

    #[test]
    fn spread_partitions_read_their_share_and_half_again() {
        assert_eq!(share(800, 8), 151);
        assert_eq!(share(9, 8), 4, "at least the smallest share");
        assert_eq!(share(2, 8), 2, "never more than wanted");
        assert_eq!(share(0, 8), 1);
    }
}
