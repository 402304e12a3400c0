//! Running a query as one parameterized statement: filter, keyset cursor, order and limit
//! pushed down (see [`crate::sql`] for why each piece is exactly the reference's answer);
//! the reference evaluator then cuts the page and makes its cursor.

use crate::error::Fail;
use crate::rows::{self, COLUMNS};
use crate::sql::Sql;
use docstore::query::{CompiledQuery, FieldPath};
use docstore::{Document, Page, Query, Result};
use rusqlite::Connection;
use rusqlite::types::Value as SqlValue;

/// A checked query over one collection, ready to run on a connection.
#[derive(Debug)]
pub(crate) struct Plan {
    compiled: CompiledQuery,
    sql: Sql,
}

impl Plan {
    /// Compiles `query` (an invalid query is `InvalidArgument` before any I/O) and builds its
    /// statement.
    pub(crate) fn new(site: &str, collection: &str, query: &Query) -> Result<Self> {
        let compiled = query.compile()?;
        let mut sql = Sql::default();
        let (s, c) = (
            sql.bind(SqlValue::Text(site.to_owned())),
            sql.bind(SqlValue::Text(collection.to_owned())),
        );
        sql.text = format!("SELECT {COLUMNS} FROM documents WHERE site = {s} AND collection = {c}");
        if let Some(filter) = compiled.filter() {
            sql.text.push_str(" AND ");
            sql.filter(filter);
        }
        // Keys after `$id` never decide anything: ids are unique.
        let order = match compiled
            .order()
            .iter()
            .position(|(p, _)| *p == FieldPath::Id)
        {
            Some(at) => &compiled.order()[..=at],
            None => compiled.order(),
        };
        let mut pushed = true;
        if let Some(position) = compiled.after() {
            let (text_len, params_len) = (sql.text.len(), sql.params.len());
            sql.text.push_str(" AND ");
            if sql.after(order, position).is_none() {
                sql.text.truncate(text_len);
                sql.params.truncate(params_len);
                pushed = false;
            }
        }
        if pushed {
            let mut keys: Vec<String> = order
                .iter()
                .map(|(path, descending)| {
                    let key = sql.key_expr(path);
                    if *descending {
                        format!("{key} DESC")
                    } else {
                        key
                    }
                })
                .collect();
            if order.last().is_none_or(|(p, _)| *p != FieldPath::Id) {
                keys.push("id".to_owned());
            }
            sql.text.push_str(" ORDER BY ");
            sql.text.push_str(&keys.join(", "));
            if let Some(limit) = compiled.limit() {
                let n = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
                let n = sql.bind(SqlValue::Integer(n));
                sql.text.push_str(&format!(" LIMIT {n}"));
            }
        }
        Ok(Plan { compiled, sql })
    }

    /// Runs the statement and lets the reference evaluator cut the page. Without the pushed
    /// cursor (a forged one) the statement returns every match and the evaluator does all.
    pub(crate) fn run(&self, conn: &Connection) -> Result<Page, Fail> {
        let mut stmt = conn.prepare_cached(&self.sql.text)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(&self.sql.params))?;
        let mut candidates: Vec<Document> = Vec::new();
        while let Some(row) = rows.next()? {
            candidates.push(rows::document(row)?);
        }
        Ok(self.compiled.evaluate(&candidates))
    }
}
