//! Every filter operator: missing fields, nulls, cross-kind comparisons, integers beyond
//! 2^53, nested and escaped paths, system fields.

use crate::Harness;
use crate::support::{Ctx, obj};
use docstore::{Error, Filter, Query};
use serde_json::{Value, json};

/// The fixture every filter case queries (collection `f`).
async fn fixture(h: &dyn Harness) -> Ctx {
    let ctx = Ctx::new(h, "filter").await;
    let docs = [
        (
            "int1",
            json!({"n": 1, "s": "a", "b": true, "tags": ["x", 1], "o": {"k": 1}}),
        ),
        (
            "flt1",
            json!({"n": 1.0, "s": "ab", "b": false, "tags": ["y"], "o": {"k": 1.0}}),
        ),
        (
            "two",
            json!({"n": 2, "s": "B", "tags": [], "o": {"k": "1"}}),
        ),
        ("big1", json!({"n": 9_007_199_254_740_993u64, "s": "é"})),
        ("big0", json!({"n": 9_007_199_254_740_992u64, "s": "😀"})),
        ("null", json!({"n": null, "s": null, "b": null})),
        ("str", json!({"n": "1", "s": 1, "tags": "x"})),
        ("none", json!({})),
        ("neg", json!({"n": -2.5, "s": "", "b": false})),
        ("arr", json!({"n": [1], "tags": [["x"]], "s": ["a"]})),
        (
            "obj",
            json!({"n": {"a": 1}, "dot.key": 5, "$id": "x", "nest": {"a": {"b": 3}}}),
        ),
        ("max", json!({"n": u64::MAX})),
        ("min", json!({"n": i64::MIN})),
    ];
    for (id, data) in docs {
        ctx.store
            .create(&ctx.key("f", id), obj(data), "fixture")
            .await
            .unwrap();
    }
    ctx
}

const ALL: [&str; 13] = [
    "arr", "big0", "big1", "flt1", "int1", "max", "min", "neg", "none", "null", "obj", "str", "two",
];

/// The ids matching `filter`, sorted.
async fn ids(ctx: &Ctx, filter: Filter) -> Vec<String> {
    let query = Query::new().filter(filter.clone());
    let page = ctx
        .store
        .query(&ctx.site, "f", &query)
        .await
        .unwrap_or_else(|e| {
            panic!("{filter:?}: {e}");
        });
    assert!(page.next.is_none(), "an unlimited query is one page");
    page.documents.into_iter().map(|d| d.id).collect()
}

async fn check(ctx: &Ctx, filter: Filter, expected: &[&str]) {
    let mut expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(ids(ctx, filter.clone()).await, expected, "{filter:?}");
}

fn all_but(excluded: &[&str]) -> Vec<&'static str> {
    ALL.iter()
        .copied()
        .filter(|id| !excluded.contains(id))
        .collect()
}

/// `Eq` compares numbers by exact value (1 == 1.0; 2^53 + 1 != 2^53) and nothing across kinds.
pub async fn eq_compares_by_value(h: &dyn Harness) {
    let ctx = fixture(h).await;
    check(&ctx, Filter::eq("n", 1), &["int1", "flt1"]).await;
    check(&ctx, Filter::eq("n", 1.0), &["int1", "flt1"]).await;
    check(&ctx, Filter::eq("n", 9_007_199_254_740_993u64), &["big1"]).await;
    check(&ctx, Filter::eq("n", 9_007_199_254_740_992u64), &["big0"]).await;
    check(&ctx, Filter::eq("n", 9_007_199_254_740_992.0), &["big0"]).await;
    check(&ctx, Filter::eq("n", u64::MAX), &["max"]).await;
    check(&ctx, Filter::eq("n", i64::MIN), &["min"]).await;
    check(&ctx, Filter::eq("n", "1"), &["str"]).await;
    check(&ctx, Filter::eq("n", true), &[]).await;
    check(&ctx, Filter::eq("b", true), &["int1"]).await;
    check(&ctx, Filter::eq("b", false), &["flt1", "neg"]).await;
    check(&ctx, Filter::eq("o", json!({"k": 1})), &["int1", "flt1"]).await;
    check(&ctx, Filter::eq("n", json!([1])), &["arr"]).await;
    check(&ctx, Filter::eq("tags", json!(["x", 1.0])), &["int1"]).await;
    check(&ctx, Filter::eq("tags", json!([])), &["two"]).await;
    check(&ctx, Filter::eq("s", ""), &["neg"]).await;
}

/// `Eq(f, null)` matches only a stored null; a missing field matches no `Eq`.
pub async fn eq_null_matches_only_stored_null(h: &dyn Harness) {
    let ctx = fixture(h).await;
    check(&ctx, Filter::eq("n", Value::Null), &["null"]).await;
    check(&ctx, Filter::eq("b", Value::Null), &["null"]).await;
    check(&ctx, Filter::eq("missing", Value::Null), &[]).await;
}

/// `Ne` is exactly `Not(Eq)`: a missing field is "not equal".
pub async fn ne_includes_missing_fields(h: &dyn Harness) {
    let ctx = fixture(h).await;
    check(&ctx, Filter::ne("n", 1), &all_but(&["int1", "flt1"])).await;
    check(&ctx, Filter::ne("missing", 1), &ALL).await;
    check(&ctx, Filter::ne("n", Value::Null), &all_but(&["null"])).await;
    check(&ctx, !Filter::eq("n", 1), &all_but(&["int1", "flt1"])).await;
}

/// Range operators compare numbers with numbers only, exactly, beyond 2^53 too.
pub async fn ranges_on_numbers(h: &dyn Harness) {
    let ctx = fixture(h).await;
    check(&ctx, Filter::lt("n", 2), &["int1", "flt1", "neg", "min"]).await;
    check(
        &ctx,
        Filter::lte("n", 2),
        &["int1", "flt1", "neg", "min", "two"],
    )
    .await;
    check(&ctx, Filter::gt("n", 2), &["big1", "big0", "max"]).await;
    check(&ctx, Filter::gte("n", 2.0), &["two", "big1", "big0", "max"]).await;
    check(
        &ctx,
        Filter::gt("n", 9_007_199_254_740_992u64),
        &["big1", "max"],
    )
    .await;
    check(
        &ctx,
        Filter::gt("n", 9_007_199_254_740_992.0),
        &["big1", "max"],
    )
    .await;
    check(
        &ctx,
        Filter::lt("n", 9_007_199_254_740_993u64),
        &["int1", "flt1", "two", "big0", "neg", "min"],
    )
    .await;
    check(&ctx, Filter::lt("n", -2.5), &["min"]).await;
    check(&ctx, Filter::lte("n", -2.5), &["min", "neg"]).await;
    check(&ctx, Filter::gte("n", u64::MAX), &["max"]).await;
    check(&ctx, Filter::lt("n", 1.5), &["int1", "flt1", "neg", "min"]).await;
    check(
        &ctx,
        Filter::gt("n", 0.5),
        &["int1", "flt1", "two", "big1", "big0", "max"],
    )
    .await;
}

/// Range operators on strings compare by code point; on booleans false < true.
pub async fn ranges_on_strings_and_booleans(h: &dyn Harness) {
    let ctx = fixture(h).await;
    check(&ctx, Filter::lt("s", "b"), &["int1", "flt1", "two", "neg"]).await;
    check(&ctx, Filter::gt("s", "z"), &["big1", "big0"]).await;
    check(&ctx, Filter::gt("s", "\u{ffff}"), &["big0"]).await;
    check(
        &ctx,
        Filter::gte("s", ""),
        &["int1", "flt1", "two", "big1", "big0", "neg"],
    )
    .await;
    check(&ctx, Filter::lt("n", "5"), &["str"]).await;
    check(&ctx, Filter::gte("b", false), &["int1", "flt1", "neg"]).await;
    check(&ctx, Filter::gt("b", false), &["int1"]).await;
    check(&ctx, Filter::lt("b", true), &["flt1", "neg"]).await;
}

/// Range operators never compare across kinds, nor with null, arrays or objects, nor on a
/// missing field.
pub async fn ranges_never_cross_kinds(h: &dyn Harness) {
    let ctx = fixture(h).await;
    check(&ctx, Filter::lt("n", true), &[]).await;
    check(&ctx, Filter::gt("b", 0), &[]).await;
    check(&ctx, Filter::lt("n", Value::Null), &[]).await;
    check(&ctx, Filter::gte("n", Value::Null), &[]).await;
    check(&ctx, Filter::gte("n", json!([0])), &[]).await;
    check(&ctx, Filter::lte("n", json!({"z": 1})), &[]).await;
    check(&ctx, Filter::lt("missing", 10), &[]).await;
    check(&ctx, Filter::gt("s", 0), &["str"]).await;
    // Not of a range matches what the range did not, missing fields included.
    check(
        &ctx,
        !Filter::lt("n", 2),
        &all_but(&["int1", "flt1", "neg", "min"]),
    )
    .await;
}

/// `In` is equality with any of the values; an empty list matches nothing.
pub async fn in_matches_any_value(h: &dyn Harness) {
    let ctx = fixture(h).await;
    check(
        &ctx,
        Filter::is_in("n", [json!(2), json!("1"), Value::Null]),
        &["two", "str", "null"],
    )
    .await;
    check(&ctx, Filter::is_in("n", [1.0]), &["int1", "flt1"]).await;
    check(&ctx, Filter::is_in("n", Vec::<Value>::new()), &[]).await;
    check(&ctx, Filter::is_in("missing", [Value::Null]), &[]).await;
    check(
        &ctx,
        Filter::is_in("n", [json!([1]), json!({"a": 1.0})]),
        &["arr", "obj"],
    )
    .await;
}

/// `Exists` is true when the path resolves, a stored null included.
pub async fn exists_includes_null(h: &dyn Harness) {
    let ctx = fixture(h).await;
    check(&ctx, Filter::exists("n"), &all_but(&["none"])).await;
    check(&ctx, Filter::exists("b"), &["int1", "flt1", "null", "neg"]).await;
    check(&ctx, Filter::exists("o.k"), &["int1", "flt1", "two"]).await;
    check(&ctx, Filter::exists("n.a"), &["obj"]).await;
    check(&ctx, Filter::exists("missing"), &[]).await;
    check(
        &ctx,
        !Filter::exists("b"),
        &all_but(&["int1", "flt1", "null", "neg"]),
    )
    .await;
}

/// `Prefix` matches strings only; `""` matches every string.
pub async fn prefix_matches_strings_only(h: &dyn Harness) {
    let ctx = fixture(h).await;
    check(&ctx, Filter::prefix("s", "a"), &["int1", "flt1"]).await;
    check(&ctx, Filter::prefix("s", "ab"), &["flt1"]).await;
    check(&ctx, Filter::prefix("s", "abc"), &[]).await;
    check(
        &ctx,
        Filter::prefix("s", ""),
        &["int1", "flt1", "two", "big1", "big0", "neg"],
    )
    .await;
    check(&ctx, Filter::prefix("s", "b"), &[]).await;
    check(&ctx, Filter::prefix("n", "1"), &["str"]).await;
    check(&ctx, Filter::prefix("s", "😀"), &["big0"]).await;
    check(&ctx, Filter::prefix("s", "%"), &[]).await;
    check(&ctx, Filter::prefix("s", "_"), &[]).await;
}

/// `Contains` looks for an equal element in an array, never a substring.
pub async fn contains_matches_array_elements(h: &dyn Harness) {
    let ctx = fixture(h).await;
    check(&ctx, Filter::contains("tags", "x"), &["int1"]).await;
    check(&ctx, Filter::contains("tags", 1.0), &["int1"]).await;
    check(&ctx, Filter::contains("tags", json!(["x"])), &["arr"]).await;
    check(&ctx, Filter::contains("tags", "y"), &["flt1"]).await;
    check(&ctx, Filter::contains("s", "a"), &["arr"]).await;
    check(&ctx, Filter::contains("s", "é"), &[]).await;
    check(&ctx, Filter::contains("missing", Value::Null), &[]).await;
}

/// `And`, `Or`, `Not` and their empty forms.
pub async fn boolean_combinations(h: &dyn Harness) {
    let ctx = fixture(h).await;
    check(&ctx, Filter::all([]), &ALL).await;
    check(&ctx, Filter::any([]), &[]).await;
    check(&ctx, !Filter::any([]), &ALL).await;
    check(
        &ctx,
        Filter::eq("n", 1).and(Filter::eq("b", true)),
        &["int1"],
    )
    .await;
    check(
        &ctx,
        Filter::eq("s", "B").or(Filter::eq("n", Value::Null)),
        &["two", "null"],
    )
    .await;
    check(
        &ctx,
        Filter::any([Filter::gt("n", 2), Filter::prefix("s", "a")]).and(!Filter::eq("$id", "max")),
        &["big1", "big0", "int1", "flt1"],
    )
    .await;
    check(
        &ctx,
        !!Filter::exists("tags"),
        &["int1", "flt1", "two", "str", "arr"],
    )
    .await;
}

/// Nested paths, escaped dots and dollars, and paths through arrays (which do not resolve).
pub async fn nested_and_escaped_paths(h: &dyn Harness) {
    let ctx = fixture(h).await;
    check(&ctx, Filter::eq("nest.a.b", 3), &["obj"]).await;
    check(&ctx, Filter::eq(r"dot\.key", 5), &["obj"]).await;
    check(&ctx, Filter::exists("dot.key"), &[]).await;
    check(&ctx, Filter::eq(r"\$id", "x"), &["obj"]).await;
    check(&ctx, Filter::exists("tags.0"), &[]).await;
    check(&ctx, Filter::eq("o.k", "1"), &["two"]).await;
    check(&ctx, Filter::gte("o.k", 1), &["int1", "flt1"]).await;
}

/// The `$` system fields can be filtered on.
pub async fn system_fields_filter(h: &dyn Harness) {
    let ctx = fixture(h).await;
    ctx.store
        .update(&ctx.key("f", "two"), &obj(json!({"x": 1})), "editor")
        .await
        .unwrap();
    check(&ctx, Filter::eq("$id", "two"), &["two"]).await;
    check(&ctx, Filter::prefix("$id", "big"), &["big0", "big1"]).await;
    check(&ctx, Filter::gt("$version", 1), &["two"]).await;
    check(&ctx, Filter::eq("$version", 1.0), &all_but(&["two"])).await;
    check(&ctx, Filter::eq("$created_by", "fixture"), &ALL).await;
    check(&ctx, Filter::eq("$updated_by", "editor"), &["two"]).await;
    check(&ctx, Filter::gt("$created_at", 0), &ALL).await;
    check(&ctx, Filter::exists("$updated_at"), &ALL).await;
    check(&ctx, Filter::eq("$version", "1"), &[]).await;
}

/// Bad paths, a zero limit and unknown system fields are `InvalidArgument`.
pub async fn invalid_queries_are_invalid_argument(h: &dyn Harness) {
    let ctx = fixture(h).await;
    let bad = [
        Query::new().filter(Filter::eq("a..b", 1)),
        Query::new().filter(Filter::eq("", 1)),
        Query::new().filter(Filter::exists(r"a\q")),
        Query::new().filter(Filter::exists("a\\")),
        Query::new().filter(Filter::eq("$nope", 1)),
        Query::new().filter(Filter::any([Filter::eq("ok", 1), Filter::eq("$id.x", 1)])),
        Query::new().order_by("$"),
        Query::new().order_by("a."),
        Query::new().limit(0),
        Query::new()
            .filter((0..docstore::query::MAX_FILTER_DEPTH).fold(Filter::exists("a"), |f, _| !f)),
    ];
    for query in bad {
        let result = ctx.store.query(&ctx.site, "f", &query).await;
        assert!(
            matches!(result, Err(Error::InvalidArgument(_))),
            "{query:?}: {result:?}"
        );
    }
}
