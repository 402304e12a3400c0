//! The one total sort order, across kinds, with ties broken by `$id`.

use crate::Harness;
use crate::support::{Ctx, obj};
use docstore::{ManualClock, Query, StoreOptions};
use serde_json::{Value, json};
use std::sync::Arc;

async fn order_of(ctx: &Ctx, collection: &str, query: Query) -> Vec<String> {
    let page = ctx
        .store
        .query(&ctx.site, collection, &query)
        .await
        .unwrap();
    page.documents.into_iter().map(|d| d.id).collect()
}

/// Ascending: missing < null < false < true < numbers < strings < arrays < objects; equal
/// values (1 and 1.0) by id. Descending reverses the kinds but not the id tie-break.
pub async fn mixed_kinds_sort_in_the_total_order(h: &dyn Harness) {
    let ctx = Ctx::new(h, "sort").await;
    let ascending: [(&str, Option<Value>); 19] = [
        ("m", None),
        ("n", Some(Value::Null)),
        ("f", Some(json!(false))),
        ("t", Some(json!(true))),
        ("neg", Some(json!(-1))),
        ("half", Some(json!(0.5))),
        ("one", Some(json!(1))),
        ("one_f", Some(json!(1.0))),
        ("big", Some(json!(9_007_199_254_740_993u64))),
        ("e", Some(json!(""))),
        ("a", Some(json!("a"))),
        ("b", Some(json!("b"))),
        ("ea", Some(json!([]))),
        ("a1", Some(json!([1]))),
        ("a12", Some(json!([1, 2]))),
        ("a2", Some(json!([2]))),
        ("oa", Some(json!({"a": 1}))),
        ("ob", Some(json!({"b": 0}))),
        ("oe", Some(json!({}))),
    ];
    // Insert in a scrambled order so that insertion order cannot pass for sort order.
    for i in [
        7, 3, 18, 0, 11, 5, 14, 1, 16, 9, 2, 13, 6, 17, 4, 10, 15, 8, 12,
    ] {
        let (id, value) = &ascending[i];
        let data = match value {
            Some(v) => obj(json!({"v": v})),
            None => obj(json!({"other": 1})),
        };
        ctx.store.create(&ctx.key("s", id), data, "").await.unwrap();
    }
    let expected: Vec<String> = ascending.iter().map(|(id, _)| id.to_string()).collect();
    assert_eq!(
        order_of(&ctx, "s", Query::new().order_by("v")).await,
        expected
    );
    let mut descending: Vec<String> = expected.clone();
    descending.reverse();
    // The 1 / 1.0 tie stays in id order.
    let one = descending.iter().position(|id| id == "one_f").unwrap();
    descending.swap(one, one + 1);
    assert_eq!(
        order_of(&ctx, "s", Query::new().order_by_desc("v")).await,
        descending
    );
}

/// Several sort keys, each with its own direction; the id breaks remaining ties.
pub async fn several_sort_keys(h: &dyn Harness) {
    let ctx = Ctx::new(h, "sort").await;
    let docs = [
        ("x1", json!({"g": "x", "n": 1})),
        ("x2b", json!({"g": "x", "n": 2})),
        ("y1", json!({"g": "y", "n": 1})),
        ("x2", json!({"g": "x", "n": 2.0})),
        ("y3", json!({"g": "y", "n": 3})),
        ("nog", json!({"n": 5})),
    ];
    for (id, data) in docs {
        ctx.store
            .create(&ctx.key("s", id), obj(data), "")
            .await
            .unwrap();
    }
    let query = Query::new().order_by("g").order_by_desc("n");
    assert_eq!(
        order_of(&ctx, "s", query).await,
        ["nog", "x2", "x2b", "x1", "y3", "y1"]
    );
    let query = Query::new().order_by_desc("g").order_by("n");
    assert_eq!(
        order_of(&ctx, "s", query).await,
        ["y1", "y3", "x1", "x2", "x2b", "nog"]
    );
}

/// Without an order the result is in id order (byte order of the UTF-8 ids).
pub async fn default_order_is_by_id(h: &dyn Harness) {
    let ctx = Ctx::new(h, "sort").await;
    for id in ["b", "a", "B", "é", "aa", "Z", "😀", "_", "ａ"] {
        ctx.store
            .create(&ctx.key("s", id), obj(json!({})), "")
            .await
            .unwrap();
    }
    let expected = ["B", "Z", "_", "a", "aa", "b", "é", "ａ", "😀"];
    assert_eq!(order_of(&ctx, "s", Query::new()).await, expected);
    let mut reversed = expected;
    reversed.reverse();
    assert_eq!(
        order_of(&ctx, "s", Query::new().order_by_desc("$id")).await,
        reversed
    );
}

/// System fields sort like their values.
pub async fn sort_by_system_fields(h: &dyn Harness) {
    let clock = Arc::new(ManualClock::new(1_000));
    let ctx = Ctx::with_options(h, "sort", StoreOptions::default().with_clock(clock.clone())).await;
    for (id, actor) in [("c", "zed"), ("a", "amy"), ("b", "bob")] {
        ctx.store
            .create(&ctx.key("s", id), obj(json!({})), actor)
            .await
            .unwrap();
        clock.advance(10);
    }
    ctx.store
        .update(&ctx.key("s", "a"), &obj(json!({"x": 1})), "amy")
        .await
        .unwrap();
    clock.advance(10);
    ctx.store
        .update(&ctx.key("s", "a"), &obj(json!({"x": 2})), "amy")
        .await
        .unwrap();
    ctx.store
        .update(&ctx.key("s", "c"), &obj(json!({"x": 1})), "zed")
        .await
        .unwrap();
    assert_eq!(
        order_of(&ctx, "s", Query::new().order_by_desc("$version")).await,
        ["a", "c", "b"]
    );
    assert_eq!(
        order_of(&ctx, "s", Query::new().order_by("$created_at")).await,
        ["c", "a", "b"]
    );
    assert_eq!(
        order_of(&ctx, "s", Query::new().order_by("$updated_at")).await,
        ["b", "a", "c"]
    );
    assert_eq!(
        order_of(&ctx, "s", Query::new().order_by_desc("$created_by")).await,
        ["c", "b", "a"]
    );
    assert_eq!(
        order_of(&ctx, "s", Query::new().order_by("$updated_by")).await,
        ["a", "b", "c"]
    );
}
