//! `explain`: how this backend runs a query today.
//!
//! Every query reads the collection's partition (`pk = <site>#<collection>`) with strongly
//! consistent `Query` requests in id (`sk`) order. A query in id order (no `order`, or `$id`
//! first) starts at the cursor's id and stops once the page is full: exact at any size. Any
//! other order reads at most `max_scan` items (and 64 MiB of data), evaluates them in memory,
//! and says `exhausted_scan = true` when it stopped before the end of the collection.
//! A query that a built index serves (and that does not ask for `consistent: true`) reads
//! the index's GSI instead: about the page (and what the filter skips), eventually
//! consistent, exact at any size — unless the planner's cost rule prefers the scan
//! (`docs/contract.md`, "Indexes"): this backend counts no index range, so an index that
//! would read and sort its whole range on every page never wins over the scan in id order.
//! An index's keys are spread over GSI partitions, each of which is read: `explain` names the
//! fan-out and counts its reads.

use crate::store::DynamoStore;
use docstore::index::Reading;
use docstore::query::CompiledQuery;
use docstore::{Explain, Result};

impl DynamoStore {
    /// The plan of `query` over `site`/`collection` (see the module docs); the estimate comes
    /// from the collection's counter (one read of the site's counters).
    pub(crate) async fn explain_query(
        &self,
        site: &str,
        collection: &str,
        query: &CompiledQuery,
    ) -> Result<Explain> {
        let size = self
            .read_counters(site)
            .await?
            .into_iter()
            .find(|(name, _)| name == collection)
            .map_or(0, |(_, n)| n);
        if query.consistent() {
            return Ok(describe(query, size, self.max_scan as u64));
        }
        // The same choice as `run_query` makes (no range is counted here: an index that would
        // sort its whole range loses to the scan in id order), with the counter's size for
        // the estimates.
        let registry = self.registry().await?;
        let choice = docstore::index::candidates(&registry.built, collection, query).choose(
            &docstore::index::Statistics {
                collection_size: Some(size),
                range_entries: Vec::new(),
            },
        );
        let explain = match &choice.plan {
            Some(plan) => {
                let chosen = &choice.estimates[0];
                let explain = Explain::index(plan, chosen.reading, chosen.reads, false);
                match registry.named(collection, &plan.index) {
                    Some(held) => fanned_out(explain, held.partitions, size),
                    None => explain,
                }
            }
            None => describe(query, size, self.max_scan as u64),
        };
        Ok(explain.with_choice(&choice))
    }
}

/// `explain` of an index plan whose keys are spread over `partitions` GSI partitions: the
/// ranges are read in each, a chunk at a time, and merged (see [`crate::index_reads`]): a
/// request per partition, and about half the page again in reads (never more than the
/// collection's `size`).
fn fanned_out(mut explain: Explain, partitions: u32, size: u64) -> Explain {
    if partitions > 1 {
        explain.key_range = format!(
            "{} in each of the index's {partitions} GSI partitions, merged in index order",
            explain.key_range
        );
        explain.estimated_reads = explain.estimated_reads.map(|reads| {
            reads
                .saturating_add(reads / 2 + u64::from(partitions))
                .min(size.max(reads))
        });
    }
    explain
}

/// The plan for a collection of `size` documents with `max_scan`.
fn describe(query: &CompiledQuery, size: u64, max_scan: u64) -> Explain {
    let from = if query.after().is_some() {
        " from the cursor's id"
    } else {
        ""
    };
    match query.id_order() {
        Some(descending) => {
            let reads = docstore::driver::estimated_id_order_reads(query, size);
            Explain::scan(
                format!(
                    "strongly consistent Query on pk in {} id order{from}, until the page \
                     is full",
                    if descending {
                        "descending"
                    } else {
                        "ascending"
                    }
                ),
                Reading::StopsAtPage,
                Some(reads),
                true,
            )
        }
        None => Explain::scan(
            format!(
                "strongly consistent Query on pk in id order, at most {max_scan} items and \
                 64 MiB, sorted in memory"
            ),
            Reading::SortsCollection,
            Some(size.min(max_scan)),
            true,
        )
        .with_read_limit(Some(max_scan)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use docstore::{Filter, Query};

    #[test]
    fn id_order_reads_the_page_other_orders_read_up_to_max_scan() {
        let compile = |q: Query| q.compile().unwrap();
        let plan = describe(&compile(Query::new().limit(5)), 1_000, 100);
        assert_eq!(
            (plan.index.as_deref(), plan.estimated_reads),
            (None, Some(6))
        );
        assert!(plan.strongly_consistent && plan.read_limit.is_none());
        let filtered = describe(
            &compile(Query::new().filter(Filter::eq("a", 1)).limit(5)),
            1_000,
            100,
        );
        assert_eq!(filtered.estimated_reads, Some(1_000));
        let sorted = describe(&compile(Query::new().order_by("n").limit(5)), 1_000, 100);
        assert_eq!(sorted.estimated_reads, Some(100));
        assert_eq!(sorted.read_limit, Some(100));
        assert!(sorted.to_string().contains("at most 100 items"), "{sorted}");
        let consistent = describe(
            &compile(Query::new().order_by("n").consistent(true)),
            10,
            100,
        );
        assert!(consistent.strongly_consistent);
    }
}
