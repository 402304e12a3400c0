//! Reads: `get` and the document queries. An expired document is left out of every answer
//! (`docs/contract.md`, "Expiry").

use crate::history::Stored;
use crate::id_order::IdOrderReader;
use crate::item::{DATA, Item, is_document, key_of, parse_document};
use crate::scan::{MAX_SCAN_BYTES, ScanBudget};
use crate::store::DynamoStore;
use docstore::query::CompiledQuery;
use docstore::{Key, Page, Result};

/// The `tracing` target of the warning that a query stopped at `max_scan` (its page has
/// `exhausted_scan`), so that a caller reporting partial answers itself (the CLI) can turn
/// this one off.
pub const PARTIAL_ANSWER_TARGET: &str = "docstore_dynamodb::partial_answer";

/// The smallest `Limit` of the first page of a filtered query in id order.
const FIRST_FILTERED_PAGE: usize = 16;

impl DynamoStore {
    /// One strongly consistent `GetItem` of the item at `key` (a primary key).
    pub(crate) async fn consistent_get(&self, key: Item) -> Result<Option<Item>> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.error("GetItem", e))?;
        Ok(output.item)
    }

    /// One strongly consistent GetItem: the document with its write history.
    pub(crate) async fn read(&self, key: &Key) -> Result<Option<Stored>> {
        let layout = self.layout().await?;
        match self.consistent_get(key_of(key, layout)).await? {
            Some(item) if is_document(&item) => Ok(Some(Stored::from_item(&item)?)),
            _ => Ok(None),
        }
    }

    /// Runs a compiled query over one collection: in id order from the cursor until the page
    /// is known to be full, otherwise over at most `max_scan` items and 64 MiB.
    pub(crate) async fn run_query(
        &self,
        site: &str,
        collection: &str,
        query: &CompiledQuery,
    ) -> Result<Page> {
        if !query.consistent() {
            let registry = self.registry().await?;
            if let Some(plan) = docstore::index::plan(&registry.built, collection, query)
                && let Some(index) = registry.named(collection, &plan.index)
            {
                return self.query_by_index(site, index, &plan, query).await;
            }
        }
        let pks = self.layout().await?.document_pks(site, collection);
        match query.id_order() {
            Some(descending) => self.query_in_id_order(pks, query, descending).await,
            None => self.query_bounded(site, collection, pks, query).await,
        }
    }

    /// Reads from the cursor's id in the query's direction and stops reading once the page
    /// is full, or at the end.
    ///
    /// Without a filter it reads one item more than the page holds, which tells whether the
    /// page is the last. With a filter, reads grow geometrically from `max(limit + 1, 16)`
    /// items (1 MB a page at most, DynamoDB's cap); the matches already read are all kept, so
    /// one beyond the page often shows that more follow. When the page filled exactly and the
    /// next item would take another read, `next` is set without reading: the page after it
    /// may be empty (with `next = None`).
    async fn query_in_id_order(
        &self,
        pks: Vec<String>,
        query: &CompiledQuery,
        descending: bool,
    ) -> Result<Page> {
        let after = query.after().map(|position| position.id.as_str());
        let mut reader = IdOrderReader::new(pks, after, !descending);
        let mut matched = Vec::new();
        let now = self.options.clock.now();
        loop {
            if let Some(limit) = query.limit() {
                if matched.len() > limit {
                    break;
                }
                if matched.len() == limit && query.filter().is_some() && !reader.next_is_buffered()
                {
                    // Full, more unread: stop without knowing whether anything follows.
                    let mut page = query.evaluate(&matched);
                    page.next = matched.last().map(|doc| query.cursor_after(doc));
                    return Ok(page);
                }
            }
            let filtered = query.filter().is_some();
            let wanted = query.limit().map(|limit| {
                // Saturating: a client may ask for `usize::MAX` documents.
                let missing = limit.saturating_add(1).saturating_sub(matched.len());
                match filtered {
                    false => missing,
                    true => missing.max(FIRST_FILTERED_PAGE),
                }
            });
            reader.expect(wanted, filtered);
            let Some(item) = reader.next(self).await? else {
                break;
            };
            let doc = parse_document(&item)?;
            if !doc.is_expired(now) && query.matches(&doc) {
                matched.push(doc);
            }
        }
        // Everything read, or more matches than the page: `next` is exact.
        Ok(query.evaluate_owned(matched))
    }

    /// Reads the collection in id order up to the scan budget, then evaluates in memory.
    async fn query_bounded(
        &self,
        site: &str,
        collection: &str,
        pks: Vec<String>,
        query: &CompiledQuery,
    ) -> Result<Page> {
        let mut budget = ScanBudget::new(self.max_scan, MAX_SCAN_BYTES);
        let mut reader = IdOrderReader::new(pks, None, true);
        let mut docs = Vec::new();
        let mut exhausted = false;
        let now = self.options.clock.now();
        loop {
            reader.expect(Some(budget.page_limit().max(1) as usize), false);
            let Some(item) = reader.next(self).await? else {
                break;
            };
            if budget.spent() {
                exhausted = true;
                break;
            }
            let doc = parse_document(&item)?;
            if !doc.is_expired(now) {
                docs.push(doc);
            }
            budget.record(data_len(&item));
        }
        if exhausted {
            tracing::warn!(
                target: PARTIAL_ANSWER_TARGET,
                site,
                collection,
                items = budget.items(),
                bytes = budget.bytes(),
                max_scan = self.max_scan,
                "docstore-dynamodb: query stopped reading at max_scan items or 64 MiB; its \
                 answer considers only the first documents by id (exhausted_scan = true)"
            );
        }
        let mut page = query.evaluate_owned(docs);
        page.exhausted_scan = exhausted;
        Ok(page)
    }
}

fn data_len(item: &Item) -> usize {
    item.get(DATA)
        .and_then(|value| value.as_s().ok())
        .map_or(0, String::len)
}
