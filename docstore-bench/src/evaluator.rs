//! The reference evaluator on its own: documents per second through
//! [`docstore::query::matches`] (which compiles the filter on every call),
//! [`CompiledQuery::matches`](docstore::query::CompiledQuery::matches) and
//! [`docstore::query::evaluate`], for a simple and a complex filter, each next to the same
//! test hand-written in Rust over `serde_json` values.

use crate::BenchResult;
use crate::data::{self, TOP, selective_order};
use crate::measure::{Figures, Latencies};
use crate::peak::PeakWindow;
use crate::workloads::Comparison;
use docstore::query::{Filter, Query};
use docstore::{Data, Document};
use serde_json::Value;
use std::hint::black_box;
use std::time::Instant;

/// Passes over the documents per measurement.
const PASSES: usize = 5;

/// `status == "open"`.
pub fn simple_filter() -> Filter {
    Filter::eq("status", "open")
}

fn simple_hand(d: &Data) -> bool {
    d.get("status").and_then(Value::as_str) == Some("open")
}

/// Seven leaves of six kinds: `Or`, `In`, two ranges, `Not(Prefix)`, `Contains`, `Exists`.
pub fn complex_filter() -> Filter {
    Filter::any([Filter::eq("status", "open"), Filter::eq("status", "review")])
        .and(Filter::is_in("category", ["c1", "c3", "c7", "c11", "c13"]))
        .and(Filter::gte("priority", 20))
        .and(Filter::lt("score", 900.0))
        .and(!Filter::prefix("owner", "user9"))
        .and(Filter::exists("address.city"))
        .and(Filter::contains("tags", "t7").or(Filter::gt("priority", 60)))
}

fn complex_hand(d: &Data) -> bool {
    let s = |k: &str| d.get(k).and_then(Value::as_str);
    let priority = d.get("priority").and_then(Value::as_i64);
    matches!(s("status"), Some("open" | "review"))
        && matches!(s("category"), Some("c1" | "c3" | "c7" | "c11" | "c13"))
        && priority.is_some_and(|p| p >= 20)
        && d.get("score")
            .and_then(Value::as_f64)
            .is_some_and(|x| x < 900.0)
        && !s("owner").is_some_and(|o| o.starts_with("user9"))
        && d.get("address").and_then(|a| a.get("city")).is_some()
        && (d
            .get("tags")
            .and_then(Value::as_array)
            .is_some_and(|t| t.iter().any(|v| v == "t7"))
            || priority.is_some_and(|p| p > 60))
}

/// Runs `pass` over the documents [`PASSES`] times; one operation is one document, the
/// latencies are per document (each pass's time divided by the documents).
fn passes(docs: usize, mut pass: impl FnMut() -> usize) -> (Figures, usize) {
    let window = PeakWindow::open();
    let mut latencies = Latencies::default();
    let started = Instant::now();
    let mut answer = 0;
    for _ in 0..PASSES {
        let t = Instant::now();
        answer = black_box(pass());
        latencies.record(t.elapsed() / docs.max(1) as u32);
    }
    let elapsed = started.elapsed();
    let mut figures = Figures::new(latencies, elapsed, window.growth_kib());
    figures.ops = (docs * PASSES) as u64;
    figures.ops_per_sec = figures.ops as f64 / elapsed.as_secs_f64().max(1e-9);
    (figures, answer)
}

fn compare(
    workload: &str,
    docs: usize,
    docstore: impl FnMut() -> usize,
    hand: impl FnMut() -> usize,
) -> Comparison {
    let (d, d_answer) = passes(docs, docstore);
    let (b, b_answer) = passes(docs, hand);
    let mut c = Comparison::new(workload, "doc", d, b);
    c.same_answer = Some(d_answer == b_answer);
    c
}

/// The evaluator measurements over `count` generated documents.
pub fn run(count: usize) -> BenchResult<Vec<Comparison>> {
    let docs: Vec<Document> = (0..count)
        .map(|n| Document {
            expires_at: None,
            id: data::id(n),
            data: data::document(n, 0),
            created_at: 0,
            updated_at: 0,
            created_by: data::ACTOR.to_owned(),
            updated_by: data::ACTOR.to_owned(),
            version: 1,
        })
        .collect();
    let mut out = Vec::new();
    for (name, filter, hand) in [
        ("simple", simple_filter(), simple_hand as fn(&Data) -> bool),
        (
            "complex",
            complex_filter(),
            complex_hand as fn(&Data) -> bool,
        ),
    ] {
        let count_hand = || docs.iter().filter(|d| hand(&d.data)).count();
        out.push(compare(
            &format!("{name} filter: matches()"),
            count,
            || {
                docs.iter()
                    .filter(|d| docstore::query::matches(&filter, d).unwrap_or(false))
                    .count()
            },
            count_hand,
        ));
        let compiled = Query::new().filter(filter.clone()).compile()?;
        out.push(compare(
            &format!("{name} filter: compiled matches"),
            count,
            || docs.iter().filter(|d| compiled.matches(d)).count(),
            count_hand,
        ));
        let query = Query::new()
            .filter(filter.clone())
            .order_by_desc("score")
            .limit(TOP);
        out.push(compare(
            &format!("{name} filter + sort + limit {TOP}: evaluate()"),
            count,
            || {
                docstore::query::evaluate(&docs, &query)
                    .map(|page| page.documents.len())
                    .unwrap_or(0)
            },
            || {
                let mut matched: Vec<&Document> = docs.iter().filter(|d| hand(&d.data)).collect();
                matched.sort_unstable_by(|a, b| selective_order(a, b));
                matched
                    .into_iter()
                    .take(TOP)
                    .cloned()
                    .collect::<Vec<Document>>()
                    .len()
            },
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_written_filters_are_the_reference() {
        for n in 0..3_000 {
            let doc = Document {
                expires_at: None,
                id: data::id(n),
                data: data::document(n, 0),
                created_at: 0,
                updated_at: 0,
                created_by: String::new(),
                updated_by: String::new(),
                version: 1,
            };
            assert_eq!(
                docstore::query::matches(&simple_filter(), &doc).unwrap(),
                simple_hand(&doc.data)
            );
            assert_eq!(
                docstore::query::matches(&complex_filter(), &doc).unwrap(),
                complex_hand(&doc.data),
                "{n}"
            );
        }
    }
}
