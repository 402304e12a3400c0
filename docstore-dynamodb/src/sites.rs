//! `sites`: the sites holding a document, found with a paginated Scan of the partition keys.
//!
//! The layout keys every item by its site (`<site>#<collection>`, `<site>#__collections`,
//! …) and keeps no list of sites, so no Query can find them: the table is scanned, keys only.

use crate::item::{PK, string};
use crate::store::DynamoStore;
use crate::table_scan::TableScan;
use aws_sdk_dynamodb::operation::scan::builders::ScanFluentBuilder;
use docstore::Result;
use std::collections::BTreeSet;

impl DynamoStore {
    /// Scans the table's partition keys (`pk` only, strongly consistent, page by page) and
    /// keeps the site of every document item: never a counter or another internal item, so
    /// a site is listed when it holds a document, whatever its counters say.
    ///
    /// A Scan reads the whole table — every item counts against the read capacity, as for
    /// `recount` — so this is a maintenance call (whole-store export, `fsck` of every site).
    pub(crate) async fn scan_sites(&self) -> Result<Vec<String>> {
        let mut sites = BTreeSet::new();
        let mut scan = TableScan::new(self, None);
        let keys_only = |request: ScanFluentBuilder| {
            request
                .projection_expression("#pk")
                .expression_attribute_names("#pk", PK)
        };
        while let Some(items) = scan.next_page(keys_only).await? {
            for item in &items {
                if let Some(site) = document_site(string(item, PK)?) {
                    sites.insert(site.to_owned());
                }
            }
            tracing::info!(items_scanned = scan.scanned(), "sites: scanning the table");
        }
        Ok(sites.into_iter().collect())
    }
}

/// The site of a document item's partition key `<site>#<collection>`; `None` for the
/// backend's own items (reserved names start with `__`: counters, delete records, index
/// records).
fn document_site(pk: &str) -> Option<&str> {
    let (site, collection) = pk.split_once('#')?;
    let reserved = site.starts_with("__") || collection.starts_with("__");
    (!reserved).then_some(site)
}

#[cfg(test)]
mod tests {
    use super::document_site;

    #[test]
    fn only_document_items_name_a_site() {
        assert_eq!(document_site("acme#tickets"), Some("acme"));
        assert_eq!(document_site("acme#__collections"), None);
        assert_eq!(document_site("acme#__deleted"), None);
        assert_eq!(document_site("acme#__removed"), None);
        assert_eq!(document_site("__docstore#indexes"), None);
        assert_eq!(document_site("no-separator"), None);
    }
}
