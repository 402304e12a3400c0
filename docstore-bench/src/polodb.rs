//! The peer: PoloDB (`polodb_core` 4.4, an embedded document database in pure Rust), on the
//! workloads it supports, the way its API is meant to be used. Calls run straight from the
//! task, like the SQLite baseline.
//!
//! - create: `insert_one` (the id as `_id`, unique); get: `find_one` by `_id`;
//! - put: `update_one` with `$set` of every field and `$inc` of a `version` field,
//!   `insert_one` when nothing matched;
//! - update: `find_one`, merge in Rust, `update_one` conditioned on the version read
//!   (`$set` of the top-level fields, `$unset` of removed ones, `$inc` version), retried when
//!   nothing matched; update_if: the same once, with the expected version;
//! - delete: `delete_one`;
//! - query: `find` with the filter, then sort and limit in Rust (PoloDB 4.4 has no sort or
//!   limit); walk: `find` with `_id > after`, reading a page from the cursor.
//!
//! It keeps no timestamps or actors, and does not report versions (the workloads count
//! them). Writes take turns behind a mutex: PoloDB fails overlapping writes rather than
//! waiting for each other.

use crate::BenchResult;
use crate::data::{CATEGORY, PRIORITY_MIN, STATUS, TOP, merge};
use crate::subject::{Subject, WalkPage, WalkPosition};
use async_trait::async_trait;
use docstore::Data;
use parking_lot::Mutex;
use polodb_core::bson::{self, Bson, Document as Bdoc, doc};
use polodb_core::{Collection, Database};
use std::path::Path;

/// PoloDB with one collection per benchmark collection.
pub struct PoloSubject {
    db: Database,
    /// PoloDB fails a write that overlaps another ("session is outdated") instead of waiting,
    /// so writes take turns here, as an application using it must arrange.
    writer: Mutex<()>,
}

impl std::fmt::Debug for PoloSubject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PoloSubject")
    }
}

impl PoloSubject {
    /// Opens (creating) the database file at `path`.
    pub fn open(path: &Path) -> BenchResult<Self> {
        Ok(PoloSubject {
            db: at("open_file", Database::open_file(path))?,
            writer: Mutex::new(()),
        })
    }

    fn coll(&self, name: &str) -> Collection<Bdoc> {
        self.db.collection::<Bdoc>(name)
    }

    /// Inserts documents `0..count` (generation 0) into `collection`, in batches.
    pub fn bulk_load(&self, collection: &str, count: usize) -> BenchResult<()> {
        let coll = self.coll(collection);
        for chunk in (0..count).collect::<Vec<_>>().chunks(1000) {
            let docs = chunk
                .iter()
                .map(|&n| body(&crate::data::id(n), crate::data::document(n, 0), 1))
                .collect::<BenchResult<Vec<_>>>()?;
            at("insert_many", coll.insert_many(docs))?;
        }
        Ok(())
    }
}

/// A PoloDB failure, naming the call.
fn at<T>(call: &str, result: polodb_core::Result<T>) -> BenchResult<T> {
    result.map_err(|err| format!("PoloDB {call}: {err}").into())
}

fn body(id: &str, data: Data, version: i64) -> BenchResult<Bdoc> {
    let mut doc = bson::to_document(&data)?;
    doc.insert("_id", id);
    doc.insert("version", version);
    Ok(doc)
}

fn to_data(mut doc: Bdoc) -> BenchResult<Data> {
    doc.remove("_id");
    doc.remove("version");
    Ok(bson::from_document(doc)?)
}

/// `$set` of every top-level field of `data`, `$unset` of `removed`, `$inc` of the version.
fn update_doc(data: &Data, removed: &[String]) -> BenchResult<Bdoc> {
    let mut update = doc! {"$set": bson::to_document(data)?, "$inc": {"version": 1}};
    if !removed.is_empty() {
        let unset: Bdoc = removed
            .iter()
            .map(|k| (k.clone(), Bson::String(String::new())))
            .collect();
        update.insert("$unset", unset);
    }
    Ok(update)
}

impl PoloSubject {
    /// find, merge, conditional update; `false` when the version moved.
    fn patch_once(
        &self,
        collection: &str,
        id: &str,
        patch: &Data,
        expected: Option<i64>,
    ) -> BenchResult<bool> {
        let coll = self.coll(collection);
        let _turn = self.writer.lock();
        let mut current = at("find_one", coll.find_one(doc! {"_id": id}))?
            .ok_or_else(|| format!("{id} not found"))?;
        let version = current.get_i64("version")?;
        if expected.is_some_and(|e| e != version) {
            return Err(format!("{id} is at version {version}, not {expected:?}").into());
        }
        current.remove("_id");
        current.remove("version");
        let mut data: Data = bson::from_document(current)?;
        let before: Vec<String> = data.keys().cloned().collect();
        merge(&mut data, patch);
        let removed: Vec<String> = before
            .into_iter()
            .filter(|k| !data.contains_key(k))
            .collect();
        let result = at(
            "update_one",
            coll.update_one(
                doc! {"_id": id, "version": version},
                update_doc(&data, &removed)?,
            ),
        )?;
        Ok(result.modified_count > 0)
    }
}

#[async_trait]
impl Subject for PoloSubject {
    fn tracks_versions(&self) -> bool {
        false
    }

    async fn create(&self, collection: &str, id: &str, data: Data) -> BenchResult<u64> {
        let doc = body(id, data, 1)?;
        let _turn = self.writer.lock();
        at("insert_one", self.coll(collection).insert_one(doc))?;
        Ok(1)
    }

    async fn get(&self, collection: &str, id: &str) -> BenchResult<bool> {
        match at("find_one", self.coll(collection).find_one(doc! {"_id": id}))? {
            Some(doc) => to_data(doc).map(|_| true),
            None => Ok(false),
        }
    }

    async fn put(&self, collection: &str, id: &str, data: Data) -> BenchResult<u64> {
        let coll = self.coll(collection);
        let update = update_doc(&data, &[])?;
        let _turn = self.writer.lock();
        let result = at("update_one", coll.update_one(doc! {"_id": id}, update))?;
        if result.modified_count == 0 {
            at("insert_one", coll.insert_one(body(id, data, 1)?))?;
        }
        Ok(0)
    }

    async fn update(&self, collection: &str, id: &str, patch: &Data) -> BenchResult<u64> {
        while !self.patch_once(collection, id, patch, None)? {}
        Ok(0)
    }

    async fn update_if(
        &self,
        collection: &str,
        id: &str,
        patch: &Data,
        expected: u64,
    ) -> BenchResult<u64> {
        if !self.patch_once(collection, id, patch, Some(expected as i64))? {
            return Err(format!("{id} changed since it was read").into());
        }
        Ok(0)
    }

    async fn delete(&self, collection: &str, id: &str) -> BenchResult<bool> {
        let _turn = self.writer.lock();
        let result = at(
            "delete_one",
            self.coll(collection).delete_one(doc! {"_id": id}),
        )?;
        Ok(result.deleted_count > 0)
    }

    async fn top(&self, collection: &str) -> BenchResult<Vec<String>> {
        let filter = doc! {
            "status": STATUS,
            "category": CATEGORY,
            "priority": {"$gte": PRIORITY_MIN},
        };
        let mut matched: Vec<(f64, String, Data)> = Vec::new();
        for doc in at("find", self.coll(collection).find(filter))? {
            let mut doc = doc?;
            let id = doc.get_str("_id")?.to_owned();
            let score = doc.get_f64("score")?;
            doc.remove("_id");
            doc.remove("version");
            matched.push((score, id, bson::from_document(doc)?));
        }
        matched.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        matched.truncate(TOP);
        Ok(matched.into_iter().map(|(_, id, _)| id).collect())
    }

    async fn walk_page(
        &self,
        collection: &str,
        page_size: usize,
        after: WalkPosition,
    ) -> BenchResult<WalkPage> {
        let filter = after.map(|id| doc! {"_id": {"$gt": id}});
        let mut cursor = at("find", self.coll(collection).find(filter))?;
        let mut ids = Vec::with_capacity(page_size);
        let mut more = false;
        for doc in cursor.by_ref() {
            let doc = doc?;
            if ids.len() == page_size {
                more = true;
                break;
            }
            ids.push(doc.get_str("_id")?.to_owned());
            to_data(doc)?;
        }
        Ok(WalkPage {
            documents: ids.len(),
            next: ids.last().filter(|_| more).cloned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{document, id, patch};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_workload_call_works() {
        let dir = tempfile::tempdir().unwrap();
        let polo = PoloSubject::open(&dir.path().join("p.db")).unwrap();
        polo.bulk_load("q", 300).unwrap();
        for n in 0..100 {
            polo.create("c", &id(n), document(n, 0)).await.unwrap();
        }
        for n in 0..100 {
            assert!(polo.get("c", &id(n)).await.unwrap());
        }
        for n in 0..100 {
            polo.put("c", &id(n), document(n, 1))
                .await
                .unwrap_or_else(|e| panic!("{n}: {e}"));
        }
        assert!(polo.get("c", &id(1)).await.unwrap());
        polo.put("c", &id(1), document(1, 1)).await.unwrap();
        polo.update("c", &id(1), &patch(1)).await.unwrap();
        polo.update_if("c", &id(1), &patch(2), 4).await.unwrap();
        assert!(polo.update_if("c", &id(1), &patch(2), 4).await.is_err());
        assert!(polo.delete("c", &id(1)).await.unwrap());
        assert!(!polo.get("c", &id(1)).await.unwrap());
        let page = polo.walk_page("q", 100, None).await.unwrap();
        assert_eq!(page.documents, 100);
        let top = polo.top("q").await.unwrap();
        assert!(!top.is_empty());
    }
}
