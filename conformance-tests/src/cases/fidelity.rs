//! JSON fidelity: what goes in comes back equal, with the same number kinds.

use crate::Harness;
use crate::support::{Ctx, obj};
use docstore::{Data, Query};
use serde_json::{Value, json};

/// Equal as `Value`s *and* every number of the same kind (u64 / i64 / f64).
pub fn assert_identical(got: &Value, want: &Value, at: &str) {
    assert_eq!(got, want, "{at}");
    match (got, want) {
        (Value::Number(g), Value::Number(w)) => {
            assert_eq!(
                (g.is_u64(), g.is_i64(), g.is_f64()),
                (w.is_u64(), w.is_i64(), w.is_f64()),
                "{at}: number kind of {w}"
            );
            assert_eq!(g.to_string(), w.to_string(), "{at}");
        }
        (Value::Array(g), Value::Array(w)) => {
            for (i, (x, y)) in g.iter().zip(w).enumerate() {
                assert_identical(x, y, &format!("{at}[{i}]"));
            }
        }
        (Value::Object(g), Value::Object(w)) => {
            for (k, y) in w {
                assert_identical(&g[k], y, &format!("{at}.{k}"));
            }
        }
        _ => {}
    }
}

fn awkward_data() -> Data {
    obj(json!({
        "int": 1,
        "float": 1.0,
        "neg_float": -0.5,
        "u64_max": u64::MAX,
        "i64_min": i64::MIN,
        "i64_max": i64::MAX,
        "beyond_2_53": 9_007_199_254_740_993u64,
        "tiny": 5e-324,
        "huge": 1.7976931348623157e308,
        "neg_zero": -0.0,
        "exp": 1e21,
        "unicode": "é😀\u{10ffff}\u{7f}",
        "escapes": "\"\\/\u{0}\n\t\u{1f}",
        "empty": "",
        "null": null,
        "bools": [true, false],
        "nested": {"a": [1, 1.5, {"b": [[], {}]}], "": "empty key"},
        "dot.key": 1,
        "$id": "not the id",
        "\\": "backslash key"
    }))
}

/// Awkward values round-trip through create, get, put, update and query results.
pub async fn values_round_trip_exactly(h: &dyn Harness) {
    let ctx = Ctx::new(h, "fid").await;
    let data = awkward_data();
    let want = Value::from(data.clone());
    let key = ctx.key("c", "d");
    let created = ctx.store.create(&key, data.clone(), "").await.unwrap();
    assert_identical(&Value::from(created.data), &want, "create");
    let got = ctx.store.get(&key).await.unwrap().unwrap();
    assert_identical(&Value::from(got.data), &want, "get");
    let page = ctx
        .store
        .query(&ctx.site, "c", &Query::new())
        .await
        .unwrap();
    assert_identical(&Value::from(page.documents[0].data.clone()), &want, "query");
    let key2 = ctx.key("c", "p");
    ctx.store.put(&key2, data.clone(), "").await.unwrap();
    assert_identical(
        &Value::from(ctx.store.get(&key2).await.unwrap().unwrap().data),
        &want,
        "put",
    );
    let key3 = ctx.key("c", "u");
    ctx.store.create(&key3, obj(json!({})), "").await.unwrap();
    ctx.store.update(&key3, &data, "").await.unwrap();
    // Merge-patch drops the `null` member, everything else stays identical.
    let mut patched = want.clone();
    patched.as_object_mut().unwrap().remove("null");
    assert_identical(
        &Value::from(ctx.store.get(&key3).await.unwrap().unwrap().data),
        &patched,
        "update",
    );
}

/// The integer/float kind of equal numbers is kept per document: `1` and `1.0` stay apart.
pub async fn number_kinds_are_kept(h: &dyn Harness) {
    let ctx = Ctx::new(h, "fid").await;
    for (id, value) in [
        ("i", json!(1)),
        ("f", json!(1.0)),
        ("n", json!(-1)),
        ("g", json!(-1.0)),
    ] {
        ctx.store
            .create(&ctx.key("c", id), obj(json!({"v": value})), "")
            .await
            .unwrap();
        let got = ctx.store.get(&ctx.key("c", id)).await.unwrap().unwrap();
        assert_identical(&got.data["v"], &value, id);
    }
}
