//! The schema, its versioned migrations and the per-connection settings.

use crate::error::Fail;
use crate::options::{Durability, SqliteOptions};
use rusqlite::{Connection, TransactionBehavior};

/// The schema version this library writes (`PRAGMA user_version`).
pub(crate) const SCHEMA_VERSION: i64 = 8;

/// Migration `n` (1-based) takes a database from version `n - 1` to `n`.
const MIGRATIONS: [&str; 8] = [
    // Version 1: one row per document, the keys as the primary key, the data as SQLite's binary
    // JSON (JSONB keeps every number and string literal as the text serde_json wrote, so
    // `json(data)` gives that text back verbatim, and queries navigate it without parsing),
    // the metadata as columns. Per-collection counters kept exact by triggers inside the writing
    // transaction.
    r#"
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
    "#,
    // Version 2: declared indexes. `indexes` records each declaration built in this file
    // (fields in text form, as JSON); `index_entries` holds one key per document and index
    // (column names distinct from `documents`', so pushed-down filters join unambiguously),
    // kept by per-index triggers on `documents` (created when the index is built).
    r#"
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
    "#,
    // Version 3: caller write identities (`docstore::identity`). One row per key that has
    // any: `ids` newest first, space-separated; `deleted_at` NULL while the document stands
    // (the row goes with it, by trigger, unless a caller-identified delete made it a record
    // of the deletion, kept for a day). Apart from `documents`, so writing identities never
    // fires the index triggers.
    r#"
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
    "#,
    // Version 4: the change feed (`crate::feed`). One row per committed write, written by
    // the write itself in its transaction; `position` is the rowid, so it grows in commit
    // order (SQLite serializes writers). Not AUTOINCREMENT: its `sqlite_sequence` update
    // measured +9 µs per write; pruning keeps the newest row instead, so a position is never
    // handed out twice. `data`, `created_at`, `created_by` are NULL for a delete; `time` and
    // `actor` are the document's `updated_at` / `updated_by`, or the delete's; `logged_at` is
    // the store clock at the write, what retention goes by (a restored document's
    // `updated_at` may be old). No index by site: a read scans at most a bounded window of
    // positions, and an index measured +13 µs per write. `feed` is one row: the file's random
    // id (in every cursor, so a cursor of another file is never read as this one's) and the
    // highest pruned position (so an expired cursor is told exactly). The feed starts empty:
    // writes from before this migration are not in it.
    r#"
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
    "#,
    // Version 5: index update triggers that skip updates leaving the key unchanged. No SQL
    // of its own: each recorded index's trigger is rebuilt from its fields
    // (`crate::index::migrate_update_triggers`, run after this step).
    "",
    // Version 6: a change's previous value (`SqliteOptions::feed_previous`): the document
    // the write replaced or removed, as one JSONB object (`data` and the metadata), NULL
    // for a create and whenever the writer had the option off. Nullable, so adding it
    // rewrites no row.
    "ALTER TABLE changes ADD COLUMN previous BLOB;",
    // Version 7: unique indexes (`docs/contract.md`, "Unique indexes"): whether a recorded
    // index is unique, checked against its declaration like its fields.
    "ALTER TABLE indexes ADD COLUMN is_unique INTEGER NOT NULL DEFAULT 0;",
    // Version 8: document expiry (`docs/contract.md`, "Expiry"): `expires_at` (store clock,
    // NULL when the document never expires) on documents and on their changes (so a replay
    // of the feed keeps it). Two partial indexes, holding only expiring documents, so a
    // store that never uses expiry pays nothing for them: by expiry, for the sweep; by site
    // and expiry, for the counts, which subtract the expired documents not yet swept.
    r#"
    ALTER TABLE documents ADD COLUMN expires_at INTEGER;
    ALTER TABLE changes ADD COLUMN expires_at INTEGER;
    CREATE INDEX documents_expiry ON documents (expires_at) WHERE expires_at IS NOT NULL;
    CREATE INDEX documents_expiry_by_site ON documents (site, expires_at)
        WHERE expires_at IS NOT NULL;
    "#,
];

/// The version whose migration rebuilds the index update triggers.
const UPDATE_TRIGGERS_VERSION: usize = 5;

/// Settings every connection gets: the busy timeout and the durability.
pub(crate) fn configure(conn: &mut Connection, options: &SqliteOptions) -> Result<(), Fail> {
    crate::busy::wait_for_locks(conn, options.busy_timeout)?;
    // Queries of different shapes have different statements; keep the common ones prepared.
    conn.set_prepared_statement_cache_capacity(64);
    let synchronous = match options.durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", synchronous)?;
    crate::functions::register(conn)?;
    Ok(())
}

/// What the writer connection adds to [`configure`]: savepoint and statement journals in
/// memory (`temp_store = MEMORY`). A batch's writes, or a group commit's, each run under a
/// savepoint, and every statement whose triggers move a counter under a statement journal:
/// SQLite keeps the pages those change in a journal that spills to a temporary file past
/// 64 KiB (a batch of 50 one-kilobyte documents does), costing a `write` system call per page.
/// In memory they cost a copy; their size is bounded by one transaction's changes (a group of
/// batches of at most 3 MB each). Readers keep the default, so a large sort may spill to disk.
pub(crate) fn configure_writer(conn: &Connection) -> Result<(), Fail> {
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    Ok(())
}

/// Switches a file database to WAL (persistent, so once per file is enough).
pub(crate) fn enable_wal(conn: &Connection) -> Result<(), Fail> {
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Fail::Store(docstore::Error::Backend {
            message: format!("sqlite refused WAL mode (journal_mode is {mode})"),
            source: None,
        }));
    }
    Ok(())
}

/// Makes a read-write connection's file ready: WAL and the current schema. Both are read
/// first, without any lock a writer holds (a WAL read), and changed only when needed, so
/// opening a current database never waits for (or blocks) another process's writer.
pub(crate) fn prepare(conn: &mut Connection) -> Result<(), Fail> {
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        enable_wal(conn)?;
    }
    let current = user_version(conn)?;
    check_not_newer(current)?;
    if current < SCHEMA_VERSION {
        migrate(conn)?;
    }
    Ok(())
}

/// The tables the migrations create: any other table in a file belongs to another program.
const OWN_TABLES: [&str; 7] = [
    "documents",
    "collections",
    "indexes",
    "index_entries",
    "write_ids",
    "changes",
    "feed",
];

/// The tables of `conn`'s main database that docstore does not own, by name (SQLite's own
/// `sqlite_*` tables aside).
fn foreign_tables(conn: &Connection) -> Result<Vec<String>, Fail> {
    let mut stmt = conn.prepare(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' \
         ESCAPE '\\' ORDER BY name",
    )?;
    let names = stmt.query_map([], |row| row.get::<_, String>(0))?;
    let mut foreign = Vec::new();
    for name in names {
        let name = name?;
        if !OWN_TABLES.contains(&name.as_str()) {
            foreign.push(name);
        }
    }
    Ok(foreign)
}

/// Refuses a file that holds another program's tables unless sharing it is allowed
/// ([`SqliteOptions::share_file`]): run before anything in the file may change. Whether
/// docstore's own tables are there yet.
pub(crate) fn check_owned(
    conn: &Connection,
    options: &SqliteOptions,
    path: &std::path::Path,
) -> Result<bool, Fail> {
    let foreign = foreign_tables(conn)?;
    if !foreign.is_empty() && !options.share_file {
        return Err(Fail::Store(docstore::Error::invalid(format!(
            "{} holds tables of another program ({}): docstore neither adds its tables to a \
             database it does not own nor changes its journal mode; use a file of its own, \
             or allow sharing this one with share_file=true (database.sqlite.share_file, \
             SqliteOptions::share_file)",
            path.display(),
            foreign.join(", ")
        ))));
    }
    let own: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'documents'",
        [],
        |row| row.get(0),
    )?;
    Ok(own > 0)
}

/// What a read-only connection found in its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Readable {
    /// Docstore's tables at the current schema version.
    Current,
    /// No docstore tables yet (an empty file, or a shared one docstore never wrote): an
    /// empty store.
    NotYetAStore,
}

/// Checks a read-only connection's database: not another program's (unless shared), and
/// either without docstore's tables yet or at exactly the current schema (a read-only
/// store cannot migrate); `reason` says why the store is read-only.
pub(crate) fn check_readable(
    conn: &Connection,
    options: &SqliteOptions,
    path: &std::path::Path,
    reason: &str,
) -> Result<Readable, Fail> {
    let has_own_tables = check_owned(conn, options, path)?;
    let current = user_version(conn)?;
    check_not_newer(current)?;
    if current == 0 && !has_own_tables {
        return Ok(Readable::NotYetAStore);
    }
    if current < SCHEMA_VERSION {
        return Err(Fail::Store(docstore::Error::Backend {
            message: format!(
                "the database has schema version {current} and needs migrating to \
                 {SCHEMA_VERSION}, but it can only be opened read-only: {reason} (a \
                 read-write open migrates it)"
            ),
            source: None,
        }));
    }
    Ok(Readable::Current)
}

fn user_version(conn: &Connection) -> Result<i64, Fail> {
    Ok(conn.query_row("PRAGMA user_version", [], |row| row.get(0))?)
}

fn check_not_newer(current: i64) -> Result<(), Fail> {
    if current > SCHEMA_VERSION {
        return Err(Fail::Store(docstore::Error::Backend {
            message: format!(
                "the database has schema version {current}; this docstore-sqlite knows \
                 versions up to {SCHEMA_VERSION}"
            ),
            source: None,
        }));
    }
    Ok(())
}

/// Brings the schema to [`SCHEMA_VERSION`] in one immediate transaction, so that two
/// processes opening a new file at once migrate it once. A newer schema is refused.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), Fail> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let current = user_version(&tx)?;
    check_not_newer(current)?;
    for (index, migration) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        tx.execute_batch(migration)?;
        if index + 1 == UPDATE_TRIGGERS_VERSION {
            crate::index::migrate_update_triggers(&tx)?;
        }
        tx.pragma_update(None, "user_version", index as i64 + 1)?;
    }
    tx.commit()?;
    Ok(())
}
