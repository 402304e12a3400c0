//! docstore-postgres's schema, copied for the baseline, and the check that the baseline's
//! schema is the one docstore-postgres created (the run fails when they differ).

use crate::BenchResult;
use tokio_postgres::Client;

/// docstore-postgres's tables, version 4 (`docstore-postgres/src/schema.rs`: its version-2
/// tables and the version-3 and 4 upgrades, verbatim but for the upgrades' version bumps): `{s}` is the
/// quoted schema. The benchmark declares no unique index and gives no expiry, so neither side
/// writes `unique_claims` or an `expires_at`.
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
ALTER TABLE {s}.changes ADD COLUMN previous text;
"#;

/// The schema version [`TABLES`] is (docstore-postgres's `meta.version`).
const VERSION: i32 = 4;

/// Creates schema `schema` (dropping it first) with docstore-postgres's tables.
pub async fn create(client: &Client, schema: &str) -> BenchResult<()> {
    let quoted = format!("\"{schema}\"");
    let ddl = TABLES.replace("{s}", &quoted);
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {quoted} CASCADE; CREATE SCHEMA {quoted}; {ddl}"
        ))
        .await?;
    let feed_id = docstore::WriteId::random().as_str().to_owned();
    client
        .execute(
            &format!("INSERT INTO {quoted}.meta VALUES (1, $1, $2)"),
            &[&VERSION, &feed_id],
        )
        .await?;
    Ok(())
}

/// The index a hand-written application declares for the benchmark's selective query
/// (`status` and `category` equal, ordered by `score` descending then id, `priority` checked
/// on the entries read), on the query collection only (`{s}` the quoted schema, `{c}` the
/// collection as a literal): the expressions are the ones the baseline's statement filters
/// and sorts by, so PostgreSQL reads it in the query's order and stops at the page.
const APP_INDEX: &str = "CREATE INDEX app_selective ON {s}.documents (site, (data ->> 'status'), \
     (data ->> 'category'), ((data -> 'score')::numeric) DESC, id) WHERE collection = {c}";

/// Adds the app index (`APP_INDEX`) over collection `collection` to schema `schema`. The benchmark lays it
/// down in both schemas (the baseline's statement reads it; docstore reads its own declared
/// index), so [`check_same`] still finds them equal.
pub async fn create_app_index(client: &Client, schema: &str, collection: &str) -> BenchResult<()> {
    let ddl = APP_INDEX
        .replace("{s}", &format!("\"{schema}\""))
        .replace("{c}", &literal(collection));
    client.batch_execute(&ddl).await?;
    Ok(())
}

/// `text` as a SQL string literal (`'` doubled; the benchmark's own constants only).
pub fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Catalog queries describing a schema (`$1`), one line per object; the schema's own name
/// is replaced by `S` where the catalog spells it.
const DESCRIBE: [&str; 5] = [
    "SELECT format('column %s.%s #%s %s null=%s collation=%s default=%s', table_name, \
     column_name, ordinal_position, data_type, is_nullable, coalesce(collation_name, '-'), \
     coalesce(replace(column_default, $1, 'S'), '-')) \
     FROM information_schema.columns WHERE table_schema = $1",
    "SELECT format('constraint %s.%s %s', c.relname, k.conname, pg_get_constraintdef(k.oid)) \
     FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid \
     JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1",
    "SELECT format('index %s %s', indexname, replace(indexdef, $1 || '.', 'S.')) \
     FROM pg_indexes WHERE schemaname = $1",
    "SELECT format('sequence %s %s start=%s step=%s', sequencename, data_type, start_value, \
     increment_by) FROM pg_sequences WHERE schemaname = $1",
    "SELECT format('trigger %s.%s %s', c.relname, t.tgname, \
     replace(pg_get_triggerdef(t.oid), $1 || '.', 'S.')) \
     FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid \
     JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND NOT t.tgisinternal",
];

/// The schema `schema` as sorted lines: its `meta.version`, every column, constraint, index,
/// sequence and trigger.
pub async fn describe(client: &Client, schema: &str) -> BenchResult<Vec<String>> {
    let version: i32 = client
        .query_one(&format!("SELECT version FROM \"{schema}\".meta"), &[])
        .await?
        .get(0);
    let mut lines = vec![format!("meta.version {version}")];
    for sql in DESCRIBE {
        for row in client.query(sql, &[&schema]).await? {
            lines.push(row.get(0));
        }
    }
    lines.sort();
    Ok(lines)
}

/// Fails, naming the objects that differ, unless schema `baseline` is exactly what
/// docstore-postgres created as schema `store`: ratios against a baseline on another schema
/// would not compare like with like.
pub async fn check_same(client: &Client, store: &str, baseline: &str) -> BenchResult<()> {
    let (ours, theirs) = (
        describe(client, store).await?,
        describe(client, baseline).await?,
    );
    if ours == theirs {
        return Ok(());
    }
    let only = |a: &[String], b: &[String]| {
        a.iter()
            .filter(|line| !b.contains(line))
            .cloned()
            .collect::<Vec<_>>()
            .join("\n  ")
    };
    Err(format!(
        "the PostgreSQL baseline's schema differs from the one docstore-postgres created; copy \
         docstore-postgres/src/schema.rs's tables into TABLES in \
         docstore-bench/src/baselines/postgres/schema.rs (and write what they add, as \
         docstore-postgres does).\nOnly in docstore-postgres's:\n  {}\nOnly in the \
         baseline's:\n  {}",
        only(&ours, &theirs),
        only(&theirs, &ours)
    )
    .into())
}
