//! Queries served by a declared index: the plan's key ranges read from its GSI, in key order,
//! groups of equal stored keys finished and ordered by the documents' full keys (see
//! [`crate::index`] on keys cut to 1 024 bytes), each range only as far as the plan's
//! [`RangeWalk`](docstore::index::RangeWalk) needs; the reference evaluator sorts and cuts
//! the page. Never bounded by `max_scan`: exact at any size.

use crate::index::{SORT_KEY_LIMIT, TableIndex, gsi_name, gsi_pk, gsi_sk, partition, stored_key};
use crate::item::{is_document, parse_document, text};
use crate::store::DynamoStore;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use docstore::index::{IndexPlan, KeyRange, Step};
use docstore::query::CompiledQuery;
use docstore::{Document, Page, Result};

/// The first GSI page of a range asks for this many items at least; later pages double.
const FIRST_PAGE: usize = 16;
/// DynamoDB caps a page at 1 MB anyway.
const LARGEST_PAGE: usize = 1_000;

impl DynamoStore {
    /// Runs `query` over `site` by `plan` on `index`'s GSI.
    pub(crate) async fn query_by_index(
        &self,
        site: &str,
        index: &TableIndex,
        plan: &IndexPlan,
        query: &CompiledQuery,
    ) -> Result<Page> {
        let mut kept = Vec::new();
        for range in &plan.ranges {
            self.read_range(site, index, plan, range, query, &mut kept)
                .await?;
        }
        Ok(query.evaluate(kept.iter()))
    }

    /// Reads one key range until its walk stops, keeping the matching documents.
    async fn read_range(
        &self,
        site: &str,
        index: &TableIndex,
        plan: &IndexPlan,
        range: &KeyRange,
        query: &CompiledQuery,
        kept: &mut Vec<Document>,
    ) -> Result<()> {
        let slot = index.slot;
        let mut walk = plan.walk(query);
        let mut group: Vec<(Vec<u8>, Document)> = Vec::new();
        let mut group_key: Option<Vec<u8>> = None;
        let mut start = None;
        let mut page_size = query
            .limit()
            .map_or(LARGEST_PAGE, |l| l.saturating_add(1).max(FIRST_PAGE))
            .min(LARGEST_PAGE);
        let condition = match &range.end {
            Some(_) => "#p = :p AND #s BETWEEN :a AND :b",
            None => "#p = :p AND #s >= :a",
        };
        loop {
            let mut request = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(gsi_name(slot))
                .key_condition_expression(condition)
                .expression_attribute_names("#p", gsi_pk(slot))
                .expression_attribute_names("#s", gsi_sk(slot))
                .expression_attribute_values(":p", text(partition(site, &index.index)))
                .expression_attribute_values(
                    ":a",
                    AttributeValue::B(Blob::new(stored_key(&range.start).to_vec())),
                )
                .scan_index_forward(!plan.reverse)
                .limit(i32::try_from(page_size).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start);
            if let Some(end) = &range.end {
                request = request.expression_attribute_values(
                    ":b",
                    AttributeValue::B(Blob::new(stored_key(end).to_vec())),
                );
            }
            let page = request.send().await.map_err(|e| self.error("Query", e))?;
            for item in page.items() {
                if !is_document(item) {
                    continue;
                }
                let stored = match item.get(&gsi_sk(slot)) {
                    Some(AttributeValue::B(bytes)) => bytes.as_ref().to_vec(),
                    _ => continue,
                };
                let doc = parse_document(item)?;
                let complete = stored.len() < SORT_KEY_LIMIT;
                if group_key.as_ref() != Some(&stored) {
                    if self.offer_group(index, plan, range, query, &mut walk, &mut group, kept) {
                        return Ok(());
                    }
                    group_key = Some(stored);
                }
                group.push((index.compiled.key(&doc), doc));
                // A key stored whole ends with the id: no other document shares it, so its
                // group is complete now.
                if complete
                    && self.offer_group(index, plan, range, query, &mut walk, &mut group, kept)
                {
                    return Ok(());
                }
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
            if walk.is_done() && group.is_empty() {
                break;
            }
            page_size = (page_size * 2).min(LARGEST_PAGE);
        }
        self.offer_group(index, plan, range, query, &mut walk, &mut group, kept);
        Ok(())
    }

    /// Offers a group of documents with equal stored keys to the walk, in full-key order;
    /// whether the walk stopped.
    #[allow(clippy::too_many_arguments)]
    fn offer_group(
        &self,
        index: &TableIndex,
        plan: &IndexPlan,
        range: &KeyRange,
        query: &CompiledQuery,
        walk: &mut docstore::index::RangeWalk,
        group: &mut Vec<(Vec<u8>, Document)>,
        kept: &mut Vec<Document>,
    ) -> bool {
        group.sort_by(|a, b| a.0.cmp(&b.0));
        if plan.reverse {
            group.reverse();
        }
        for (key, doc) in group.drain(..) {
            if !range.contains(&key) {
                continue;
            }
            let matches = query.matches(&doc) && query.is_after_cursor(&doc);
            match walk.offer(&index.compiled, &key, matches) {
                Step::Keep => kept.push(doc),
                Step::Skip => {}
                Step::Stop => return true,
            }
        }
        false
    }
}
