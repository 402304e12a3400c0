//! Reads: `get` and the document queries.

use crate::history::Stored;
use crate::item::{DATA, Item, PK, SK, document_pk, is_document, key_of, parse_document, text};
use crate::scan::{MAX_SCAN_BYTES, ScanBudget};
use crate::store::DynamoStore;
use docstore::query::CompiledQuery;
use docstore::{Key, Page, Result};
use std::collections::HashMap;

/// The `tracing` target of the warning that a query stopped at `max_scan` (its page has
/// `exhausted_scan`), so that a caller reporting partial answers itself (the CLI) can turn
/// this one off.
pub const PARTIAL_ANSWER_TARGET: &str = "docstore_dynamodb::partial_answer";

/// The smallest `Limit` of the first page of a filtered query in id order.
const FIRST_FILTERED_PAGE: usize = 16;

impl DynamoStore {
    /// One strongly consistent GetItem: the document with its write history.
    pub(crate) async fn read(&self, key: &Key) -> Result<Option<Stored>> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key_of(key)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.error("GetItem", e))?;
        match output.item {
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
        let pk = document_pk(site, collection);
        match query.id_order() {
            Some(descending) => self.query_in_id_order(&pk, query, descending).await,
            None => self.query_bounded(site, collection, &pk, query).await,
        }
    }

    /// Reads from the cursor's id in the query's direction and stops reading once the page
    /// is full, or at the end.
    ///
    /// Without a filter it asks DynamoDB for one item more than the page holds, which tells
    /// whether the page is the last. With a filter, pages grow geometrically from
    /// `max(limit + 1, 16)` items (1 MB at most, DynamoDB's cap); the matches of the page read
    /// last are all kept, so one beyond the page often shows that more follow. When the page
    /// filled exactly and unread items remain, `next` is set without reading them: the page
    /// after it may be empty (with `next = None`).
    async fn query_in_id_order(
        &self,
        pk: &str,
        query: &CompiledQuery,
        descending: bool,
    ) -> Result<Page> {
        let mut start = query.after().map(|position| {
            HashMap::from([
                (PK.to_owned(), text(pk)),
                (SK.to_owned(), text(&position.id)),
            ])
        });
        let mut matched = Vec::new();
        let mut round = 0u32;
        loop {
            let page_limit = query.limit().map(|limit| {
                // Saturating: a client may ask for `usize::MAX` documents.
                let missing = limit.saturating_add(1).saturating_sub(matched.len());
                let items = match query.filter() {
                    None => missing,
                    Some(_) => missing
                        .max(FIRST_FILTERED_PAGE)
                        .saturating_mul(1 << round.min(16)),
                };
                i32::try_from(items).unwrap_or(i32::MAX)
            });
            let (items, next) = self.query_page(pk, start, !descending, page_limit).await?;
            for item in &items {
                let doc = parse_document(item)?;
                if query.matches(&doc) {
                    matched.push(doc);
                }
            }
            let full = query.limit().is_some_and(|limit| matched.len() >= limit);
            match next {
                Some(key) if !full => start = Some(key),
                Some(_) if query.limit() == Some(matched.len()) => {
                    // Full, more unread: stop without knowing whether anything follows.
                    let mut page = query.evaluate(&matched);
                    page.next = matched.last().map(|doc| query.cursor_after(doc));
                    return Ok(page);
                }
                // Everything read, or more matches than the page: `next` is exact.
                _ => return Ok(query.evaluate_owned(matched)),
            }
            round += 1;
        }
    }

    /// Reads the collection in id order up to the scan budget, then evaluates in memory.
    async fn query_bounded(
        &self,
        site: &str,
        collection: &str,
        pk: &str,
        query: &CompiledQuery,
    ) -> Result<Page> {
        let mut budget = ScanBudget::new(self.max_scan, MAX_SCAN_BYTES);
        let mut docs = Vec::new();
        let mut start = None;
        let mut exhausted = false;
        loop {
            let (items, next) = self
                .query_page(pk, start, true, Some(budget.page_limit()))
                .await?;
            for item in &items {
                let doc = parse_document(item)?;
                budget.record(data_len(item));
                docs.push(doc);
            }
            let Some(next) = next else { break };
            if budget.spent() {
                // A page cut by `Limit` carries a key even at the very end: look one further.
                let (rest, _) = self.query_page(pk, Some(next), true, Some(1)).await?;
                exhausted = !rest.is_empty();
                break;
            }
            start = Some(next);
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

    /// One strongly consistent Query page on `pk`; the key to continue from, if any.
    async fn query_page(
        &self,
        pk: &str,
        start: Option<Item>,
        forward: bool,
        limit: Option<i32>,
    ) -> Result<(Vec<Item>, Option<Item>)> {
        let output = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("#pk = :pk")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_values(":pk", text(pk))
            .scan_index_forward(forward)
            .set_exclusive_start_key(start)
            .set_limit(limit)
            .send()
            .await
            .map_err(|e| self.error("Query", e))?;
        let next = output.last_evaluated_key.filter(|key| !key.is_empty());
        Ok((output.items.unwrap_or_default(), next))
    }
}

fn data_len(item: &Item) -> usize {
    item.get(DATA)
        .and_then(|value| value.as_s().ok())
        .map_or(0, String::len)
}
