//! Declared indexes. Each index gets, at open, one generated SQL function computing a
//! document's key in that index — the bytes of [`docstore::index::key`], whose byte order
//! (`bytea` compares bytes) is the contract's total order — a stored generated column of
//! `documents` holding that key, and a B-tree over `(site, key column)` holding the documents of
//! its collection. A write computes the key once, into the column; a query reads it back from
//! the row, so reading a range computes nothing per row. Queries name the column, never a user
//! string, so the statement is fixed and fully parameterized; the declared fields appear only
//! in the function's DDL, as quoted literals ([`literal`]), the one place user text becomes
//! SQL.
//!
//! A document the server cannot key — one kept in `raw` (JSONB cannot hold it) or holding an
//! object in an indexed field (whose canonical text the server does not compute) — gets the
//! empty key, below every real key: queries read those few beside the ranges and key them in
//! Rust. Another collection's documents get no key (`NULL`): the partial index leaves them
//! out, so an index costs writes to its own collection only.

use crate::error::Fail;
use docstore::Index;
use docstore::index::{CompiledIndex, IndexSet};
use docstore::query::FieldPath;
use std::borrow::Cow;

/// The server's key functions (`sql/keys.sql`).
const KEY_FUNCTIONS: &str = include_str!("../sql/keys.sql");

/// The newest of [`KEY_FUNCTIONS`]: a schema without it has none or earlier definitions.
const NEWEST_KEY_FUNCTION: &str = "docstore_text";

/// The UTF-8 bytes of text `t` in a UTF-8 database: the text's own bytes, through `bytea`'s
/// input with every backslash doubled (its only escape character). Unlike `convert_to` it is
/// immutable, so the key functions using it are inlined.
const UTF8_TEXT_BYTES: &str = r"replace(t, E'\\', E'\\\\')::bytea";

/// The same in a database of another encoding (not inlined: `convert_to` is only stable).
const CONVERTED_TEXT_BYTES: &str = "convert_to(t, 'UTF8')";

/// The columns a key function takes, in order.
const ARGS: &str =
    "collection, data, raw, id, created_at, updated_at, created_by, updated_by, version";

/// The name of the SQL function, key column and B-tree that keep declared index `index` in
/// the store's schema: `ix_` and the [`stable_hash`](docstore::driver::stable_hash) of the
/// declaration (collection, name, fields), so a declaration with other fields gets its own.
pub fn name(index: &Index) -> String {
    let fields = serde_json::to_value(index).expect("an index serializes")["fields"].to_string();
    let declaration = format!("{}\0{}\0{fields}\0", index.collection, index.name);
    let hash = docstore::driver::stable_hash(declaration.as_bytes());
    format!("ix_{hash:016x}")
}

/// The column of `documents` holding each declared index's keys, named once at open ([`name`]
/// serializes the declaration).
#[derive(Debug)]
pub(crate) struct Columns(Vec<(CompiledIndex, String)>);

impl Columns {
    pub(crate) fn of(indexes: &IndexSet) -> Self {
        let named = indexes
            .iter()
            .map(|index| (index.clone(), name(index.declaration())));
        Columns(named.collect())
    }

    /// `index`'s [`name`], as named at open (every declared index is; another is named here).
    pub(crate) fn name(&self, index: &CompiledIndex) -> Cow<'_, str> {
        match self.planned(index.collection(), index.name()) {
            Some((_, column)) => Cow::Borrowed(column),
            None => Cow::Owned(name(index.declaration())),
        }
    }

    /// The index `plan` reads in `collection`, and its column.
    pub(crate) fn planned(&self, collection: &str, plan: &str) -> Option<(&CompiledIndex, &str)> {
        self.0
            .iter()
            .find(|(index, _)| index.collection() == collection && index.name() == plan)
            .map(|(index, column)| (index, column.as_str()))
    }
}

/// A SQL string literal holding `text` exactly: `E'…'` with `\` and `'` doubled (an escape
/// string reads the same whatever `standard_conforming_strings` says). `None` for text
/// holding U+0000, which no PostgreSQL text can.
fn literal(text: &str) -> Option<String> {
    (!text.contains('\0')).then(|| format!("E'{}'", text.replace('\\', "\\\\").replace('\'', "''")))
}

/// The SQL of one field's key component.
fn component(s: &str, path: &FieldPath, descending: bool) -> String {
    let value = match path {
        FieldPath::Id => "to_jsonb(id)".to_owned(),
        FieldPath::CreatedAt => "to_jsonb(created_at)".to_owned(),
        FieldPath::UpdatedAt => "to_jsonb(updated_at)".to_owned(),
        FieldPath::CreatedBy => "to_jsonb(created_by)".to_owned(),
        FieldPath::UpdatedBy => "to_jsonb(updated_by)".to_owned(),
        FieldPath::Version => "to_jsonb(version)".to_owned(),
        // `->` with a text key steps into objects only, as paths do; no key holds U+0000.
        FieldPath::Data(segments) => segments
            .iter()
            .try_fold("data".to_owned(), |at, seg| {
                Some(format!("({at} -> {})", literal(seg)?))
            })
            .unwrap_or_else(|| "NULL::jsonb".to_owned()),
    };
    let key = format!("{s}.docstore_key({value})");
    if descending {
        format!("{s}.docstore_invert({key})")
    } else {
        key
    }
}

/// The DDL of `index`'s key function, key column and B-tree. It replaces what a schema of an
/// earlier version has under the same name: the function (same keys) and an expression index
/// over it, which the column's index supersedes. Adding the column rewrites the table once.
///
/// The function is PL/pgSQL around one expression of the (inlined) SQL key functions:
/// PostgreSQL plans that expression once per session and evaluates it on its fast path for
/// simple expressions.
fn index_ddl(s: &str, index: &CompiledIndex) -> String {
    let name = name(index.declaration());
    let collection = literal(index.collection()).unwrap_or_else(|| "NULL".to_owned());
    let mut key: Vec<String> = index
        .fields()
        .iter()
        .map(|(path, descending)| component(s, path, *descending))
        .collect();
    key.push(format!(
        r"'\x05'::bytea || {s}.docstore_text(id) || '\x0000'::bytea"
    ));
    let body = format!(
        "BEGIN RETURN CASE WHEN collection IS DISTINCT FROM {collection} THEN NULL \
         WHEN raw IS NOT NULL THEN ''::bytea ELSE coalesce({}, ''::bytea) END; END",
        key.join(" || ")
    );
    let tag = dollar_tag(&body);
    format!(
        "DROP INDEX IF EXISTS {s}.{name};
         CREATE OR REPLACE FUNCTION {s}.{name}(collection text, data jsonb, raw text, id text, \
         created_at bigint, updated_at bigint, created_by text, updated_by text, version bigint) \
         RETURNS bytea LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS {tag}{body}{tag};
         ALTER TABLE {s}.documents ADD COLUMN {name} bytea \
         GENERATED ALWAYS AS ({s}.{name}({ARGS})) STORED;
         CREATE INDEX {name} ON {s}.documents (site, {name}) WHERE {name} IS NOT NULL;"
    )
}

/// A dollar-quote tag `body` does not contain (declared field names are user text).
fn dollar_tag(body: &str) -> String {
    (0u64..)
        .map(|n| format!("$k{n}$"))
        .find(|tag| !body.contains(tag.as_str()))
        .expect("some tag is free")
}

/// Creates what is missing — the key functions, each declared index's function, column and
/// index (built over the documents already there) — in `tx`, which holds the schema's
/// migration lock.
pub(crate) async fn prepare(
    tx: &tokio_postgres::Transaction<'_>,
    schema: &str,
    indexes: &docstore::index::IndexSet,
) -> Result<(), Fail> {
    let s = format!("\"{schema}\"");
    let exists = "SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
                  WHERE n.nspname = $1 AND p.proname = $2";
    let present = |name: String| async move {
        Ok::<_, Fail>(tx.query_opt(exists, &[&schema, &name]).await?.is_some())
    };
    if indexes.is_empty() {
        return Ok(());
    }
    if !present(NEWEST_KEY_FUNCTION.to_owned()).await? {
        let encoding = tx.query_one("SHOW server_encoding", &[]).await?;
        let text_bytes = match encoding.try_get::<_, String>(0)?.as_str() {
            "UTF8" => UTF8_TEXT_BYTES,
            _ => CONVERTED_TEXT_BYTES,
        };
        let functions = KEY_FUNCTIONS.replace("{text_bytes}", text_bytes);
        tx.batch_execute(&functions.replace("{s}", &s)).await?;
    }
    let column = "SELECT 1 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
                  JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 \
                  AND c.relname = 'documents' AND a.attname = $2 AND NOT a.attisdropped";
    for index in indexes.iter() {
        let name = name(index.declaration());
        if tx.query_opt(column, &[&schema, &name]).await?.is_none() {
            tx.batch_execute(&index_ddl(&s, index)).await?;
        }
    }
    Ok(())
}
