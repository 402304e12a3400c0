//! Running a query: one parameterized statement reads the candidates, the reference evaluator
//! decides the page.

use crate::error::Fail;
use crate::rows::{self, COLUMNS};
use docstore::query::CompiledQuery;
use docstore::{Document, Page, Query, Result};
use rusqlite::Connection;
use rusqlite::types::Value as SqlValue;

/// A checked query over one collection, ready to run on a connection.
#[derive(Debug)]
pub(crate) struct Plan {
    compiled: CompiledQuery,
    sql: String,
    params: Vec<SqlValue>,
    /// Stop reading once this many candidates matched (id-order queries with a limit).
    enough: Option<usize>,
}

impl Plan {
    /// Compiles `query` (an invalid query is `InvalidArgument` before any I/O) and builds its
    /// statement.
    pub(crate) fn new(site: &str, collection: &str, query: &Query) -> Result<Self> {
        let compiled = query.compile()?;
        let mut sql =
            format!("SELECT {COLUMNS} FROM documents WHERE site = ?1 AND collection = ?2");
        let mut params = vec![
            SqlValue::Text(site.to_owned()),
            SqlValue::Text(collection.to_owned()),
        ];
        let mut enough = None;
        if let Some(descending) = compiled.id_order() {
            // The primary key gives id order: start after the cursor's id and stop once one
            // match more than the page holds was read.
            if let Some(position) = compiled.after() {
                sql.push_str(if descending {
                    " AND id < ?3"
                } else {
                    " AND id > ?3"
                });
                params.push(SqlValue::Text(position.id.clone()));
            }
            sql.push_str(if descending {
                " ORDER BY id DESC"
            } else {
                " ORDER BY id"
            });
            enough = compiled.limit().map(|limit| limit.saturating_add(1));
        }
        Ok(Plan {
            compiled,
            sql,
            params,
            enough,
        })
    }

    /// Reads the candidates and evaluates the page.
    pub(crate) fn run(&self, conn: &Connection) -> Result<Page, Fail> {
        let mut stmt = conn.prepare_cached(&self.sql)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(&self.params))?;
        let mut candidates: Vec<Document> = Vec::new();
        while let Some(row) = rows.next()? {
            let doc = rows::document(row)?;
            if self.compiled.matches(&doc) {
                candidates.push(doc);
                if self.enough.is_some_and(|enough| candidates.len() >= enough) {
                    break;
                }
            }
        }
        Ok(self.compiled.evaluate(&candidates))
    }
}
