//! Running a query as one parameterized statement: filter, keyset cursor, order and limit
//! pushed down (see [`crate::sql`] for why each piece is exactly the reference's answer);
//! the reference evaluator then sorts the few rows read, cuts the page and makes its cursor.

use crate::error::Fail;
use crate::rows::{self, COLUMNS};
use crate::sql::Sql;
use docstore::query::{CompiledQuery, FieldPath};
use docstore::{Document, Page, Result};
use rusqlite::Connection;
use rusqlite::types::Value as SqlValue;

/// A checked query over one collection, ready to run on a connection.
#[derive(Debug)]
pub(crate) struct Plan {
    compiled: CompiledQuery,
    sql: Sql,
    /// Whether the statement applies the filter (false for filters too deep for SQLite).
    filter_pushed: bool,
    /// Whether the statement applies the cursor (false only for a forged cursor).
    cursor_pushed: bool,
    /// Stop reading once this many rows matched (id order with an unpushed filter).
    enough: Option<usize>,
    /// The collection whose every row the statement examines when it sorts in SQL (another
    /// order with a limit): its size counts as read (see [`Plan::run`]).
    sorted_in_sql: Option<(String, String)>,
}

impl Plan {
    /// Builds the statement of `compiled` (checked by the front end).
    /// Only documents not expired at `now` match.
    pub(crate) fn new(site: &str, collection: &str, compiled: &CompiledQuery, now: i64) -> Self {
        let compiled = compiled.clone();
        let mut sql = Sql::default();
        // `sql.text` first collects the WHERE clause.
        let (s, c) = (
            sql.bind(SqlValue::Text(site.to_owned())),
            sql.bind(SqlValue::Text(collection.to_owned())),
        );
        let n = sql.bind(SqlValue::Integer(now));
        sql.text =
            format!("site = {s} AND collection = {c} AND (expires_at IS NULL OR expires_at > {n})");
        let filter_pushed = compiled.filter().is_none_or(crate::sql::pushable);
        if let Some(filter) = compiled.filter().filter(|_| filter_pushed) {
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
        let mut cursor_pushed = true;
        if let Some(position) = compiled.after() {
            let (text_len, params_len) = (sql.text.len(), sql.params.len());
            sql.text.push_str(" AND ");
            if sql.after(order, position).is_none() {
                // A forged cursor: the evaluator applies it to every match.
                sql.text.truncate(text_len);
                sql.params.truncate(params_len);
                cursor_pushed = false;
            }
        }
        let filter = std::mem::take(&mut sql.text);
        let mut enough = None;
        let mut sorted_in_sql = None;
        sql.text = match (cursor_pushed, compiled.id_order(), compiled.limit()) {
            // Primary-key order: SQLite walks the index from the cursor and stops at the
            // limit, without sorting (or, with the filter in memory, the reading stops once
            // the page and one more matched).
            (true, Some(descending), limit) => {
                let direction = if descending { "DESC" } else { "ASC" };
                let limit = if filter_pushed {
                    limit_clause(&mut sql, limit)
                } else {
                    enough = limit.map(|l| l.saturating_add(1));
                    String::new()
                };
                format!(
                    "SELECT {COLUMNS} FROM documents WHERE {filter} ORDER BY id {direction}{limit}"
                )
            }
            // Other keys: choose the page's rows by their keys alone, then read only those
            // rows' data (a sorter would otherwise carry every match's data along).
            (true, None, Some(limit)) if filter_pushed => {
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
                keys.push("id".to_owned());
                let keys = keys.join(", ");
                sorted_in_sql = Some((site.to_owned(), collection.to_owned()));
                let limit = limit_clause(&mut sql, Some(limit));
                format!(
                    "SELECT {COLUMNS} FROM documents WHERE rowid IN \
                     (SELECT rowid FROM documents WHERE {filter} ORDER BY {keys}{limit})"
                )
            }
            // No limit, a filter left to memory or a forged cursor: every candidate is read
            // and the evaluator does the rest.
            _ => format!("SELECT {COLUMNS} FROM documents WHERE {filter}"),
        };
        Plan {
            compiled,
            sql,
            filter_pushed,
            cursor_pushed,
            enough,
            sorted_in_sql,
        }
    }

    /// How the statement reads, for `explain`.
    pub(crate) fn how(&self) -> String {
        match (
            self.cursor_pushed,
            self.compiled.id_order(),
            self.compiled.limit(),
        ) {
            (true, Some(descending), _) => format!(
                "the primary key in {} id order{}, until the page is full",
                if descending {
                    "descending"
                } else {
                    "ascending"
                },
                if self.compiled.after().is_some() {
                    " from the cursor"
                } else {
                    ""
                }
            ),
            (true, None, Some(_)) if self.filter_pushed => {
                "the collection's rows, filtered and sorted by key in SQL; only the page's \
                 rows' data is read"
                    .to_owned()
            }
            _ => "the whole collection, sorted in memory".to_owned(),
        }
    }

    /// Runs the statement and lets the reference evaluator sort and cut the page.
    ///
    /// Every row the statement returns matches (and follows the cursor): debug builds, and
    /// so the tests, assert it, because the evaluator filtering the rows again would hide a
    /// statement that selects too much whenever the extra rows fall outside the page.
    /// Also says how many rows the statement read (for [`crate::SqliteStore::documents_read`]):
    /// the rows it gave, and for a statement that sorts in SQL every row of the collection
    /// as well (its sorter examines each one before the first row comes out; counted from the
    /// collection's counter, since SQLite does not report it).
    pub(crate) fn run(&self, conn: &Connection) -> Result<(Page, u64), Fail> {
        let mut stmt = conn.prepare_cached(&self.sql.text)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(&self.sql.params))?;
        let mut candidates: Vec<Document> = Vec::new();
        let mut read = 0u64;
        while let Some(row) = rows.next()? {
            read += 1;
            let doc = rows::document(row)?;
            if !self.filter_pushed {
                if !self.compiled.matches(&doc) {
                    continue;
                }
            } else {
                debug_assert!(
                    self.compiled.matches(&doc),
                    "the statement selected {:?}, which the filter rejects: {}",
                    doc.id,
                    self.sql.text
                );
            }
            debug_assert!(
                !self.cursor_pushed || self.compiled.is_after_cursor(&doc),
                "the statement selected {:?}, which is not after the cursor: {}",
                doc.id,
                self.sql.text
            );
            candidates.push(doc);
            if self.enough.is_some_and(|enough| candidates.len() >= enough) {
                break;
            }
        }
        if let Some((site, collection)) = &self.sorted_in_sql {
            read += crate::index::collection_size(conn, site, collection)?;
        }
        Ok((self.compiled.evaluate_owned(candidates), read))
    }
}

/// ` LIMIT ?n` with one row more than the page: whether it exists tells if a next page does.
fn limit_clause(sql: &mut Sql, limit: Option<usize>) -> String {
    match limit {
        Some(limit) => {
            let n = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
            format!(" LIMIT {}", sql.bind(SqlValue::Integer(n)))
        }
        None => String::new(),
    }
}
