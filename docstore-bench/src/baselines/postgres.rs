//! The PostgreSQL baseline: what a careful programmer writes directly against `tokio-postgres`
//! (with the `deadpool-postgres` pool docstore-postgres uses: 16 connections, the most
//! recently returned one handed out first) for the same
//! guarantees as docstore-postgres, on docstore-postgres's schema in a schema of its own
//! (copied in [`schema`]; the run fails when the schema docstore-postgres creates differs).
//!
//! Every write is one transaction of prepared statements, sent as one pipeline after
//! `BEGIN` and before `COMMIT`, doing what docstore-postgres's write does:
//!
//! - the document row: `INSERT` (a create), or, after reading the row `FOR UPDATE` (with the
//!   write identities it keeps, in the same statement), the merge in the application and an
//!   `UPDATE`;
//! - the collection's counter row (`counters`), moved by a create or a delete;
//! - the write's identity (`write_ids`): the front end gives every write to PostgreSQL one
//!   (an answer lost with a connection must not apply the write twice), so the baseline does
//!   too, kept with the last 15 of the key's earlier ones, and a write whose identity the
//!   key already keeps is recognised as a repeat;
//! - the change row, its position drawn under the store's transaction-scoped advisory lock
//!   (positions in commit order, as docstore-postgres's feed) with a `pg_notify`.
//!
//! A batch reads and locks each document and writes each with an `UPDATE` (single-key
//! statements, pipelined), and keeps their identities and logs their changes with one
//! statement each (`unnest`). Reads are single statements; the
//! selective query filters, sorts and limits in SQL, reading the expression index an
//! application declares for it ([`schema::create_app_index`]: `status`, `category`, then
//! `score` descending, on the query collection), so it stops at the page as docstore's
//! declared index does.

pub mod schema;

use crate::BenchResult;
use crate::data::{
    ACTOR, CATEGORY, PRIORITY_MIN, QUERY_COLLECTION, SITE, STATUS, TOP, merge, now_nanos,
};
use crate::subject::{Subject, WalkPage, WalkPosition};
use async_trait::async_trait;
use deadpool_postgres::Transaction;
use docstore::{Data, Document, WriteId};
use std::collections::HashMap;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

/// The statements, with the baseline's schema in them.
#[derive(Debug)]
struct Sql {
    insert: String,
    count_up: String,
    count_down: String,
    keep_id: String,
    keep_ids: String,
    keep_delete_id: String,
    prune_ids: String,
    log: String,
    log_many: String,
    lock_one: String,
    update: String,
    delete: String,
    get: String,
    top: String,
    walk: String,
    kept: String,
}

/// Keeps `$4` first, then the 15 newest identities the key kept (docstore keeps 16).
const KEEP_NEWEST: &str = "array_to_string((string_to_array(excluded.ids || ' ' || w.ids, ' '))\
     [1:16], ' ')";

impl Sql {
    fn new(schema: &str) -> Self {
        let s = format!("\"{schema}\"");
        let columns = "id, data::text, created_at, updated_at, created_by, updated_by, version";
        let changes = format!(
            "WITH lock AS MATERIALIZED (SELECT pg_advisory_xact_lock($1), pg_notify($2, '')) \
             INSERT INTO {s}.changes (position, site, collection, id, kind, version, body, \
             created_at, created_by, time, actor, previous)"
        );
        // The document as the change row's `previous` keeps it, built by the server.
        let locked = format!(
            "SELECT d.id, d.data::text, d.created_at, d.created_by, d.updated_at, d.version, \
             w.ids, json_build_object('data', d.data, 'created_at', d.created_at, \
             'created_by', d.created_by, 'updated_at', d.updated_at, 'updated_by', \
             d.updated_by, 'version', d.version, 'expires_at', d.expires_at)::text \
             FROM {s}.documents d LEFT JOIN {s}.write_ids w \
             ON w.site = d.site AND w.collection = d.collection AND w.id = d.id \
             WHERE d.site = $1 AND d.collection = $2"
        );
        Sql {
            insert: format!(
                "INSERT INTO {s}.documents (site, collection, id, data, created_at, updated_at, \
                 created_by, updated_by, version) VALUES ($1, $2, $3, $4::text::jsonb, $5, $5, \
                 $6, $6, 1)"
            ),
            count_up: format!(
                "INSERT INTO {s}.counters AS c (site, collection, n) VALUES ($1, $2, 1) \
                 ON CONFLICT (site, collection) DO UPDATE SET n = c.n + 1"
            ),
            count_down: format!(
                "UPDATE {s}.counters SET n = n - 1 WHERE site = $1 AND collection = $2"
            ),
            keep_id: format!(
                "INSERT INTO {s}.write_ids AS w (site, collection, id, ids) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (site, collection, id) \
                 DO UPDATE SET ids = {KEEP_NEWEST}, deleted_at = NULL"
            ),
            keep_ids: format!(
                "INSERT INTO {s}.write_ids AS w (site, collection, id, ids) \
                 SELECT $1, $2, k, $4 FROM unnest($3::text[]) AS k \
                 ON CONFLICT (site, collection, id) \
                 DO UPDATE SET ids = {KEEP_NEWEST}, deleted_at = NULL"
            ),
            keep_delete_id: format!(
                "INSERT INTO {s}.write_ids (site, collection, id, ids, deleted_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (site, collection, id) \
                 DO UPDATE SET ids = excluded.ids, deleted_at = excluded.deleted_at"
            ),
            prune_ids: format!("DELETE FROM {s}.write_ids WHERE deleted_at < $1"),
            log: format!(
                "{changes} SELECT nextval('{s}.change_positions'), $3, $4, $5, $6, $7, $8, $9, \
                 $10, $11, $12, $13 FROM lock"
            ),
            log_many: format!(
                "{changes} SELECT nextval('{s}.change_positions'), $3, $4, c.id, 'updated', \
                 c.version, c.body, c.created_at, c.created_by, $5, $6, c.previous FROM lock, \
                 unnest($7::text[], $8::bigint[], $9::text[], $10::bigint[], $11::text[], \
                 $12::text[]) AS c (id, version, body, created_at, created_by, previous)"
            ),
            lock_one: format!("{locked} AND d.id = $3 FOR UPDATE OF d"),
            update: format!(
                "UPDATE {s}.documents SET data = $4::text::jsonb, updated_at = $5, \
                 updated_by = $6, version = $7 WHERE site = $1 AND collection = $2 AND id = $3"
            ),
            delete: format!(
                "DELETE FROM {s}.documents WHERE site = $1 AND collection = $2 AND id = $3 \
                 RETURNING version"
            ),
            get: format!(
                "SELECT {columns} FROM {s}.documents \
                 WHERE site = $1 AND collection = $2 AND id = $3"
            ),
            // The collection as a literal, as the application's index has it
            // (`schema::create_app_index`): a partial index serves a statement whose
            // predicate implies the index's, which a parameter never does in a generic plan.
            top: format!(
                "SELECT {columns} FROM {s}.documents WHERE site = $1 AND collection = {} \
                 AND data ->> 'status' = $2 AND data ->> 'category' = $3 \
                 AND (data -> 'priority')::numeric >= $4::bigint \
                 ORDER BY (data -> 'score')::numeric DESC, id LIMIT $5",
                schema::literal(QUERY_COLLECTION)
            ),
            walk: format!(
                "SELECT {columns} FROM {s}.documents WHERE site = $1 AND collection = $2 \
                 AND id > $3 ORDER BY id LIMIT $4"
            ),
            kept: format!(
                "SELECT ids FROM {s}.write_ids WHERE site = $1 AND collection = $2 AND id = $3"
            ),
        }
    }
}

/// The PostgreSQL baseline. See the [module docs](self).
#[derive(Debug)]
pub struct PostgresBaseline {
    pool: deadpool_postgres::Pool,
    sql: Sql,
    /// The advisory lock a change row's position is drawn under.
    feed_lock: i64,
    /// The channel a commit notifies.
    channel: String,
}

/// A document row read `FOR UPDATE`, with the identities its key keeps.
struct Locked {
    id: String,
    data: Data,
    created_at: i64,
    created_by: String,
    updated_at: i64,
    version: i64,
    ids: Option<String>,
    /// The row as the change row's `previous` keeps it.
    previous: String,
}

impl Locked {
    fn of(row: &Row) -> BenchResult<Self> {
        Ok(Locked {
            id: row.try_get(0)?,
            data: serde_json::from_str(row.try_get(1)?)?,
            created_at: row.try_get(2)?,
            created_by: row.try_get(3)?,
            updated_at: row.try_get(4)?,
            version: row.try_get(5)?,
            ids: row.try_get(6)?,
            previous: row.try_get(7)?,
        })
    }

    /// Whether the key keeps `write` already: this write was applied before.
    fn keeps(&self, write: &WriteId) -> bool {
        self.ids
            .as_deref()
            .is_some_and(|ids| ids.split(' ').any(|id| id == write.as_str()))
    }
}

/// A pool of 16 connections to `url`, as docstore-postgres opens: last in, first out, so
/// a lone caller keeps using one warm connection (and its server process).
pub fn pool(url: &str) -> BenchResult<deadpool_postgres::Pool> {
    let config: tokio_postgres::Config = url.parse()?;
    let manager = deadpool_postgres::Manager::new(config, tokio_postgres::NoTls);
    Ok(deadpool_postgres::Pool::builder(manager)
        .max_size(16)
        .queue_mode(deadpool_postgres::QueueMode::Lifo)
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .build()?)
}

type Params<'a> = [&'a (dyn ToSql + Sync)];

impl PostgresBaseline {
    /// The baseline on schema `schema` of the server at `url` (a URL without `?schema=`),
    /// creating the schema afresh with docstore-postgres's tables.
    pub async fn open(url: &str, schema: &str) -> BenchResult<Self> {
        let pool = pool(url)?;
        schema::create(&**pool.get().await?, schema).await?;
        Ok(PostgresBaseline {
            pool,
            sql: Sql::new(schema),
            feed_lock: lock_key(schema),
            channel: format!("baseline_{schema}"),
        })
    }

    /// Appends the change row of a write that left `locked`'s document at `version` with
    /// `body` (`kind`: created or updated), at `now`, replacing `previous`, to the
    /// transaction's pipeline.
    async fn log(
        &self,
        tx: &Transaction<'_>,
        (collection, id, kind): (&str, &str, &str),
        (version, body, created): (i64, Option<&str>, Option<(i64, &str)>),
        (now, previous): (i64, Option<&str>),
    ) -> BenchResult<u64> {
        let log = tx.prepare_cached(&self.sql.log).await?;
        let (created_at, created_by) = created.unzip();
        let params: &Params = &[
            &self.feed_lock,
            &self.channel,
            &SITE,
            &collection,
            &id,
            &kind,
            &version,
            &body,
            &created_at,
            &created_by,
            &now,
            &ACTOR,
            &previous,
        ];
        Ok(tx.execute(&log, params).await?)
    }

    /// Read `FOR UPDATE`, merge, write in one transaction; `expected` checks the version.
    async fn patch(
        &self,
        collection: &str,
        id: &str,
        patch: &Data,
        expected: Option<u64>,
    ) -> BenchResult<u64> {
        let write = WriteId::random();
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let lock = tx.prepare_cached(&self.sql.lock_one).await?;
        let row = tx.query_opt(&lock, &[&SITE, &collection, &id]).await?;
        let mut doc = Locked::of(&row.ok_or_else(|| format!("{id} not found"))?)?;
        if doc.keeps(&write) {
            return Ok(doc.version as u64);
        }
        if let Some(expected) = expected.filter(|v| *v != doc.version as u64) {
            return Err(format!("{id} is at version {}, not {expected}", doc.version).into());
        }
        merge(&mut doc.data, patch);
        let body = serde_json::to_string(&doc.data)?;
        let (version, now) = (doc.version + 1, now_nanos().max(doc.updated_at));
        let previous = Some(doc.previous.as_str());
        let (update, keep) = tokio::try_join!(
            tx.prepare_cached(&self.sql.update),
            tx.prepare_cached(&self.sql.keep_id)
        )?;
        let update_params: &Params = &[&SITE, &collection, &id, &body, &now, &ACTOR, &version];
        let keep_params: &Params = &[&SITE, &collection, &id, &write.as_str()];
        let created = Some((doc.created_at, doc.created_by.as_str()));
        tokio::try_join!(
            exec(&tx, &update, update_params),
            exec(&tx, &keep, keep_params),
            self.log(
                &tx,
                (collection, id, "updated"),
                (version, Some(&body), created),
                (now, previous)
            ),
        )?;
        tx.commit().await?;
        Ok(version as u64)
    }

    /// After a create found its key taken: whether the key keeps `write` (a repeat).
    async fn repeated(&self, collection: &str, id: &str, write: &WriteId) -> BenchResult<bool> {
        let client = self.pool.get().await?;
        let kept = client.prepare_cached(&self.sql.kept).await?;
        let row = client.query_opt(&kept, &[&SITE, &collection, &id]).await?;
        Ok(row.is_some_and(|row| {
            row.get::<_, &str>(0)
                .split(' ')
                .any(|kept| kept == write.as_str())
        }))
    }
}

/// The baseline's feed lock: a key of its own schema (the stable hash of its name).
fn lock_key(schema: &str) -> i64 {
    docstore::driver::stable_hash(format!("baseline feed {schema}").as_bytes()) as i64
}

/// Runs `statement` in the transaction's pipeline: how many rows it touched.
async fn exec(
    tx: &Transaction<'_>,
    statement: &tokio_postgres::Statement,
    params: &Params<'_>,
) -> BenchResult<u64> {
    Ok(tx.execute(statement, params).await?)
}

/// Whether `err` is a unique violation (the key exists).
fn is_taken(err: &tokio_postgres::Error) -> bool {
    err.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
}

/// The document of a row of `id, data::text, created_at, updated_at, created_by,
/// updated_by, version`, parsed as an application would.
fn document(row: &Row) -> BenchResult<Document> {
    Ok(Document {
        id: row.try_get(0)?,
        data: serde_json::from_str(row.try_get(1)?)?,
        created_at: row.try_get(2)?,
        updated_at: row.try_get(3)?,
        created_by: row.try_get(4)?,
        updated_by: row.try_get(5)?,
        version: row.try_get::<_, i64>(6)? as u64,
        expires_at: None,
    })
}

/// The documents of a batch after its merges, as the parallel arrays its statements take.
#[derive(Default)]
struct Merged {
    ids: Vec<String>,
    bodies: Vec<String>,
    versions: Vec<i64>,
    created_at: Vec<i64>,
    created_by: Vec<String>,
    previous: Vec<String>,
}

impl PostgresBaseline {
    /// A batch of `update_if`s in one transaction: one locking read and one `UPDATE` a
    /// document, one statement keeps the identity on their keys, one logs their changes.
    async fn patch_many(
        &self,
        collection: &str,
        writes: &[(String, Data, u64)],
    ) -> BenchResult<Vec<u64>> {
        let write = WriteId::random();
        let mut keys: Vec<&str> = writes.iter().map(|(id, ..)| id.as_str()).collect();
        keys.sort_unstable();
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let lock = tx.prepare_cached(&self.sql.lock_one).await?;
        // One single-key statement a document, in key order, all in one pipeline: one
        // statement for all (`d.id = ANY($3)`, or a join to `unnest($3)`) was tried, and with
        // the statistics of a collection that grew since the last ANALYZE, PostgreSQL read
        // the whole collection for it (4-8 ms a batch at 2 000 documents, auto_explain).
        let reads = keys.iter().map(|id| {
            let (tx, lock) = (&tx, &lock);
            async move { tx.query_opt(lock, &[&SITE, &collection, id]).await }
        });
        let rows = futures_util::future::try_join_all(reads).await?;
        let mut locked = HashMap::with_capacity(rows.len());
        for row in rows.iter().flatten() {
            let doc = Locked::of(row)?;
            locked.insert(doc.id.clone(), doc);
        }
        if locked.values().any(|doc| doc.keeps(&write)) {
            return Ok(writes
                .iter()
                .map(|(id, ..)| locked[id].version as u64)
                .collect());
        }
        let mut now = now_nanos();
        let mut merged = Merged::default();
        for (id, patch, expected) in writes {
            let doc = locked
                .get_mut(id)
                .ok_or_else(|| format!("{id} not found"))?;
            if doc.version as u64 != *expected {
                return Err(format!("{id} is at version {}, not {expected}", doc.version).into());
            }
            merge(&mut doc.data, patch);
            now = now.max(doc.updated_at);
            merged.ids.push(id.clone());
            merged.bodies.push(serde_json::to_string(&doc.data)?);
            merged.versions.push(doc.version + 1);
            merged.created_at.push(doc.created_at);
            merged.created_by.push(doc.created_by.clone());
            merged.previous.push(std::mem::take(&mut doc.previous));
        }
        let (update, keep, log) = tokio::try_join!(
            tx.prepare_cached(&self.sql.update),
            tx.prepare_cached(&self.sql.keep_ids),
            tx.prepare_cached(&self.sql.log_many)
        )?;
        let m = &merged;
        // One `UPDATE` a document, all in the pipeline (one `UPDATE … FROM unnest(…)` would
        // meet the planning trouble of the reads above).
        let updates = (0..m.ids.len()).map(|i| {
            let params: Vec<&(dyn ToSql + Sync)> = vec![
                &SITE,
                &collection,
                &m.ids[i],
                &m.bodies[i],
                &now,
                &ACTOR,
                &m.versions[i],
            ];
            let update = &update;
            let tx = &tx;
            async move { exec(tx, update, &params).await }
        });
        let log_params: &Params = &[
            &self.feed_lock,
            &self.channel,
            &SITE,
            &collection,
            &now,
            &ACTOR,
            &m.ids,
            &m.versions,
            &m.bodies,
            &m.created_at,
            &m.created_by,
            &m.previous,
        ];
        let keep_params: &Params = &[&SITE, &collection, &m.ids, &write.as_str()];
        let (counts, ..) = tokio::try_join!(
            futures_util::future::try_join_all(updates),
            exec(&tx, &keep, keep_params),
            exec(&tx, &log, log_params),
        )?;
        let updated: u64 = counts.iter().sum();
        if updated != writes.len() as u64 {
            return Err(format!("{updated} of {} documents updated", writes.len()).into());
        }
        tx.commit().await?;
        Ok(m.versions.iter().map(|&v| v as u64).collect())
    }
}

#[async_trait]
impl Subject for PostgresBaseline {
    async fn create(&self, collection: &str, id: &str, data: Data) -> BenchResult<u64> {
        let write = WriteId::random();
        let body = serde_json::to_string(&data)?;
        let now = now_nanos();
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let (insert, count, keep) = tokio::try_join!(
            tx.prepare_cached(&self.sql.insert),
            tx.prepare_cached(&self.sql.count_up),
            tx.prepare_cached(&self.sql.keep_id)
        )?;
        let insert_params: &Params = &[&SITE, &collection, &id, &body, &now, &ACTOR];
        let keep_params: &Params = &[&SITE, &collection, &id, &write.as_str()];
        let count_params: &Params = &[&SITE, &collection];
        let written = tokio::try_join!(
            exec(&tx, &insert, insert_params),
            exec(&tx, &count, count_params),
            exec(&tx, &keep, keep_params),
            self.log(
                &tx,
                (collection, id, "created"),
                (1, Some(&body), Some((now, ACTOR))),
                (now, None)
            ),
        );
        match written {
            Ok(_) => {
                tx.commit().await?;
                Ok(1)
            }
            Err(err) => {
                let taken = err
                    .downcast_ref::<tokio_postgres::Error>()
                    .is_some_and(is_taken);
                drop(tx);
                if taken && self.repeated(collection, id, &write).await? {
                    return Ok(1);
                }
                Err(err)
            }
        }
    }

    async fn get(&self, collection: &str, id: &str) -> BenchResult<bool> {
        let client = self.pool.get().await?;
        let get = client.prepare_cached(&self.sql.get).await?;
        match client.query_opt(&get, &[&SITE, &collection, &id]).await? {
            Some(row) => document(&row).map(|_| true),
            None => Ok(false),
        }
    }

    async fn put(&self, collection: &str, id: &str, data: Data) -> BenchResult<u64> {
        let write = WriteId::random();
        let body = serde_json::to_string(&data)?;
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let lock = tx.prepare_cached(&self.sql.lock_one).await?;
        let row = tx.query_opt(&lock, &[&SITE, &collection, &id]).await?;
        let Some(doc) = row.as_ref().map(Locked::of).transpose()? else {
            drop(tx);
            return self.create(collection, id, data).await;
        };
        if doc.keeps(&write) {
            return Ok(doc.version as u64);
        }
        let (version, now) = (doc.version + 1, now_nanos().max(doc.updated_at));
        let previous = Some(doc.previous.as_str());
        let (update, keep) = tokio::try_join!(
            tx.prepare_cached(&self.sql.update),
            tx.prepare_cached(&self.sql.keep_id)
        )?;
        let update_params: &Params = &[&SITE, &collection, &id, &body, &now, &ACTOR, &version];
        let keep_params: &Params = &[&SITE, &collection, &id, &write.as_str()];
        let created = Some((doc.created_at, doc.created_by.as_str()));
        tokio::try_join!(
            exec(&tx, &update, update_params),
            exec(&tx, &keep, keep_params),
            self.log(
                &tx,
                (collection, id, "updated"),
                (version, Some(&body), created),
                (now, previous)
            ),
        )?;
        tx.commit().await?;
        Ok(version as u64)
    }

    async fn update(&self, collection: &str, id: &str, patch: &Data) -> BenchResult<u64> {
        self.patch(collection, id, patch, None).await
    }

    async fn update_if(
        &self,
        collection: &str,
        id: &str,
        patch: &Data,
        expected: u64,
    ) -> BenchResult<u64> {
        self.patch(collection, id, patch, Some(expected)).await
    }

    async fn update_if_many(
        &self,
        collection: &str,
        writes: &[(String, Data, u64)],
    ) -> BenchResult<Vec<u64>> {
        self.patch_many(collection, writes).await
    }

    async fn delete(&self, collection: &str, id: &str) -> BenchResult<bool> {
        let write = WriteId::random();
        let now = now_nanos();
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let (lock, delete) = tokio::try_join!(
            tx.prepare_cached(&self.sql.lock_one),
            tx.prepare_cached(&self.sql.delete)
        )?;
        let Some(row) = tx.query_opt(&lock, &[&SITE, &collection, &id]).await? else {
            return Ok(false);
        };
        let removed = Locked::of(&row)?;
        if removed.keeps(&write) {
            return Ok(true);
        }
        let (count, keep, prune) = tokio::try_join!(
            tx.prepare_cached(&self.sql.count_down),
            tx.prepare_cached(&self.sql.keep_delete_id),
            tx.prepare_cached(&self.sql.prune_ids)
        )?;
        let horizon = now.saturating_sub(docstore::identity::DELETE_IDS_KEPT_FOR_NANOS);
        let keep_params: &Params = &[&SITE, &collection, &id, &write.as_str(), &now];
        let deleted =
            async { BenchResult::Ok(tx.query_one(&delete, &[&SITE, &collection, &id]).await?) };
        let count_params: &Params = &[&SITE, &collection];
        let prune_params: &Params = &[&horizon];
        let (deleted, ..) = tokio::try_join!(
            deleted,
            exec(&tx, &count, count_params),
            exec(&tx, &keep, keep_params),
            exec(&tx, &prune, prune_params),
        )?;
        let version: i64 = deleted.try_get(0)?;
        // `Store::delete` logs its delete with an empty actor.
        let log = tx.prepare_cached(&self.sql.log).await?;
        let none: (Option<&str>, Option<i64>, Option<&str>) = (None, None, None);
        let params: &Params = &[
            &self.feed_lock,
            &self.channel,
            &SITE,
            &collection,
            &id,
            &"deleted",
            &version,
            &none.0,
            &none.1,
            &none.2,
            &now,
            &"",
            &removed.previous,
        ];
        tx.execute(&log, params).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn top(&self, collection: &str) -> BenchResult<Vec<String>> {
        if collection != QUERY_COLLECTION {
            return Err(
                format!("the selective query reads {QUERY_COLLECTION}, not {collection}").into(),
            );
        }
        let client = self.pool.get().await?;
        let top = client.prepare_cached(&self.sql.top).await?;
        let rows = client
            .query(
                &top,
                &[&SITE, &STATUS, &CATEGORY, &PRIORITY_MIN, &(TOP as i64)],
            )
            .await?;
        let page = rows.iter().map(document).collect::<BenchResult<Vec<_>>>()?;
        Ok(page.into_iter().map(|d| d.id).collect())
    }

    async fn walk_page(
        &self,
        collection: &str,
        page_size: usize,
        after: WalkPosition,
    ) -> BenchResult<WalkPage> {
        let client = self.pool.get().await?;
        let walk = client.prepare_cached(&self.sql.walk).await?;
        let after = after.unwrap_or_default();
        let limit = page_size as i64 + 1;
        let rows = client
            .query(&walk, &[&SITE, &collection, &after, &limit])
            .await?;
        let mut page = rows.iter().map(document).collect::<BenchResult<Vec<_>>>()?;
        let more = page.len() > page_size;
        page.truncate(page_size);
        Ok(WalkPage {
            documents: page.len(),
            next: page.last().filter(|_| more).map(|d| d.id.clone()),
        })
    }
}
