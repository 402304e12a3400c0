//! The memory baseline: a `RwLock<HashMap>` from collection to its documents (ordered by
//! id, so a walk can page), holding the same [`Document`] values `MemoryStore` holds.
//!
//! Reads hand back an owned `Document`, as any store must (its [`Data`] shares the stored
//! map: a clone of it is a reference count); writes change the value in place (a merge
//! copies the map only if a reader still holds it) and return nothing but the new version,
//! with no size check.

use crate::BenchResult;
use crate::data::{ACTOR, TOP, merge, now_nanos, selective_matches, selective_order};
use crate::subject::{Subject, WalkPage, WalkPosition};
use async_trait::async_trait;
use docstore::{Data, Document};
use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

/// The memory baseline. See the [module docs](self).
#[derive(Debug, Default)]
pub struct MemoryBaseline {
    collections: RwLock<HashMap<String, BTreeMap<String, Document>>>,
}

impl MemoryBaseline {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }
}

fn missing(id: &str) -> crate::BenchError {
    format!("{id} not found").into()
}

#[async_trait]
impl Subject for MemoryBaseline {
    async fn create(&self, collection: &str, id: &str, data: Data) -> BenchResult<u64> {
        let mut collections = self.collections.write();
        let docs = collections.entry(collection.to_owned()).or_default();
        if docs.contains_key(id) {
            return Err(format!("{id} already exists").into());
        }
        let now = now_nanos();
        docs.insert(
            id.to_owned(),
            Document {
                expires_at: None,
                id: id.to_owned(),
                data,
                created_at: now,
                updated_at: now,
                created_by: ACTOR.to_owned(),
                updated_by: ACTOR.to_owned(),
                version: 1,
            },
        );
        Ok(1)
    }

    async fn get(&self, collection: &str, id: &str) -> BenchResult<bool> {
        let doc = self
            .collections
            .read()
            .get(collection)
            .and_then(|docs| docs.get(id))
            .cloned();
        Ok(doc.is_some())
    }

    async fn put(&self, collection: &str, id: &str, data: Data) -> BenchResult<u64> {
        let mut collections = self.collections.write();
        let docs = collections.entry(collection.to_owned()).or_default();
        let now = now_nanos();
        if let Some(doc) = docs.get_mut(id) {
            doc.data = data;
            doc.updated_at = now.max(doc.updated_at);
            doc.updated_by = ACTOR.to_owned();
            doc.version += 1;
            return Ok(doc.version);
        }
        docs.insert(
            id.to_owned(),
            Document {
                expires_at: None,
                id: id.to_owned(),
                data,
                created_at: now,
                updated_at: now,
                created_by: ACTOR.to_owned(),
                updated_by: ACTOR.to_owned(),
                version: 1,
            },
        );
        Ok(1)
    }

    async fn update(&self, collection: &str, id: &str, patch: &Data) -> BenchResult<u64> {
        let mut collections = self.collections.write();
        let doc = collections
            .get_mut(collection)
            .and_then(|docs| docs.get_mut(id))
            .ok_or_else(|| missing(id))?;
        merge(&mut doc.data, patch);
        doc.updated_at = now_nanos().max(doc.updated_at);
        doc.updated_by = ACTOR.to_owned();
        doc.version += 1;
        Ok(doc.version)
    }

    async fn update_if(
        &self,
        collection: &str,
        id: &str,
        patch: &Data,
        expected: u64,
    ) -> BenchResult<u64> {
        let mut collections = self.collections.write();
        let doc = collections
            .get_mut(collection)
            .and_then(|docs| docs.get_mut(id))
            .ok_or_else(|| missing(id))?;
        if doc.version != expected {
            return Err(format!("{id} is at version {}, not {expected}", doc.version).into());
        }
        merge(&mut doc.data, patch);
        doc.updated_at = now_nanos().max(doc.updated_at);
        doc.updated_by = ACTOR.to_owned();
        doc.version += 1;
        Ok(doc.version)
    }

    async fn delete(&self, collection: &str, id: &str) -> BenchResult<bool> {
        let mut collections = self.collections.write();
        Ok(collections
            .get_mut(collection)
            .and_then(|docs| docs.remove(id))
            .is_some())
    }

    async fn top(&self, collection: &str) -> BenchResult<Vec<String>> {
        let collections = self.collections.read();
        let Some(docs) = collections.get(collection) else {
            return Ok(Vec::new());
        };
        let mut matched: Vec<&Document> = docs
            .values()
            .filter(|d| selective_matches(&d.data))
            .collect();
        matched.sort_unstable_by(|a, b| selective_order(a, b));
        let page: Vec<Document> = matched.into_iter().take(TOP).cloned().collect();
        Ok(page.into_iter().map(|d| d.id).collect())
    }

    async fn walk_page(
        &self,
        collection: &str,
        page_size: usize,
        after: WalkPosition,
    ) -> BenchResult<WalkPage> {
        let collections = self.collections.read();
        let Some(docs) = collections.get(collection) else {
            return Ok(WalkPage::default());
        };
        let start = match &after {
            Some(id) => Bound::Excluded(id.as_str()),
            None => Bound::Unbounded,
        };
        let mut range = docs.range::<str, _>((start, Bound::Unbounded)).peekable();
        let page: Vec<Document> = range
            .by_ref()
            .take(page_size)
            .map(|e| e.1.clone())
            .collect();
        let more = range.peek().is_some();
        Ok(WalkPage {
            documents: page.len(),
            next: page.last().filter(|_| more).map(|d| d.id.clone()),
        })
    }
}
