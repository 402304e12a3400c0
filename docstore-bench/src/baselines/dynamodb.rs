//! The DynamoDB baseline: the raw `aws-sdk-dynamodb` calls a careful programmer makes on the
//! same table layout (`docs/contract.md`), with the fewest requests the layout allows:
//!
//! | call | requests |
//! |---|---|
//! | create | conditional PutItem, counter `ADD` |
//! | get | consistent GetItem |
//! | put | one UpdateItem (`if_not_exists` keeps `created_*`, `ADD version`, `ALL_NEW`), counter `ADD` only when it created |
//! | update | GetItem, PutItem conditioned on the version read (retried with jittered backoff) |
//! | update_if | GetItem, PutItem conditioned on the expected version |
//! | delete | DeleteItem returning the old item, counter `ADD -1` when there was one |
//! | query | consistent Query pages over each of the collection's partition keys, all at once, filtered and sorted by hand |
//! | walk | a page: one consistent Query a partition key, all at once (`sk >` the last id, `Limit` the page), merged by id |
//!
//! Documents sit under the partition keys of the layout (`docs/contract.md`, "Partitions on
//! DynamoDB"; [`dynamo::document_pk`]), as docstore-dynamodb's do, so the query and the walk
//! read every partition of a collection on both sides.
//! It has none of docstore's write identities or lost-answer handling: a resent write can
//! report a conflict that was its own, and counters are not protected from double counting.

use crate::BenchResult;
use crate::data::{ACTOR, Rng, SITE, TOP, merge, now_nanos, selective_matches, selective_order};
use crate::dynamo;
use crate::subject::{Subject, WalkPage, WalkPosition};
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use docstore::{Data, Document};
use futures_util::future::try_join_all;
use std::collections::HashMap;
use std::time::Duration;

type Item = HashMap<String, AttributeValue>;

/// The DynamoDB baseline. See the [module docs](self).
#[derive(Clone, Debug)]
pub struct DynamoBaseline {
    client: Client,
    table: String,
}

impl DynamoBaseline {
    /// Uses `client` on `table`.
    pub fn new(client: Client, table: &str) -> Self {
        DynamoBaseline {
            client,
            table: table.to_owned(),
        }
    }

    fn key(collection: &str, id: &str) -> Item {
        HashMap::from([
            ("pk".to_owned(), s(dynamo::document_pk(collection, id))),
            ("sk".to_owned(), s(id)),
        ])
    }

    /// Every document of partition key `pk` that `keep` keeps, page by page.
    async fn read_partition(
        &self,
        pk: &str,
        keep: impl Fn(&Document) -> bool,
    ) -> BenchResult<Vec<Document>> {
        let (mut kept, mut start) = (Vec::new(), None);
        loop {
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .key_condition_expression("pk = :pk")
                .expression_attribute_values(":pk", s(pk))
                .set_exclusive_start_key(start)
                .send()
                .await?;
            for item in output.items() {
                let doc = parse(item)?;
                if keep(&doc) {
                    kept.push(doc);
                }
            }
            match output.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(kept),
            }
        }
    }

    /// Up to `limit` ids of partition key `pk` after `after`, in id order; whether it holds
    /// more.
    async fn ids_after(
        &self,
        pk: &str,
        after: Option<&str>,
        limit: usize,
    ) -> BenchResult<(Vec<String>, bool)> {
        let mut query = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .expression_attribute_values(":pk", s(pk))
            .limit(i32::try_from(limit).unwrap_or(i32::MAX));
        query = match after {
            Some(id) => query
                .key_condition_expression("pk = :pk AND sk > :after")
                .expression_attribute_values(":after", s(id)),
            None => query.key_condition_expression("pk = :pk"),
        };
        let output = query.send().await?;
        let ids = output
            .items()
            .iter()
            .map(|item| Ok(parse(item)?.id))
            .collect::<BenchResult<Vec<_>>>()?;
        let more = output.last_evaluated_key.is_some_and(|key| !key.is_empty());
        Ok((ids, more))
    }

    async fn count(&self, collection: &str, delta: i64) -> BenchResult<()> {
        self.client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(format!("{SITE}#__collections")))
            .key("sk", s(collection))
            .update_expression("ADD #n :d")
            .expression_attribute_names("#n", "n")
            .expression_attribute_values(":d", n(delta))
            .send()
            .await?;
        Ok(())
    }

    async fn read(&self, collection: &str, id: &str) -> BenchResult<Option<Document>> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(collection, id)))
            .consistent_read(true)
            .send()
            .await?;
        output.item.map(|item| parse(&item)).transpose()
    }

    /// Writes `doc` as the next version of what was read at `read_version`; `false` when the
    /// condition failed.
    async fn write_next(&self, collection: &str, doc: &Document) -> BenchResult<bool> {
        let mut item = Self::key(collection, &doc.id);
        item.insert("data".into(), s(serde_json::to_string(&doc.data)?));
        item.insert("created_at".into(), n(doc.created_at));
        item.insert("updated_at".into(), n(doc.updated_at));
        item.insert("created_by".into(), s(&doc.created_by));
        item.insert("updated_by".into(), s(&doc.updated_by));
        item.insert("version".into(), n(doc.version));
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("#v = :v")
            .expression_attribute_names("#v", "version")
            .expression_attribute_values(":v", n(doc.version - 1))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(false)
            }
            Err(err) => Err(err.into()),
        }
    }

    fn next_version(doc: &mut Document, patch: &Data) {
        merge(&mut doc.data, patch);
        doc.updated_at = now_nanos().max(doc.updated_at);
        doc.updated_by = ACTOR.to_owned();
        doc.version += 1;
    }
}

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// The document an item in the table layout holds.
pub fn parse(item: &Item) -> BenchResult<Document> {
    let text = |name: &str| -> BenchResult<String> {
        match item.get(name) {
            Some(AttributeValue::S(v)) => Ok(v.clone()),
            _ => Err(format!("attribute {name} missing").into()),
        }
    };
    let number = |name: &str| -> BenchResult<i64> {
        match item.get(name) {
            Some(AttributeValue::N(v)) => Ok(v.parse()?),
            _ => Err(format!("attribute {name} missing").into()),
        }
    };
    Ok(Document {
        expires_at: None,
        id: text("sk")?,
        data: serde_json::from_str(&text("data")?)?,
        created_at: number("created_at")?,
        updated_at: number("updated_at")?,
        created_by: text("created_by")?,
        updated_by: text("updated_by")?,
        version: number("version")? as u64,
    })
}

#[async_trait]
impl Subject for DynamoBaseline {
    async fn create(&self, collection: &str, id: &str, data: Data) -> BenchResult<u64> {
        let now = now_nanos();
        let mut item = Self::key(collection, id);
        item.insert("data".into(), s(serde_json::to_string(&data)?));
        item.insert("created_at".into(), n(now));
        item.insert("updated_at".into(), n(now));
        item.insert("created_by".into(), s(ACTOR));
        item.insert("updated_by".into(), s(ACTOR));
        item.insert("version".into(), n(1));
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await?;
        self.count(collection, 1).await?;
        Ok(1)
    }

    async fn get(&self, collection: &str, id: &str) -> BenchResult<bool> {
        Ok(self.read(collection, id).await?.is_some())
    }

    async fn put(&self, collection: &str, id: &str, data: Data) -> BenchResult<u64> {
        let output = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(collection, id)))
            .update_expression(
                "SET #data = :data, updated_at = :now, updated_by = :actor, \
                 created_at = if_not_exists(created_at, :now), \
                 created_by = if_not_exists(created_by, :actor) ADD #v :one",
            )
            .expression_attribute_names("#data", "data")
            .expression_attribute_names("#v", "version")
            .expression_attribute_values(":data", s(serde_json::to_string(&data)?))
            .expression_attribute_values(":now", n(now_nanos()))
            .expression_attribute_values(":actor", s(ACTOR))
            .expression_attribute_values(":one", n(1))
            .return_values(ReturnValue::AllNew)
            .send()
            .await?;
        let version = parse(&output.attributes.unwrap_or_default())?.version;
        if version == 1 {
            self.count(collection, 1).await?;
        }
        Ok(version)
    }

    async fn update(&self, collection: &str, id: &str, patch: &Data) -> BenchResult<u64> {
        let mut rng = Rng::new(now_nanos() as u64);
        let mut bound_ms = 4;
        loop {
            let mut doc = self
                .read(collection, id)
                .await?
                .ok_or_else(|| format!("{id} not found"))?;
            Self::next_version(&mut doc, patch);
            if self.write_next(collection, &doc).await? {
                return Ok(doc.version);
            }
            let wait = rng.below(bound_ms * 1000);
            tokio::time::sleep(Duration::from_micros(wait)).await;
            bound_ms = (bound_ms * 2).min(250);
        }
    }

    async fn update_if(
        &self,
        collection: &str,
        id: &str,
        patch: &Data,
        expected: u64,
    ) -> BenchResult<u64> {
        let mut doc = self
            .read(collection, id)
            .await?
            .ok_or_else(|| format!("{id} not found"))?;
        if doc.version != expected {
            return Err(format!("{id} is at version {}, not {expected}", doc.version).into());
        }
        Self::next_version(&mut doc, patch);
        if !self.write_next(collection, &doc).await? {
            return Err(format!("{id} changed since it was read").into());
        }
        Ok(doc.version)
    }

    async fn delete(&self, collection: &str, id: &str) -> BenchResult<bool> {
        let output = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(collection, id)))
            .return_values(ReturnValue::AllOld)
            .send()
            .await?;
        let existed = output.attributes.is_some_and(|a| !a.is_empty());
        if existed {
            self.count(collection, -1).await?;
        }
        Ok(existed)
    }

    async fn top(&self, collection: &str) -> BenchResult<Vec<String>> {
        let pks = dynamo::document_pks(collection);
        let keep = |doc: &Document| selective_matches(&doc.data);
        let reads = pks.iter().map(|pk| self.read_partition(pk, keep));
        let mut matched: Vec<Document> = try_join_all(reads).await?.concat();
        matched.sort_unstable_by(selective_order);
        matched.truncate(TOP);
        Ok(matched.into_iter().map(|d| d.id).collect())
    }

    async fn walk_page(
        &self,
        collection: &str,
        page_size: usize,
        after: WalkPosition,
    ) -> BenchResult<WalkPage> {
        let pks = dynamo::document_pks(collection);
        let reads = pks
            .iter()
            .map(|pk| self.ids_after(pk, after.as_deref(), page_size));
        let read = try_join_all(reads).await?;
        let more = read.iter().any(|(_, more)| *more);
        let mut ids: Vec<String> = read.into_iter().flat_map(|(ids, _)| ids).collect();
        ids.sort_unstable();
        let more = more || ids.len() > page_size;
        ids.truncate(page_size);
        Ok(WalkPage {
            documents: ids.len(),
            next: ids.pop().filter(|_| more),
        })
    }
}
