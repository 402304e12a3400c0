//! The SQLite baseline: what a careful programmer writes directly against `rusqlite` for
//! the same guarantees as docstore-sqlite, on the same schema (docstore-sqlite's, copied
//! verbatim; the run fails when the schema docstore-sqlite creates differs, see
//! [`check_same_schema`]), with the same pragmas (WAL, `synchronous`, busy timeout), called
//! straight from the task (no blocking-pool hop). With the change feed on (docstore-sqlite's
//! default) every write inserts its change row in its own transaction, as docstore-sqlite
//! does (the document's row copied into `changes`, or the delete's key and version): one
//! immediate transaction per write. With it off, single statements run in autocommit and
//! read-modify-write in one immediate transaction. The benchmark's writes carry no caller
//! identity, so neither side writes `write_ids` rows; a delete runs the schema's trigger
//! forgetting a key's identities on both sides.

use crate::BenchResult;
use crate::data::{ACTOR, CATEGORY, PRIORITY_MIN, SITE, STATUS, TOP, merge, now_nanos};
use crate::subject::{Subject, WalkPage, WalkPosition};
use async_trait::async_trait;
use docstore::{Data, Document};
use parking_lot::Mutex;
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};
use std::path::Path;
use std::time::Duration;

/// docstore-sqlite's schema, versions 1 to 6 (`docstore-sqlite/src/schema.rs`), verbatim
/// (version 5 only rebuilds index triggers; no index is declared in the benchmark, so no
/// index trigger exists on either side; version 6's `previous` column is NULL on both
/// sides: docstore-sqlite fills it only with `feed_previous`, off in the benchmark).
pub const SCHEMA: &str = r#"
    CREATE TABLE documents (
        site       TEXT    NOT NULL,
        collection TEXT    NOT NULL,
        id         TEXT    NOT NULL,
        data       BLOB    NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        created_by TEXT    NOT NULL,
        updated_by TEXT    NOT NULL,
        version    INTEGER NOT NULL CHECK (version >= 1),
        PRIMARY KEY (site, collection, id)
    ) STRICT;

    CREATE TABLE collections (
        site       TEXT    NOT NULL,
        collection TEXT    NOT NULL,
        documents  INTEGER NOT NULL CHECK (documents > 0),
        PRIMARY KEY (site, collection)
    ) STRICT, WITHOUT ROWID;

    CREATE TRIGGER documents_count_insert AFTER INSERT ON documents BEGIN
        INSERT INTO collections (site, collection, documents)
            VALUES (NEW.site, NEW.collection, 1)
            ON CONFLICT (site, collection) DO UPDATE SET documents = documents + 1;
    END;

    CREATE TRIGGER documents_count_delete AFTER DELETE ON documents BEGIN
        DELETE FROM collections
            WHERE site = OLD.site AND collection = OLD.collection AND documents = 1;
        UPDATE collections SET documents = documents - 1
            WHERE site = OLD.site AND collection = OLD.collection;
    END;

    CREATE TABLE indexes (
        id         INTEGER PRIMARY KEY,
        collection TEXT    NOT NULL,
        name       TEXT    NOT NULL,
        fields     TEXT    NOT NULL,
        UNIQUE (collection, name)
    ) STRICT;

    CREATE TABLE index_entries (
        index_id   INTEGER NOT NULL,
        entry_site TEXT    NOT NULL,
        entry_key  BLOB    NOT NULL,
        entry_id   TEXT    NOT NULL,
        PRIMARY KEY (index_id, entry_site, entry_key)
    ) STRICT, WITHOUT ROWID;

    CREATE TABLE write_ids (
        site       TEXT    NOT NULL,
        collection TEXT    NOT NULL,
        id         TEXT    NOT NULL,
        ids        TEXT    NOT NULL,
        deleted_at INTEGER,
        PRIMARY KEY (site, collection, id)
    ) STRICT, WITHOUT ROWID;

    CREATE INDEX write_ids_deleted ON write_ids (deleted_at) WHERE deleted_at IS NOT NULL;

    CREATE TRIGGER write_ids_forget AFTER DELETE ON documents BEGIN
        DELETE FROM write_ids
            WHERE site = OLD.site AND collection = OLD.collection AND id = OLD.id
              AND deleted_at IS NULL;
    END;

    CREATE TABLE changes (
        position   INTEGER PRIMARY KEY,
        site       TEXT    NOT NULL,
        collection TEXT    NOT NULL,
        id         TEXT    NOT NULL,
        kind       TEXT    NOT NULL,
        version    INTEGER NOT NULL,
        data       BLOB,
        created_at INTEGER,
        created_by TEXT,
        time       INTEGER NOT NULL,
        actor      TEXT    NOT NULL,
        logged_at  INTEGER NOT NULL
    ) STRICT;

    CREATE TABLE feed (
        singleton      INTEGER PRIMARY KEY CHECK (singleton = 1),
        file_id        TEXT    NOT NULL,
        pruned_through INTEGER NOT NULL
    ) STRICT;

    INSERT INTO feed (singleton, file_id, pruned_through)
        VALUES (1, lower(hex(randomblob(8))), 0);

    ALTER TABLE changes ADD COLUMN previous BLOB;
    ALTER TABLE indexes ADD COLUMN is_unique INTEGER NOT NULL DEFAULT 0;

    ALTER TABLE documents ADD COLUMN expires_at INTEGER;
    ALTER TABLE changes ADD COLUMN expires_at INTEGER;
    CREATE INDEX documents_expiry ON documents (expires_at) WHERE expires_at IS NOT NULL;
    CREATE INDEX documents_expiry_by_site ON documents (site, expires_at)
        WHERE expires_at IS NOT NULL;
"#;

/// The schema version [`SCHEMA`] is (docstore-sqlite's `PRAGMA user_version`).
const SCHEMA_VERSION: i64 = 8;

/// The change row of a write that just left the document at the key `?1, ?2, ?3`: the
/// document's row copied (its data as stored, not converted again), `?4` the kind.
const LOG_STORED: &str = "INSERT INTO changes (site, collection, id, kind, version, data, \
     created_at, created_by, time, actor, logged_at) \
     SELECT site, collection, id, ?4, version, data, created_at, created_by, updated_at, \
     updated_by, ?5 FROM documents WHERE site = ?1 AND collection = ?2 AND id = ?3";

/// The change row of a delete of the key `?1, ?2, ?3` at version `?4`.
const LOG_DELETED: &str = "INSERT INTO changes (site, collection, id, kind, version, time, \
     actor, logged_at) VALUES (?1, ?2, ?3, 'deleted', ?4, ?5, ?6, ?5)";

const COLUMNS: &str = "id, json(data), created_at, updated_at, created_by, updated_by, version";

const INSERT: &str = "INSERT INTO documents \
     (site, collection, id, data, created_at, updated_at, created_by, updated_by, version) \
     VALUES (?1, ?2, ?3, jsonb(?4), ?5, ?6, ?7, ?8, ?9)";

/// Whether commits are flushed (`synchronous = FULL`) or not (`NORMAL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sync {
    /// `synchronous = FULL` (docstore-sqlite's default).
    Full,
    /// `synchronous = NORMAL`.
    Normal,
}

impl Sync {
    fn pragma(self) -> &'static str {
        match self {
            Sync::Full => "FULL",
            Sync::Normal => "NORMAL",
        }
    }
}

/// The SQLite baseline. See the [module docs](self).
#[derive(Debug)]
pub struct SqliteBaseline {
    writer: Mutex<Connection>,
    reader: Mutex<Connection>,
    /// Whether writes insert change rows (docstore-sqlite's `SqliteOptions::feed`).
    feed: bool,
}

fn configure(conn: &Connection, sync: Sync) -> rusqlite::Result<()> {
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "synchronous", sync.pragma())?;
    Ok(())
}

impl SqliteBaseline {
    /// Opens `path`, creating the schema when the file is new (in WAL mode), with one
    /// writing and one reading connection; `feed`: whether writes log their changes.
    pub fn open(path: &Path, sync: Sync, feed: bool) -> BenchResult<Self> {
        let writer = Connection::open(path)?;
        configure(&writer, sync)?;
        let mode: String = writer.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(format!("journal_mode is {mode}, not WAL").into());
        }
        let version: i64 = writer.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version == 0 {
            writer.execute_batch(SCHEMA)?;
            writer.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        }
        let reader = Connection::open(path)?;
        configure(&reader, sync)?;
        Ok(SqliteBaseline {
            writer: Mutex::new(writer),
            reader: Mutex::new(reader),
            feed,
        })
    }
}

/// The schema of the database at `path`: its `user_version` and every object of
/// `sqlite_master` with its SQL text.
pub fn schema_of(path: &Path) -> BenchResult<Vec<String>> {
    let conn = Connection::open(path)?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let mut stmt = conn.prepare("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")?;
    let rows = stmt.query_map([], |r| {
        Ok(format!(
            "{} {} {}",
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, Option<String>>(2)?.unwrap_or_default()
        ))
    })?;
    let mut schema = vec![format!("user_version {version}")];
    for row in rows {
        schema.push(row?);
    }
    Ok(schema)
}

/// Fails, naming the objects that differ, unless the database at `baseline` has exactly
/// the schema docstore-sqlite created at `store`: ratios against a baseline on another
/// schema would not compare like with like.
pub fn check_same_schema(store: &Path, baseline: &Path) -> BenchResult<()> {
    let (ours, theirs) = (schema_of(store)?, schema_of(baseline)?);
    if ours == theirs {
        return Ok(());
    }
    let missing: Vec<&str> = ours
        .iter()
        .filter(|o| !theirs.contains(o))
        .map(String::as_str)
        .collect();
    let extra: Vec<&str> = theirs
        .iter()
        .filter(|o| !ours.contains(o))
        .map(String::as_str)
        .collect();
    Err(format!(
        "the SQLite baseline's schema differs from the one docstore-sqlite created; copy \
         docstore-sqlite/src/schema.rs's migrations into SCHEMA in \
         docstore-bench/src/baselines/sqlite.rs (and write what they add, as docstore-sqlite \
         does).\nOnly in docstore-sqlite's:\n  {}\nOnly in the baseline's:\n  {}",
        missing.join("\n  "),
        extra.join("\n  ")
    )
    .into())
}

/// Inserts documents `0..count` (generation 0) into `collection` of the database at `path`
/// in one transaction, with the statement docstore-sqlite's `create` runs.
pub fn bulk_load(path: &Path, collection: &str, count: usize) -> BenchResult<()> {
    let mut conn = Connection::open(path)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    {
        let mut stmt = tx.prepare_cached(INSERT)?;
        let now = now_nanos();
        for n in 0..count {
            let text = serde_json::to_string(&crate::data::document(n, 0))?;
            stmt.execute(params![
                SITE,
                collection,
                crate::data::id(n),
                text,
                now,
                now,
                ACTOR,
                ACTOR,
                1
            ])?;
        }
    }
    tx.commit()?;
    Ok(())
}

fn document(row: &Row<'_>) -> rusqlite::Result<BenchResult<Document>> {
    let text: String = row.get(1)?;
    let data: Data = match serde_json::from_str(&text) {
        Ok(data) => data,
        Err(err) => return Ok(Err(err.into())),
    };
    Ok(Ok(Document {
        expires_at: None,
        id: row.get(0)?,
        data,
        created_at: row.get(2)?,
        updated_at: row.get(3)?,
        created_by: row.get(4)?,
        updated_by: row.get(5)?,
        version: row.get::<_, i64>(6)? as u64,
    }))
}

fn load(conn: &Connection, collection: &str, id: &str) -> BenchResult<Option<Document>> {
    let sql =
        format!("SELECT {COLUMNS} FROM documents WHERE site = ?1 AND collection = ?2 AND id = ?3");
    let mut stmt = conn.prepare_cached(&sql)?;
    let doc = stmt
        .query_row(params![SITE, collection, id], document)
        .optional()?;
    doc.transpose()
}

/// The change row of a write that left the document `id` of `collection` (`kind`: created or
/// updated), at `now`.
fn log_stored(
    conn: &Connection,
    collection: &str,
    id: &str,
    kind: &str,
    now: i64,
) -> rusqlite::Result<()> {
    conn.prepare_cached(LOG_STORED)?
        .execute(params![SITE, collection, id, kind, now])?;
    Ok(())
}

impl SqliteBaseline {
    /// Read, merge, write in one immediate transaction; `expected` checks the version.
    fn patch(
        &self,
        collection: &str,
        id: &str,
        patch: &Data,
        expected: Option<u64>,
    ) -> BenchResult<u64> {
        let mut conn = self.writer.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let version = patch_in(&tx, collection, id, patch, expected, self.feed)?;
        tx.commit()?;
        Ok(version)
    }
}

/// Reads, merges and rewrites one document inside the caller's transaction, with its change
/// row when `feed`.
fn patch_in(
    tx: &rusqlite::Transaction<'_>,
    collection: &str,
    id: &str,
    patch: &Data,
    expected: Option<u64>,
    feed: bool,
) -> BenchResult<u64> {
    let mut doc = load(tx, collection, id)?.ok_or_else(|| format!("{id} not found"))?;
    if let Some(expected) = expected.filter(|v| *v != doc.version) {
        return Err(format!("{id} is at version {}, not {expected}", doc.version).into());
    }
    merge(&mut doc.data, patch);
    let text = serde_json::to_string(&doc.data)?;
    let version = doc.version + 1;
    let now = now_nanos();
    tx.prepare_cached(
        "UPDATE documents SET data = jsonb(?4), updated_at = ?5, updated_by = ?6, \
             version = ?7 WHERE site = ?1 AND collection = ?2 AND id = ?3",
    )?
    .execute(params![
        SITE,
        collection,
        id,
        text,
        now.max(doc.updated_at),
        ACTOR,
        version as i64
    ])?;
    if feed {
        log_stored(tx, collection, id, "updated", now)?;
    }
    Ok(version)
}

#[async_trait]
impl Subject for SqliteBaseline {
    async fn create(&self, collection: &str, id: &str, data: Data) -> BenchResult<u64> {
        let text = serde_json::to_string(&data)?;
        let now = now_nanos();
        let mut conn = self.writer.lock();
        let insert = |conn: &Connection| {
            conn.prepare_cached(INSERT)?.execute(params![
                SITE, collection, id, text, now, now, ACTOR, ACTOR, 1
            ])
        };
        if !self.feed {
            insert(&conn)?;
            return Ok(1);
        }
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        insert(&tx)?;
        log_stored(&tx, collection, id, "created", now)?;
        tx.commit()?;
        Ok(1)
    }

    async fn get(&self, collection: &str, id: &str) -> BenchResult<bool> {
        let conn = self.reader.lock();
        Ok(load(&conn, collection, id)?.is_some())
    }

    async fn put(&self, collection: &str, id: &str, data: Data) -> BenchResult<u64> {
        let text = serde_json::to_string(&data)?;
        let now = now_nanos();
        let mut conn = self.writer.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let version: Option<i64> = tx
            .prepare_cached(
                "UPDATE documents SET data = jsonb(?4), updated_at = max(updated_at, ?5), \
                 updated_by = ?6, version = version + 1 \
                 WHERE site = ?1 AND collection = ?2 AND id = ?3 RETURNING version",
            )?
            .query_row(params![SITE, collection, id, text, now, ACTOR], |r| {
                r.get(0)
            })
            .optional()?;
        let (version, kind) = match version {
            Some(v) => (v as u64, "updated"),
            None => {
                tx.prepare_cached(INSERT)?.execute(params![
                    SITE, collection, id, text, now, now, ACTOR, ACTOR, 1
                ])?;
                (1, "created")
            }
        };
        if self.feed {
            log_stored(&tx, collection, id, kind, now)?;
        }
        tx.commit()?;
        Ok(version)
    }

    async fn update(&self, collection: &str, id: &str, patch: &Data) -> BenchResult<u64> {
        self.patch(collection, id, patch, None)
    }

    async fn update_if(
        &self,
        collection: &str,
        id: &str,
        patch: &Data,
        expected: u64,
    ) -> BenchResult<u64> {
        self.patch(collection, id, patch, Some(expected))
    }

    async fn update_if_many(
        &self,
        collection: &str,
        writes: &[(String, Data, u64)],
    ) -> BenchResult<Vec<u64>> {
        let mut conn = self.writer.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut versions = Vec::with_capacity(writes.len());
        for (id, patch, expected) in writes {
            versions.push(patch_in(
                &tx,
                collection,
                id,
                patch,
                Some(*expected),
                self.feed,
            )?);
        }
        tx.commit()?;
        Ok(versions)
    }

    async fn delete(&self, collection: &str, id: &str) -> BenchResult<bool> {
        let mut conn = self.writer.lock();
        if !self.feed {
            let deleted = conn
                .prepare_cached(
                    "DELETE FROM documents WHERE site = ?1 AND collection = ?2 AND id = ?3",
                )?
                .execute(params![SITE, collection, id])?;
            return Ok(deleted > 0);
        }
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let version: Option<i64> = tx
            .prepare_cached(
                "DELETE FROM documents WHERE site = ?1 AND collection = ?2 AND id = ?3 \
                 RETURNING version",
            )?
            .query_row(params![SITE, collection, id], |r| r.get(0))
            .optional()?;
        if let Some(version) = version {
            // `Store::delete` logs its delete with an empty actor.
            tx.prepare_cached(LOG_DELETED)?.execute(params![
                SITE,
                collection,
                id,
                version,
                now_nanos(),
                ""
            ])?;
        }
        tx.commit()?;
        Ok(version.is_some())
    }

    async fn top(&self, collection: &str) -> BenchResult<Vec<String>> {
        let conn = self.reader.lock();
        let sql = format!(
            "SELECT {COLUMNS} FROM documents WHERE site = ?1 AND collection = ?2 \
             AND data ->> '$.status' = ?3 AND data ->> '$.category' = ?4 \
             AND data ->> '$.priority' >= ?5 \
             ORDER BY data ->> '$.score' DESC, id LIMIT ?6"
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(
            params![SITE, collection, STATUS, CATEGORY, PRIORITY_MIN, TOP as i64],
            document,
        )?;
        let mut page = Vec::with_capacity(TOP);
        for row in rows {
            page.push(row??);
        }
        Ok(page.into_iter().map(|d| d.id).collect())
    }

    async fn walk_page(
        &self,
        collection: &str,
        page_size: usize,
        after: WalkPosition,
    ) -> BenchResult<WalkPage> {
        let conn = self.reader.lock();
        let sql = format!(
            "SELECT {COLUMNS} FROM documents WHERE site = ?1 AND collection = ?2 AND id > ?3 \
             ORDER BY id LIMIT ?4"
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(
            params![
                SITE,
                collection,
                after.unwrap_or_default(),
                page_size as i64 + 1
            ],
            document,
        )?;
        let mut page = Vec::with_capacity(page_size + 1);
        for row in rows {
            page.push(row??);
        }
        let more = page.len() > page_size;
        page.truncate(page_size);
        Ok(WalkPage {
            documents: page.len(),
            next: page.last().filter(|_| more).map(|d| d.id.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The copy is docstore-sqlite's schema, and a baseline file that drifts from it fails
    /// the check (the run exits with its error).
    #[test]
    fn the_baseline_has_docstore_sqlites_schema_and_drift_fails() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store.db");
        drop(docstore_sqlite::SqliteStore::open(&store).unwrap());
        let baseline = dir.path().join("baseline.db");
        drop(SqliteBaseline::open(&baseline, Sync::Normal, true).unwrap());
        check_same_schema(&store, &baseline).unwrap();

        Connection::open(&baseline)
            .unwrap()
            .execute_batch("DROP TABLE changes")
            .unwrap();
        let err = check_same_schema(&store, &baseline)
            .unwrap_err()
            .to_string();
        assert!(err.contains("table changes CREATE TABLE changes"), "{err}");
    }
}
