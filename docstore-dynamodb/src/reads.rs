//! Reads: `get` and the document queries.

use crate::item::{DATA, Item, PK, SK, document_pk, is_document, key_of, parse_document, text};
use crate::scan::{MAX_SCAN_BYTES, ScanBudget};
use crate::store::DynamoStore;
use docstore::query::CompiledQuery;
use docstore::{Document, Key, Page, Result, WriteId};
use std::collections::HashMap;

impl DynamoStore {
    /// One strongly consistent GetItem: the document and its write identity.
    pub(crate) async fn read(&self, key: &Key) -> Result<Option<(Document, Option<WriteId>)>> {
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
            Some(item) if is_document(&item) => Ok(Some(parse_document(&item)?)),
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
        let pk = document_pk(site, collection);
        match query.id_order() {
            Some(descending) => self.query_in_id_order(&pk, query, descending).await,
            None => self.query_bounded(site, collection, &pk, query).await,
        }
    }

    /// Reads from the cursor's id in the query's direction and stops at one match more than
    /// the page holds (which tells whether the page is the last), or at the end.
    async fn query_in_id_order(
        &self,
        pk: &str,
        query: &CompiledQuery,
        descending: bool,
    ) -> Result<Page> {
        let wanted = query.limit().map(|limit| limit.saturating_add(1));
        let mut start = query.after().map(|position| {
            HashMap::from([
                (PK.to_owned(), text(pk)),
                (SK.to_owned(), text(&position.id)),
            ])
        });
        let mut matched = Vec::new();
        loop {
            // Without a filter every item matches: ask for exactly what is missing.
            let page_limit = match (query.filter(), wanted) {
                (None, Some(wanted)) => {
                    Some(i32::try_from(wanted - matched.len()).unwrap_or(i32::MAX))
                }
                _ => None,
            };
            let (items, next) = self.query_page(pk, start, !descending, page_limit).await?;
            for item in &items {
                let (doc, _) = parse_document(item)?;
                if query.matches(&doc) {
                    matched.push(doc);
                    if Some(matched.len()) == wanted {
                        return Ok(query.evaluate(&matched));
                    }
                }
            }
            match next {
                Some(key) => start = Some(key),
                None => return Ok(query.evaluate(&matched)),
            }
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
                let (doc, _) = parse_document(item)?;
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
                site,
                collection,
                items = budget.items(),
                bytes = budget.bytes(),
                max_scan = self.max_scan,
                "docstore-dynamodb: query stopped reading at max_scan items or 64 MiB; its \
                 answer considers only the first documents by id (exhausted_scan = true)"
            );
        }
        let mut page = query.evaluate(&docs);
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
