//! Declared indexes as generic global secondary indexes (GSIs).
//!
//! ## Layout
//! A GSI *slot* `N` (1–20) is the GSI named `docstore-gN`, keyed by the item attributes `gNpk`
//! (S, partition) and `gNsk` (B, sort), projecting every attribute. Slots are overloaded
//! across collections (overloaded GSIs): the index declared as `name` for
//! `collection` puts, on every document item of that collection in every site,
//! `gNpk = "<site>#<collection>#<name>#<p>"` and `gNsk` = the index key of the document
//! ([`docstore::index`]'s order-preserving encoding, id last). Two indexes of one collection
//! never share a slot.
//!
//! ## Partitions
//! One GSI partition key takes at most 1 000 write units per second, and a busy table's writes
//! are throttled when a GSI partition cannot keep up. An index whose leading field has few
//! values (`status`) would put every document of a collection on a handful of partition keys,
//! so each index spreads its keys over `partitions` GSI partitions: `<p>` is the document id's
//! shard ([`crate::item::shard_of`]) in `0..partitions`. A query reads its key ranges in every
//! partition, a chunk at a time, and merges them in the index's order
//! ([`crate::index_reads`]): a page costs a request per partition
//! ([`Explain`](docstore::Explain) names the fan-out). The count is fixed per index when it is added (`database.dynamodb.
//! index_partitions`, default 8: a one-value index then takes 8 000 one-KB writes per
//! second) and kept in its record; an index recorded without one was written before
//! partitions and keeps its keys unsuffixed (`<site>#<collection>#<name>`), one partition. Every write sets these attributes in the same request as the document
//! (they are part of the item it puts), so an index never lags its table by more than the
//! GSI's own (eventual) propagation.
//!
//! The table records which indexes it holds under the reserved partition
//! `pk = "__docstore#indexes"` (no site can start with `__`), one item per index:
//! `sk = "<collection>#<name>"`, `index` (S, the declaration as JSON), `slot` (N),
//! `partitions` (N, absent for an index written before partitions), `state`
//! (S: `building` until every existing document carries its key, then `built`), `added_at`
//! (N, unix nanoseconds) and, while a build runs, `resume` (S, where the build's scan goes on).
//! Stores re-read this record at most every [`REFRESH`]; a build waits two of those after the
//! index was added, so every writer maintains the index before the build passes its items.
//!
//! ## Keys past DynamoDB's limits
//! A GSI sort key holds at most 1 024 bytes. A longer index key is stored cut to its first
//! 1 024 bytes; cutting keeps the order (`a < b` gives `cut(a) <= cut(b)`), only documents whose
//! cut keys are equal may come in any order. So a query reads each group of equal stored keys
//! whole, orders it by the documents' full keys (recomputed from the documents, which the GSI
//! projects), bounds the key range by the cut bounds and re-checks the full range and the
//! filter on the documents: the answer never depends on the cut. The partition key is at most
//! 194 bytes (64 + 64 + 64 and two `#`).
//!
//! A GSI is eventually consistent: a query it serves may miss the writes of the last moments.
//! A query with `consistent: true` never uses one.

use crate::item::{Item, PK, SK, num, shard_of, string, text};
use crate::store::DynamoStore;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use docstore::index::{CompiledIndex, Index, IndexSet};
use docstore::{Document, Error, Key, Result};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The reserved partition of the index records.
pub(crate) const REGISTRY_PK: &str = "__docstore#indexes";
/// DynamoDB allows 20 GSIs per table.
pub const MAX_SLOTS: usize = 20;
/// DynamoDB's limit on a sort key, in bytes.
pub(crate) const SORT_KEY_LIMIT: usize = 1_024;
/// How long a store trusts the index records it read.
pub(crate) const REFRESH: Duration = Duration::from_secs(5);

/// The GSI of slot `slot`.
pub(crate) fn gsi_name(slot: usize) -> String {
    format!("docstore-g{slot}")
}

/// The partition key attribute of slot `slot`.
pub(crate) fn gsi_pk(slot: usize) -> String {
    format!("g{slot}pk")
}

/// The sort key attribute of slot `slot`.
pub(crate) fn gsi_sk(slot: usize) -> String {
    format!("g{slot}sk")
}

/// Whether an index is ready to serve queries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexState {
    /// Added: writers maintain it, but documents written before may still lack their key.
    Building,
    /// Every document carries its key: queries may use it.
    Built,
}

impl IndexState {
    fn as_str(self) -> &'static str {
        match self {
            IndexState::Building => "building",
            IndexState::Built => "built",
        }
    }
}

/// An index the table holds.
#[derive(Clone, Debug)]
pub struct TableIndex {
    /// The declaration.
    pub index: Index,
    /// Its GSI slot (`docstore-g<slot>`).
    pub slot: usize,
    /// Whether it serves queries yet.
    pub state: IndexState,
    /// When it was added, unix nanoseconds.
    pub added_at: i64,
    /// Over how many GSI partitions its keys are spread (see the module docs; 1 for an index
    /// written before partitions, whose keys carry no suffix).
    pub partitions: u32,
    /// Whether its partition keys carry the partition's number (false only for an index
    /// written before partitions).
    pub(crate) suffixed: bool,
    /// Where an interrupted build goes on (the scan's last key), if one ran.
    pub(crate) resume: Option<String>,
    pub(crate) compiled: CompiledIndex,
}

/// The index records as one store last read them.
#[derive(Debug)]
pub(crate) struct Registry {
    pub(crate) indexes: Vec<TableIndex>,
    /// The built ones, for the planner.
    pub(crate) built: IndexSet,
    /// The unique indexes the store's options declare and the table does not hold: writes
    /// of their collections are refused rather than left unguarded.
    unheld_unique: Vec<Index>,
    read_at: Instant,
}

impl Registry {
    /// The indexes every write of a document of `collection` maintains.
    pub(crate) fn for_collection<'a>(
        &'a self,
        collection: &'a str,
    ) -> impl Iterator<Item = &'a TableIndex> + 'a {
        self.indexes
            .iter()
            .filter(move |i| i.index.collection == collection)
    }

    /// A registry of `indexes`, as if read from a table (unit tests).
    #[cfg(test)]
    pub(crate) fn of(indexes: Vec<TableIndex>) -> Registry {
        Registry {
            indexes,
            built: IndexSet::default(),
            unheld_unique: Vec::new(),
            read_at: Instant::now(),
        }
    }

    /// Refuses a write of `collection` when the store declares a unique index of it that the
    /// table does not hold (the value could not be guarded).
    pub(crate) fn refuse_unheld(&self, collection: &str) -> Result<()> {
        match self
            .unheld_unique
            .iter()
            .find(|i| i.collection == collection)
        {
            None => Ok(()),
            Some(index) => Err(Error::invalid(format!(
                "index {index} is declared but the table does not hold it, so its values \
                 cannot be guarded: add and build it (`docstore index add --unique`, \
                 `docstore index build`) before writing to `{collection}`"
            ))),
        }
    }

    pub(crate) fn named(&self, collection: &str, name: &str) -> Option<&TableIndex> {
        self.indexes
            .iter()
            .find(|i| i.index.collection == collection && i.index.name == name)
    }
}

/// The index key as stored: cut to DynamoDB's sort key limit.
pub(crate) fn stored_key(key: &[u8]) -> &[u8] {
    &key[..key.len().min(SORT_KEY_LIMIT)]
}

impl TableIndex {
    /// The GSI partition value of this index for the document `id` of `site`.
    pub(crate) fn partition_of(&self, site: &str, id: &str) -> String {
        self.partition(site, shard_of(id, self.partitions))
    }

    /// Every GSI partition value of this index in `site`, the ones a query reads.
    pub(crate) fn partitions_in(&self, site: &str) -> Vec<String> {
        (0..self.partitions)
            .map(|shard| self.partition(site, shard))
            .collect()
    }

    fn partition(&self, site: &str, shard: u32) -> String {
        let index = &self.index;
        if self.suffixed {
            format!("{site}#{}#{}#{shard}", index.collection, index.name)
        } else {
            format!("{site}#{}#{}", index.collection, index.name)
        }
    }
}

/// Adds the key attributes of every index of `key`'s collection to a document item.
pub(crate) fn add_index_keys(registry: &Registry, key: &Key, doc: &Document, item: &mut Item) {
    for table_index in registry.for_collection(key.collection()) {
        let slot = table_index.slot;
        let full = table_index.compiled.key(doc);
        item.insert(
            gsi_pk(slot),
            text(table_index.partition_of(key.site(), key.id())),
        );
        item.insert(
            gsi_sk(slot),
            AttributeValue::B(Blob::new(stored_key(&full).to_vec())),
        );
    }
}

impl DynamoStore {
    /// The index records, read again when older than [`REFRESH`]. Checks the store's declared
    /// indexes against them: a declaration whose name the table holds with other fields is
    /// an error naming it.
    pub(crate) async fn registry(&self) -> Result<Arc<Registry>> {
        if let Some(registry) = self.registry.lock().expect("not poisoned").clone()
            && registry.read_at.elapsed() < REFRESH
        {
            return Ok(registry);
        }
        let mut registry = self.read_registry().await?;
        registry.unheld_unique = self
            .options
            .indexes
            .declarations()
            .into_iter()
            .filter(|i| i.unique && registry.named(&i.collection, &i.name).is_none())
            .collect();
        let registry = Arc::new(registry);
        for declared in self.options.indexes.declarations() {
            if let Some(held) = registry.named(&declared.collection, &declared.name)
                && held.index.unique != declared.unique
            {
                return Err(Error::invalid(format!(
                    "index `{}` of collection `{}` is declared as {declared} but the table holds \
                     it as {}; drop it (`docstore index drop`) and add it as declared",
                    declared.name, declared.collection, held.index
                )));
            }
            if let Some(held) = registry.named(&declared.collection, &declared.name)
                && held.index.fields != declared.fields
            {
                return Err(Error::invalid(format!(
                    "index `{}` of collection `{}` is declared with fields {:?} but the table \
                     holds it with {:?}; drop it (`docstore index drop`) or declare it as held",
                    declared.name,
                    declared.collection,
                    field_texts(&declared),
                    field_texts(&held.index)
                )));
            }
        }
        *self.registry.lock().expect("not poisoned") = Some(registry.clone());
        Ok(registry)
    }

    /// Forgets the cached index records (after this store changed them).
    pub(crate) fn forget_registry(&self) {
        *self.registry.lock().expect("not poisoned") = None;
    }

    async fn read_registry(&self) -> Result<Registry> {
        let mut indexes = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_values(":pk", text(REGISTRY_PK))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| self.error("Query", e))?;
            for item in page.items() {
                indexes.push(parse_record(item)?);
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        let built = IndexSet::new(
            indexes
                .iter()
                .filter(|i| i.state == IndexState::Built)
                .map(|i| i.index.clone()),
        )?;
        Ok(Registry {
            indexes,
            built,
            unheld_unique: Vec::new(),
            read_at: Instant::now(),
        })
    }

    /// Writes an index record.
    pub(crate) async fn put_record(&self, record: &TableIndex) -> Result<()> {
        let mut request = self
            .client
            .put_item()
            .table_name(&self.table)
            .item(PK, text(REGISTRY_PK))
            .item(SK, text(record_sk(&record.index)))
            .item(
                "index",
                text(serde_json::to_string(&record.index).expect("an index serializes")),
            )
            .item("slot", num(record.slot))
            .item("partitions", num(record.partitions))
            .item("state", text(record.state.as_str()))
            .item("added_at", num(record.added_at));
        if let Some(resume) = &record.resume {
            request = request.item("resume", text(resume));
        }
        request.send().await.map_err(|e| self.error("PutItem", e))?;
        self.forget_registry();
        Ok(())
    }

    /// Deletes an index record.
    pub(crate) async fn delete_record(&self, index: &Index) -> Result<()> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .key(PK, text(REGISTRY_PK))
            .key(SK, text(record_sk(index)))
            .send()
            .await
            .map_err(|e| self.error("DeleteItem", e))?;
        self.forget_registry();
        Ok(())
    }
}

fn record_sk(index: &Index) -> String {
    format!("{}#{}", index.collection, index.name)
}

fn field_texts(index: &Index) -> Vec<String> {
    match serde_json::to_value(index) {
        Ok(serde_json::Value::Object(map)) => map
            .get("fields")
            .and_then(|f| f.as_array())
            .map(|f| {
                f.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn parse_record(item: &Item) -> Result<TableIndex> {
    let index: Index =
        serde_json::from_str(string(item, "index")?).map_err(|e| Error::Backend {
            message: format!("the table's index record {item:?} is not docstore's: {e}"),
            source: None,
        })?;
    let slot: usize = crate::item::number(item, "slot")?;
    let state = match string(item, "state")? {
        "built" => IndexState::Built,
        _ => IndexState::Building,
    };
    // An index recorded before partitions keeps its keys unsuffixed, in one partition.
    let partitions = match item.get("partitions") {
        Some(_) => Some(crate::item::number::<u32>(item, "partitions")?),
        None => None,
    };
    let resume = match item.get("resume") {
        Some(AttributeValue::S(s)) => Some(s.clone()),
        _ => None,
    };
    let compiled = IndexSet::new([index.clone()])?
        .iter()
        .next()
        .cloned()
        .expect("one index");
    Ok(TableIndex {
        index,
        slot,
        state,
        added_at: crate::item::number(item, "added_at")?,
        partitions: partitions.unwrap_or(1).max(1),
        suffixed: partitions.is_some(),
        resume,
        compiled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(partitions: Option<u32>) -> Item {
        let index = Index::parse("tickets", "by_status", ["status"]).unwrap();
        let mut item = Item::from([
            (PK.to_owned(), text(REGISTRY_PK)),
            (SK.to_owned(), text("tickets#by_status")),
            (
                "index".to_owned(),
                text(serde_json::to_string(&index).unwrap()),
            ),
            ("slot".to_owned(), num(1)),
            ("state".to_owned(), text("built")),
            ("added_at".to_owned(), num(5)),
        ]);
        if let Some(partitions) = partitions {
            item.insert("partitions".to_owned(), num(partitions));
        }
        item
    }

    /// An index recorded before partitions keeps the keys its items carry: one partition,
    /// no suffix; a recorded count spreads documents by id over suffixed partitions.
    #[test]
    fn partitions_come_from_the_record() {
        let legacy = parse_record(&record(None)).unwrap();
        assert_eq!(legacy.partitions, 1);
        assert_eq!(legacy.partition_of("acme", "T-1"), "acme#tickets#by_status");
        assert_eq!(legacy.partitions_in("acme"), ["acme#tickets#by_status"]);

        let spread = parse_record(&record(Some(8))).unwrap();
        let shard = shard_of("T-1", 8);
        assert_eq!(
            spread.partition_of("acme", "T-1"),
            format!("acme#tickets#by_status#{shard}")
        );
        let all = spread.partitions_in("acme");
        assert_eq!(all.len(), 8);
        assert!(all.contains(&spread.partition_of("acme", "T-1")));
        assert_eq!(all[7], "acme#tickets#by_status#7");
    }
}
