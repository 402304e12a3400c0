//! Declared indexes in SQLite: an index table (`index_entries`) kept by triggers on
//! `documents` inside the writing transaction, registered in the `indexes` table, built at
//! open in one transaction, and read key range by key range with the core's plan.
//!
//! Why a table and triggers rather than an expression index over a registered function: a
//! query can only use an expression index when it repeats the indexed expression literally,
//! so the query SQL would have to embed each index's declared fields as a literal; with a
//! table the query is one fixed, fully parameterized statement (`index_entries` by
//! `(index_id, entry_site, entry_key)`), and the declared fields appear only in the trigger DDL, as
//! quoted SQL literals. Writes pay the same either way (one extra B-tree entry per index,
//! the key computed by `docstore_index_key` from the row).

use crate::error::Fail;
use crate::rows::{self, COLUMNS};
use crate::sql::Sql;
use docstore::index::chunks::Kept;
use docstore::index::{Choice, CompiledIndex, IndexPlan, IndexSet, KeyRange, Step};
use docstore::query::{CompiledFilter, CompiledQuery, FieldPath};
use docstore::{Error, Index, Page};
use futures_util::FutureExt;
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use std::collections::HashMap;

/// `docstore_index_key(fields_json, data_json, id, created_at, updated_at, created_by,
/// updated_by, version)`: the document's key in an index with those fields (text form).
pub(crate) const INDEX_KEY: &str = "docstore_index_key";

/// The declared indexes this store may read: declared, recorded with the same fields and
/// built, with their row ids.
#[derive(Debug, Default)]
pub(crate) struct Indexes {
    /// What the planner may choose from.
    pub(crate) usable: IndexSet,
    /// `(collection, name)` -> `indexes.id`.
    ids: HashMap<(String, String), i64>,
}

impl Indexes {
    /// The unique indexes of `collection` with their row ids.
    pub(crate) fn unique_of(&self, collection: &str) -> Vec<(i64, &CompiledIndex)> {
        self.usable
            .for_collection(collection)
            .iter()
            .filter(|index| index.is_unique())
            .filter_map(|index| Some((self.id(collection, index.name())?, index)))
            .collect()
    }

    fn id(&self, collection: &str, name: &str) -> Option<i64> {
        self.ids
            .get(&(collection.to_owned(), name.to_owned()))
            .copied()
    }
}

/// The text form of an index's fields, as recorded and as the triggers pass it.
pub(crate) fn fields_json(index: &Index) -> String {
    let value = serde_json::to_value(index).expect("an index serializes");
    value["fields"].to_string()
}

/// A SQL string literal: single quotes around `text`, quotes doubled. SQLite string literals
/// have no other escapes, so any text (semicolons, `--`, unicode) stays inside it.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Checks the declarations against the ones recorded in the file and builds the missing
/// ones (when the store is writable) in one immediate transaction: registration, triggers
/// and the entries of every existing document. A declaration whose name is recorded with
/// other fields is [`Error::InvalidArgument`] naming it. On a read-only store indexes not
/// built yet are not used.
pub(crate) fn prepare(
    conn: &mut Connection,
    declared: &IndexSet,
    writable: bool,
) -> Result<Indexes, Fail> {
    let recorded = recorded(conn)?;
    let mut missing = Vec::new();
    for index in declared.iter() {
        let decl = index.declaration();
        let key = (decl.collection.clone(), decl.name.clone());
        match recorded.get(&key) {
            Some(held) if !held.matches(decl) => return Err(contradiction(decl, &recorded)),
            Some(_) => {}
            None => missing.push(decl.clone()),
        }
    }
    let recorded = if !missing.is_empty() && writable {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        // Another process may have built some meanwhile.
        let again = recorded_in(&tx)?;
        for index in &missing {
            if !again.contains_key(&(index.collection.clone(), index.name.clone())) {
                build(&tx, index)?;
            }
        }
        let now = recorded_in(&tx)?;
        tx.commit()?;
        now
    } else {
        recorded
    };
    let mut usable = Vec::new();
    let mut ids = HashMap::new();
    for index in declared.iter() {
        let decl = index.declaration();
        let key = (decl.collection.clone(), decl.name.clone());
        match recorded.get(&key) {
            Some(held) if held.matches(decl) => {
                usable.push(decl.clone());
                ids.insert(key, held.id);
            }
            // Recorded meanwhile by another process with other fields.
            Some(_) => return Err(contradiction(decl, &recorded)),
            None => {}
        }
    }
    Ok(Indexes {
        usable: IndexSet::new(usable)?,
        ids,
    })
}

/// An index as the file records it.
#[derive(Debug)]
struct Held {
    id: i64,
    /// Its fields' text form ([`fields_json`]).
    fields: String,
    unique: bool,
}

impl Held {
    fn matches(&self, decl: &Index) -> bool {
        self.fields == fields_json(decl) && self.unique == decl.unique
    }

    fn describe(&self) -> String {
        let unique = if self.unique { " (unique)" } else { "" };
        format!("{}{unique}", self.fields)
    }
}

type Recorded = HashMap<(String, String), Held>;

/// The error for a declaration whose name the file records otherwise (other fields, or
/// unique where the declaration is not, or the reverse).
fn contradiction(decl: &Index, recorded: &Recorded) -> Fail {
    let held = recorded
        .get(&(decl.collection.clone(), decl.name.clone()))
        .map_or_else(String::new, Held::describe);
    let unique = if decl.unique { " (unique)" } else { "" };
    Fail::Store(Error::invalid(format!(
        "index {:?} of collection {:?} is declared with fields {}{unique} but the database \
         holds it with fields {held}; drop it or give the new declaration another name",
        decl.name,
        decl.collection,
        fields_json(decl)
    )))
}

fn recorded(conn: &Connection) -> Result<Recorded, Fail> {
    recorded_in(conn)
}

fn recorded_in(conn: &Connection) -> Result<Recorded, Fail> {
    let mut stmt = conn.prepare("SELECT id, collection, name, fields, is_unique FROM indexes")?;
    let rows = stmt.query_map([], |row| {
        let held = Held {
            id: row.get(0)?,
            fields: row.get(3)?,
            unique: row.get(4)?,
        };
        Ok(((row.get::<_, String>(1)?, row.get::<_, String>(2)?), held))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The call computing a row's key in an index whose fields' text form is `fields` (a SQL
/// literal already): `row` is `NEW`, `OLD` or a table alias.
fn key_sql(fields: &str, row: &str) -> String {
    format!(
        "{INDEX_KEY}({fields}, json({row}.data), {row}.id, {row}.created_at, \
         {row}.updated_at, {row}.created_by, {row}.updated_by, {row}.version)"
    )
}

/// Registers `index`, creates its triggers and writes the entries of the documents already
/// in its collection.
fn build(conn: &Connection, index: &Index) -> Result<(), Fail> {
    let fields = fields_json(index);
    conn.execute(
        "INSERT INTO indexes (collection, name, fields, is_unique) VALUES (?1, ?2, ?3, ?4)",
        params![index.collection, index.name, fields, index.unique],
    )?;
    let id = conn.last_insert_rowid();
    let update = update_trigger(id, index)?;
    let (collection, fields) = (literal(&index.collection), literal(&fields));
    let (new, old) = (key_sql(&fields, "NEW"), key_sql(&fields, "OLD"));
    conn.execute_batch(&format!(
        "CREATE TRIGGER docstore_index_{id}_insert AFTER INSERT ON documents
             WHEN NEW.collection = {collection} BEGIN
             INSERT INTO index_entries (index_id, entry_site, entry_key, entry_id)
                 VALUES ({id}, NEW.site, {new}, NEW.id);
         END;
         CREATE TRIGGER docstore_index_{id}_delete AFTER DELETE ON documents
             WHEN OLD.collection = {collection} BEGIN
             DELETE FROM index_entries
                 WHERE index_id = {id} AND entry_site = OLD.site AND entry_key = {old};
         END;
         {update}
         INSERT INTO index_entries (index_id, entry_site, entry_key, entry_id)
             SELECT {id}, site, {key_docs}, id FROM documents AS d
             WHERE collection = {collection};",
        key_docs = key_sql(&fields, "d"),
    ))?;
    if index.unique {
        crate::unique::refuse_duplicates(conn, id, index)?;
    }
    Ok(())
}

/// The `CREATE TRIGGER` of index `id`'s update trigger. It fires only when the update may
/// have changed the document's key ([`unchanged_sql`]): computing both keys calls
/// `docstore_index_key`, which parses the whole document twice, and most updates leave the
/// indexed fields alone (this measured an update with 3 indexes at 3.31x one with none).
fn update_trigger(id: i64, index: &Index) -> Result<String, Fail> {
    let unchanged = unchanged_sql(index)?;
    let (collection, fields) = (literal(&index.collection), literal(&fields_json(index)));
    let (new, old) = (key_sql(&fields, "NEW"), key_sql(&fields, "OLD"));
    Ok(format!(
        "CREATE TRIGGER docstore_index_{id}_update AFTER UPDATE ON documents
             WHEN OLD.collection = {collection} AND NOT ({unchanged}) BEGIN
             DELETE FROM index_entries
                 WHERE index_id = {id} AND entry_site = OLD.site AND entry_key = {old};
             INSERT INTO index_entries (index_id, entry_site, entry_key, entry_id)
                 VALUES ({id}, NEW.site, {new}, NEW.id);
         END;"
    ))
}

/// A SQL condition true only when an update leaves every input of the document's key in
/// `index` as it was: the site and id, each metadata field, and for each data field the
/// whole value of its top-level member, compared as the JSON text SQLite renders (equal
/// text, equal value; a value that renders differently but is equal only costs a
/// recomputation). The top-level member rather than the field's own path, so that no JSON
/// path semantics (array steps) need to match the core's. A member name SQLite's quoted
/// path label cannot hold (`"`, `\`, a control character) makes the condition false: the
/// key is recomputed. The name appears as a quoted SQL literal (see [`literal`]).
fn unchanged_sql(index: &Index) -> Result<String, Fail> {
    let mut same = vec![
        "OLD.site IS NEW.site".to_owned(),
        "OLD.id IS NEW.id".to_owned(),
    ];
    for order in &index.fields {
        let path = FieldPath::parse(&order.field)?;
        same.push(match &path {
            FieldPath::Id => "1".to_owned(),
            FieldPath::CreatedAt => "OLD.created_at IS NEW.created_at".to_owned(),
            FieldPath::CreatedBy => "OLD.created_by IS NEW.created_by".to_owned(),
            FieldPath::UpdatedAt => "OLD.updated_at IS NEW.updated_at".to_owned(),
            FieldPath::UpdatedBy => "OLD.updated_by IS NEW.updated_by".to_owned(),
            FieldPath::Version => "OLD.version IS NEW.version".to_owned(),
            FieldPath::Data(segments) => match segments.first() {
                Some(member)
                    if !member
                        .chars()
                        .any(|c| c == '"' || c == '\\' || c.is_control()) =>
                {
                    let path = literal(&format!("$.\"{member}\""));
                    format!("(OLD.data -> {path}) IS (NEW.data -> {path})")
                }
                _ => "0".to_owned(),
            },
        });
    }
    Ok(same.join(" AND "))
}

/// Schema version 5: replaces every recorded index's update trigger with one that skips
/// updates leaving the key unchanged ([`update_trigger`]). Inside the migration's
/// transaction.
pub(crate) fn migrate_update_triggers(conn: &Connection) -> Result<(), Fail> {
    let mut stmt = conn.prepare("SELECT id, collection, name, fields FROM indexes")?;
    let rows = stmt.query_map([], |row| {
        Ok((
            row.get::<_, i64>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, String>(2)?,
            row.get::<_, String>(3)?,
        ))
    })?;
    for row in rows {
        let (id, collection, name, fields) = row?;
        let fields: Vec<String> = serde_json::from_str(&fields)
            .map_err(|err| crate::error::corrupt(format!("index {name:?} fields: {err}")))?;
        let index = Index::parse(collection, name, fields)?;
        conn.execute_batch(&format!(
            "DROP TRIGGER IF EXISTS docstore_index_{id}_update; {}",
            update_trigger(id, &index)?
        ))?;
    }
    Ok(())
}

/// The statement reading one key range of one index, joined to the documents not expired
/// at `now`, with the plan's residual filter pushed down when SQL can apply it exactly (so rows it rejects are
/// never converted from JSONB nor parsed).
fn range_sql(
    id: i64,
    site: &str,
    collection: &str,
    now: i64,
    range: &KeyRange,
    reverse: bool,
    residual: Option<&CompiledFilter>,
) -> Sql {
    let mut sql = Sql::default();
    let i = sql.bind(SqlValue::Integer(id));
    let s = sql.bind(SqlValue::Text(site.to_owned()));
    let c = sql.bind(SqlValue::Text(collection.to_owned()));
    let start = sql.bind(SqlValue::Blob(range.start.clone()));
    let n = sql.bind(SqlValue::Integer(now));
    let mut conditions = format!(
        "index_id = {i} AND entry_site = {s} AND entry_key >= {start} \
         AND (expires_at IS NULL OR expires_at > {n})"
    );
    if let Some(end) = &range.end {
        let end = sql.bind(SqlValue::Blob(end.clone()));
        conditions.push_str(&format!(" AND entry_key < {end}"));
    }
    if let Some(filter) = residual.filter(|f| crate::sql::pushable(f)) {
        sql.filter(filter);
        conditions.push_str(" AND ");
        conditions.push_str(&std::mem::take(&mut sql.text));
    }
    sql.text = format!(
        "SELECT {COLUMNS}, entry_key FROM index_entries \
         JOIN documents ON site = entry_site AND collection = {c} AND id = entry_id \
         WHERE {conditions} ORDER BY entry_key {}",
        if reverse { "DESC" } else { "ASC" }
    );
    sql
}

/// The planner's choice for `query` (`docs/contract.md`, "Indexes"), with the collection's
/// counter and each contested range counted in `index_entries` (index-only) when the cost
/// rule asks ([`Candidates::choose_measured`]). `explain` reads the counter anyway, for the
/// estimates it prints.
///
/// [`Candidates::choose_measured`]: docstore::index::Candidates::choose_measured
pub(crate) fn choose(
    conn: &Connection,
    indexes: &Indexes,
    site: &str,
    collection: &str,
    query: &CompiledQuery,
    explain: bool,
) -> Result<Choice, Fail> {
    let candidates = docstore::index::candidates(&indexes.usable, collection, query);
    let size = std::future::ready(collection_size(conn, site, collection));
    let count = |plan: &IndexPlan, range: &KeyRange, at_most: u64| {
        std::future::ready(match indexes.id(collection, &plan.index) {
            Some(id) => count_entries(conn, id, site, range, at_most),
            None => Ok(at_most),
        })
    };
    candidates
        .choose_measured(explain, size, count)
        .now_or_never()
        .expect("SQLite's counting never waits")
}

/// The collection's size, from its counter.
pub(crate) fn collection_size(
    conn: &Connection,
    site: &str,
    collection: &str,
) -> Result<u64, Fail> {
    let mut stmt = conn
        .prepare_cached("SELECT documents FROM collections WHERE site = ?1 AND collection = ?2")?;
    let count: Option<i64> = stmt
        .query_row(params![site, collection], |row| row.get(0))
        .optional()?;
    Ok(count.map_or(0, |n| u64::try_from(n).unwrap_or(0)))
}

/// The entries of `range`, counted up to `at_most` (index-only: no document row is read).
fn count_entries(
    conn: &Connection,
    id: i64,
    site: &str,
    range: &KeyRange,
    at_most: u64,
) -> Result<u64, Fail> {
    let mut sql = Sql::default();
    let i = sql.bind(SqlValue::Integer(id));
    let s = sql.bind(SqlValue::Text(site.to_owned()));
    let start = sql.bind(SqlValue::Blob(range.start.clone()));
    let mut conditions = format!("index_id = {i} AND entry_site = {s} AND entry_key >= {start}");
    if let Some(end) = &range.end {
        let end = sql.bind(SqlValue::Blob(end.clone()));
        conditions.push_str(&format!(" AND entry_key < {end}"));
    }
    let limit = sql.bind(SqlValue::Integer(
        i64::try_from(at_most).unwrap_or(i64::MAX),
    ));
    let text = format!(
        "SELECT count(*) FROM (SELECT 1 FROM index_entries WHERE {conditions} LIMIT {limit})"
    );
    let mut stmt = conn.prepare_cached(&text)?;
    let n: i64 = stmt.query_row(rusqlite::params_from_iter(&sql.params), |row| row.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Runs a query the planner gave to an index: each range read in the plan's direction only
/// as far as its walk needs, then the evaluator sorts and cuts the page. Also says how many
/// document rows it read (for [`crate::SqliteStore::documents_read`]).
pub(crate) fn run(
    conn: &Connection,
    indexes: &Indexes,
    site: &str,
    collection: &str,
    plan: &IndexPlan,
    query: &CompiledQuery,
    now: i64,
) -> Result<(Page, u64), Fail> {
    let missing = |what: &str| {
        Fail::Store(Error::Backend {
            message: format!("planned index {:?} {what}", plan.index),
            source: None,
        })
    };
    let def: &CompiledIndex = indexes
        .usable
        .for_collection(collection)
        .iter()
        .find(|i| i.name() == plan.index)
        .ok_or_else(|| missing("is not usable"))?;
    let id = indexes
        .id(collection, &plan.index)
        .ok_or_else(|| missing("has no id"))?;
    let (mut kept, mut read, mut more_unread) = (Vec::new(), 0u64, false);
    // With no residual filter, the ranges decide the whole filter.
    let filter_applied = plan.residual.is_none();
    for range in &plan.ranges {
        let sql = range_sql(
            id,
            site,
            collection,
            now,
            range,
            plan.reverse,
            plan.residual.as_ref(),
        );
        let mut stmt = conn.prepare_cached(&sql.text)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(&sql.params))?;
        let mut walk = plan.walk(query);
        while let Some(row) = rows.next()? {
            read += 1;
            if plan.page_is_complete(query, filter_applied, kept.len()) {
                more_unread = true;
                break;
            }
            let key: Vec<u8> = row.get(8)?;
            let doc = rows::document(row)?;
            let matches = query.matches(&doc) && query.is_after_cursor(&doc);
            match walk.offer(def, &key, matches) {
                Step::Keep => kept.push(doc),
                Step::Skip => {}
                Step::Stop => break,
            }
        }
    }
    let kept = Kept {
        documents: kept,
        read,
        in_order: plan.keeps_order(),
        more_unread,
    };
    Ok((kept.page(query), read))
}

/// `EXPLAIN QUERY PLAN` of the statement reading one range (for tests and `explain`).
pub(crate) fn query_plan(
    conn: &Connection,
    plan: &IndexPlan,
    site: &str,
    collection: &str,
) -> Result<String, Fail> {
    let range = plan.first_range();
    let sql = range_sql(
        0,
        site,
        collection,
        0,
        &range,
        plan.reverse,
        plan.residual.as_ref(),
    );
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {}", sql.text))?;
    let details = stmt.query_map(rusqlite::params_from_iter(&sql.params), |row| {
        row.get::<_, String>(3)
    })?;
    Ok(details.collect::<rusqlite::Result<Vec<_>>>()?.join("; "))
}
