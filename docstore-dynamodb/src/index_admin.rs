//! Adding, building, listing and dropping declared indexes on a table (`docstore index
//! add|build|list|drop`), and the GSIs `create_table` makes. See [`crate::index`].

use crate::guards::{GuardAction, GuardKey};
use crate::index::{
    IndexState, MAX_SLOTS, REFRESH, REGISTRY_PK, TableIndex, gsi_name, gsi_pk, gsi_sk, stored_key,
};
use crate::item::{Item, PK, SK, VERSION, is_document, num, parse_document, string, text};
use crate::layout::{Partition, parse_pk};
use crate::send::TransactionFailure;
use crate::store::DynamoStore;
use crate::table_scan::TableScan;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, CreateGlobalSecondaryIndexAction,
    DeleteGlobalSecondaryIndexAction, GlobalSecondaryIndex, GlobalSecondaryIndexUpdate,
    KeySchemaElement, KeyType, Projection, ProjectionType, ScalarAttributeType,
};
use aws_sdk_dynamodb::types::{TransactWriteItem, Update};
use docstore::index::unique::MAX_NAMED_DUPLICATES;
use docstore::index::{Index, IndexSet};
use docstore::{Error, Result};
use std::collections::HashMap;

/// Items a build reads per Scan page: the grain of its progress reports and resume points.
const BUILD_PAGE: i32 = 200;

/// What one page of a build did, for progress reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BuildProgress {
    /// Items of the table read so far (all collections and sites).
    pub scanned: u64,
    /// Documents of the index's collection that were given their key so far.
    pub updated: u64,
}

/// The slot of every declared index: its position among its collection's declarations.
pub(crate) fn declared_slots(indexes: &IndexSet) -> Vec<(Index, usize)> {
    let mut per_collection: HashMap<String, usize> = HashMap::new();
    indexes
        .declarations()
        .into_iter()
        .map(|index| {
            let slot = per_collection.entry(index.collection.clone()).or_default();
            *slot += 1;
            let slot = *slot;
            (index, slot)
        })
        .collect()
}

/// The GSI of `slot`: `gNpk` hash, `gNsk` range, every attribute projected.
pub(crate) fn gsi(slot: usize) -> GlobalSecondaryIndex {
    GlobalSecondaryIndex::builder()
        .index_name(gsi_name(slot))
        .key_schema(key_element(&gsi_pk(slot), KeyType::Hash))
        .key_schema(key_element(&gsi_sk(slot), KeyType::Range))
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::All)
                .build(),
        )
        .build()
        .expect("name, keys and projection are set")
}

fn key_element(name: &str, key_type: KeyType) -> KeySchemaElement {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(key_type)
        .build()
        .expect("name and type are set")
}

fn attribute(name: &str, kind: ScalarAttributeType) -> AttributeDefinition {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(kind)
        .build()
        .expect("name and type are set")
}

impl DynamoStore {
    /// The indexes the table holds, with their slots and states.
    pub async fn list_indexes(&self) -> Result<Vec<TableIndex>> {
        self.forget_registry();
        Ok(self.registry().await?.indexes.clone())
    }

    pub(crate) async fn register(
        &self,
        index: Index,
        slot: usize,
        state: IndexState,
        added_at: i64,
    ) -> Result<TableIndex> {
        let compiled = IndexSet::new([index.clone()])?
            .iter()
            .next()
            .cloned()
            .expect("one index");
        let record = TableIndex {
            index,
            slot,
            state,
            added_at,
            partitions: self.index_partitions,
            suffixed: true,
            resume: None,
            compiled,
        };
        self.put_record(&record).await?;
        Ok(record)
    }

    /// Adds `index` to an existing table: picks a GSI slot no other index of its collection
    /// uses, creates that GSI when the table lacks it (and waits until it is active), and
    /// records the index as `building`. From then on every store maintains it on every write
    /// (they re-read the records within a few seconds); [`build_index`](Self::build_index)
    /// gives the documents written before their keys, and then queries use it. Adding an
    /// index the table holds with the same fields does nothing; with other fields it is an
    /// error naming it.
    pub async fn add_index(&self, index: &Index) -> Result<TableIndex> {
        IndexSet::new([index.clone()])?;
        self.forget_registry();
        let registry = self.registry().await?;
        if let Some(held) = registry.named(&index.collection, &index.name) {
            if held.index.fields != index.fields || held.index.unique != index.unique {
                return Err(Error::invalid(format!(
                    "the table already holds index `{}` of collection `{}` as {}; drop it \
                     first (`docstore index drop`) to add it as {index}",
                    index.name, index.collection, held.index
                )));
            }
            return Ok(held.clone());
        }
        let taken: Vec<usize> = registry
            .for_collection(&index.collection)
            .map(|i| i.slot)
            .collect();
        let slot = (1..=MAX_SLOTS)
            .find(|slot| !taken.contains(slot))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "collection `{}` already has {MAX_SLOTS} indexes, DynamoDB's limit of GSIs",
                    index.collection
                ))
            })?;
        let described = self
            .client
            .describe_table()
            .table_name(&self.table)
            .send()
            .await
            .map_err(|e| self.error("DescribeTable", e))?;
        let exists = described
            .table()
            .map(|t| t.global_secondary_indexes())
            .unwrap_or_default()
            .iter()
            .any(|g| g.index_name() == Some(gsi_name(slot).as_str()));
        if !exists {
            let create = CreateGlobalSecondaryIndexAction::builder()
                .index_name(gsi_name(slot))
                .key_schema(key_element(&gsi_pk(slot), KeyType::Hash))
                .key_schema(key_element(&gsi_sk(slot), KeyType::Range))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::All)
                        .build(),
                )
                .build()
                .map_err(crate::send::build_error)?;
            self.client
                .update_table()
                .table_name(&self.table)
                .attribute_definitions(attribute(&gsi_pk(slot), ScalarAttributeType::S))
                .attribute_definitions(attribute(&gsi_sk(slot), ScalarAttributeType::B))
                .global_secondary_index_updates(
                    GlobalSecondaryIndexUpdate::builder().create(create).build(),
                )
                .send()
                .await
                .map_err(|e| self.error("UpdateTable", e))?;
        }
        self.wait_until_active(Some(&gsi_name(slot))).await?;
        // Wall time, not the store's clock: builds in other processes wait from it.
        let now = docstore::Clock::now(&docstore::SystemClock);
        self.register(index.clone(), slot, IndexState::Building, now)
            .await
    }

    /// Gives every document of the index's collection (in every site) written before the
    /// index was added its key, then records the index as `built`. Resumable: each page's
    /// position is recorded, and a build started again goes on from there. Safe while
    /// applications write: it starts 10 s (twice the 5 s stores trust their index records) after the index was added (every store
    /// maintains it by then), and a document changed since the page was read is left to its
    /// writer (the update is conditioned on its version). `progress` is called after each page.
    pub async fn build_index(
        &self,
        collection: &str,
        name: &str,
        mut progress: impl FnMut(BuildProgress),
    ) -> Result<TableIndex> {
        self.forget_registry();
        let registry = self.registry().await?;
        let Some(record) = registry.named(collection, name).cloned() else {
            return Err(Error::invalid(format!(
                "the table holds no index `{name}` of collection `{collection}`; add it first"
            )));
        };
        if record.state == IndexState::Built {
            return Ok(record);
        }
        let ready_at = record.added_at + 2 * REFRESH.as_nanos() as i64;
        let now = docstore::Clock::now(&docstore::SystemClock);
        if ready_at > now {
            tokio::time::sleep(std::time::Duration::from_nanos((ready_at - now) as u64)).await;
        }
        let resume: Option<Item> = record
            .resume
            .as_deref()
            .and_then(|r| serde_json::from_str::<HashMap<String, String>>(r).ok())
            .map(|key| key.into_iter().map(|(k, v)| (k, text(v))).collect());
        let mut scan = TableScan::new(self, resume);
        let mut done = BuildProgress::default();
        let mut duplicates = Duplicates::default();
        while let Some(items) = scan.next_page(|request| request.limit(BUILD_PAGE)).await? {
            done.scanned = scan.scanned();
            for item in &items {
                if self
                    .give_index_key(&record, collection, item, &mut duplicates)
                    .await?
                {
                    done.updated += 1;
                }
            }
            progress(done);
            if let Some(key) = scan.resume_key() {
                let position: HashMap<String, String> = key
                    .iter()
                    .filter_map(|(k, v)| v.as_s().ok().map(|s| (k.clone(), s.clone())))
                    .collect();
                let mut resumed = record.clone();
                resumed.resume = Some(serde_json::to_string(&position).expect("strings serialize"));
                self.put_record(&resumed).await?;
            }
        }
        if let Some(refusal) = duplicates.refusal(&record.compiled) {
            // Left `building`: writers keep its guards, and a build after the values were
            // made distinct goes on (every guard already written is written again as it is).
            let mut restart = record;
            restart.resume = None;
            self.put_record(&restart).await?;
            return Err(refusal);
        }
        let mut built = record;
        built.state = IndexState::Built;
        built.resume = None;
        self.put_record(&built).await?;
        Ok(built)
    }

    /// Gives `item` the key of index `record` when it is a document of `collection` whose
    /// key attributes are missing or stale, and for a unique index the guard of its value
    /// (in one transaction with the key, [`Self::give_guard`]): whether it was updated (an
    /// item changed since it was read is left to its writer, who set its key and guard).
    async fn give_index_key(
        &self,
        record: &TableIndex,
        collection: &str,
        item: &Item,
        duplicates: &mut Duplicates,
    ) -> Result<bool> {
        let Ok(pk) = string(item, PK) else {
            return Ok(false);
        };
        let Partition::Documents {
            site,
            collection: of,
        } = parse_pk(pk)
        else {
            return Ok(false);
        };
        if of != collection || !is_document(item) {
            return Ok(false);
        }
        let doc = parse_document(item)?;
        let key = record.compiled.key(&doc);
        let wanted_pk = record.partition_of(site, &doc.id);
        let wanted_sk = stored_key(&key).to_vec();
        let has = matches!(item.get(&gsi_pk(record.slot)), Some(AttributeValue::S(p)) if *p == wanted_pk)
            && matches!(item.get(&gsi_sk(record.slot)), Some(AttributeValue::B(b)) if b.as_ref() == wanted_sk.as_slice());
        if let Some(claim) = record.compiled.claim(&doc) {
            let keys = IndexKeys {
                pk: wanted_pk,
                sk: wanted_sk,
            };
            return self
                .give_guard(record, item, &doc, keys, &claim, duplicates)
                .await;
        }
        if has {
            return Ok(false);
        }
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, text(pk))
            .key(SK, text(string(item, SK)?))
            .update_expression("SET #gp = :gp, #gs = :gs")
            .condition_expression("#v = :v")
            .expression_attribute_names("#gp", gsi_pk(record.slot))
            .expression_attribute_names("#gs", gsi_sk(record.slot))
            .expression_attribute_names("#v", VERSION)
            .expression_attribute_values(":gp", text(wanted_pk))
            .expression_attribute_values(":gs", AttributeValue::B(Blob::new(wanted_sk)))
            .expression_attribute_values(":v", num(doc.version))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            // Written or deleted since the page was read: its writer set the key.
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(false)
            }
            Err(err) => Err(self.error("UpdateItem", err)),
        }
    }

    /// Writes the guard of `doc`'s value in the unique index `record` together with its index
    /// `keys`, conditioned on the document's version (a document written since was given both
    /// by its writer) and on the guard being absent or the document's own (written again as
    /// it is by a resumed build). A guard held by another document that claims the value too
    /// is a pair sharing it, noted in `duplicates`; a guard naming a document that no longer
    /// claims it (left by a guard lost outside docstore) is taken over.
    async fn give_guard(
        &self,
        record: &TableIndex,
        item: &Item,
        doc: &docstore::Document,
        keys: IndexKeys,
        value: &[u8],
        duplicates: &mut Duplicates,
    ) -> Result<bool> {
        let site = item_site(item)?;
        let guard = GuardKey::of(self.layout().await?, site, &record.compiled, value);
        let update = Update::builder()
            .table_name(&self.table)
            .key(PK, text(string(item, PK)?))
            .key(SK, text(string(item, SK)?))
            .update_expression("SET #gp = :gp, #gs = :gs")
            .condition_expression("#v = :v")
            .expression_attribute_names("#gp", gsi_pk(record.slot))
            .expression_attribute_names("#gs", gsi_sk(record.slot))
            .expression_attribute_names("#v", VERSION)
            .expression_attribute_values(":gp", text(keys.pk))
            .expression_attribute_values(":gs", AttributeValue::B(Blob::new(keys.sk)))
            .expression_attribute_values(":v", num(doc.version))
            .build()
            .map_err(crate::send::build_error)?;
        let mut claim = GuardAction::claim(guard, &doc.id);
        let mut backoff = self.backoff();
        loop {
            let actions = vec![
                TransactWriteItem::builder().update(update.clone()).build(),
                claim.transact_item(&self.table)?,
            ];
            let sent = self
                .client
                .transact_write_items()
                .set_transact_items(Some(actions))
                .send()
                .await;
            let err = match sent {
                Ok(_) => return Ok(true),
                Err(err) => err,
            };
            match self.transaction_failure(err, 1, 1)? {
                // Written or deleted since the page was read: its writer set key and guard.
                TransactionFailure::Refused { .. } => return Ok(false),
                TransactionFailure::Guarded { mut refused } => {
                    let returned = refused.swap_remove(0).item;
                    let guard = self.refused_guard(&claim, returned).await?;
                    let holder = guard.as_ref().and_then(crate::guards::holder_of);
                    if let Some(holder) = holder.filter(|h| *h != doc.id) {
                        let key = docstore::Key::new(site, &record.index.collection, holder)?;
                        let claims = self
                            .read(&key)
                            .await?
                            .and_then(|held| record.compiled.claim(&held.doc));
                        if claims.as_deref() == Some(value) {
                            duplicates.add(record, site, holder, &doc.id);
                            return Ok(false);
                        }
                        claim.allowed.insert(holder.to_owned());
                        continue;
                    }
                }
                TransactionFailure::Unknown(err) => return Err(err),
                TransactionFailure::Contended => {}
                // Nothing but the document and its guard is sent.
                TransactionFailure::CompanionRefused => {
                    return Err(crate::send::companion_refused(&self.table));
                }
            }
            if !backoff.wait().await {
                return Err(Error::Unavailable {
                    message: format!(
                        "building index `{}`: the guard of document {} kept meeting concurrent \
                         writes; run the build again",
                        record.index.name, doc.id
                    ),
                    source: None,
                    write_id: None,
                });
            }
        }
    }

    /// Deletes every guard of the unique index `record` (one Scan of the table), so that a
    /// unique index added again later meets no guard of a document that gave its value up.
    async fn delete_guards(&self, record: &TableIndex) -> Result<()> {
        let prefix = format!("{}#{}#", record.index.collection, record.index.name);
        let mut scan = TableScan::new(self, None);
        let guards = |request: aws_sdk_dynamodb::operation::scan::builders::ScanFluentBuilder| {
            request
                .filter_expression("begins_with(#sk, :prefix) AND attribute_exists(#h)")
                .projection_expression("#pk, #sk, #h")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_names("#sk", SK)
                .expression_attribute_names("#h", crate::guards::HOLDER)
                .expression_attribute_values(":prefix", text(&prefix))
        };
        while let Some(items) = scan.next_page(guards).await? {
            for item in &items {
                let (pk, sk) = (string(item, PK)?, string(item, SK)?);
                if !crate::guards::is_guard_pk(pk) {
                    continue;
                }
                self.client
                    .delete_item()
                    .table_name(&self.table)
                    .key(PK, text(pk))
                    .key(SK, text(sk))
                    .send()
                    .await
                    .map_err(|e| self.error("DeleteItem", e))?;
            }
        }
        Ok(())
    }

    /// Drops an index: forgets its record (queries stop using it at once in this store,
    /// within a few seconds in others), deletes its guards when it is unique (a Scan of the
    /// table; a store that has not re-read the records yet may still write one in the next
    /// seconds, which `docstore fsck --repair` removes) and deletes its GSI when no other
    /// index uses the slot.
    /// Items keep the stale key attributes until they are next written; they cost storage
    /// only. Dropping an index the table does not hold does nothing.
    pub async fn drop_index(&self, collection: &str, name: &str) -> Result<()> {
        self.forget_registry();
        let registry = self.registry().await?;
        let Some(record) = registry.named(collection, name).cloned() else {
            return Ok(());
        };
        self.delete_record(&record.index).await?;
        if record.index.unique {
            self.delete_guards(&record).await?;
        }
        let shared = registry
            .indexes
            .iter()
            .any(|i| i.slot == record.slot && i.index != record.index);
        if !shared {
            self.client
                .update_table()
                .table_name(&self.table)
                .global_secondary_index_updates(
                    GlobalSecondaryIndexUpdate::builder()
                        .delete(
                            DeleteGlobalSecondaryIndexAction::builder()
                                .index_name(gsi_name(record.slot))
                                .build()
                                .map_err(crate::send::build_error)?,
                        )
                        .build(),
                )
                .send()
                .await
                .map_err(|e| self.error("UpdateTable", e))?;
        }
        Ok(())
    }
}

/// The key attributes of one document in one index.
struct IndexKeys {
    pk: String,
    sk: Vec<u8>,
}

/// The site of a document item.
fn item_site(item: &Item) -> Result<&str> {
    match parse_pk(string(item, PK)?) {
        Partition::Documents { site, .. } => Ok(site),
        _ => Err(Error::Backend {
            message: format!("{item:?} is not a document item"),
            source: None,
        }),
    }
}

/// The pairs of documents an index build found sharing a value of a unique index.
#[derive(Debug, Default)]
struct Duplicates {
    count: u64,
    pairs: Vec<String>,
}

impl Duplicates {
    fn add(&mut self, record: &TableIndex, site: &str, holder: &str, id: &str) {
        self.count += 1;
        if self.pairs.len() < MAX_NAMED_DUPLICATES {
            let collection = &record.index.collection;
            let (first, second) = if holder < id {
                (holder, id)
            } else {
                (id, holder)
            };
            self.pairs.push(format!(
                "{site}/{collection}/{first} and {site}/{collection}/{second}"
            ));
        }
    }

    /// The refusal of the build, worded as [`docstore::index::unique::DuplicateFinder`]'s.
    fn refusal(&self, index: &docstore::index::CompiledIndex) -> Option<Error> {
        (self.count > 0).then(|| {
            Error::invalid(format!(
                "unique index {:?} of collection {:?}: {} pairs of documents share a value, \
                 e.g. {}; make the values distinct before declaring it unique",
                index.name(),
                index.collection(),
                self.count,
                self.pairs.join(", ")
            ))
        })
    }
}

/// The registry partition is skipped by document scans: its `pk` starts with `__`.
const _: () = assert!(REGISTRY_PK.as_bytes()[0] == b'_');
