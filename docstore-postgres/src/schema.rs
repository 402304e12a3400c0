//! The store's tables, created in its own schema on first open and versioned in table
//! `meta`, like SQLite's `user_version`.

use crate::error::Fail;
use docstore::Error;
use tokio_postgres::Client;

/// The schema version this crate writes: 2 added `meta.pruned_through` (feed retention), 3
/// expiry and unique indexes ([`V3`]), 4 the document each change replaced or removed
/// ([`V4`]).
pub(crate) const VERSION: i32 = 4;

/// Checks a schema name: it becomes SQL text (quoted), so only `[a-z_][a-z0-9_]*`, at most 63
/// bytes (PostgreSQL's identifier length), and never PostgreSQL's own (`pg_*`).
pub(crate) fn check_name(name: &str) -> Result<(), Error> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && !name.starts_with("pg_")
        && name != "information_schema"
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit();
    if valid {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "PostgreSQL schema {name:?}: 1 to 63 of a-z, 0-9 and _, not starting with a digit \
             or pg_"
        )))
    }
}

/// The DDL of version 2 (a new schema is made at 2 and upgraded). `{s}` is the quoted schema. Keys compare in the "C" collation: byte
/// order, which is the contract's id order.
const TABLES: &str = r#"
CREATE TABLE {s}.meta (singleton int PRIMARY KEY CHECK (singleton = 1), version int NOT NULL,
    feed_id text NOT NULL, pruned_through bigint NOT NULL DEFAULT 0);
CREATE TABLE {s}.documents (
    site text COLLATE "C" NOT NULL, collection text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL, data jsonb NOT NULL, raw text,
    created_at bigint NOT NULL, updated_at bigint NOT NULL,
    created_by text NOT NULL, updated_by text NOT NULL, version bigint NOT NULL,
    PRIMARY KEY (site, collection, id));
CREATE TABLE {s}.counters (site text COLLATE "C" NOT NULL, collection text COLLATE "C" NOT NULL,
    n bigint NOT NULL CHECK (n >= 0), PRIMARY KEY (site, collection));
CREATE TABLE {s}.write_ids (site text COLLATE "C" NOT NULL, collection text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL, ids text NOT NULL, deleted_at bigint,
    PRIMARY KEY (site, collection, id));
CREATE INDEX write_ids_deleted ON {s}.write_ids (deleted_at) WHERE deleted_at IS NOT NULL;
CREATE SEQUENCE {s}.change_positions;
CREATE TABLE {s}.changes (position bigint PRIMARY KEY, site text COLLATE "C" NOT NULL,
    collection text COLLATE "C" NOT NULL, id text COLLATE "C" NOT NULL, kind text NOT NULL,
    version bigint NOT NULL, body text, created_at bigint, created_by text,
    time bigint NOT NULL, actor text NOT NULL);
CREATE INDEX changes_by_site ON {s}.changes (site, position);
"#;

/// Creates the schema and its tables when missing, and the declared indexes
/// ([`crate::keys`], [`crate::unique`]: unique ones built over the documents live at `now`), under a transaction-scoped advisory lock (stores opening side by side
/// create them once); returns the feed's id. A schema written by a newer version of this
/// crate is refused.
pub(crate) async fn migrate(
    client: &mut Client,
    schema: &str,
    indexes: &docstore::index::IndexSet,
    now: i64,
) -> Result<String, Fail> {
    let quoted = format!("\"{schema}\"");
    let tx = client.transaction().await?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1)",
        &[&crate::feed::lock_key("migrate", schema)],
    )
    .await?;
    let exists = tx
        .query_opt(
            "SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'meta'",
            &[&schema],
        )
        .await?
        .is_some();
    if !exists {
        let feed_id = docstore::WriteId::random().as_str().replace('-', "");
        let ddl = TABLES.replace("{s}", &quoted);
        tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {quoted}; {ddl}"))
            .await?;
        let insert = format!("INSERT INTO {quoted}.meta VALUES (1, $1, $2)");
        tx.execute(&insert, &[&2, &feed_id]).await?;
    }
    upgrade(&tx, &quoted).await?;
    crate::keys::prepare(&tx, schema, indexes).await?;
    crate::unique::build(&tx, &quoted, indexes, now).await?;
    let row = tx
        .query_one(&format!("SELECT version, feed_id FROM {quoted}.meta"), &[])
        .await?;
    tx.commit().await?;
    let version: i32 = row.get(0);
    if version > VERSION {
        return Err(Error::invalid(format!(
            "PostgreSQL schema {schema} is at version {version}, newer than this docstore \
             ({VERSION}): upgrade docstore"
        ))
        .into());
    }
    Ok(row.get(1))
}

/// Brings a schema of an older version of this crate to [`VERSION`] (inside `migrate`'s
/// transaction and lock).
async fn upgrade(tx: &tokio_postgres::Transaction<'_>, quoted: &str) -> Result<(), Fail> {
    let version: i32 = tx
        .query_one(&format!("SELECT version FROM {quoted}.meta"), &[])
        .await?
        .get(0);
    if version < 2 {
        let sql = format!(
            "ALTER TABLE {quoted}.meta ADD COLUMN pruned_through bigint NOT NULL DEFAULT 0; \
             UPDATE {quoted}.meta SET version = 2"
        );
        tx.batch_execute(&sql).await?;
    }
    if version < 3 {
        tx.batch_execute(&V3.replace("{s}", quoted)).await?;
    }
    if version < 4 {
        tx.batch_execute(&V4.replace("{s}", quoted)).await?;
    }
    Ok(())
}

/// Version 3: `expires_at` on documents and changes, with partial indexes holding only
/// expiring documents (the sweep's, by expiry; counts', by collection), so a store that never
/// uses expiry pays nothing for them; the unique values documents claim (`unique_claims`) and
/// the unique indexes built (`unique_indexes`). A claim is unique by its SHA-256, as a B-tree
/// entry must stay small whatever the value.
const V3: &str = r#"
ALTER TABLE {s}.documents ADD COLUMN expires_at bigint;
ALTER TABLE {s}.changes ADD COLUMN expires_at bigint;
CREATE INDEX documents_expiring ON {s}.documents (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX documents_expiring_by_collection ON {s}.documents (site, collection, expires_at)
    WHERE expires_at IS NOT NULL;
CREATE TABLE {s}.unique_claims (site text COLLATE "C" NOT NULL,
    collection text COLLATE "C" NOT NULL, id text COLLATE "C" NOT NULL, ix text NOT NULL,
    claim bytea NOT NULL, digest bytea GENERATED ALWAYS AS (sha256(claim)) STORED,
    PRIMARY KEY (site, collection, id, ix),
    CONSTRAINT unique_claims_held UNIQUE (site, ix, digest));
CREATE TABLE {s}.unique_indexes (ix text PRIMARY KEY);
UPDATE {s}.meta SET version = 3;
"#;

/// Version 4: the document a change replaced or removed (`docs/contract.md`, "Change feed":
/// `previous`), as [`docstore::feed::previous_text`] writes it; `NULL` for a create, an expiry
/// and the changes written before this version.
const V4: &str = r#"
ALTER TABLE {s}.changes ADD COLUMN previous text;
UPDATE {s}.meta SET version = 4;
"#;
