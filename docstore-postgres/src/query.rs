//! Queries: the planner's choice (`docs/contract.md`, "Indexes", cost rule) read with
//! prepared, parameterized statements (cached per connection), the filter pushed down where
//! PostgreSQL decides it exactly as the reference evaluator does (`Eq`, `In`, `Exists`,
//! ranges, `Prefix` on data paths, `$id`; object-only paths through `->`, numbers through
//! `numeric`, strings in the "C" collation); the core evaluator then filters, sorts, cuts the
//! page and makes its cursor.
//!
//! - **An index plan** reads each key range of the index's key column ([`crate::keys`]) in
//!   key order — the contract's total order, so `ORDER BY key LIMIT n` stops where the core's
//!   [`RangeWalk`](docstore::index::RangeWalk) says the page is complete, each row with its
//!   key — plus the few documents the server cannot key, in the first chunk's statement,
//!   keyed in Rust.
//! - **The scan in id order** walks the primary key from the cursor in chunks and stops once
//!   the page and one more matched; any other scan reads the collection's candidates (documents
//!   JSONB cannot keep exactly always among them) and sorts them in memory.

use crate::error::Fail;
use crate::json::Body;
use crate::keys::Columns;
use crate::sql::Statements;
use docstore::index::chunks::{self, Chunk, Kept};
use docstore::index::{Choice, CompiledIndex, IndexPlan, IndexSet, KeyRange};
use docstore::query::sql::{ConditionSql, filter_sql};
use docstore::query::{CompiledFilter, CompiledQuery, FieldPath};
use docstore::{Document, Explain, Page};
use serde_json::Value;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

type Params = Vec<Box<dyn ToSql + Sync + Send>>;

/// The rows not expired at the instant of [`Target::params`]' `$3`.
const LIVE: &str = "(expires_at IS NULL OR expires_at > $3)";
type Client = deadpool_postgres::Client;

/// Where a range statement ([`Target::range`]) has the key: after the document's columns.
const KEY_COLUMN: usize = 8;

/// One query's setting: the connection, the store's statements and indexes, where it reads.
pub(crate) struct Target<'a> {
    pub(crate) client: &'a Client,
    pub(crate) sql: &'a Statements,
    pub(crate) indexes: &'a IndexSet,
    pub(crate) columns: &'a Columns,
    /// The store clock's instant: documents expired at it are left out.
    pub(crate) now: i64,
    pub(crate) site: &'a str,
    pub(crate) collection: &'a str,
}

/// A statement and its parameters.
struct Statement {
    text: String,
    params: Params,
}

impl Statement {
    /// The rows, through the connection's cache of prepared statements.
    async fn rows(&self, client: &Client) -> Result<Vec<Row>, Fail> {
        let prepared = client.prepare_cached(&self.text).await?;
        let params: Vec<&(dyn ToSql + Sync)> =
            self.params.iter().map(|p| p.as_ref() as _).collect();
        Ok(client.query(&prepared, &params).await?)
    }

    async fn documents(&self, client: &Client) -> Result<Vec<Document>, Fail> {
        let rows = self.rows(client).await?;
        rows.iter()
            .map(|row| crate::rows::document(row, 0))
            .collect()
    }

    /// The rows of a statement selecting [`crate::rows::DOC_COLUMNS`] and a key: each row
    /// with its key (the document is read from the row when the page needs it).
    async fn entries(&self, client: &Client) -> Result<Vec<(Vec<u8>, Row)>, Fail> {
        let rows = self.rows(client).await?;
        rows.into_iter()
            .map(|row| Ok((row.try_get(KEY_COLUMN)?, row)))
            .collect()
    }

    /// PostgreSQL's plan of the statement as this store runs it — a prepared statement,
    /// planned generically (the store's connections plan that way: `SESSION_OPTIONS` in
    /// `store.rs`) — in one line: `EXPLAIN EXECUTE` of it prepared anew. A generic plan
    /// does not depend on the parameters' values, so they are all `NULL` there.
    async fn plan(&self, client: &Client) -> Result<String, Fail> {
        let nulls = vec!["NULL"; self.params.len()].join(", ");
        let prepare = format!("PREPARE docstore_explain AS {}", self.text);
        client.batch_execute(&prepare).await?;
        let rows = client
            .query(&format!("EXPLAIN EXECUTE docstore_explain({nulls})"), &[])
            .await;
        client.batch_execute("DEALLOCATE docstore_explain").await?;
        let lines: Vec<String> = rows?
            .iter()
            .map(|row| row.try_get::<_, String>(0))
            .collect::<Result<_, _>>()?;
        Ok(lines
            .iter()
            .map(|l| l.trim())
            .collect::<Vec<_>>()
            .join("; "))
    }
}

impl Target<'_> {
    /// `$1` the site, `$2` the collection, `$3` the instant reads are at ([`LIVE`]).
    fn params(&self) -> Params {
        vec![
            Box::new(self.site.to_owned()),
            Box::new(self.collection.to_owned()),
            Box::new(self.now),
        ]
    }

    /// `compiled` over the collection: the page, and how many rows were read.
    pub(crate) async fn run(&self, compiled: &CompiledQuery) -> Result<(Page, u64), Fail> {
        let kept = match self.choose(compiled, false).await?.plan {
            Some(plan) => self.read_index(&plan, compiled).await?,
            None if compiled.id_order().is_some() && compiled.limit().is_some() => {
                let fetch = |after: Option<String>, limit| async move {
                    self.id_chunk(compiled, after, limit)
                        .documents(self.client)
                        .await
                };
                chunks::read_id_order(compiled, fetch).await?
            }
            None => {
                let documents = self.candidates(compiled).documents(self.client).await?;
                let read = documents.len() as u64;
                Kept {
                    documents,
                    read,
                    in_order: false,
                    more_unread: false,
                }
            }
        };
        let read = kept.read;
        Ok((kept.page(compiled), read))
    }

    /// How `compiled` is read: the planner's choice and PostgreSQL's plan of its statement.
    pub(crate) async fn explain(&self, compiled: &CompiledQuery) -> Result<Explain, Fail> {
        let choice = self.choose(compiled, true).await?;
        let (statement, how) = match (&choice.plan, compiled.id_order()) {
            (Some(plan), _) => {
                let range = plan.first_range();
                let chunk = Chunk {
                    start: range.start,
                    end: range.end,
                    reverse: plan.reverse,
                    limit: 1,
                };
                (self.range(self.index(plan)?.1, plan, chunk, false), "")
            }
            (None, Some(_)) => (
                self.id_chunk(compiled, None, 1),
                "primary key (site, collection, id) from the cursor, filter pushed down where exact",
            ),
            (None, None) => (
                self.candidates(compiled),
                "the collection's rows, sorted in memory",
            ),
        };
        let postgres = statement.plan(self.client).await?;
        let explain = choice.explain(compiled, || how.to_owned(), true);
        Ok(explain.with_database_plan("PostgreSQL", &postgres))
    }

    /// The planner's choice, with the collection's counter and the contested ranges counted
    /// when the cost rule asks ([`Candidates::choose_measured`]), and always for `explain`.
    ///
    /// [`Candidates::choose_measured`]: docstore::index::Candidates::choose_measured
    async fn choose(&self, query: &CompiledQuery, explain: bool) -> Result<Choice, Fail> {
        let candidates = docstore::index::candidates(self.indexes, self.collection, query);
        let size = async {
            let sizes = Statement {
                text: self.sql.read.size.clone(),
                params: self.params(),
            };
            Ok(match sizes.rows(self.client).await?.first() {
                Some(row) => u64::try_from(row.try_get::<_, i64>(0)?).unwrap_or(0),
                None => 0,
            })
        };
        let count = |plan: &IndexPlan, range: &KeyRange, at_most: u64| {
            let mut params = self.params();
            let statement = self.index(plan).map(|(_, key)| {
                let bounds = (range.start.clone(), range.end.clone());
                let within = self.within("1", key, bounds, &mut params);
                let limit = bind(
                    &mut params,
                    Box::new(i64::try_from(at_most).unwrap_or(i64::MAX)),
                );
                let text = format!("SELECT count(*) FROM ({within} LIMIT {limit}) AS entries");
                Statement { text, params }
            });
            async move {
                let rows = statement?.rows(self.client).await?;
                let counted = rows.first().map_or(Ok(0), |r| r.try_get::<_, i64>(0))?;
                Ok(u64::try_from(counted).unwrap_or(0))
            }
        };
        candidates.choose_measured(explain, size, count).await
    }

    /// `SELECT columns` of the collection's rows whose `key` is in `start..end`, above the
    /// empty key of the documents the server could not key (every real key starts with a
    /// tag byte, so is at least `[0]`).
    fn within(
        &self,
        columns: &str,
        key: &str,
        (start, end): (Vec<u8>, Option<Vec<u8>>),
        params: &mut Params,
    ) -> String {
        let start = if start.is_empty() { vec![0] } else { start };
        let mut text = format!(
            "SELECT {columns} FROM {}.documents WHERE site = $1 AND collection = $2 AND {LIVE} \
             AND {key} >= {}",
            self.sql.schema,
            bind(params, Box::new(start)),
        );
        if let Some(end) = end {
            text.push_str(&format!(" AND {key} < {}", bind(params, Box::new(end))));
        }
        text
    }

    /// The index `plan` reads and its key column.
    fn index(&self, plan: &IndexPlan) -> Result<(&CompiledIndex, &str), Fail> {
        self.columns
            .planned(self.collection, &plan.index)
            .ok_or_else(|| {
                let what = format!("planned index {:?} is not declared", plan.index);
                Fail::Store(crate::error::corrupt(what))
            })
    }

    /// The statement reading one chunk of `index`'s range, the residual filter pushed down
    /// where exact: each document and its key ([`KEY_COLUMN`]), stored in the row, so the
    /// client need not compute it again. With `unkeyed`, the documents the server could not
    /// key (the empty key) come too, in the same statement: one statement a chunk.
    fn range(&self, key: &str, plan: &IndexPlan, chunk: Chunk, unkeyed: bool) -> Statement {
        let columns = format!("{}, {key}", crate::rows::DOC_COLUMNS);
        let mut params = self.params();
        let mut text = self.within(&columns, key, (chunk.start, chunk.end), &mut params);
        if let Some(pushed) = plan.residual.as_ref().and_then(|f| pushed(f, &mut params)) {
            text.push_str(&format!(" AND {pushed}"));
        }
        let direction = if chunk.reverse { "DESC" } else { "ASC" };
        let limit = bind(&mut params, Box::new(chunk.limit as i64));
        text.push_str(&format!(" ORDER BY {key} {direction} LIMIT {limit}"));
        if unkeyed {
            // Sorting the union again costs a sort of the rows returned, and keeps their
            // order the range's by SQL's rules, not by how PostgreSQL runs a union.
            text = format!(
                "SELECT * FROM ((SELECT {columns} FROM {}.documents WHERE site = $1 \
                 AND collection = $2 AND {LIVE} AND {key} = ''::bytea) UNION ALL ({text})) \
                 AS entries ORDER BY {} {direction}",
                self.sql.schema,
                KEY_COLUMN + 1
            );
        }
        Statement { text, params }
    }

    /// Runs `plan` a chunk at a time ([`chunks::read_plan`]), with the documents the server
    /// could not key (read with the first chunk): those in the plan's ranges that match,
    /// keyed here. They only add to what the ranges give, so the page stays the reference
    /// one.
    async fn read_index(&self, plan: &IndexPlan, query: &CompiledQuery) -> Result<Kept, Fail> {
        let (index, key) = self.index(plan)?;
        let (first, unkeyed) = (AtomicBool::new(true), Mutex::new(Vec::new()));
        let filtered = plan
            .residual
            .as_ref()
            .is_none_or(|f| pushed(f, &mut Vec::new()).is_some());
        let fetch = |chunk| {
            let (with_unkeyed, unkeyed) = (first.swap(false, Ordering::Relaxed), &unkeyed);
            let statement = self.range(key, plan, chunk, with_unkeyed);
            async move {
                let (none, keyed): (Vec<_>, Vec<_>) = (statement.entries(self.client).await?)
                    .into_iter()
                    .partition(|(key, _)| key.is_empty());
                unkeyed
                    .lock()
                    .expect("not poisoned")
                    .extend(none.into_iter().map(|(_, row)| row));
                Ok::<_, Fail>(keyed)
            }
        };
        let document = |row: Row| crate::rows::document(&row, 0);
        let mut kept = chunks::read_plan(plan, index, query, filtered, fetch, document).await?;
        let unkeyed = unkeyed.into_inner().expect("not poisoned");
        kept.read += unkeyed.len() as u64;
        let mut found = Vec::new();
        for row in unkeyed {
            let doc = document(row)?;
            let key = index.key(&doc);
            if plan.ranges.iter().any(|r| r.contains(&key))
                && query.matches(&doc)
                && query.is_after_cursor(&doc)
            {
                found.push(doc);
            }
        }
        if !found.is_empty() {
            // Out of the ranges' order: the page is sorted again, from every match kept.
            kept.in_order = false;
            kept.documents.extend(found);
        }
        Ok(kept)
    }

    /// The statement of the scan's candidates: the collection with the filter pushed down
    /// where exact (documents kept in `raw` always among them).
    fn candidates(&self, query: &CompiledQuery) -> Statement {
        let mut params = self.params();
        let mut text = format!(
            "SELECT {} FROM {}.documents WHERE site = $1 AND collection = $2 AND {LIVE}",
            crate::rows::DOC_COLUMNS,
            self.sql.schema
        );
        if let Some(pushed) = query.filter().and_then(|f| pushed(f, &mut params)) {
            text.push_str(&format!(" AND (raw IS NOT NULL OR {pushed})"));
        }
        Statement { text, params }
    }

    /// One chunk of the id-order scan: `limit` candidates after `from` in the query's direction.
    fn id_chunk(&self, query: &CompiledQuery, from: Option<String>, limit: usize) -> Statement {
        let mut statement = self.candidates(query);
        let descending = query.id_order() == Some(true);
        let (compare, direction) = if descending {
            ("<", "DESC")
        } else {
            (">", "ASC")
        };
        if let Some(id) = from {
            let id = bind(&mut statement.params, Box::new(id));
            statement.text.push_str(&format!(" AND id {compare} {id}"));
        }
        let limit = bind(&mut statement.params, Box::new(limit as i64));
        statement
            .text
            .push_str(&format!(" ORDER BY id {direction} LIMIT {limit}"));
        statement
    }
}

/// `filter`'s SQL when all of it can be said exactly (else nothing is pushed: the parameters
/// an unfinished attempt bound are dropped).
fn pushed(filter: &CompiledFilter, params: &mut Params) -> Option<String> {
    let before = params.len();
    let sql = filter_sql(filter, &mut Conditions(params));
    if sql.is_none() {
        params.truncate(before);
    }
    sql
}

/// PostgreSQL's SQL of the conditions it decides exactly as the reference evaluator does, on
/// documents JSONB keeps exactly: not `Contains`, other system fields, nor values holding
/// `\u0000`.
struct Conditions<'a>(&'a mut Params);

impl ConditionSql for Conditions<'_> {
    fn condition(&mut self, condition: &CompiledFilter) -> Option<String> {
        let params = &mut *self.0;
        Some(match condition {
            CompiledFilter::Eq(FieldPath::Id, Value::String(id)) if !id.contains('\0') => {
                format!("(id = {})", bind(params, Box::new(id.clone())))
            }
            CompiledFilter::Eq(FieldPath::Id, Value::String(_)) => return None,
            CompiledFilter::Eq(FieldPath::Id, _) => "FALSE".to_owned(),
            CompiledFilter::Exists(FieldPath::Id) => "TRUE".to_owned(),
            CompiledFilter::In(path, values) => {
                let eq = |v: &Value| CompiledFilter::Eq(path.clone(), v.clone());
                return filter_sql(&CompiledFilter::Or(values.iter().map(eq).collect()), self);
            }
            CompiledFilter::Eq(FieldPath::Data(path), value) => {
                let body = Body::of(value);
                if !body.exact {
                    return None;
                }
                let value = bind(params, Box::new(body.text));
                let at = field(path, params);
                format!("coalesce({at} = {value}::text::jsonb, FALSE)")
            }
            CompiledFilter::Exists(FieldPath::Data(path)) => {
                format!("({} IS NOT NULL)", field(path, params))
            }
            CompiledFilter::Prefix(FieldPath::Data(path), prefix) if !prefix.contains('\0') => {
                let at = field(path, params);
                let prefix = bind(params, Box::new(prefix.clone()));
                format!(
                    "coalesce(jsonb_typeof({at}) = 'string' AND \
                     starts_with(({at} #>> '{{}}') COLLATE \"C\", {prefix}), FALSE)"
                )
            }
            CompiledFilter::Lt(FieldPath::Data(p), v) => range(p, v, "<", params)?,
            CompiledFilter::Lte(FieldPath::Data(p), v) => range(p, v, "<=", params)?,
            CompiledFilter::Gt(FieldPath::Data(p), v) => range(p, v, ">", params)?,
            CompiledFilter::Gte(FieldPath::Data(p), v) => range(p, v, ">=", params)?,
            _ => return None,
        })
    }
}

/// Adds a parameter; its placeholder.
fn bind(params: &mut Params, value: Box<dyn ToSql + Sync + Send>) -> String {
    params.push(value);
    format!("${}", params.len())
}

/// `data -> $a -> $b …`: through objects only (`->` with a text key gives `NULL` on an
/// array), as the evaluator resolves paths.
fn field(path: &[String], params: &mut Params) -> String {
    let mut sql = "data".to_owned();
    for segment in path {
        params.push(Box::new(segment.clone()));
        sql.push_str(&format!(" -> ${}::text", params.len()));
    }
    format!("({sql})")
}

/// A range on numbers (compared as `numeric`: exact), strings (bytes) or booleans; `FALSE`
/// for a bound of another kind, as no value of another kind is in range.
fn range(path: &[String], bound: &Value, op: &str, params: &mut Params) -> Option<String> {
    match bound {
        Value::Number(_) | Value::Bool(_) => {}
        Value::String(s) if !s.contains('\0') => {}
        Value::String(_) => return None,
        _ => return Some("FALSE".to_owned()),
    }
    let at = field(path, params);
    let (kind, left, right) = match bound {
        Value::Number(n) => {
            let text = match n.as_f64() {
                Some(f) if n.is_f64() => crate::json::plain_decimal(f),
                _ => n.to_string(),
            };
            params.push(Box::new(text));
            (
                "number",
                format!("({at})::numeric"),
                format!("${}::text::numeric", params.len()),
            )
        }
        Value::String(s) => {
            params.push(Box::new(s.clone()));
            (
                "string",
                format!("({at} #>> '{{}}') COLLATE \"C\""),
                format!("${}", params.len()),
            )
        }
        Value::Bool(b) => {
            params.push(Box::new(b.to_string()));
            (
                "boolean",
                at.clone(),
                format!("${}::text::jsonb", params.len()),
            )
        }
        _ => unreachable!("refused above"),
    };
    // CASE, not AND: PostgreSQL may evaluate AND's sides in any order, and the cast to
    // numeric fails on another kind.
    Some(format!(
        "(CASE WHEN jsonb_typeof({at}) = '{kind}' THEN {left} {op} {right} ELSE FALSE END)"
    ))
}
