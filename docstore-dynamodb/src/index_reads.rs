//! Queries served by a declared index: the plan's key ranges read from its GSI, in key order,
//! groups of equal stored keys finished and ordered by the documents' full keys (see
//! [`crate::index`] on keys cut to 1 024 bytes), each range only as far as the plan's
//! [`RangeWalk`](docstore::index::RangeWalk) needs; the reference evaluator sorts and cuts
//! the page. Never bounded by `max_scan`: exact at any size.
//!
//! An index spreads its keys over several GSI partitions ([`crate::index`], "Partitions"), each
//! in key order: a range is read as a merge of its partitions. Every partition is read a chunk
//! at a time — first its share of the page and half as much again (documents spread over the
//! partitions by a hash of their ids, so a share varies), then half a share, doubling — and
//! the merge takes the smallest key among the partitions' next entries, reading a
//! partition's next chunk when it runs out. The walk sees one stream in the index's order; a
//! page costs a request per partition (more for a partition holding much more than its
//! share) and reads about one and a half times itself.

use crate::index::{SORT_KEY_LIMIT, TableIndex, gsi_name, gsi_pk, gsi_sk, stored_key};
use crate::item::{Item, is_document, parse_document, text};
use crate::store::DynamoStore;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use docstore::index::{IndexPlan, KeyRange, RangeWalk, Step};
use docstore::query::CompiledQuery;
use docstore::{Document, Page, Result};
use std::collections::{HashMap, VecDeque};

/// A chunk asks for at least this many entries.
const FIRST_CHUNK: usize = 4;
/// DynamoDB caps a page at 1 MB anyway.
const LARGEST_CHUNK: usize = 1_000;

/// One GSI partition of a range being read: the entries fetched and not yet merged, in the
/// walk's direction, and where its next chunk starts.
struct PartitionReader {
    partition: String,
    buffer: VecDeque<(Vec<u8>, Document)>,
    start: Option<HashMap<String, AttributeValue>>,
    exhausted: bool,
    /// The size of the next chunk asked for.
    chunk: usize,
    /// The size of the chunk after it (chunks after the first start at half a share and
    /// double).
    later_chunk: usize,
}

/// What one range's merge has gathered: the group of entries with equal stored keys not yet
/// offered to the walk, and the documents kept.
struct Gathered<'a> {
    walk: RangeWalk,
    group: Vec<(Vec<u8>, Document)>,
    group_key: Option<Vec<u8>>,
    kept: &'a mut Vec<Document>,
    /// The store clock's now: a document expired by then is left out.
    now: i64,
}

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

    /// Reads one key range, merged over the index's partitions, until its walk stops, keeping
    /// the matching documents.
    async fn read_range(
        &self,
        site: &str,
        index: &TableIndex,
        plan: &IndexPlan,
        range: &KeyRange,
        query: &CompiledQuery,
        kept: &mut Vec<Document>,
    ) -> Result<()> {
        let partitions = index.partitions_in(site);
        let share = query.limit().map_or(LARGEST_CHUNK, |limit| {
            (limit.saturating_add(1) / partitions.len()).saturating_add(1)
        });
        let first = (share + share / 2 + 1).clamp(FIRST_CHUNK, LARGEST_CHUNK);
        let later = (share / 2).clamp(FIRST_CHUNK, LARGEST_CHUNK);
        let mut readers: Vec<PartitionReader> = partitions
            .into_iter()
            .map(|partition| PartitionReader {
                partition,
                buffer: VecDeque::new(),
                start: None,
                exhausted: false,
                chunk: first,
                later_chunk: later,
            })
            .collect();
        let mut gathered = Gathered {
            walk: plan.walk(query),
            group: Vec::new(),
            group_key: None,
            kept,
            now: self.options.clock.now(),
        };
        loop {
            if gathered.walk.is_done() && gathered.group.is_empty() {
                return Ok(());
            }
            self.refill(index, plan, range, &mut readers).await?;
            let Some(next) = next_reader(&readers, plan.reverse) else {
                break;
            };
            let (stored, doc) = readers[next].buffer.pop_front().expect("not empty");
            if gathered.group_key.as_ref() != Some(&stored) {
                if offer_group(index, plan, range, query, &mut gathered) {
                    return Ok(());
                }
                gathered.group_key = Some(stored.clone());
            }
            gathered.group.push((index.compiled.key(&doc), doc));
            // A key stored whole ends with the id: no other document shares it, so its group
            // is complete now.
            if stored.len() < SORT_KEY_LIMIT
                && offer_group(index, plan, range, query, &mut gathered)
            {
                return Ok(());
            }
        }
        offer_group(index, plan, range, query, &mut gathered);
        Ok(())
    }

    /// Reads the next chunk of every partition that has none left in its buffer and is not
    /// exhausted, all at once: then every partition's next entry is known.
    async fn refill(
        &self,
        index: &TableIndex,
        plan: &IndexPlan,
        range: &KeyRange,
        readers: &mut [PartitionReader],
    ) -> Result<()> {
        let fetches = readers
            .iter_mut()
            .filter(|reader| reader.buffer.is_empty() && !reader.exhausted)
            .map(|reader| self.fetch_chunk(index, plan, range, reader));
        futures_util::future::try_join_all(fetches).await?;
        Ok(())
    }

    /// Reads one chunk of `reader`'s partition (a page may hold fewer documents than asked,
    /// or none: it is read again from where it stopped until it holds one or ends).
    async fn fetch_chunk(
        &self,
        index: &TableIndex,
        plan: &IndexPlan,
        range: &KeyRange,
        reader: &mut PartitionReader,
    ) -> Result<()> {
        let slot = index.slot;
        let condition = match &range.end {
            Some(_) => "#p = :p AND #s BETWEEN :a AND :b",
            None => "#p = :p AND #s >= :a",
        };
        while reader.buffer.is_empty() && !reader.exhausted {
            let mut request = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(gsi_name(slot))
                .key_condition_expression(condition)
                .expression_attribute_names("#p", gsi_pk(slot))
                .expression_attribute_names("#s", gsi_sk(slot))
                .expression_attribute_values(":p", text(&reader.partition))
                .expression_attribute_values(
                    ":a",
                    AttributeValue::B(Blob::new(stored_key(&range.start).to_vec())),
                )
                .scan_index_forward(!plan.reverse)
                .limit(i32::try_from(reader.chunk).unwrap_or(i32::MAX))
                .set_exclusive_start_key(reader.start.take());
            if let Some(end) = &range.end {
                request = request.expression_attribute_values(
                    ":b",
                    AttributeValue::B(Blob::new(stored_key(end).to_vec())),
                );
            }
            let page = request.send().await.map_err(|e| self.error("Query", e))?;
            for item in page.items() {
                if let Some(entry) = index_entry(item, slot)? {
                    reader.buffer.push_back(entry);
                }
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => reader.start = Some(key),
                _ => reader.exhausted = true,
            }
            reader.chunk = reader.later_chunk;
            reader.later_chunk = (reader.later_chunk * 2).min(LARGEST_CHUNK);
        }
        Ok(())
    }
}

/// The stored index key and the document of a GSI item; `None` for an item that is not a
/// document or carries no key of this slot.
fn index_entry(item: &Item, slot: usize) -> Result<Option<(Vec<u8>, Document)>> {
    if !is_document(item) {
        return Ok(None);
    }
    let stored = match item.get(&gsi_sk(slot)) {
        Some(AttributeValue::B(bytes)) => bytes.as_ref().to_vec(),
        _ => return Ok(None),
    };
    Ok(Some((stored, parse_document(item)?)))
}

/// The reader whose next entry comes first in the walk's direction; `None` when every one is
/// empty (and, after a refill, exhausted).
fn next_reader(readers: &[PartitionReader], reverse: bool) -> Option<usize> {
    let fronts = readers
        .iter()
        .enumerate()
        .filter_map(|(at, reader)| reader.buffer.front().map(|(stored, _)| (at, stored)));
    let chosen = if reverse {
        fronts.max_by(|a, b| a.1.cmp(b.1))
    } else {
        fronts.min_by(|a, b| a.1.cmp(b.1))
    };
    chosen.map(|(at, _)| at)
}

/// Offers the gathered group of documents with equal stored keys to the walk, in full-key
/// order; whether the walk stopped.
fn offer_group(
    index: &TableIndex,
    plan: &IndexPlan,
    range: &KeyRange,
    query: &CompiledQuery,
    gathered: &mut Gathered<'_>,
) -> bool {
    let group = &mut gathered.group;
    group.sort_by(|a, b| a.0.cmp(&b.0));
    if plan.reverse {
        group.reverse();
    }
    for (key, doc) in group.drain(..) {
        if !range.contains(&key) {
            continue;
        }
        let matches =
            !doc.is_expired(gathered.now) && query.matches(&doc) && query.is_after_cursor(&doc);
        match gathered.walk.offer(&index.compiled, &key, matches) {
            Step::Keep => gathered.kept.push(doc),
            Step::Skip => {}
            Step::Stop => return true,
        }
    }
    false
}
