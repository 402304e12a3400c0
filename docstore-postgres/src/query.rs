//! Queries: one parameterized statement over the collection, the filter pushed down where
//! PostgreSQL decides it exactly as the reference evaluator does (`Eq`, `In`, `Exists`,
//! ranges, `Prefix` on data paths, `$id`; object-only paths through `->`, numbers through
//! `numeric`, strings in the "C" collation), documents JSONB cannot keep exactly always read
//! as candidates; the core evaluator then filters, sorts, cuts the page and makes its cursor.
//! A query in id order walks the primary key from the cursor in chunks and stops once the
//! page and one more matched.

use crate::error::Fail;
use crate::json::Body;
use docstore::query::{CompiledFilter, CompiledQuery, FieldPath};
use docstore::{Document, Page};
use serde_json::Value;
use tokio_postgres::types::ToSql;

/// The most rows one chunk of an id-order walk reads.
const CHUNK: usize = 1000;

type Params = Vec<Box<dyn ToSql + Sync + Send>>;

/// `compiled` over one collection: the page, and how many rows were read.
pub(crate) async fn run(
    client: &deadpool_postgres::Client,
    schema: &str,
    (site, collection): (&str, &str),
    compiled: &CompiledQuery,
) -> Result<(Page, u64), Fail> {
    let mut params: Params = vec![Box::new(site.to_owned()), Box::new(collection.to_owned())];
    let mut filter = String::new();
    match compiled.filter().and_then(|f| push(f, &mut params)) {
        Some(pushed) => filter = format!(" AND (raw IS NOT NULL OR {pushed})"),
        // A part that could not be said left its earlier parts' parameters behind.
        None => params.truncate(2),
    }
    let base = format!(
        "SELECT {} FROM {schema}.documents WHERE site = $1 AND collection = $2{filter}",
        crate::rows::DOC_COLUMNS
    );
    let (Some(descending), Some(limit)) = (compiled.id_order(), compiled.limit()) else {
        let docs = read(client, &base, &params).await?;
        let read = docs.len() as u64;
        return Ok((compiled.evaluate_owned(docs), read));
    };
    let (compare, direction) = if descending {
        ("<", "DESC")
    } else {
        (">", "ASC")
    };
    let wanted = limit.saturating_add(1);
    let (chunk, mut from) = (wanted.min(CHUNK), compiled.after().map(|c| c.id.clone()));
    let (mut matched, mut read_rows) = (Vec::new(), 0);
    loop {
        let mut params_now: Vec<&(dyn ToSql + Sync)> =
            params.iter().map(|p| p.as_ref() as _).collect();
        let after = from
            .as_ref()
            .map(|_| format!(" AND id {compare} ${}", params.len() + 1));
        if let Some(id) = &from {
            params_now.push(id);
        }
        let sql = format!(
            "{base}{} ORDER BY id {direction} LIMIT {chunk}",
            after.unwrap_or_default()
        );
        let rows = client.query(&sql, &params_now).await?;
        read_rows += rows.len() as u64;
        let full = rows.len() == chunk;
        for row in &rows {
            let doc = crate::rows::document(row, 0)?;
            from = Some(doc.id.clone());
            if compiled.matches(&doc) && compiled.is_after_cursor(&doc) {
                matched.push(doc);
            }
        }
        if !full || matched.len() >= wanted {
            break;
        }
    }
    Ok((compiled.evaluate_owned(matched), read_rows))
}

async fn read(
    client: &deadpool_postgres::Client,
    sql: &str,
    params: &Params,
) -> Result<Vec<Document>, Fail> {
    let params: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref() as _).collect();
    let rows = client.query(sql, &params).await?;
    rows.iter()
        .map(|row| crate::rows::document(row, 0))
        .collect()
}

/// The SQL of `filter` — true exactly where the reference evaluator matches, on documents
/// JSONB keeps exactly — or `None` when some part cannot be said exactly (`Contains`, other
/// system fields, values holding `\u0000`). Every piece is two-valued (never SQL `NULL`), so
/// `NOT` is the evaluator's `Not`.
fn push(filter: &CompiledFilter, params: &mut Params) -> Option<String> {
    Some(match filter {
        CompiledFilter::And(all) | CompiledFilter::Or(all) if all.is_empty() => {
            (if matches!(filter, CompiledFilter::And(_)) {
                "TRUE"
            } else {
                "FALSE"
            })
            .to_owned()
        }
        CompiledFilter::And(all) => join(all, " AND ", params)?,
        CompiledFilter::Or(all) => join(all, " OR ", params)?,
        CompiledFilter::Not(inner) => format!("(NOT {})", push(inner, params)?),
        CompiledFilter::Eq(FieldPath::Id, value) => match value {
            Value::String(id) if !id.contains('\0') => {
                format!("(id = {})", bind(params, Box::new(id.clone())))
            }
            Value::String(_) => return None,
            _ => "FALSE".to_owned(),
        },
        CompiledFilter::In(path, values) => {
            let eqs: Vec<CompiledFilter> = values
                .iter()
                .map(|v| CompiledFilter::Eq(path.clone(), v.clone()))
                .collect();
            return push(&CompiledFilter::Or(eqs), params);
        }
        CompiledFilter::Exists(FieldPath::Id) => "TRUE".to_owned(),
        CompiledFilter::Eq(FieldPath::Data(path), value) => {
            let body = Body::of(value);
            if !body.exact {
                return None;
            }
            let value = bind(params, Box::new(body.text));
            format!(
                "coalesce({} = {value}::text::jsonb, FALSE)",
                field(path, params)
            )
        }
        CompiledFilter::Exists(FieldPath::Data(path)) => {
            format!("({} IS NOT NULL)", field(path, params))
        }
        CompiledFilter::Prefix(FieldPath::Data(path), prefix) if !prefix.contains('\0') => {
            let at = field(path, params);
            let prefix = bind(params, Box::new(prefix.clone()));
            format!(
                "coalesce(jsonb_typeof({at}) = 'string' AND starts_with(({at} #>> '{{}}') COLLATE \"C\", {prefix}), FALSE)"
            )
        }
        CompiledFilter::Lt(FieldPath::Data(p), v) => range(p, v, "<", params)?,
        CompiledFilter::Lte(FieldPath::Data(p), v) => range(p, v, "<=", params)?,
        CompiledFilter::Gt(FieldPath::Data(p), v) => range(p, v, ">", params)?,
        CompiledFilter::Gte(FieldPath::Data(p), v) => range(p, v, ">=", params)?,
        _ => return None,
    })
}

/// Adds a parameter; its placeholder.
fn bind(params: &mut Params, value: Box<dyn ToSql + Sync + Send>) -> String {
    params.push(value);
    format!("${}", params.len())
}

fn join(all: &[CompiledFilter], with: &str, params: &mut Params) -> Option<String> {
    let parts: Option<Vec<String>> = all.iter().map(|f| push(f, params)).collect();
    Some(format!("({})", parts?.join(with)))
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
