//! Filters as SQL, for backends that push them down: the walk over `And`, `Or` and `Not`
//! that every SQL backend shares, the backend saying only each condition's SQL
//! ([`ConditionSql`]). Every piece is two-valued (never SQL `NULL`), so `NOT` is the
//! evaluator's `Not`.
//!
//! ```
//! use docstore::query::sql::{ConditionSql, filter_sql};
//! use docstore::query::{CompiledFilter, Query};
//! use docstore::Filter;
//!
//! /// Says equality on `$id` only.
//! struct Ids(Vec<String>);
//! impl ConditionSql for Ids {
//!     fn condition(&mut self, condition: &CompiledFilter) -> Option<String> {
//!         match condition {
//!             CompiledFilter::Eq(docstore::query::FieldPath::Id, id) => {
//!                 self.0.push(id.as_str()?.to_owned());
//!                 Some(format!("id = ${}", self.0.len()))
//!             }
//!             _ => None,
//!         }
//!     }
//! }
//! let query = Query::new().filter(!Filter::eq("$id", "a").or(Filter::eq("$id", "b"))).compile()?;
//! let mut ids = Ids(Vec::new());
//! let sql = filter_sql(query.filter().unwrap(), &mut ids);
//! assert_eq!(sql.as_deref(), Some("(NOT (id = $1 OR id = $2))"));
//! let query = Query::new().filter(Filter::eq("status", "open")).compile()?;
//! assert_eq!(filter_sql(query.filter().unwrap(), &mut ids), None);
//! # Ok::<(), docstore::Error>(())
//! ```

use super::CompiledFilter;

/// A backend's SQL for one filter condition.
pub trait ConditionSql {
    /// The SQL of a condition other than `And`, `Or` and `Not` — true exactly where the
    /// reference evaluator matches, on the rows the backend uses it on, and never `NULL` — or
    /// `None` when the backend cannot say it exactly.
    fn condition(&mut self, condition: &CompiledFilter) -> Option<String>;

    /// The SQL of a constant (an empty `And` is true, an empty `Or` false).
    fn constant(&self, value: bool) -> &'static str {
        if value { "TRUE" } else { "FALSE" }
    }
}

/// The SQL of `filter`, or `None` when some condition has none (parameters the backend
/// bound on the way are then its to drop).
pub fn filter_sql(filter: &CompiledFilter, sql: &mut impl ConditionSql) -> Option<String> {
    match filter {
        CompiledFilter::And(all) | CompiledFilter::Or(all) => {
            let and = matches!(filter, CompiledFilter::And(_));
            if all.is_empty() {
                return Some(sql.constant(and).to_owned());
            }
            let parts: Option<Vec<String>> = all.iter().map(|f| filter_sql(f, sql)).collect();
            Some(format!(
                "({})",
                parts?.join(if and { " AND " } else { " OR " })
            ))
        }
        CompiledFilter::Not(inner) => Some(format!("(NOT {})", filter_sql(inner, sql)?)),
        condition => sql.condition(condition),
    }
}
