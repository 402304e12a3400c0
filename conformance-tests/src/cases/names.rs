//! Names and their validation: every rule, both sides of each boundary.

use crate::Harness;
use crate::support::{Ctx, obj};
use docstore::{Error, Key, Query};
use serde_json::json;

fn is_invalid<T: std::fmt::Debug>(result: docstore::Result<T>) -> bool {
    matches!(result, Err(Error::InvalidArgument(_)))
}

/// `Key::new` enforces every name rule on both sides of its boundary.
pub async fn key_rules_hold_at_every_boundary(_: &dyn Harness) {
    let ok = |s: &str, c: &str, i: &str| Key::new(s, c, i).is_ok();
    assert!(ok(&"s".repeat(64), &"c".repeat(64), "i"));
    assert!(is_invalid(Key::new("s".repeat(65), "c", "i")));
    assert!(is_invalid(Key::new("s", "c".repeat(65), "i")));
    assert!(is_invalid(Key::new("", "c", "i")));
    assert!(is_invalid(Key::new("s", "", "i")));
    for bad in ["a#b", "a b", "a.b", "a/b", "é", "a\u{0}"] {
        assert!(is_invalid(Key::new(bad, "c", "i")), "site {bad:?}");
        assert!(is_invalid(Key::new("s", bad, "i")), "collection {bad:?}");
    }
    assert!(is_invalid(Key::new("__s", "c", "i")));
    assert!(is_invalid(Key::new("s", "__collections", "i")));
    assert!(ok("_s", "c_", "i") && ok("s__", "-c", "i") && ok("AZaz09_-", "c", "i"));
    assert!(ok("s", "c", &"i".repeat(512)));
    assert!(is_invalid(Key::new("s", "c", "i".repeat(513))));
    assert!(
        ok("s", "c", &"é".repeat(256)),
        "512 bytes of two-byte characters"
    );
    assert!(is_invalid(Key::new("s", "c", "é".repeat(256) + "i")));
    assert!(is_invalid(Key::new("s", "c", "")));
    for control in ["\n", "\t", "\u{0}", "\u{7f}", "\u{85}", "\u{9f}"] {
        assert!(
            is_invalid(Key::new("s", "c", format!("a{control}b"))),
            "{control:?}"
        );
    }
}

/// `query`, `collections` and `count` refuse invalid site and collection names.
pub async fn store_calls_reject_invalid_names(h: &dyn Harness) {
    let ctx = Ctx::new(h, "names").await;
    let store = &ctx.store;
    for bad in ["", "a#b", "__collections", "é", &"x".repeat(65)] {
        assert!(
            is_invalid(store.query(bad, "c", &Query::new()).await),
            "site {bad:?}"
        );
        assert!(
            is_invalid(store.query(&ctx.site, bad, &Query::new()).await),
            "coll {bad:?}"
        );
        assert!(
            is_invalid(store.collections(bad).await),
            "collections {bad:?}"
        );
        assert!(is_invalid(store.count(bad).await), "count {bad:?}");
    }
    assert_eq!(store.count(&ctx.site).await.unwrap(), 0);
}

/// The longest names and awkward ids are stored and found again.
pub async fn edge_names_round_trip(h: &dyn Harness) {
    let ctx = Ctx::new(h, "edge").await;
    let long_collection = "C".repeat(64);
    let ids = [
        "i".repeat(512),
        "é".repeat(256),
        "a#b".into(),
        "a/b?c=d&e".into(),
        " spaced ".into(),
        "quote'\"\\".into(),
        "😀".into(),
        "__collections".into(),
    ];
    for id in &ids {
        let key = ctx.key(&long_collection, id);
        ctx.store
            .create(&key, obj(json!({"id": id})), "a")
            .await
            .unwrap();
        let doc = ctx.store.get(&key).await.unwrap().expect("stored");
        assert_eq!(&doc.id, id);
        assert_eq!(doc.data["id"], json!(id));
    }
    let page = ctx
        .store
        .query(&ctx.site, &long_collection, &Query::new())
        .await
        .unwrap();
    let mut expected: Vec<&String> = ids.iter().collect();
    expected.sort();
    let found: Vec<&String> = page.documents.iter().map(|d| &d.id).collect();
    assert_eq!(found, expected);
    let collections = ctx.store.collections(&ctx.site).await.unwrap();
    assert_eq!(collections, vec![(long_collection, ids.len() as u64)]);
}
