//! `recount`: a site's collections counted from its documents with a paginated Scan, compared
//! with (and optionally written over) the counter shards under `<site>#__collections`.

use crate::counters::{counted_collection, shard_number};
use crate::expiry_check::ExpiryScan;
use crate::guard_check::GuardScan;
use crate::guards::HOLDER;
use crate::item::{COUNT, DATA, EXPIRES_AT, PK, SK, VERSION, num, number, string, text};
use crate::layout::{Layout, Partition, parse_pk};
use crate::store::DynamoStore;
use crate::table_scan::TableScan;
use aws_sdk_dynamodb::operation::scan::builders::ScanFluentBuilder;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{TransactWriteItem, Update};
use docstore::driver::CounterChange;
use docstore::{Recount, RecountMode, Result};
use std::collections::BTreeMap;

/// The counter shards of one collection as the scan saw them: sort key and count.
#[derive(Debug, Default)]
struct SeenShards {
    shards: Vec<(String, i64)>,
}

impl SeenShards {
    fn sum(&self) -> i64 {
        self.shards.iter().map(|(_, n)| n).sum()
    }
}

/// What one Scan of a site found.
struct SiteScan {
    /// Document items per collection, expired ones included: what the counters hold.
    documents: BTreeMap<String, u64>,
    /// Documents per collection not expired at the store clock's now: what reads see.
    live: BTreeMap<String, u64>,
    shards: BTreeMap<String, SeenShards>,
    guards: Option<GuardScan>,
    expiry: ExpiryScan,
}

impl DynamoStore {
    /// Scans the table for the site's items (`begins_with(pk, "<site>#")`, keys and `n`
    /// only), counts documents per collection, and compares with the sums of the counter
    /// shards.
    ///
    /// A Scan reads the whole table (every site), so this costs read capacity for the table's
    /// size: a maintenance call. With [`RecountMode::Repair`] each differing counter is set in
    /// one transaction per collection: shard 0 to the truth and every other shard to 0, each
    /// conditioned on still holding what the scan saw, so a counter that moved while the scan
    /// ran is left alone and still reported; run it again on a quiet site.
    ///
    /// When the table holds unique indexes, the same Scan reads the documents' data and the
    /// site's guards, and the guards are checked and, in repair mode, repaired as
    /// [`check_unique`](Self::check_unique) does ([`Recount::unique`] lists the problems).
    ///
    /// Counters count a document until it is removed, so expired documents no sweep removed
    /// yet count on both sides; [`Recount::collections`] lists what reads see (without them).
    /// Expiry markers without their document are logged and, with repair, deleted before
    /// the counters are set ([`crate::expiry_check`]).
    pub(crate) async fn recount_site(&self, site: &str, mode: RecountMode) -> Result<Recount> {
        let SiteScan {
            documents,
            live,
            shards,
            guards,
            expiry,
        } = self.scan_site_counts(site).await?;
        let unique = match guards {
            Some(guards) => self.settle_guards(site, &guards, mode).await?,
            None => Vec::new(),
        };
        // Before the counters: see `crate::expiry_check`.
        self.settle_markers(site, &expiry, mode).await?;
        let changes = counter_changes(&documents, &shards);
        if mode == RecountMode::Repair {
            for change in &changes {
                let seen = shards.get(&change.collection);
                self.set_counter(site, &change.collection, seen, change.documents)
                    .await?;
            }
        }
        Ok(Recount {
            collections: live.into_iter().filter(|(_, n)| *n > 0).collect(),
            changes,
            unique,
        })
    }

    /// The documents of each collection of `site` and its counter shards, from one Scan;
    /// with the claims and guards of its unique indexes when the table has any, and its
    /// expiry markers.
    async fn scan_site_counts(&self, site: &str) -> Result<SiteScan> {
        let prefix = format!("{site}#");
        let mut documents: BTreeMap<String, u64> = BTreeMap::new();
        let mut live: BTreeMap<String, u64> = BTreeMap::new();
        let mut shards: BTreeMap<String, SeenShards> = BTreeMap::new();
        let mut expiry = ExpiryScan::default();
        let now = self.options.clock.now();
        let registry = self.registry().await?;
        let layout = self.layout().await?;
        let unique = registry.indexes.iter().any(|i| i.compiled.is_unique());
        let mut guards = unique.then(GuardScan::default);
        let mut scan = TableScan::new(self, None);
        let site_items = |request: ScanFluentBuilder| {
            let request = request
                .filter_expression("begins_with(#pk, :prefix)")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_names("#sk", SK)
                .expression_attribute_names("#n", COUNT)
                .expression_attribute_names("#ea", EXPIRES_AT)
                .expression_attribute_values(":prefix", text(&prefix));
            match unique {
                // A Scan costs what it reads whatever it returns: the data comes at no more
                // read capacity.
                true => request
                    .projection_expression("#pk, #sk, #n, #ea, #d, #v, #h")
                    .expression_attribute_names("#d", DATA)
                    .expression_attribute_names("#v", VERSION)
                    .expression_attribute_names("#h", HOLDER),
                false => request.projection_expression("#pk, #sk, #n, #ea"),
            }
        };
        while let Some(items) = scan.next_page(site_items).await? {
            for item in &items {
                if let Some(guards) = guards.as_mut() {
                    guards.add(&registry, layout, site, item)?;
                }
                expiry.add(site, item)?;
                match parse_pk(string(item, PK)?) {
                    Partition::Counters { site: of } if of == site => {
                        let sort_key = string(item, SK)?;
                        let n: i64 = number(item, COUNT)?;
                        let seen = shards
                            .entry(counted_collection(sort_key).to_owned())
                            .or_default();
                        seen.shards.push((sort_key.to_owned(), n));
                    }
                    Partition::Documents {
                        site: of,
                        collection,
                    } if of == site => {
                        // Counters count a document until it is removed, expired or not.
                        *documents.entry(collection.to_owned()).or_default() += 1;
                        let expired = number::<i64>(item, EXPIRES_AT).is_ok_and(|at| at <= now);
                        if !expired {
                            *live.entry(collection.to_owned()).or_default() += 1;
                        }
                    }
                    _ => {}
                }
            }
            let read = scan.scanned();
            tracing::info!(site, items_scanned = read, "recount: scanning the table");
        }
        Ok(SiteScan {
            documents,
            live,
            shards,
            guards,
            expiry,
        })
    }

    /// Sets the counter of `collection` to `actual` if its shards still hold what the scan saw
    /// (`None`: no shard at all): shard 0 to `actual`, the others to 0, in one transaction.
    async fn set_counter(
        &self,
        site: &str,
        collection: &str,
        seen: Option<&SeenShards>,
        actual: u64,
    ) -> Result<()> {
        let layout = self.layout().await?;
        let seen_shards = seen.map_or(&[][..], |seen| &seen.shards[..]);
        let mut actions = Vec::with_capacity(seen_shards.len() + 1);
        if !seen_shards
            .iter()
            .any(|(sort_key, _)| sort_key == collection)
        {
            actions.push(self.set_shard(layout, site, collection, None, actual)?);
        }
        for (sort_key, n) in seen_shards {
            let value = if sort_key == collection { actual } else { 0 };
            actions.push(self.set_shard(layout, site, sort_key, Some(*n), value)?);
        }
        let sent = self
            .client
            .transact_write_items()
            .set_transact_items(Some(actions))
            .send()
            .await;
        match sent {
            Ok(_) => Ok(()),
            Err(err)
                if matches!(
                    err.as_service_error(),
                    Some(TransactWriteItemsError::TransactionCanceledException(_))
                ) =>
            {
                tracing::warn!(
                    site,
                    collection,
                    "recount: the counter moved during the scan; left as it is (run again)"
                );
                Ok(())
            }
            Err(err) => Err(self.error("TransactWriteItems", err)),
        }
    }

    /// Sets the shard item `sort_key` to `value` if it still holds `seen` (`None`: absent).
    fn set_shard(
        &self,
        layout: Layout,
        site: &str,
        sort_key: &str,
        seen: Option<i64>,
        value: u64,
    ) -> Result<TransactWriteItem> {
        let update = Update::builder()
            .table_name(&self.table)
            .key(PK, text(layout.counter_pk(site, shard_number(sort_key))))
            .key(SK, text(sort_key))
            .update_expression("SET #n = :value")
            .expression_attribute_names("#n", COUNT)
            .expression_attribute_values(":value", num(value));
        let update = match seen {
            Some(seen) => update
                .condition_expression("#n = :seen")
                .expression_attribute_values(":seen", num(seen)),
            None => update.condition_expression("attribute_not_exists(#n)"),
        };
        let update = update.build().map_err(crate::send::build_error)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }
}

/// The counters that disagree with the documents. A collection's counter is the sum of its
/// shards, shown as 0 when drift took it below zero — which is reported even when the
/// collection has no documents, since the next create would then not count.
fn counter_changes(
    documents: &BTreeMap<String, u64>,
    shards: &BTreeMap<String, SeenShards>,
) -> Vec<CounterChange> {
    let counters: BTreeMap<String, u64> = shards
        .iter()
        .map(|(collection, seen)| (collection.clone(), seen.sum().max(0) as u64))
        .collect();
    let mut changes = docstore::driver::counter_changes(documents, &counters);
    for (collection, seen) in shards {
        let listed = changes.iter().any(|c| &c.collection == collection);
        if seen.sum() < 0 && !listed {
            changes.push(CounterChange {
                collection: collection.clone(),
                counter: Some(0),
                documents: documents.get(collection).copied().unwrap_or(0),
            });
        }
    }
    changes.sort_by(|a, b| a.collection.cmp(&b.collection));
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(shards: &[(&str, i64)]) -> SeenShards {
        SeenShards {
            shards: shards.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
        }
    }

    #[test]
    fn a_counter_is_the_sum_of_its_shards_and_a_negative_sum_is_drift() {
        let documents = BTreeMap::from([("a".to_owned(), 3), ("b".to_owned(), 1)]);
        let shards = BTreeMap::from([
            // 5 in shard 0 from a table written before shards, 2 deleted from their shards.
            ("a".to_owned(), seen(&[("a", 5), ("a#3", -1), ("a#9", -1)])),
            ("b".to_owned(), seen(&[("b#1", 2), ("b#2", -1)])),
            ("c".to_owned(), seen(&[("c", 1), ("c#4", -2)])),
        ]);
        let changes = counter_changes(&documents, &shards);
        let found: Vec<_> = changes
            .iter()
            .map(|c| (c.collection.as_str(), c.counter, c.documents))
            .collect();
        assert_eq!(found, [("c", Some(0), 0)]);
    }
}
