//! `sites`: the sites holding a document or a counter that is not 0, found with a paginated
//! Scan of the partition keys (and the counts of counter items).
//!
//! The layout keys every item by its site (`<site>#<collection>`, `<site>#__collections`,
//! …) and keeps no list of sites, so no Query can find them: the table is scanned, keys only.

use crate::item::{COUNT, EXPIRES_AT, Item, PK, SK, number, string};
use crate::layout::{Partition, parse_pk};
use crate::store::DynamoStore;
use crate::table_scan::TableScan;
use aws_sdk_dynamodb::operation::scan::builders::ScanFluentBuilder;
use docstore::Result;
use std::collections::{BTreeMap, BTreeSet};

impl DynamoStore {
    /// Scans the table's keys (and `n` of counter shards; strongly consistent, page by
    /// page) and keeps the site of every document item, whatever its counters say, and of
    /// every collection counter whose shards do not sum to 0: a counter left by drift in a
    /// site without documents is listed, so that `fsck` of every site finds it. Never another
    /// internal item.
    ///
    /// A Scan reads the whole table — every item counts against the read capacity, as for
    /// `recount` — so this is a maintenance call (whole-store export, `fsck` of every site).
    pub(crate) async fn scan_sites(&self) -> Result<Vec<String>> {
        let mut sites = BTreeSet::new();
        let mut counters = CounterSums::default();
        let mut scan = TableScan::new(self, None);
        let keys_only = |request: ScanFluentBuilder| {
            request
                .projection_expression("#pk, #sk, #n, #ea")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_names("#sk", SK)
                .expression_attribute_names("#n", COUNT)
                .expression_attribute_names("#ea", EXPIRES_AT)
        };
        let now = self.options.clock.now();
        while let Some(items) = scan.next_page(keys_only).await? {
            for item in &items {
                let pk = string(item, PK)?;
                match parse_pk(pk) {
                    Partition::Documents { site, .. } if !expired(item, now) => {
                        sites.insert(site.to_owned());
                    }
                    Partition::Documents { .. } => {}
                    Partition::Counters { site } => counters.add(site, item)?,
                    Partition::Other => {
                        // An expired document no sweep removed yet: its counter still
                        // counts it, its due marker takes it off.
                        let due = crate::expiring::marker_site(pk)
                            .and_then(|site| crate::expiring::due_marker(site, item, now));
                        if let Some(marker) = due {
                            counters.take_off(marker.key.site(), marker.key.collection());
                        }
                    }
                }
            }
            tracing::info!(items_scanned = scan.scanned(), "sites: scanning the table");
        }
        sites.extend(counters.sites_not_zero());
        Ok(sites.into_iter().collect())
    }
}

/// The sums of collection counters' shards, by site and collection: a single shard may be
/// below zero, only a collection's sum means anything.
/// Whether the document `item` has expired at `now`.
fn expired(item: &Item, now: i64) -> bool {
    number::<i64>(item, EXPIRES_AT).is_ok_and(|at| at <= now)
}

#[derive(Debug, Default)]
struct CounterSums {
    /// The sum of each `(site, collection)` counter's shards (`None` when one is unreadable:
    /// `recount` says what is wrong with it, so the site is listed).
    sums: BTreeMap<(String, String), Option<i64>>,
}

impl CounterSums {
    /// Adds the counter shard `item` of `site` (its `sk` is the collection, then `#<shard>`
    /// for shards past the first).
    fn add(&mut self, site: &str, item: &Item) -> Result<()> {
        let sk = string(item, SK)?;
        let collection = sk.split_once('#').map_or(sk, |(collection, _)| collection);
        let count = number::<i64>(item, COUNT).ok();
        let sum = self
            .sums
            .entry((site.to_owned(), collection.to_owned()))
            .or_insert(Some(0));
        *sum = sum.zip(count).map(|(sum, n)| sum.saturating_add(n));
        Ok(())
    }

    /// The sites with a collection counter that does not sum to 0.
    /// Takes one document off the sum of `collection` in `site` (a due expiry).
    fn take_off(&mut self, site: &str, collection: &str) {
        let sum = self
            .sums
            .entry((site.to_owned(), collection.to_owned()))
            .or_insert(Some(0));
        *sum = sum.map(|sum| sum.saturating_sub(1));
    }

    fn sites_not_zero(self) -> impl Iterator<Item = String> {
        self.sums
            .into_iter()
            .filter(|(_, sum)| *sum != Some(0))
            .map(|((site, _), _)| site)
    }
}

#[cfg(test)]
mod tests {
    use super::CounterSums;
    use crate::item::{COUNT, Item, SK};
    use aws_sdk_dynamodb::types::AttributeValue;

    #[test]
    fn a_collection_counter_not_summing_to_zero_names_its_site() {
        let shard = |sk: &str, n: &str| -> Item {
            [
                (SK.to_owned(), AttributeValue::S(sk.into())),
                (COUNT.to_owned(), AttributeValue::N(n.into())),
            ]
            .into()
        };
        let mut counters = CounterSums::default();
        for (site, sk, n) in [
            ("drift", "t", "1"),
            ("balanced", "t", "1"),
            ("balanced", "t#3", "-1"),
            ("zero", "t", "0"),
            ("sharded", "t#2", "2"),
            ("unreadable", "t", "x"),
        ] {
            counters.add(site, &shard(sk, n)).unwrap();
        }
        let sites: Vec<String> = counters.sites_not_zero().collect();
        assert_eq!(sites, ["drift", "sharded", "unreadable"]);
    }
}
