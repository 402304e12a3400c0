//! Paged Scans of the whole table, for the maintenance calls that must see every item
//! (`sites`, `recount`, index builds): strongly consistent, one page after another, counting
//! the items read so far for progress reports.

use crate::item::Item;
use crate::store::DynamoStore;
use aws_sdk_dynamodb::operation::scan::builders::ScanFluentBuilder;
use docstore::Result;

/// One Scan of the table, read page by page with [`TableScan::next_page`].
pub(crate) struct TableScan<'a> {
    store: &'a DynamoStore,
    /// Where the next page starts (`None`: at the table's start, or after its end).
    start: Option<Item>,
    finished: bool,
    /// Items read so far (before any filter), across pages.
    scanned: u64,
}

impl<'a> TableScan<'a> {
    /// A Scan from the table's start, or from `start` (a [`TableScan::resume_key`] kept
    /// earlier).
    pub(crate) fn new(store: &'a DynamoStore, start: Option<Item>) -> Self {
        TableScan {
            store,
            start,
            finished: false,
            scanned: 0,
        }
    }

    /// The next page's items (those a filter kept), or `None` after the last page. `shape`
    /// adds what differs between callers (projection, filter, page limit) to the request.
    pub(crate) async fn next_page(
        &mut self,
        shape: impl FnOnce(ScanFluentBuilder) -> ScanFluentBuilder,
    ) -> Result<Option<Vec<Item>>> {
        if self.finished {
            return Ok(None);
        }
        let store = self.store;
        let request = store
            .client
            .scan()
            .table_name(&store.table)
            .consistent_read(true)
            .set_exclusive_start_key(self.start.take());
        let page = shape(request)
            .send()
            .await
            .map_err(|e| store.error("Scan", e))?;
        self.scanned += u64::try_from(page.scanned_count()).unwrap_or(0);
        self.start = page.last_evaluated_key.filter(|key| !key.is_empty());
        self.finished = self.start.is_none();
        Ok(Some(page.items.unwrap_or_default()))
    }

    /// Items read so far, filtered out or not (what the Scan cost).
    pub(crate) fn scanned(&self) -> u64 {
        self.scanned
    }

    /// Where the next page starts: `None` once the last page was read.
    pub(crate) fn resume_key(&self) -> Option<&Item> {
        self.start.as_ref()
    }
}
