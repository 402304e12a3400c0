//! `recount`: a site's collections counted from its documents with a paginated Scan, compared
//! with (and optionally written over) the counters under `<site>#__collections`.

use crate::item::{COUNT, PK, SK, counters_pk, num, number, string, text};
use crate::store::DynamoStore;
use crate::table_scan::TableScan;
use aws_sdk_dynamodb::operation::scan::builders::ScanFluentBuilder;
use docstore::{Recount, RecountMode, Result};
use std::collections::BTreeMap;

impl DynamoStore {
    /// Scans the table for the site's items (`begins_with(pk, "<site>#")`, keys and `n`
    /// only), counts documents per collection, and compares with the counters.
    ///
    /// A Scan reads the whole table (every site), so this costs read capacity for the table's
    /// size: a maintenance call. With [`RecountMode::Repair`] each differing counter is set
    /// with a conditional write (`n` still what the scan saw), so a counter that moved while
    /// the scan ran is left alone and still reported; run it again on a quiet site.
    pub(crate) async fn recount_site(&self, site: &str, mode: RecountMode) -> Result<Recount> {
        let prefix = format!("{site}#");
        let counters_key = counters_pk(site);
        let mut documents: BTreeMap<String, u64> = BTreeMap::new();
        let mut counters: BTreeMap<String, u64> = BTreeMap::new();
        let mut scan = TableScan::new(self, None);
        let site_items = |request: ScanFluentBuilder| {
            request
                .filter_expression("begins_with(#pk, :prefix)")
                .projection_expression("#pk, #sk, #n")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_names("#sk", SK)
                .expression_attribute_names("#n", COUNT)
                .expression_attribute_values(":prefix", text(&prefix))
        };
        while let Some(items) = scan.next_page(site_items).await? {
            for item in &items {
                let pk = string(item, PK)?;
                if pk == counters_key {
                    let n: i64 = number(item, COUNT)?;
                    counters.insert(string(item, SK)?.to_owned(), n.max(0) as u64);
                } else if let Some(collection) = pk.strip_prefix(&prefix)
                    // Reserved names are the backend's own partitions (delete records).
                    && !collection.starts_with("__")
                {
                    *documents.entry(collection.to_owned()).or_default() += 1;
                }
            }
            let read = scan.scanned();
            tracing::info!(site, items_scanned = read, "recount: scanning the table");
        }
        let changes = docstore::driver::counter_changes(&documents, &counters);
        if mode == RecountMode::Repair {
            for change in &changes {
                self.set_counter(site, &change.collection, change.counter, change.documents)
                    .await?;
            }
        }
        Ok(Recount {
            collections: documents.into_iter().collect(),
            changes,
        })
    }

    /// Sets a counter to `actual` if it still holds `seen` (`None`: no counter item).
    async fn set_counter(
        &self,
        site: &str,
        collection: &str,
        seen: Option<u64>,
        actual: u64,
    ) -> Result<()> {
        let request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, text(counters_pk(site)))
            .key(SK, text(collection))
            .update_expression("SET #n = :actual")
            .expression_attribute_names("#n", COUNT)
            .expression_attribute_values(":actual", num(actual));
        let request = match seen {
            Some(seen) => request
                .condition_expression("#n = :seen")
                .expression_attribute_values(":seen", num(seen)),
            None => request.condition_expression("attribute_not_exists(#n)"),
        };
        match request.send().await {
            Ok(_) => Ok(()),
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                tracing::warn!(
                    site,
                    collection,
                    "recount: the counter moved during the scan; left as it is (run again)"
                );
                Ok(())
            }
            Err(err) => Err(self.error("UpdateItem", err)),
        }
    }
}
